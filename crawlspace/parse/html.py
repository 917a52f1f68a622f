"""HTML link and text extraction on selectolax's lexbor engine (HTML5-correct on malformed input).

Filled by the engine with each fetched HTML body; the links go to the URL filter, the text,
title and anchor texts to the store (the indexer reads them, IIR §20.2.1). Pure: bytes in, data
out, and it must survive any input.

- Links: `<a href>`, `<area href>`, `<frame src>`, `<iframe src>`, `<link href>` whose rel is
  one a crawler follows (alternate, next, prev), the `<meta http-equiv=refresh>` target; each
  resolved against the document base (`<base href>`, else the page URL) as a browser does,
  with its anchor text (the `alt` of an image when the anchor has no text) and `rel=nofollow`.
  Invalid hrefs are dropped and counted; at most `max_links` are kept (Heritrix keeps 6,000).
- Robots directives from `<meta name=robots>`, `<meta name=TOKEN>` (our product token) and
  X-Robots-Tag headers, whose `agent: directives` form applies to that agent only: noindex,
  nofollow, none (both). nofollow marks every link; noindex is reported for the store.
- Canonical: `<link rel=canonical>` or a `Link: <...>; rel="canonical"` header, resolved.
- Charset, as a browser decides it (WHATWG encoding sniffing, simplified): byte order mark,
  then the Content-Type charset, then `<meta charset>` / `<meta http-equiv=Content-Type>` in
  the first 4 KiB, else UTF-8 when the bytes are valid UTF-8 and windows-1252 when not.
  Labels map as browsers map them (latin1 and ascii are windows-1252, gb2312 is gb18030, ...).
- Bounded time: lexbor's tree builder is quadratic in nesting depth (each start tag scans the
  stack of open elements): 10,000 levels take 0.08 s, 100,000 take 10 s. Pages with many tags
  get a linear pre-pass that estimates the depth and, beyond MAX_NESTING, drops the start and
  end tags of nesting elements past that depth (text, links and metadata are kept).
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from selectolax.lexbor import LexborHTMLParser, LexborNode

from crawlspace.urls import InvalidURL, join

MAX_ANCHOR_CHARS = 200
MAX_LINKS = 10_000
MAX_NESTING = 1_000
NESTING_CHECK_TAGS = 5_000  # pages with fewer '<' cannot nest deeper than this: no pre-pass
META_SCAN_BYTES = 4096

_LINK_SELECTOR = "a[href], area[href], frame[src], iframe[src], link[href]"
_FOLLOWED_LINK_RELS = frozenset({"alternate", "next", "prev"})
_NON_TEXT_TAGS = ["script", "style", "noscript", "template"]
_META_CHARSET = re.compile(rb"""<meta\b[^>]{0,512}?\bcharset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
_REFRESH_URL = re.compile(r"""^\s*[\d.]*\s*[;,]?\s*(?:url\s*=\s*)?(["']?)(.*?)\1\s*$""", re.IGNORECASE | re.DOTALL)
_LINK_HEADER = re.compile(r"""<([^>]*)>\s*((?:;\s*[^;,]*)*)""")
_CANONICAL_REL = re.compile(r"""\brel\s*=\s*"?[^";,]*\bcanonical\b""", re.IGNORECASE)
_TAG = re.compile(rb"<(/?)([A-Za-z][A-Za-z0-9-]{0,31})\b[^<>]{0,4096}?(/?)>")

# Elements that never hold others (void) or whose end tag is implied by a sibling: they do not
# deepen the stack of open elements in a way that costs the tree builder.
_FLAT_ELEMENTS = frozenset(
    b"area base br col embed hr img input link meta param source track wbr p li dt dd option optgroup "
    b"tr td th tbody thead tfoot colgroup caption rb rt rp".split()
)
_KEPT_ELEMENTS = frozenset(b"a area frame iframe base meta link title html head body".split())
_VALUED_DIRECTIVES = frozenset(
    {"unavailable_after", "max-snippet", "max-image-preview", "max-video-preview", "indexifembedded"}
)

# WHATWG encoding labels whose Python codec differs from the label's literal meaning.
_LABELS = {
    "iso-8859-1": "cp1252",
    "iso8859-1": "cp1252",
    "latin1": "cp1252",
    "latin-1": "cp1252",
    "l1": "cp1252",
    "cp819": "cp1252",
    "us-ascii": "cp1252",
    "ascii": "cp1252",
    "ansi_x3.4-1968": "cp1252",
    "iso-8859-9": "cp1254",
    "latin5": "cp1254",
    "iso-8859-11": "cp874",
    "tis-620": "cp874",
    "gb2312": "gb18030",
    "gbk": "gb18030",
    "x-gbk": "gb18030",
    "chinese": "gb18030",
    "euc-kr": "cp949",
    "ks_c_5601-1987": "cp949",
    "shift_jis": "cp932",
    "shift-jis": "cp932",
    "sjis": "cp932",
    "x-sjis": "cp932",
    "ms_kanji": "cp932",
    "windows-31j": "cp932",
    "big5": "big5hkscs",
    "x-user-defined": "cp1252",
}


@dataclass(slots=True, frozen=True)
class Link:
    url: str
    anchor_text: str
    nofollow: bool
    kind: str = "a"  # a, area, frame, iframe, link, refresh


@dataclass(slots=True)
class ParsedPage:
    """`raw_text` is the body's text as lexbor gives it; `text` is the same with whitespace runs
    collapsed, computed on first use: collapsing a 20 KB page costs more than extracting its links
    (0.2 ms), and only some consumers need it (the near-duplicate shingler reads words off the raw text)."""

    title: str = ""
    raw_text: str = ""
    links: list[Link] = field(default_factory=list)
    base: str = ""
    canonical: str | None = None
    refresh: str | None = None
    directives: frozenset[str] = frozenset()
    charset: str = "utf-8"
    invalid_links: int = 0
    dropped_links: int = 0  # beyond max_links

    _text: str | None = field(default=None, repr=False)

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = _collapse(self.raw_text)
        return self._text

    @text.setter
    def text(self, value: str) -> None:
        self._text = self.raw_text = value

    @property
    def meta_noindex(self) -> bool:
        return "noindex" in self.directives

    @property
    def meta_nofollow(self) -> bool:
        return "nofollow" in self.directives


def _codec(label: str | None) -> str | None:
    """The Python codec for an encoding label, or None when it is unknown."""
    if not label:
        return None
    label = label.strip().strip("\"'").lower()
    name = _LABELS.get(label, label)
    try:
        return codecs.lookup(name).name
    except LookupError:
        return None


def _charset_from_header(content_type: str | None) -> str | None:
    if not content_type:
        return None
    for part in content_type.split(";")[1:]:
        key, _, value = part.partition("=")
        if key.strip().lower() == "charset":
            return _codec(value)
    return None


def sniff_charset(body: bytes, content_type: str | None = None) -> str:
    """The codec to decode an HTML body with (see the module docstring for the order)."""
    if body.startswith(codecs.BOM_UTF8):
        return "utf-8-sig"
    if body.startswith(codecs.BOM_UTF16_LE):
        return "utf-16-le"
    if body.startswith(codecs.BOM_UTF16_BE):
        return "utf-16-be"
    declared = _charset_from_header(content_type)
    if declared is None:
        match = _META_CHARSET.search(body, 0, META_SCAN_BYTES)
        declared = _codec(match.group(1).decode("ascii")) if match else None
        if declared is not None and declared.startswith("utf-16"):
            declared = "utf-8"  # a meta tag readable as ASCII cannot be UTF-16 (WHATWG)
    if declared is not None:
        return declared
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(body) - 3:  # not merely a multi-byte character cut by truncation
            return "cp1252"
    return "utf-8"


def decode_html(body: bytes, content_type: str | None = None) -> tuple[str, str]:
    """The text of an HTML body and the codec used; never raises."""
    charset = sniff_charset(body, content_type)
    try:
        return body.decode(charset, errors="replace"), charset
    except (LookupError, UnicodeError):  # a codec that cannot even replace
        return body.decode("utf-8", errors="replace"), "utf-8"


def robots_directives(values: Iterable[str], agent: str = "") -> frozenset[str]:
    """Directives of meta robots contents or X-Robots-Tag values that apply to `agent` (or to all).

    `googlebot: noindex` applies to googlebot only; `none` means noindex and nofollow.
    """
    agent = agent.lower()
    found: set[str] = set()
    for value in values:
        scope: str | None = None
        for raw in value.split(","):
            part = raw.strip().lower()
            head, colon, tail = part.partition(":")
            if colon and head.strip() not in _VALUED_DIRECTIVES:
                scope, part = head.strip(), tail.strip()
            if scope is not None and scope != agent:
                continue
            name = part.split(":", 1)[0].strip()
            if name:
                found.add(name)
    if "none" in found:
        found |= {"noindex", "nofollow"}
    return frozenset(found)


def canonical_from_link_header(values: Iterable[str]) -> str | None:
    """The target of the first `Link: <url>; rel="canonical"` header value, as written."""
    for value in values:
        for match in _LINK_HEADER.finditer(value):
            if _CANONICAL_REL.search(match.group(2)):
                return match.group(1).strip()
    return None


def refresh_target(content: str) -> str | None:
    """The URL of a meta refresh `content` (`5; url=/next`), or None when it only reloads the page."""
    match = _REFRESH_URL.match(content)
    if match is None:
        return None
    target = match.group(2).strip()
    return target or None


def flatten_deep_nesting(body: bytes, max_depth: int = MAX_NESTING) -> bytes:
    """Drop the tags of nesting elements deeper than `max_depth` (linear; text and links stay).

    Only runs the tag scan when the page has enough tags to nest that deep.
    """
    if body.count(b"<") <= max(max_depth, NESTING_CHECK_TAGS):
        return body
    depth = 0
    dropped = 0
    pieces: list[bytes] = []
    position = 0
    for match in _TAG.finditer(body):
        name = match.group(2).lower()
        if name in _FLAT_ELEMENTS or name in _KEPT_ELEMENTS or match.group(3):
            continue
        if match.group(1):  # end tag
            if dropped and depth <= max_depth:
                dropped -= 1
                pieces.append(body[position : match.start()])
                position = match.end()
            else:
                depth = max(depth - 1, 0)
            continue
        if depth >= max_depth:
            dropped += 1
            pieces.append(body[position : match.start()])
            position = match.end()
        else:
            depth += 1
    if position == 0:
        return body
    pieces.append(body[position:])
    return b"".join(pieces)


def _collapse(text: str) -> str:
    """Runs of whitespace as one space, none at the ends (str.split: 10x faster than a regex here)."""
    return " ".join(text.split())


def _anchor_text(node: LexborNode) -> str:
    text = _collapse(node.text(deep=True))
    if not text:
        image = node.css_first("img[alt]")
        if image is not None:
            text = _collapse(image.attributes.get("alt") or "")
    if not text:
        text = _collapse(node.attributes.get("title") or "")
    return text[:MAX_ANCHOR_CHARS]


def parse_html(
    body: bytes,
    url: str,
    content_type: str | None = None,
    robots_headers: Iterable[str] | str | None = None,
    *,
    agent: str = "",
    link_headers: Iterable[str] = (),
    max_links: int = MAX_LINKS,
) -> ParsedPage:
    """Links, title, text, canonical and robots directives of a page fetched from `url`.

    `robots_headers` are the X-Robots-Tag values of the response, `link_headers` its Link
    values, `agent` the crawler's product token (for `<meta name=TOKEN>` and agent-scoped
    X-Robots-Tag directives).
    """
    text, charset = decode_html(flatten_deep_nesting(body), content_type)
    tree = LexborHTMLParser(text)
    page = ParsedPage(base=url, charset=charset)
    base_node = tree.css_first("base[href]")
    if base_node is not None:
        try:
            page.base = join(url, base_node.attributes.get("href") or "")
        except InvalidURL:
            page.base = url
    base = page.base
    title_node = tree.css_first("title")
    if title_node is not None:
        page.title = _collapse(title_node.text())

    agent = agent.lower()
    meta_values: list[str] = []
    refresh: str | None = None
    for meta in tree.css("meta[content]"):
        attributes = meta.attributes
        name = (attributes.get("name") or "").strip().lower()
        if name == "robots" or (agent and name == agent):
            meta_values.append(attributes.get("content") or "")
        elif (attributes.get("http-equiv") or "").strip().lower() == "refresh" and refresh is None:
            refresh = refresh_target(attributes.get("content") or "")
    headers = [robots_headers] if isinstance(robots_headers, str) else list(robots_headers or ())
    page.directives = robots_directives(meta_values, agent) | robots_directives(headers, agent)
    nofollow_all = page.meta_nofollow

    canonical_href = canonical_from_link_header(link_headers)
    for node in tree.css(_LINK_SELECTOR):
        attributes = node.attributes
        tag = node.tag or ""
        rel = (attributes.get("rel") or "").lower().split()
        if tag == "link":
            if "canonical" in rel and canonical_href is None:
                canonical_href = attributes.get("href") or ""
            if not _FOLLOWED_LINK_RELS.intersection(rel):
                continue
        href = attributes.get("src" if tag in ("frame", "iframe") else "href")
        if href is None:
            continue
        if len(page.links) >= max_links:
            page.dropped_links += 1
            continue
        try:
            target = join(base, href)
        except InvalidURL:
            page.invalid_links += 1
            continue
        if tag == "a":
            anchor = _anchor_text(node)
        elif tag == "area":
            anchor = _collapse(attributes.get("alt") or "")[:MAX_ANCHOR_CHARS]
        else:
            anchor = _collapse(attributes.get("title") or "")[:MAX_ANCHOR_CHARS]
        page.links.append(Link(target, anchor, nofollow_all or "nofollow" in rel, tag))

    if canonical_href is not None:
        try:
            page.canonical = join(base, canonical_href)
        except InvalidURL:
            page.invalid_links += 1
    if refresh is not None:
        try:
            page.refresh = join(base, refresh)
            if len(page.links) < max_links:
                page.links.append(Link(page.refresh, "", nofollow_all, "refresh"))
        except InvalidURL:
            page.invalid_links += 1

    tree.strip_tags(_NON_TEXT_TAGS)
    body_node = tree.body
    if body_node is not None:
        page.raw_text = body_node.text(separator=" ")
    return page
