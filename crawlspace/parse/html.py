"""HTML link and text extraction on selectolax's lexbor engine (HTML5-correct on malformed input).

Hrefs are resolved here against the document's base (the `<base href>` or the page URL) so
that later stages see absolute URLs only; invalid hrefs are dropped and counted.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass, field

from selectolax.lexbor import LexborHTMLParser

from crawlspace.urls import InvalidURL, join

_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
_LINK_SELECTOR = "a[href], area[href], frame[src], iframe[src], link[href]"
_FOLLOWED_LINK_RELS = frozenset({"alternate", "next", "prev", "canonical"})
_NON_TEXT_TAGS = ["script", "style", "noscript", "template"]
MAX_ANCHOR_CHARS = 200


@dataclass(slots=True, frozen=True)
class Link:
    url: str
    anchor_text: str
    nofollow: bool


@dataclass(slots=True)
class ParsedPage:
    title: str = ""
    text: str = ""
    links: list[Link] = field(default_factory=list)
    canonical: str | None = None
    meta_noindex: bool = False
    meta_nofollow: bool = False
    invalid_links: int = 0


def sniff_charset(body: bytes, content_type: str | None) -> str:
    """Charset by precedence: BOM, HTTP header, <meta> in the first 4 KiB, else UTF-8."""
    if body.startswith(codecs.BOM_UTF8):
        return "utf-8-sig"
    if body.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"
    for candidate in (_charset_from_header(content_type), _charset_from_meta(body[:4096])):
        if candidate and _known_codec(candidate):
            return candidate
    return "utf-8"


def _charset_from_header(content_type: str | None) -> str | None:
    if not content_type:
        return None
    for part in content_type.split(";")[1:]:
        key, _, value = part.partition("=")
        if key.strip().lower() == "charset":
            return value.strip().strip("\"'").lower() or None
    return None


def _charset_from_meta(head: bytes) -> str | None:
    match = _META_CHARSET.search(head)
    return match.group(1).decode("ascii").lower() if match else None


def _known_codec(name: str) -> bool:
    try:
        codecs.lookup(name)
    except LookupError:
        return False
    return True


def _robots_directives(content: str) -> set[str]:
    tokens = {token.strip().lower() for token in content.split(",")}
    if "none" in tokens:
        tokens |= {"noindex", "nofollow"}
    return tokens


def parse_html(body: bytes, url: str, content_type: str | None = None, robots_header: str | None = None) -> ParsedPage:
    """Links (resolved, with anchor text and nofollow), title, text and robots directives of a page."""
    text = body.decode(sniff_charset(body, content_type), errors="replace")
    tree = LexborHTMLParser(text)
    page = ParsedPage()
    base = url
    base_node = tree.css_first("base[href]")
    if base_node is not None:
        try:
            base = join(url, base_node.attributes.get("href") or "")
        except InvalidURL:
            base = url
    title_node = tree.css_first("title")
    if title_node is not None:
        page.title = " ".join(title_node.text().split())
    directives: set[str] = set()
    for meta in tree.css("meta[name][content]"):
        name = (meta.attributes.get("name") or "").lower()
        if name in ("robots", "crawlspace"):
            directives |= _robots_directives(meta.attributes.get("content") or "")
    if robots_header:
        directives |= _robots_directives(robots_header)
    page.meta_noindex = "noindex" in directives
    page.meta_nofollow = "nofollow" in directives
    for node in tree.css(_LINK_SELECTOR):
        attributes = node.attributes
        tag = node.tag
        rel = (attributes.get("rel") or "").lower().split()
        if tag == "link":
            if "canonical" in rel:
                try:
                    page.canonical = join(base, attributes.get("href") or "")
                except InvalidURL:
                    page.invalid_links += 1
            if not _FOLLOWED_LINK_RELS.intersection(rel):
                continue
        href = attributes.get("src" if tag in ("frame", "iframe") else "href")
        if href is None:
            continue
        try:
            target = join(base, href)
        except InvalidURL:
            page.invalid_links += 1
            continue
        anchor = ""
        if tag == "a":
            anchor = " ".join(node.text(deep=True).split())[:MAX_ANCHOR_CHARS]
        elif tag == "area":
            anchor = attributes.get("alt") or ""
        page.links.append(Link(target, anchor, "nofollow" in rel or page.meta_nofollow))
    tree.strip_tags(_NON_TEXT_TAGS)
    body_node = tree.body
    if body_node is not None:
        page.text = " ".join(body_node.text(separator=" ").split())
    return page
