"""Rendering of responses on demand: HTML bodies, hrefs in every link form, robots.txt, the trap.

Nothing is stored per page: the body of page g is a function of (seed, g) and the arrays of
model.WebData. Text paragraphs are picked from the shared corpus by a stride that a hash of
(seed, page) fixes; links are written into paragraphs, each href spelled in its link form
relative to the page's own URL, or to its `<base href>` when it has one. Pages whose body is
shared by copies (exact and near duplicates) use absolute hrefs only, so that their link set
does not depend on the URL they are served at.

`page_links` is the single source of both the body's `<a>` elements and the ground truth's
`links(url)`; the targets come from the arrays, never from parsing the hrefs back.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from types import MappingProxyType

from crawlspace.simweb.model import (
    DIRS,
    JAVASCRIPT,
    MAILTO,
    TRAP_ENTRY,
    ExtraKind,
    LinkForm,
    Response,
    WebData,
    mix,
)
from crawlspace.simweb.robots import RobotsKind, robots_status, robots_text
from crawlspace.simweb.template import SiteTemplate
from crawlspace.simweb.text import PARAGRAPHS, Corpus

HTML = "text/html; charset=utf-8"
TEXT = "text/plain; charset=utf-8"
INTRO_WORDS = 30
TRAP_START = (2026, 11)
_CALENDAR = re.compile(r"/cal/(\d{4,6})/(\d\d)/")
_REASONS = MappingProxyType({404: "Not Found", 500: "Internal Server Error", 503: "Service Unavailable"})
_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)


@dataclass(frozen=True, slots=True)
class RenderedLink:
    """A link as the renderer writes it: `target` is a node id, or MAILTO/JAVASCRIPT/TRAP_ENTRY."""

    target: int
    href: str
    anchor: str
    nofollow: bool
    target_url: str | None


def relative_reference(base_dir: str, path: str) -> str:
    """The shortest `../`-style relative reference from a directory to a path (never empty)."""
    base_parts = base_dir.strip("/").split("/") if base_dir != "/" else []
    cut = path.rfind("/")
    target_dir, file_name = path[: cut + 1], path[cut + 1 :]
    target_parts = target_dir.strip("/").split("/") if target_dir != "/" else []
    common = 0
    while common < min(len(base_parts), len(target_parts)) and base_parts[common] == target_parts[common]:
        common += 1
    reference = "../" * (len(base_parts) - common) + "".join(part + "/" for part in target_parts[common:]) + file_name
    return reference or "./"


def dot_segments(path: str) -> str:
    """The same path with a `./` and an `x/../` inserted: /s1/p3.html -> /s1/./x/../p3.html."""
    cut = path.rfind("/") + 1
    return f"{path[:cut]}./x/../{path[cut:]}"


def percent_encoded(path: str, lower: bool) -> str:
    """Escape one unreserved character (`~` if there is one, else the first letter or digit)."""
    index = path.find("~")
    if index < 0:
        index = next((i for i, char in enumerate(path) if char.isalnum()), -1)
    if index < 0:
        return path
    escape = f"%{ord(path[index]):02X}"
    return path[:index] + (escape.lower() if lower else escape) + path[index + 1 :]


class Renderer:
    """Turns (host, path) into a Response, and nodes into their links. Holds no per-request state."""

    def __init__(self, data: WebData, corpus: Corpus) -> None:
        self.data = data
        self.corpus = corpus
        self.seed = data.config.seed
        self.paragraph_bytes = corpus.paragraph_bytes()
        self.port = data.config.port
        self._titles: dict[int, str] = {}
        self.template = SiteTemplate(corpus.words, self.seed) if data.config.page_style == "realistic" else None

    # -- words -----------------------------------------------------------------------------------
    def title(self, node: int) -> str:
        """Title of a page (copies and near-copies show their original's); also the anchor text of its links.

        Memoized: a page's title is written into every page that links to it, about ten times per crawl.
        """
        title = self._titles.get(node)
        if title is None:
            words = self.corpus.words
            key = mix(self.seed, node, 1)
            count = 3 + key % 4
            title = " ".join([words[100 + (key >> (8 + 11 * i)) % 2900] for i in range(count)]).capitalize()
            self._titles[node] = title
        return title

    def anchor(self, node: int) -> str:
        data = self.data
        if node < data.pages:
            return self.title(node)
        extra = node - data.pages
        kind = ExtraKind(int(data.extra_kind[extra]))
        if kind in (ExtraKind.COPY, ExtraKind.NEAR):
            return self.title(int(data.extra_target[extra]))
        words = self.corpus.words
        key = mix(self.seed, node, 2)
        return f"{words[200 + key % 2000]} {words[200 + (key >> 16) % 2000]}"

    def intro(self, page: int, changed: int, version: int = 0) -> str:
        """Opening words of a page; a near-copy changes `changed` of them (1 to 5); a later version of a
        changing page (simweb.changes) rewrites 3 to 7 more, chosen by the version."""
        key = mix(self.seed, page, 3)
        words = self.corpus.paragraphs[key % PARAGRAPHS].split(" ", INTRO_WORDS)[:INTRO_WORDS]
        vocabulary = self.corpus.words
        for j in range(changed):
            position = ((key >> 20) + 7 * j) % len(words)
            replacement = vocabulary[300 + (key + j) % 3000]
            if replacement == words[position]:
                replacement = vocabulary[301 + (key + j) % 3000]
            words[position] = replacement
        if version:
            rewrite = mix(self.seed, page, version, 5)
            for j in range(3 + rewrite % 5):
                position = ((rewrite >> 8) + 11 * j) % len(words)
                words[position] = vocabulary[300 + ((rewrite >> 24) + 13 * j) % 3000]
        return " ".join(words)

    # -- links ----------------------------------------------------------------------------------
    def href(
        self, form: int, source_host: int, base_dir: str, absolute_only: bool, target_host: int, path: str, k: int
    ) -> str:
        """Spell a link to http://host/path in `form`, relative to `base_dir` of the source's host."""
        data = self.data
        name = data.host_names[target_host]
        origin = f"http://{name}{data.port_suffix}"
        relative_ok = target_host == source_host and not absolute_only
        if form == LinkForm.RELATIVE and relative_ok:
            return relative_reference(base_dir, path)
        if form == LinkForm.DOT and relative_ok:
            reference = relative_reference(base_dir, path)
            return reference if reference.startswith(".") else "./" + reference
        if form == LinkForm.PARENT and relative_ok:
            return "../" * max(1, base_dir.count("/") - 1) + path[1:]
        if form == LinkForm.ROOT_RELATIVE and relative_ok:
            return path
        if form == LinkForm.PROTOCOL_RELATIVE and not absolute_only:
            return f"//{name}{data.port_suffix}{path}"
        if form == LinkForm.UPPER_HOST:
            return f"http://{name.upper()}{data.port_suffix}{path}"
        if form == LinkForm.EXPLICIT_PORT:
            return f"http://{name}:{self.port}{path}"
        if form == LinkForm.DOT_SEGMENTS:
            return dot_segments(path) if relative_ok else origin + dot_segments(path)
        if form == LinkForm.PERCENT_ENCODED:
            encoded = percent_encoded(path, lower=k % 2 == 1)
            return encoded if relative_ok else origin + encoded
        if form == LinkForm.FRAGMENT:
            fragment = f"#sec{k % 7}"
            return (relative_reference(base_dir, path) if relative_ok else origin + path) + fragment
        return origin + path

    def base_dir(self, page: int) -> str:
        base = int(self.data.page_base[page])
        return DIRS[base] if base >= 0 else DIRS[int(self.data.page_dir[page])]

    def page_links(self, page: int) -> list[RenderedLink]:
        """The links of a tree page, in body order."""
        data = self.data
        host = int(data.page_host[page])
        name = data.host_names[host]
        base_dir = self.base_dir(page)
        absolute_only = bool(data.page_abs_only[page])
        start, end = int(data.link_start[page]), int(data.link_start[page + 1])
        links: list[RenderedLink] = []
        targets = data.link_dst[start:end].tolist()
        forms = data.link_form[start:end].tolist()
        nofollows = data.link_nofollow[start:end].tolist()
        for k, (target, form, nofollow) in enumerate(zip(targets, forms, nofollows, strict=True)):
            if target == MAILTO:
                links.append(RenderedLink(target, f"mailto:webmaster@{name}", "Contact the webmaster", False, None))
            elif target == JAVASCRIPT:
                links.append(RenderedLink(target, "javascript:window.print()", "Print this page", False, None))
            elif target == TRAP_ENTRY:
                path = f"/cal/{TRAP_START[0]:04d}/{TRAP_START[1]:02d}/"
                href = self.href(form, host, base_dir, absolute_only, host, path, k)
                links.append(RenderedLink(target, href, "Events calendar", False, data.origin(host) + path))
            else:
                target_host = data.host_of_node(target)
                path = data.path_of(target)
                href = self.href(form, host, base_dir, absolute_only, target_host, path, k)
                links.append(RenderedLink(target, href, self.anchor(target), nofollow, data.origin(target_host) + path))
        return links

    # -- bodies ---------------------------------------------------------------------------------
    def page_body(self, page: int, changed_words: int = 0, version: int = 0, news: str | None = None) -> bytes:
        """The page's HTML; `version` > 0: as a changing web's page is at that version (one paragraph and
        some opening words rewritten), with a link to the news item at URL `news` if it has one."""
        data = self.data
        title = self.title(page)
        host = int(data.page_host[page])
        base = int(data.page_base[page])
        base_element = f'<base href="{data.origin(host)}{DIRS[base]}">' if base >= 0 else ""
        intro = self.intro(page, changed_words, version)
        links: Sequence[RenderedLink] = self.page_links(page)
        template = self.template
        if template is None:
            parts = [
                '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>',
                title,
                "</title>",
                base_element,
                "</head>\n<body>\n",
            ]
            text_links, sidebar, footer = links, links[:0], links[:0]
        else:
            nav, text_links, sidebar, footer = template.split_links(links)
            description = intro[: intro.find(" ", 120) if len(intro) > 120 else len(intro)]
            parts = [template.head(host, title, description, base_element), template.header(host, nav)]
        parts += ["<h1>", title, '</h1>\n<p class="intro">', intro, "</p>\n"]
        key = mix(self.seed, page, 4)
        stride = 1 + (key >> 13) % (PARAGRAPHS - 1)
        current = key % PARAGRAPHS
        chosen: list[int] = []
        budget = int(data.page_bytes[page])
        while budget > 0 and len(chosen) < PARAGRAPHS:
            chosen.append(current)
            budget -= self.paragraph_bytes[current] + 8
            current = (current + stride) % PARAGRAPHS
        if version:  # one paragraph rewritten
            rewrite = mix(self.seed, page, version, 6)
            chosen[rewrite % len(chosen)] = (
                chosen[rewrite % len(chosen)] + 1 + (rewrite >> 16) % (PARAGRAPHS - 1)
            ) % PARAGRAPHS
        paragraphs = self.corpus.paragraphs
        count, n_links = len(chosen), len(text_links)
        opening, closing = "<p>", "</p>\n"
        for j, paragraph in enumerate(chosen):
            text = paragraphs[paragraph]
            if template is not None:
                opening, closing = template.block(j)
            here = text_links[j * n_links // count : (j + 1) * n_links // count]
            if here:
                cut = text.find(". ") + 2
                anchors = " ".join(
                    f'<a rel="nofollow" href="{link.href}">{link.anchor}</a>'
                    if link.nofollow
                    else f'<a href="{link.href}">{link.anchor}</a>'
                    for link in here
                )
                parts += [opening, text[:cut], anchors, " ", text[cut:], closing]
            else:
                parts += [opening, text, closing]
        if news is not None:
            parts += ['<p class="news">Latest: <a href="', news, '">', self.news_title(page, version), "</a></p>\n"]
        parts.append("</body></html>\n" if template is None else template.footer(host, page, sidebar, footer))
        return "".join(parts).encode()

    def news_title(self, page: int, version: int) -> str:
        key = mix(self.seed, page, version, 7)
        words = self.corpus.words
        return " ".join(words[100 + (key >> (9 * i)) % 2900] for i in range(4)).capitalize()

    def news_body(self, page: int, version: int, page_url: str) -> bytes:
        """A news item: a new URL that a version of a changing page links to, and that links back."""
        title = self.news_title(page, version)
        return (
            f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{title}</title></head>\n'
            f"<body>\n<h1>{title}</h1>\n<p>{self.intro(page, 0, version)}</p>\n"
            f'<p><a href="{page_url}">{self.title(page)}</a></p>\n</body></html>\n'
        ).encode()

    def small_page(self, title: str, text: str) -> bytes:
        return (
            f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{title}</title></head>\n'
            f"<body>\n<h1>{title}</h1>\n<p>{text}</p>\n</body></html>\n"
        ).encode()

    def error_body(self, status: int, path: str) -> bytes:
        return self.small_page(f"{status} {_REASONS.get(status, 'Error')}", f"The requested URL {path} failed.")

    # -- the trap -------------------------------------------------------------------------------
    @staticmethod
    def calendar_month(path: str) -> tuple[int, int] | None:
        match = _CALENDAR.fullmatch(path)
        if match is None:
            return None
        year, month = int(match.group(1)), int(match.group(2))
        return (year, month) if 1 <= month <= 12 and year >= 1000 else None

    def calendar_links(self, host: int, year: int, month: int) -> list[RenderedLink]:
        """Previous and next month, next year and home: enough to never end."""
        origin = self.data.origin(host)
        prev_year, prev_month = (year - 1, 12) if month == 1 else (year, month - 1)
        next_year, next_month = (year + 1, 1) if month == 12 else (year, month + 1)
        base_dir = f"/cal/{year:04d}/{month:02d}/"
        targets = [
            (f"/cal/{prev_year:04d}/{prev_month:02d}/", LinkForm.ROOT_RELATIVE, "Previous month"),
            (f"/cal/{next_year:04d}/{next_month:02d}/", LinkForm.RELATIVE, "Next month"),
            (f"/cal/{year + 1:04d}/{month:02d}/", LinkForm.ABSOLUTE, "Next year"),
            ("/", LinkForm.RELATIVE, "Home"),
        ]
        return [
            RenderedLink(
                TRAP_ENTRY, self.href(form, host, base_dir, False, host, path, 0), anchor, False, origin + path
            )
            for path, form, anchor in targets
        ]

    def calendar_body(self, host: int, year: int, month: int) -> bytes:
        title = f"Events in {_MONTHS[month - 1]} {year}"
        text = self.corpus.paragraphs[mix(self.seed, host, year * 12 + month) % PARAGRAPHS]
        links = self.calendar_links(host, year, month)
        anchors = " | ".join(f'<a href="{link.href}">{link.anchor}</a>' for link in links)
        return (
            f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{title}</title></head>\n'
            f"<body>\n<h1>{title}</h1>\n<p>{anchors}</p>\n<p>{text}</p>\n</body></html>\n"
        ).encode()

    # -- responses ------------------------------------------------------------------------------
    def robots_response(self, host: int) -> Response:
        kind = RobotsKind(int(self.data.host_robots[host]))
        status = robots_status(kind)
        if status != 200:
            return Response(status, HTML, self.error_body(status, "/robots.txt"))
        text = robots_text(kind, base_url=self.data.origin(host), crawl_delay=self.data.config.robots_crawl_delay)
        if self.template is not None:
            text = self.template.robots(host, text)
        return Response(200, TEXT, text.encode())

    def node_response(self, node: int) -> Response:
        data = self.data
        if node < data.pages:
            return Response(200, HTML, self.page_body(node))
        extra = node - data.pages
        kind = int(data.extra_kind[extra])
        status = int(data.extra_status[extra])
        target = int(data.extra_target[extra])
        if kind == ExtraKind.COPY:
            return Response(200, HTML, self.page_body(target))
        if kind == ExtraKind.NEAR:
            return Response(200, HTML, self.page_body(target, changed_words=int(data.extra_aux[extra])))
        if kind == ExtraKind.REDIRECT:
            same_host = data.host_of_node(target) == int(data.extra_host[extra])
            relative = same_host and int(data.extra_aux[extra]) == 1
            location = data.path_of(target) if relative else data.url_of(target)
            return Response(status, HTML, self.small_page("Moved", f"This page has moved to {location}."), location)
        if kind == ExtraKind.HIDDEN:
            return Response(200, HTML, self.small_page(self.anchor(node).capitalize(), self.intro(node, 0)))
        return Response(status, HTML, self.error_body(status, data.extra_path[extra]))
