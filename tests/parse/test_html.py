"""HTML extraction: links and their kinds, base href, nofollow, robots directives, canonical, refresh, text, charset."""

from __future__ import annotations

import codecs
import re
import tracemalloc

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crawlspace.parse import parse_html
from crawlspace.parse.html import (
    MAX_ANCHOR_CHARS,
    MAX_TITLE_CHARS,
    ParsedPage,
    _collapse,
    _collapsed_prefix,
    canonical_from_link_header,
    decode_html,
    html_segments,
    refresh_target,
    robots_directives,
    sniff_charset,
)

PAGE = """<!DOCTYPE html><html><head>
<title>  The   Title </title>
<base href="/docs/">
<link rel="canonical" href="/canonical-page">
<link rel="next" href="page2.html"><link rel="alternate" hreflang="de" href="https://de.example.com/">
<link rel="stylesheet" href="style.css"><link rel="icon" href="/favicon.ico">
<meta http-equiv="refresh" content="10; URL='later.html'">
<style>.x { color: red }</style>
</head><body>
<h1>Heading</h1>
<p>Some <b>bold</b> text &amp; an <a href="a.html">anchor <i>text</i></a>.</p>
<a href="b.html" rel="nofollow">no</a>
<a href="../up.html" title="Up there"></a>
<a href="/img.html"><img src="x.png" alt="An image"></a>
<a href="http://[invalid">broken</a>
<a href="mailto:someone@example.com">mail</a>
<a name="no-href">not a link</a>
<map><area href="/area.html" alt="Area  alt"></map>
<iframe src="//frames.example.com/f.html"></iframe>
<script>document.write('<a href="/scripted.html">x</a>')</script>
<noscript>Enable JavaScript</noscript>
</body></html>"""


@pytest.fixture(scope="module")
def page() -> ParsedPage:
    return parse_html(PAGE.encode(), "http://example.com/dir/index.html", "text/html; charset=utf-8")


def test_links_resolved_against_base_href(page: ParsedPage) -> None:
    by_url = {link.url: link for link in page.links}
    assert page.base == "http://example.com/docs/"
    assert set(by_url) == {
        "http://example.com/docs/page2.html",
        "https://de.example.com/",
        "http://example.com/docs/a.html",
        "http://example.com/docs/b.html",
        "http://example.com/up.html",
        "http://example.com/img.html",
        "mailto:someone@example.com",
        "http://example.com/area.html",
        "http://frames.example.com/f.html",
        "http://example.com/docs/later.html",
    }
    kinds = {link.url.rsplit("/", 1)[-1]: link.kind for link in page.links}
    assert kinds["page2.html"] == "link" and kinds["area.html"] == "area" and kinds["f.html"] == "iframe"
    assert kinds["later.html"] == "refresh" and kinds["a.html"] == "a"
    assert page.invalid_links == 1
    assert not any("style.css" in url or "favicon" in url or "scripted" in url for url in by_url)


def test_anchor_texts(page: ParsedPage) -> None:
    anchors = {link.url.rsplit("/", 1)[-1]: link.anchor_text for link in page.links}
    assert anchors["a.html"] == "anchor text"
    assert anchors["img.html"] == "An image"  # alt of an image link
    assert anchors["up.html"] == "Up there"  # title when there is no text
    assert anchors["area.html"] == "Area alt"


def test_nofollow_per_link(page: ParsedPage) -> None:
    nofollow = {link.url for link in page.links if link.nofollow}
    assert nofollow == {"http://example.com/docs/b.html"}


def test_title_text_canonical_refresh(page: ParsedPage) -> None:
    assert page.title == "The Title"
    assert page.text.startswith("Heading Some bold text & an anchor text .")
    assert "color" not in page.text and "document.write" not in page.text and "Enable JavaScript" not in page.text
    assert page.canonical == "http://example.com/canonical-page"
    assert page.refresh == "http://example.com/docs/later.html"
    assert page.directives == frozenset() and not page.meta_noindex and not page.meta_nofollow


def test_meta_robots_and_agent_meta() -> None:
    html = b'<meta name="Robots" content="NOINDEX"><meta name="crawlspace" content="nofollow"><a href="/x">x</a>'
    page = parse_html(html, "http://e.com/", agent="crawlspace")
    assert page.meta_noindex and page.meta_nofollow
    assert all(link.nofollow for link in page.links)
    other = parse_html(html, "http://e.com/", agent="otherbot")
    assert other.meta_noindex and not other.meta_nofollow


def test_x_robots_tag_headers() -> None:
    page = parse_html(b'<a href="/x">x</a>', "http://e.com/", robots_headers=["otherbot: noindex", "nofollow"])
    assert page.meta_nofollow and not page.meta_noindex
    page = parse_html(b"", "http://e.com/", robots_headers="crawlspace: none", agent="crawlspace")
    assert page.meta_noindex and page.meta_nofollow


def test_robots_directives() -> None:
    assert robots_directives(["noindex, nofollow"]) == {"noindex", "nofollow"}
    assert robots_directives(["none"]) == {"none", "noindex", "nofollow"}
    assert robots_directives(["googlebot: noindex", "crawlspace: noarchive, nosnippet"], "crawlspace") == {
        "noarchive",
        "nosnippet",
    }
    assert robots_directives(["unavailable_after: 25 Jun 2010 15:00:00 PST, noindex"]) == {
        "unavailable_after",
        "noindex",
    }
    assert robots_directives(["max-snippet: 20, nofollow"]) == {"max-snippet", "nofollow"}


def test_canonical_from_link_header_wins() -> None:
    header = '<https://e.com/style.css>; rel="preload", <https://e.com/canon>; rel="canonical"'
    assert canonical_from_link_header([header]) == "https://e.com/canon"
    page = parse_html(b'<link rel="canonical" href="/tag">', "http://e.com/p", link_headers=[header])
    assert page.canonical == "https://e.com/canon"
    assert canonical_from_link_header(['<https://e.com/>; rel="next"']) is None


@pytest.mark.parametrize(
    ("content", "target"),
    [
        ("5; url=/next", "/next"),
        ("0;URL='http://e.com/x'", "http://e.com/x"),
        ('3, url="y.html"', "y.html"),
        ("0; http://e.com/z", "http://e.com/z"),
        ("5", None),
        ("", None),
    ],
)
def test_refresh_target(content: str, target: str | None) -> None:
    assert refresh_target(content) == target


def test_max_links_and_dropped_count() -> None:
    html = "".join(f'<a href="/p{i}">{i}</a>' for i in range(50)).encode()
    page = parse_html(html, "http://e.com/", max_links=10)
    assert len(page.links) == 10 and page.dropped_links == 40
    assert page.links[-1].url == "http://e.com/p9"


def test_text_title_and_anchor_texts_are_cut_at_their_limits() -> None:
    """One unclosed element can make the rest of a truncated 10 MiB page its text: what a page
    yields is bounded however large it is, and nothing is cut from pages within the limits."""
    words = " ".join(f"w{n}" for n in range(50_000))
    html = f"<title>{words}</title><body><p>{words}</p><a href='/x'>  {words}</a>".encode()
    page = parse_html(html, "http://e.com/", max_text_chars=1000)
    assert len(page.raw_text) == 1000 and page.raw_text.startswith("w0 w1 w2")
    assert len(page.text) <= 1000 and page.text.startswith("w0 w1 w2")
    assert page.title == words[:MAX_TITLE_CHARS]
    assert page.links[0].anchor_text == words[:MAX_ANCHOR_CHARS]
    whole = parse_html(html, "http://e.com/")
    assert whole.raw_text.split() == words.split() * 2


@given(st.text(alphabet=" \t\nab\u3000é", max_size=3000), st.integers(min_value=0, max_value=400))
def test_collapsed_prefix_is_the_prefix_of_the_collapse(text: str, limit: int) -> None:
    assert _collapsed_prefix(text, limit) == _collapse(text)[:limit]


def long_page(paragraphs: int) -> str:
    """A page whose links hide in places a careless cut would expose: scripts, comments, textareas."""
    parts = ['<html><head><title>Long</title><base href="/docs/"><meta name="robots" content="nofollow">']
    parts.append('<link rel="canonical" href="/the-one"></head><body>')
    for n in range(paragraphs):
        parts.append(f'<p>para {n} <a href="p{n}.html">to {n}</a> words</p>\n')
        if n % 7 == 0:
            parts.append(f'<script>var s = "<a href=\\"/in-script-{n}\\">x</a>"; if (a < b) {{}}</script>')
        if n % 11 == 0:
            parts.append(f'<!-- <a href="/in-comment-{n}">x</a> < not a tag -->')
        if n % 13 == 0:
            parts.append(f'<textarea><a href="/in-textarea-{n}"></textarea><STYLE>a < b {{}}</STYLE>')
    parts.append("</body></html>")
    return "".join(parts)


@pytest.mark.parametrize("size", [40, 150, 1000])
def test_segments_are_cut_before_tags_never_in_comments_or_raw_text(size: int) -> None:
    page = long_page(200)
    pieces = list(html_segments(page, size))
    assert "".join(pieces) == page and len(pieces) > len(page) // (size * 10)
    for piece in pieces:
        assert piece.count("<!--") == piece.count("-->")
        assert len(re.findall("<script", piece)) == len(re.findall("</script>", piece))
        assert len(re.findall("<textarea", piece)) == len(re.findall("</textarea>", piece))
    assert all(piece.startswith("<") for piece in pieces)


@pytest.mark.parametrize("size", [200, 600, 3000])  # the head (170 characters) is in the first segment
def test_a_page_parsed_in_segments_has_the_links_head_and_text_of_the_whole(size: int) -> None:
    body = long_page(200).encode()
    whole = parse_html(body, "http://e.com/a/b")
    parsed = parse_html(body, "http://e.com/a/b", segment_chars=size)
    assert len(whole.links) == 200 and not any("/in-" in link.url for link in whole.links)
    assert [(link.url, link.nofollow, link.kind) for link in parsed.links] == [
        (link.url, link.nofollow, link.kind) for link in whole.links
    ]
    assert all(link.nofollow and link.url.startswith("http://e.com/docs/p") for link in parsed.links)
    assert (parsed.title, parsed.base, parsed.canonical, parsed.directives) == (
        whole.title,
        whole.base,
        whole.canonical,
        whole.directives,
    )
    assert parsed.text.split() == whole.text.split()


def test_a_text_run_longer_than_a_segment_is_cut_in_it() -> None:
    """A decoded gzip bomb is millions of NUL characters and no tag: lexbor spends 18 bytes on each."""
    text = "<p>" + "\0" * 1000 + "</p><p>" + "w " * 1000 + "</p>"
    pieces = list(html_segments(text, 100))
    assert "".join(pieces) == text and max(len(piece) for piece in pieces) <= 100
    page = parse_html(text.encode(), "http://e.com/", segment_chars=100)
    assert page.text.split() == ["w"] * 1000


def test_the_tree_of_a_long_tag_dense_page_is_built_a_segment_at_a_time() -> None:
    """lexbor takes about 40 bytes per character of `<p>x</p>`: 120 MB for these 3 MiB at once."""
    body = b"<html><body>" + b"<p>x</p>" * (3 << 17)
    tracemalloc.start()
    try:
        page = parse_html(body, "http://e.com/", segment_chars=1 << 19)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert page.text.split() == ["x"] * (3 << 17)
    assert peak < 40 << 20, peak


def test_invalid_base_href_falls_back_to_the_page_url() -> None:
    page = parse_html(b'<base href="http://[bad"><a href="x">x</a>', "http://e.com/d/p")
    assert page.links[0].url == "http://e.com/d/x"


def test_the_first_base_and_title_count_and_every_meta_wherever_they_stand() -> None:
    """The first base with an href and the first title in document order count, and the metas of the body
    as well as the head's (a single walk for the three was tried and not kept: bench/README.md)."""
    body = (
        b'<html><head><base target="_top"><title></title><meta name="description" content="d"></head>'
        b'<body><svg><title>Icon</title></svg><base href="/first/"><base href="/second/">'
        b'<meta name="robots" content="nofollow"><meta http-equiv="refresh" content="5; url=next">'
        b'<a href="x">x</a></body></html>'
    )
    page = parse_html(body, "http://e.com/d/p")
    assert page.base == "http://e.com/first/"
    assert page.title == ""  # the first title, empty, not the SVG's
    assert page.meta_nofollow
    assert page.refresh == "http://e.com/first/next"
    assert (page.links[0].url, page.links[0].nofollow) == ("http://e.com/first/x", True)


@pytest.mark.parametrize(
    ("body", "content_type", "expected"),
    [
        (codecs.BOM_UTF8 + b"<p>x", "text/html; charset=iso-8859-1", "utf-8-sig"),  # BOM beats header
        (codecs.BOM_UTF16_LE + "<p>x".encode("utf-16-le"), None, "utf-16-le"),
        (b"<p>x", 'text/html; charset="ISO-8859-1"', "cp1252"),  # latin1 is windows-1252 on the web
        (b'<meta charset="shift_jis"><p>x', None, "cp932"),
        (b'<meta http-equiv="Content-Type" content="text/html; charset=gb2312">', None, "gb18030"),
        (b'<meta charset="utf-16">', None, "utf-8"),  # an ASCII-readable meta cannot be UTF-16
        (b'<meta charset="koi8-r">', "text/html; charset=utf-8", "utf-8"),  # header beats meta
        (b'<meta charset="no-such-charset"><p>caf\xc3\xa9', None, "utf-8"),
        (b"<p>caf\xe9 cr\xe8me", None, "cp1252"),  # not UTF-8, nothing declared
        (b"<p>cut in the middle \xe2\x82", None, "utf-8"),  # truncated multi-byte character
    ],
)
def test_charset_sniffing(body: bytes, content_type: str | None, expected: str) -> None:
    assert sniff_charset(body, content_type) == expected


def test_decoding_is_never_fatal() -> None:
    text, charset = decode_html(b"<p>\xff\xfe\x00 bad \xc3", "text/html; charset=utf-8")
    assert charset == "utf-8" and "\ufffd" in text
    page = parse_html("<title>café</title>".encode("cp1252"), "http://e.com/", "text/html; charset=windows-1252")
    assert page.title == "café" and page.charset == "cp1252"
    page = parse_html("<title>日本</title>".encode("shift_jis"), "http://e.com/", "text/html; charset=Shift_JIS")
    assert page.title == "日本"
