"""The "realistic" page style: a site template of markup, scripts and boilerplate around the text.

The plain style (render.py) is text paragraphs with links in them, which is light on a parser and
unlike a real page: on real sites the text is a fraction of the HTML, the rest is the head's
metadata, inline and external scripts and styles, navigation, wrappers with classes and data
attributes, sidebars and footers that repeat on every page of a site. `SiteTemplate` writes that
around a page's text and links:

- each host has its own template (a hash of (seed, host) picks its scripts, styles, class names
  and weight), shared by all its pages as a real site's is, so the boilerplate repeats within a
  host and differs between hosts;
- the links are the page's own (`Renderer.page_links`, the single source of the ground truth):
  about a fifth go to the header's navigation, a fifth to a "related" sidebar and a tenth to the
  footer, the rest stay in the text; no link is added that the ground truth does not know;
- scripts and styles are pseudo-code built from the corpus's words (minified-looking JavaScript
  and CSS); a parser must skip them, a text extractor must not count them, and they carry no
  `<a href` that a careless extractor could take for a link;
- the footer's boilerplate text (copyright, cookie notice) repeats on every page of the host,
  as real boilerplate does, so near-duplicate detection sees shared text across a site.

Deterministic like the rest of the web: same (seed, host, page), same bytes.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Protocol, TypeVar

import numpy as np

from crawlspace.simweb.model import mix

TEMPLATE_SEED = 20_261_201
SNIPPETS = 512
"""Scripts and style rules in each pool; a host takes a contiguous run of each."""
NAV_SHARE, SIDEBAR_SHARE, FOOTER_SHARE = 0.2, 0.2, 0.1


class _Link(Protocol):
    @property
    def href(self) -> str: ...

    @property
    def anchor(self) -> str: ...

    @property
    def nofollow(self) -> bool: ...


LinkT = TypeVar("LinkT", bound=_Link)


def _identifier(words: Sequence[str], rng: np.random.Generator) -> str:
    first, second = words[int(rng.integers(100, 3000))], words[int(rng.integers(100, 3000))]
    return first + second.capitalize()


def _script_pool(words: Sequence[str], rng: np.random.Generator) -> list[str]:
    """Minified-looking functions: what a bundler leaves in a page, about 150-600 bytes each."""
    pool: list[str] = []
    for _ in range(SNIPPETS):
        name = _identifier(words, rng)
        statements: list[str] = []
        for _ in range(int(rng.integers(2, 9))):
            a, b = _identifier(words, rng), _identifier(words, rng)
            number = int(rng.integers(0, 1000))
            choice = int(rng.integers(0, 4))
            if choice == 0:
                statements.append(f'var {a}=e.{b}||{{}};if({a}.length>{number}){{return t("{words[number % 3000]}")}}')
            elif choice == 1:
                statements.append(f"n.{a}=function(r){{return r&&r.{b}?r.{b}({number}):void 0}}")
            elif choice == 2:
                statements.append(f"for(var i=0;i<{number};i++){{o[i]=o[i]^{number * 7 % 255}}}")
            else:
                statements.append(f'document.querySelector(".{a}").setAttribute("data-{b.lower()}","{number}")')
        pool.append(f"function {name}(e,t,n,o){{{';'.join(statements)}}}")
    return pool


def _style_pool(words: Sequence[str], rng: np.random.Generator) -> list[str]:
    properties = (
        "margin:0 auto",
        "padding:4px 8px",
        "display:flex",
        "color:#2b2b2b",
        "font-size:.875rem",
        "line-height:1.5",
        "border-bottom:1px solid #e5e5e5",
        "background:#fafafa",
        "position:relative",
        "max-width:72rem",
        "text-decoration:none",
        "grid-template-columns:repeat(3,1fr)",
    )
    pool: list[str] = []
    for _ in range(SNIPPETS):
        selector = f".{words[int(rng.integers(100, 3000))]}-{words[int(rng.integers(100, 3000))]}"
        chosen = rng.choice(len(properties), size=int(rng.integers(2, 6)), replace=False)
        pool.append(f"{selector}{{{';'.join(properties[i] for i in chosen.tolist())}}}")
    return pool


class SiteTemplate:
    """Per-host markup around a page's text and links (see the module docstring)."""

    def __init__(self, words: Sequence[str], seed: int) -> None:
        rng = np.random.default_rng(TEMPLATE_SEED)
        self.words = words
        self.seed = seed
        self.scripts = _script_pool(words, rng)
        self.styles = _style_pool(words, rng)

    def _host_key(self, host: int) -> int:
        return mix(self.seed, host, 77)

    def _run(self, pool: list[str], start: int, count: int) -> str:
        return "".join(pool[(start + i) % SNIPPETS] for i in range(count))

    def _host_name(self, host: int) -> str:
        key = self._host_key(host)
        return f"{self.words[200 + key % 2000]} {self.words[200 + (key >> 12) % 2000]}".title()

    def head(self, host: int, title: str, description: str, base_element: str) -> str:
        """Everything from the doctype to the end of `<head>`: metadata, styles, scripts."""
        key = self._host_key(host)
        weight = key % 4  # 0..3: light to heavy sites
        css = self._run(self.styles, key >> 8, (4, 40, 80, 120)[weight])
        inline_script = self._run(self.scripts, key >> 20, (1, 24, 44, 64)[weight])
        site = self._host_name(host)
        safe_title, safe_description = html.escape(title), html.escape(description)
        return "".join(
            [
                '<!DOCTYPE html>\n<html lang="en" class="no-js"><head><meta charset="utf-8">',
                '<meta name="viewport" content="width=device-width, initial-scale=1">',
                f"<title>{safe_title} | {site}</title>",
                base_element,
                f'<meta name="description" content="{safe_description}">',
                f'<meta property="og:title" content="{safe_title}"><meta property="og:type" content="article">',
                f'<meta property="og:site_name" content="{site}"><meta name="twitter:card" content="summary">',
                f'<link rel="stylesheet" href="/static/css/site.{key % 65536:04x}.css">',
                '<link rel="icon" href="/favicon.ico"><link rel="preconnect" href="https://fonts.example">',
                f"<style>{css}</style>\n",
                f'<script type="application/ld+json">{{"@context":"https://schema.org","@type":"WebPage",'
                f'"name":"{safe_title}","publisher":{{"@type":"Organization","name":"{site}"}}}}</script>\n',
                f"<script>(function(w,d){{{inline_script}}})(window,document);</script>\n",
                f'<script async src="/static/js/vendor.{(key >> 16) % 65536:04x}.js"></script>',
                "</head>\n",
            ]
        )

    def _link_items(self, links: Sequence[_Link], item_class: str) -> str:
        nofollow = ' rel="nofollow"'
        return "".join(
            f'<li class="{item_class}"><a{nofollow if link.nofollow else ""} href="{link.href}" '
            f'class="{item_class}__link" data-track="{index}">{link.anchor}</a></li>'
            for index, link in enumerate(links)
        )

    def split_links(
        self, links: Sequence[LinkT]
    ) -> tuple[Sequence[LinkT], Sequence[LinkT], Sequence[LinkT], Sequence[LinkT]]:
        """(navigation, text, sidebar, footer) shares of a page's links, in body order."""
        n = len(links)
        nav, side, foot = int(n * NAV_SHARE), int(n * SIDEBAR_SHARE), int(n * FOOTER_SHARE)
        return links[:nav], links[nav : n - side - foot], links[n - side - foot : n - foot], links[n - foot :]

    def block(self, index: int) -> tuple[str, str]:
        """Opening and closing markup of the text's `index`-th paragraph: wrappers, classes, data
        attributes and an ad slot now and then, as a content management system writes them."""
        opening = (
            f'<div class="block block--text" data-block-id="{index}"><div class="block__inner">'
            f'<p class="paragraph" data-analytics="para-{index}">'
        )
        closing = "</p></div></div>\n"
        if index % 4 == 3:
            closing += (
                f'<div class="ad-slot" id="ad-{index}" data-size="300x250" aria-hidden="true">'
                f'<div class="ad-slot__placeholder"></div><script>window.ads=window.ads||[];'
                f'window.ads.push({{slot:"ad-{index}",sizes:[[300,250],[728,90]]}});</script></div>\n'
            )
        return opening, closing

    def header(self, host: int, links: Sequence[_Link]) -> str:
        site = self._host_name(host)
        return (
            '<body class="page page--article">\n'
            '<div id="cookie-banner" class="cookie-banner" hidden><p>We use cookies to improve your experience '
            "and to measure traffic. By continuing you accept our use of cookies.</p>"
            '<button type="button" class="cookie-banner__accept">Accept</button></div>\n'
            f'<header class="site-header"><div class="site-header__brand"><span class="logo">{site}</span></div>'
            '<nav class="site-nav" aria-label="Main"><ul class="site-nav__list">'
            f"{self._link_items(links, 'site-nav__item')}</ul></nav>"
            '<form class="search" role="search"><input type="search" name="q" placeholder="Search">'
            '<button type="submit">Search</button></form></header>\n'
            '<div class="layout"><main id="main" class="content"><article class="article">\n'
        )

    def footer(self, host: int, page: int, sidebar: Sequence[_Link], footer: Sequence[_Link]) -> str:
        key = self._host_key(host)
        site = self._host_name(host)
        tracking = self._run(self.scripts, (key >> 28) + page % 3, 4 + key % 12)
        return (
            "</article></main>\n"
            '<aside class="sidebar"><section class="related"><h2>Related</h2><ul class="related__list">'
            f"{self._link_items(sidebar, 'related__item')}</ul></section>"
            '<section class="newsletter"><h2>Newsletter</h2><p>Get the latest articles in your inbox every week. '
            "No spam, unsubscribe at any time.</p></section></aside></div>\n"
            '<footer class="site-footer"><ul class="site-footer__links">'
            f"{self._link_items(footer, 'site-footer__item')}</ul>"
            f'<p class="site-footer__legal">Copyright {2000 + key % 26} {site}. All rights reserved. '
            "Content may not be reproduced without permission. Terms of use and privacy policy apply.</p>"
            "</footer>\n"
            f"<script>{tracking}</script>\n"
            f'<script src="/static/js/app.{(key >> 32) % 65536:04x}.js" defer></script>\n'
            "</body></html>\n"
        )

    def robots(self, host: int, text: str) -> str:
        """A host's robots.txt as real sites write it: a comment header, groups for other crawlers
        (named, so they bind neither crawlspace, nor the benchmark's Scrapy, nor `*`), a sitemap;
        the kind's own groups (`text`) unchanged after them. Empty files stay empty."""
        if not text:
            return text
        key = self._host_key(host)
        bots = _OTHER_CRAWLERS[key % 3 : key % 3 + 3 + key % len(_OTHER_CRAWLERS)]
        lines = [f"# robots.txt for {self._host_name(host)}", "# Questions: see our contact page", ""]
        for index, bot in enumerate(bots):
            lines.append(f"User-agent: {bot}")
            lines.extend(f"Disallow: /{self.words[300 + (key >> j) % 2000]}/" for j in range(index % 4 + 1))
            if index % 3 == 0:
                lines.append("Disallow: /")
            lines.append("")
        return "\n".join(lines) + "\n" + text


_OTHER_CRAWLERS = (
    "GPTBot",
    "AhrefsBot",
    "SemrushBot",
    "MJ12bot",
    "Baiduspider",
    "YandexBot",
    "Bytespider",
    "CCBot",
    "DotBot",
    "PetalBot",
    "BLEXBot",
    "DataForSeoBot",
)
