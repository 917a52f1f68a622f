"""Sitemaps: URL sets, indexes, gzip, text and feeds, limits, hostile files."""

from __future__ import annotations

import gzip
import zlib

from crawlspace.parse.sitemap import SitemapKind, inflate, parse_sitemap

URLSET = b"""<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">
  <url><loc>http://e.com/a?x=1&amp;y=2</loc><lastmod>2024-01-01</lastmod>
       <image:image><image:loc>http://e.com/pic.jpg</image:loc></image:image></url>
  <url><loc>
     <![CDATA[http://e.com/b]]>
  </loc></url>
  <url><loc></loc></url>
  <url><loc>http://e.com/caf&#233;</loc></url>
</urlset>"""


def test_urlset() -> None:
    sitemap = parse_sitemap(URLSET)
    assert sitemap.kind is SitemapKind.URLSET
    assert sitemap.urls == ["http://e.com/a?x=1&y=2", "http://e.com/b", "http://e.com/café"]
    assert not sitemap.truncated


def test_index() -> None:
    body = (
        b'<?xml version="1.0"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        b"<sitemap><loc>http://e.com/s1.xml.gz</loc></sitemap><sitemap><loc>/s2.xml</loc></sitemap></sitemapindex>"
    )
    sitemap = parse_sitemap(body)
    assert sitemap.kind is SitemapKind.INDEX and sitemap.urls == ["http://e.com/s1.xml.gz", "/s2.xml"]


def test_gzip_including_several_members() -> None:
    body = gzip.compress(URLSET[:200]) + gzip.compress(URLSET[200:])
    assert parse_sitemap(body).urls == parse_sitemap(URLSET).urls


def test_text_sitemap() -> None:
    body = b"\xef\xbb\xbfhttp://e.com/1\r\n  https://e.com/2  \n\nftp://e.com/3\nnot a url\n"
    sitemap = parse_sitemap(body)
    assert sitemap.kind is SitemapKind.TEXT and sitemap.urls == ["http://e.com/1", "https://e.com/2"]


def test_feeds() -> None:
    rss = b"<rss version='2.0'><channel><link>http://e.com/</link><item><link>http://e.com/p1</link></item></channel></rss>"
    assert parse_sitemap(rss).urls == ["http://e.com/", "http://e.com/p1"]
    atom = b'<feed xmlns="http://www.w3.org/2005/Atom"><entry><link rel="alternate" href="http://e.com/e1"/></entry></feed>'
    sitemap = parse_sitemap(atom)
    assert sitemap.kind is SitemapKind.FEED and sitemap.urls == ["http://e.com/e1"]


def test_url_limit() -> None:
    body = b"<urlset>" + b"".join(b"<url><loc>http://e.com/%d</loc></url>" % i for i in range(100)) + b"</urlset>"
    sitemap = parse_sitemap(body, max_urls=30)
    assert len(sitemap.urls) == 30 and sitemap.truncated
    assert sitemap.urls[-1] == "http://e.com/29"


def test_compression_bomb_is_cut_at_the_byte_limit() -> None:
    bomb = gzip.compress(b"<urlset>" + b"<url><loc>http://e.com/x</loc></url>" * 2_000_000, compresslevel=9)
    assert len(bomb) < 1_000_000
    data, cut = inflate(bomb, max_bytes=1_000_000)
    assert len(data) == 1_000_000 and cut
    sitemap = parse_sitemap(bomb, max_bytes=1_000_000)
    assert sitemap.truncated and 0 < len(sitemap.urls) <= 1_000_000 // 30


def test_corrupt_gzip_keeps_what_was_readable() -> None:
    body = gzip.compress(URLSET)
    broken = body[:60] + b"\x00" * 20 + body[80:]
    assert isinstance(parse_sitemap(broken).urls, list)
    data, _ = inflate(b"\x1f\x8b garbage")
    assert data == b""
    assert inflate(zlib.compress(b"raw"))[0] == zlib.compress(b"raw")  # not gzip: taken as is


def test_hostile_xml_is_scanned_not_expanded() -> None:
    billion_laughs = (
        b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;">]>'
        b"<urlset><url><loc>http://e.com/&lol2;</loc></url></urlset>"
    )
    assert parse_sitemap(billion_laughs).urls == ["http://e.com/&lol2;"]  # no entity expansion
    unclosed = b"<urlset>" + b"<url><loc>http://e.com/x" * 200_000
    assert parse_sitemap(unclosed).urls == []
    nested = b"<urlset>" + b"<url>" * 100_000 + b"<loc>http://e.com/deep</loc>"
    assert parse_sitemap(nested).urls == ["http://e.com/deep"]
