"""Hostile and random HTML: the extractor never raises, and huge or deep pages cost bounded time and memory.

Time is bounded structurally (what the parser is given is capped or flattened), not by timing
assertions; the timeouts only stop a hang.
"""

from __future__ import annotations

import random
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crawlspace.parse import parse_html
from crawlspace.parse.html import MAX_NESTING, flatten_deep_nesting
from crawlspace.parse.sitemap import parse_sitemap

SNIPPETS = [
    "<a href='/x'>",
    "</a>",
    "<div>",
    "</div>",
    "<p>",
    "<base href='//h/'>",
    "<meta name=robots content='none'>",
    "<meta http-equiv=refresh content='0;url=",
    "<link rel=canonical href=",
    "<iframe src=x>",
    "<table><tr><td>",
    "<!--",
    "-->",
    "<script>",
    "</script>",
    "&amp;",
    "&#xD800;",
    "\x00",
    "é",
    "<a href='http://[::1'>",
    "<area href=javascript:x>",
    "'",
    '"',
    ">",
    "<",
    "<frame src='\\\\h\\x'>",
    "text ",
]


@given(body=st.binary(max_size=3000), content_type=st.sampled_from([None, "text/html", "text/html; charset=utf-16"]))
@settings(max_examples=200)
def test_random_bytes_never_raise(body: bytes, content_type: str | None) -> None:
    page = parse_html(body, "http://e.com/d/p", content_type, ["noindex"])
    assert page.meta_noindex
    assert all(link.url for link in page.links)


@given(pieces=st.lists(st.sampled_from(SNIPPETS), max_size=80), encoding=st.sampled_from(["utf-8", "cp1252", "utf-16"]))
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
def test_mutated_html_never_raises(pieces: list[str], encoding: str) -> None:
    body = "".join(pieces).encode(encoding, errors="surrogatepass")
    page = parse_html(body, "http://e.com/", f"text/html; charset={encoding}", agent="crawlspace")
    assert len(page.links) <= 10_000
    for link in page.links:
        assert ":" in link.url and len(link.anchor_text) <= 200


@given(body=st.binary(max_size=2000))
@settings(max_examples=200)
def test_sitemap_parser_never_raises(body: bytes) -> None:
    assert isinstance(parse_sitemap(body).urls, list)


def _peak(function: object, *args: object) -> int:
    tracemalloc.start()
    try:
        function(*args)  # type: ignore[operator]
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.timeout(120)
def test_hundred_thousand_links() -> None:
    body = ("<html><body>" + "".join(f'<a href="/p{i}">link {i}</a> ' for i in range(100_000))).encode()
    page = parse_html(body, "http://e.com/")
    assert len(page.links) == 10_000 and page.dropped_links == 90_000
    assert page.links[123].url == "http://e.com/p123" and page.links[123].anchor_text == "link 123"
    assert _peak(parse_html, body, "http://e.com/") < 40 * len(body)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("tag", ["div", "span", "b", "table"])
def test_nesting_ten_thousand_deep(tag: str) -> None:
    depth = 10_000
    body = (f"<html><body>{f'<{tag}>' * depth}<a href='/deep'>deep</a>{f'</{tag}>' * depth}</body></html>").encode()
    page = parse_html(body, "http://e.com/")
    assert [link.url for link in page.links] == ["http://e.com/deep"]
    assert page.text == "deep"


def test_deep_nesting_is_flattened_to_a_bounded_depth() -> None:
    """lexbor's tree builder is quadratic in depth: what it is given never nests beyond MAX_NESTING."""
    depth = 200_000
    body = b"<body>" + b"<div>" * depth + b"<a href='/deep'>deep</a> tail" + b"</div>" * depth
    flat = flatten_deep_nesting(body)
    assert flat.count(b"<div>") == MAX_NESTING and flat.count(b"</div>") == MAX_NESTING
    assert b"<a href='/deep'>deep</a> tail" in flat
    page = parse_html(body, "http://e.com/")
    assert [link.url for link in page.links] == ["http://e.com/deep"] and page.text == "deep tail"
    unclosed = b"<body>" + b"<section><p>x" * 50_000
    assert flatten_deep_nesting(unclosed).count(b"<section>") == MAX_NESTING
    shallow = b"<body>" + b"<div>a</div>" * 20_000  # many tags, no depth: untouched
    assert flatten_deep_nesting(shallow) is shallow


def test_binary_garbage_as_html() -> None:
    body = random.Random(3).randbytes(2_000_000)
    page = parse_html(body, "http://e.com/", "text/html")
    assert page.charset in ("cp1252", "utf-8")
    assert isinstance(page.text, str)
