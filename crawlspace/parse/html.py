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
- Bounded text: the body's text is cut at `max_text_chars` characters (1 Mi by default), the title
  at MAX_TITLE_CHARS and anchor texts at MAX_ANCHOR_CHARS, and whitespace is collapsed only in
  the part that is kept. Everything downstream (shingles, the stored text, policies, processors)
  holds a page's text, and a truncated 10 MiB page has 10 M characters of it; one unclosed
  element can make the rest of a page its text.
- Bounded memory: lexbor's tree takes up to 40 bytes per character of tag-dense HTML (400 MB for a
  truncated 10 MiB page; 18 per NUL character of a decoded bomb), so a page longer than
  `segment_chars` (1 Mi) is parsed in segments of about that size, one tree at a time. Each
  segment but the last ends just before a tag outside comments and raw-text elements (script,
  style, textarea, title...), so no tag, comment or script is split and every link is found;
  what the head says (base, title, meta robots, refresh) is read from the first segment, where
  the head is. What segments change, and only on pages longer than one: an element open across a
  boundary ends there (an anchor's text is what precedes it), a `<` inside an attribute value can
  be taken for a tag start.
- Bounded time: lexbor's tree builder is quadratic in nesting depth (each start tag scans the
  stack of open elements): 10,000 levels take 0.08 s, 100,000 take 10 s. Pages with many tags
  get a linear pre-pass that estimates the depth and, beyond MAX_NESTING, drops the start and
  end tags of nesting elements past that depth (text, links and metadata are kept).
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import msgspec
import numpy as np
from selectolax.lexbor import LexborHTMLParser, LexborNode

from crawlspace.urls import InvalidURL, join

MAX_ANCHOR_CHARS = 200
MAX_TITLE_CHARS = 1_000
MAX_TEXT_CHARS = 1 << 20
SEGMENT_CHARS = 1 << 20
MAX_LINKS = 10_000
MAX_NESTING = 1_000
NESTING_CHECK_TAGS = 5_000  # pages with fewer '<' cannot nest deeper than this: no pre-pass
_TAG_OPEN = ord("<")
META_SCAN_BYTES = 4096

_LINK_SELECTOR = "a[href], area[href], frame[src], iframe[src], link[href]"
_FOLLOWED_LINK_RELS = frozenset({"alternate", "next", "prev"})
_NON_TEXT_TAGS = ["script", "style", "noscript", "template"]
_META_CHARSET = re.compile(rb"""<meta\b[^>]{0,512}?\bcharset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
_REFRESH_URL = re.compile(r"""^\s*[\d.]*\s*[;,]?\s*(?:url\s*=\s*)?(["']?)(.*?)\1\s*$""", re.IGNORECASE | re.DOTALL)
_LINK_HEADER = re.compile(r"""<([^>]*)>\s*((?:;\s*[^;,]*)*)""")
_CANONICAL_REL = re.compile(r"""\brel\s*=\s*"?[^";,]*\bcanonical\b""", re.IGNORECASE)
_TAG = re.compile(rb"<(/?)([A-Za-z][A-Za-z0-9-]{0,31})\b[^<>]{0,4096}?(/?)>")
_TAG_START = re.compile(r"<[A-Za-z/!?]")
_OPAQUE = re.compile(r"<!--|<(script|style|textarea|title|xmp|iframe|noembed|noframes|plaintext)[\s/>]", re.IGNORECASE)

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


class Link(msgspec.Struct, frozen=True, gc=False):
    """A link as found (a page has dozens: a Struct is built in C, a frozen dataclass sets each field
    through object.__setattr__)."""

    url: str
    anchor_text: str
    nofollow: bool
    kind: str = "a"  # a, area, frame, iframe, link, refresh


@dataclass(slots=True)
class ParsedPage:
    """`raw_text` is the body's text as lexbor gives it (its first `max_text_chars` characters); `text`
    is the same with whitespace runs collapsed, computed on first use: collapsing a 20 KB page costs
    more than extracting its links (0.2 ms), and only some consumers need it (the near-duplicate
    shingler reads words off the raw text)."""

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

    Only runs the tag scan when the page has enough tags to nest that deep. They are counted with
    numpy: `bytes.count` goes byte by byte, 33 µs for the benchmark web's 50 KB pages against 14.
    """
    enough = max(max_depth, NESTING_CHECK_TAGS)
    if len(body) <= enough or np.count_nonzero(np.frombuffer(body, np.uint8) == _TAG_OPEN) <= enough:
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


def _collapsed_prefix(text: str, limit: int) -> str:
    """`_collapse(text)[:limit]`, splitting only as much of a long text as that needs.

    str.split makes an object per word (60 bytes each: 130 MB for the words of 10 MiB of text), and
    the collapse of a prefix is a prefix of the collapse, so windows of growing size are collapsed
    until one gives `limit` characters or is the whole text."""
    window = 2 * limit + 64
    while True:
        collapsed = _collapse(text[:window])
        if len(collapsed) >= limit or window >= len(text):
            return collapsed[:limit]
        window *= 4


def _anchor_text(node: LexborNode) -> str:
    raw = node.text(deep=True)
    # most anchor texts are a few words: collapsed whole, without _collapsed_prefix's windows
    text = " ".join(raw.split()) if len(raw) <= MAX_ANCHOR_CHARS else _collapsed_prefix(raw, MAX_ANCHOR_CHARS)
    if not text:
        image = node.css_first("img[alt]")
        if image is not None:
            text = _collapsed_prefix(image.attributes.get("alt") or "", MAX_ANCHOR_CHARS)
    if not text:
        text = _collapsed_prefix(node.attributes.get("title") or "", MAX_ANCHOR_CHARS)
    return text


def parse_html(
    body: bytes,
    url: str,
    content_type: str | None = None,
    robots_headers: Iterable[str] | str | None = None,
    *,
    agent: str = "",
    link_headers: Iterable[str] = (),
    max_links: int = MAX_LINKS,
    max_text_chars: int = MAX_TEXT_CHARS,
    segment_chars: int = SEGMENT_CHARS,
) -> ParsedPage:
    """Links, title, text, canonical and robots directives of a page fetched from `url`.

    `robots_headers` are the X-Robots-Tag values of the response, `link_headers` its Link
    values, `agent` the crawler's product token (for `<meta name=TOKEN>` and agent-scoped
    X-Robots-Tag directives). A page longer than `segment_chars` is parsed in segments (see the
    module docstring).
    """
    text, charset = decode_html(flatten_deep_nesting(body), content_type)
    segments = html_segments(text, segment_chars)
    page = ParsedPage(base=url, charset=charset)
    first = LexborHTMLParser(next(segments))
    refresh = _read_head(first, page, agent.lower(), robots_headers)
    canonical_href = canonical_from_link_header(link_headers)
    texts: list[str] = []
    canonical_href = _read_segment(first, page, max_links, canonical_href, texts, max_text_chars)
    del first
    for segment in segments:  # each tree is freed when _read_segment returns, before the next is built
        canonical_href = _read_segment(
            LexborHTMLParser(segment), page, max_links, canonical_href, texts, max_text_chars
        )
    page.raw_text = " ".join(texts)[:max_text_chars]

    base = page.base
    if canonical_href is not None:
        try:
            page.canonical = join(base, canonical_href)
        except InvalidURL:
            page.invalid_links += 1
    if refresh is not None:
        try:
            page.refresh = join(base, refresh)
            if len(page.links) < max_links:
                page.links.append(Link(page.refresh, "", page.meta_nofollow, "refresh"))
        except InvalidURL:
            page.invalid_links += 1
    return page


def _read_head(
    tree: LexborHTMLParser, page: ParsedPage, agent: str, robots_headers: Iterable[str] | str | None
) -> str | None:
    """Base, title and robots directives into `page`; returns the meta refresh target, if any."""
    base_node = tree.css_first("base[href]")
    if base_node is not None:
        try:
            page.base = join(page.base, base_node.attributes.get("href") or "")
        except InvalidURL:
            pass  # the page URL stays the base
    title_node = tree.css_first("title")
    if title_node is not None:
        page.title = _collapsed_prefix(title_node.text(), MAX_TITLE_CHARS)
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
    return refresh


def _read_segment(
    tree: LexborHTMLParser,
    page: ParsedPage,
    max_links: int,
    canonical_href: str | None,
    texts: list[str],
    max_text_chars: int,
) -> str | None:
    """Links and (while fewer than `max_text_chars` are kept) text of one segment's tree; returns the
    canonical href (see `_add_links`)."""
    canonical_href = _add_links(tree, page, max_links, canonical_href)
    room = max_text_chars - sum(len(text) + 1 for text in texts)
    if room > 0:
        tree.strip_tags(_NON_TEXT_TAGS)
        body_node = tree.body
        if body_node is not None:
            texts.append(body_node.text(separator=" ")[:room])
    return canonical_href


def _add_links(tree: LexborHTMLParser, page: ParsedPage, max_links: int, canonical_href: str | None) -> str | None:
    """The links of one segment's tree, added to `page` (resolved against its base, nofollow if its
    directives say so); returns the canonical href: `canonical_href`, else the first link element's."""
    base = page.base
    nofollow_all = page.meta_nofollow
    for node in tree.css(_LINK_SELECTOR):
        attributes = node.attributes
        tag = node.tag or ""
        rel_value = attributes.get("rel")
        rel: Sequence[str] = rel_value.lower().split() if rel_value else ()
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
            anchor = _collapsed_prefix(attributes.get("alt") or "", MAX_ANCHOR_CHARS)
        else:
            anchor = _collapsed_prefix(attributes.get("title") or "", MAX_ANCHOR_CHARS)
        page.links.append(Link(target, anchor, nofollow_all or "nofollow" in rel, tag))
    return canonical_href


def html_segments(text: str, size: int = SEGMENT_CHARS) -> Iterator[str]:
    """The document in consecutive pieces of about `size` characters (the whole if it is no longer),
    each but the last cut just before a tag that is outside comments and raw-text elements."""
    start = 0
    while len(text) - start > size:
        cut = _segment_end(text, start, start + size)
        yield text[start:cut]
        start = cut
    yield text[start:]


def _segment_end(text: str, start: int, target: int) -> int:
    """Where the segment starting at `start` ends: the last tag start before `target` in the data
    state; else the start of a comment or raw-text element `target` is in, or its end if the segment
    begins with it (one text node for lexbor, however long); else `target` itself, inside text, or
    the end of a tag longer than a segment."""
    position = start
    while (opaque := _OPAQUE.search(text, position, target)) is not None:
        name = opaque.group(1)
        if name is None:
            close = text.find("-->", opaque.end())
            end = len(text) if close < 0 else close + 3
        else:
            closing = re.compile(rf"</{name}[\s/>]", re.IGNORECASE).search(text, opaque.end())
            close = -1 if closing is None or name.lower() == "plaintext" else text.find(">", closing.start())
            end = len(text) if close < 0 else close + 1
        if end > target:
            return opaque.start() if opaque.start() > start else end
        position = end
    cut = text.rfind("<", max(position, start + 1), target)
    while cut > start and _TAG_START.match(text, cut) is None:
        cut = text.rfind("<", max(position, start + 1), cut)
    if cut > start:
        return cut
    if position > start:
        return position
    if text.startswith("<", start) and text.find(">", start, target) < 0:  # in one huge tag: after it
        close = text.find(">", target)
        return len(text) if close < 0 else close + 1
    return target  # in a text run longer than a segment (a decoded bomb's NULs: 18 bytes each in lexbor)
