"""Sitemaps (sitemaps.org 0.9): URL sets, sitemap indexes, plain-text lists, RSS and Atom feeds.

Filled by the engine with the body of each sitemap named in a robots.txt (or in a sitemap
index); what it returns goes through the same URL filters as any link. Pure and bounded:

- gzip is recognised by its magic bytes (a `.xml.gz` is usually served without
  Content-Encoding) and inflated to at most `max_bytes` (50 MB, the protocol's limit), which
  defuses compression bombs; a body cut by the limit still yields the URLs before the cut.
- at most `max_urls` URLs per file (50,000, the protocol's limit).
- the XML is scanned, not parsed into a tree: `<loc>` elements (and feed links) are found by a
  single forward pass of `bytes.find`, so a malformed, truncated or hostile file (entity bombs,
  deep nesting, unclosed elements) costs linear time and never raises. Entities are decoded per
  URL only (no DTD is read, so no entity can expand).
"""

from __future__ import annotations

import html
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum

MAX_SITEMAP_BYTES = 50 * 1000 * 1000  # sitemaps.org: 50 MB uncompressed
MAX_SITEMAP_URLS = 50_000  # sitemaps.org: 50,000 URLs per file
MAX_LOC_CHARS = 4096

_GZIP_MAGIC = b"\x1f\x8b"
_ROOT = re.compile(rb"<\s*(?:[A-Za-z_][\w.-]*:)?(urlset|sitemapindex|rss|feed|rdf)\b", re.IGNORECASE)
_ATOM_LINK = re.compile(rb"<link\b[^>]{0,1024}?\bhref\s*=\s*[\"']([^\"'>]{0,4096})[\"']")
_CDATA = re.compile(r"^<!\[CDATA\[(.*?)\]\]>$", re.DOTALL)


class SitemapKind(StrEnum):
    URLSET = "urlset"
    INDEX = "sitemapindex"
    FEED = "feed"
    TEXT = "text"


@dataclass(slots=True)
class Sitemap:
    """`urls` are page URLs, or child sitemap URLs when `kind` is INDEX; as written (not resolved)."""

    kind: SitemapKind
    urls: list[str] = field(default_factory=list)
    truncated: bool = False  # more bytes or URLs than the limits allowed

    def __repr__(self) -> str:
        head = ", ".join(self.urls[:3]) + (", ..." if len(self.urls) > 3 else "")
        return f"Sitemap({self.kind}, {len(self.urls)} URLs [{head}], truncated={self.truncated})"


def inflate(body: bytes, max_bytes: int = MAX_SITEMAP_BYTES) -> tuple[bytes, bool]:
    """The body, gunzipped when it is gzip (all members), at most `max_bytes`; and whether it was cut."""
    if not body.startswith(_GZIP_MAGIC):
        return body[:max_bytes], len(body) > max_bytes
    out: list[bytes] = []
    size = 0
    data = body
    while data.startswith(_GZIP_MAGIC) and size < max_bytes:
        inflater = zlib.decompressobj(wbits=31)
        try:
            chunk = inflater.decompress(data, max_bytes - size)
        except zlib.error:
            break  # corrupt: keep what was inflated so far
        out.append(chunk)
        size += len(chunk)
        if inflater.unconsumed_tail:
            return b"".join(out), True
        data = inflater.unused_data
    return b"".join(out), size >= max_bytes and bool(data)


def _clean(raw: bytes) -> str | None:
    text = raw[:MAX_LOC_CHARS].decode("utf-8", "replace").strip()
    cdata = _CDATA.match(text)
    if cdata:
        text = cdata.group(1).strip()
    elif "&" in text:
        text = html.unescape(text)
    return text or None


def parse_sitemap(body: bytes, *, max_bytes: int = MAX_SITEMAP_BYTES, max_urls: int = MAX_SITEMAP_URLS) -> Sitemap:
    """What a sitemap file lists. Never raises; an unrecognisable body is an empty text sitemap."""
    data, truncated = inflate(body, max_bytes)
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    root = _ROOT.search(data, 0, 4096)
    if root is None:
        sitemap = Sitemap(SitemapKind.TEXT)
        for line in data.splitlines():
            text = line.strip().decode("utf-8", "replace")
            if text.startswith(("http://", "https://")):
                if len(sitemap.urls) >= max_urls:
                    sitemap.truncated = True
                    break
                sitemap.urls.append(text[:MAX_LOC_CHARS])
        sitemap.truncated |= truncated
        return sitemap
    name = root.group(1).lower()
    if name == b"feed":
        sitemap = Sitemap(SitemapKind.FEED)
        values: Iterator[bytes] = (match.group(1) for match in _ATOM_LINK.finditer(data, root.start()))
    else:
        kind = {b"sitemapindex": SitemapKind.INDEX, b"urlset": SitemapKind.URLSET}.get(name, SitemapKind.FEED)
        sitemap = Sitemap(kind)
        tag = b"link" if kind is SitemapKind.FEED else b"loc"
        values = _element_texts(data, tag, root.start())
    for value in values:
        url = _clean(value)
        if url is None:
            continue
        if len(sitemap.urls) >= max_urls:
            sitemap.truncated = True
            break
        sitemap.urls.append(url)
    sitemap.truncated |= truncated
    return sitemap


def _element_texts(data: bytes, tag: bytes, start: int) -> Iterator[bytes]:
    """Texts of `<tag>...</tag>` in document order (XML is case-sensitive), in one forward pass."""
    opening, closing = b"<" + tag + b">", b"</" + tag + b">"
    position = start
    while True:
        begin = data.find(opening, position)
        if begin < 0:
            return
        begin += len(opening)
        end = data.find(closing, begin)
        if end < 0:
            return  # unclosed: nothing after this point can close either
        yield data[begin:end]
        position = end + len(closing)
