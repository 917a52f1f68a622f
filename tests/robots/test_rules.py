"""RFC 9309 rules beyond Google's suite: crawl-delay, sitemaps, limits, our normalized-URL additions, bad input."""

from __future__ import annotations

import random
import re
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawlspace.robots import RobotsRules, parse
from crawlspace.robots.rules import MAX_ROBOTS_BYTES, _matches, path_params_query, product_token
from crawlspace.urls import normalize

AGENT = "crawlspace"


def test_product_token() -> None:
    assert product_token("crawlspace/0.1 (+https://x)") == "crawlspace"
    assert product_token("FOO BAR") == "foo"
    assert product_token("MJ12bot") == "mj12bot"
    assert product_token("") == ""


def test_group_choice_and_merging() -> None:
    rules = parse(
        b"User-agent: *\nDisallow: /all/\n\n"
        b"User-agent: crawlspace\nDisallow: /a/\n\n"
        b"User-agent: otherbot\nDisallow: /\n\n"
        b"User-agent: CrawlSpace\nDisallow: /b/\n"
    )
    assert not rules.allowed("http://h/a/x", AGENT) and not rules.allowed("http://h/b/x", AGENT)  # merged
    assert rules.allowed("http://h/all/x", AGENT)  # '*' ignored once a group names us
    assert not rules.allowed("http://h/all/x", "somebot")
    assert rules.allowed("http://h/a/x", "crawlspace2")  # exact token, not a prefix
    assert rules.allowed("http://h/a/x", "otherbot/2.0") is False  # the caller's product token is used


def test_a_user_agent_run_lasts_until_a_rule_and_an_empty_rule_allows() -> None:
    rules = parse(b"User-agent: crawlspace\n\nUser-agent: *\nDisallow: /\n")
    # the first group has no rule but the UA run continues: both agents share "Disallow: /"
    assert not rules.allowed("http://h/x", AGENT)
    rules = parse(b"User-agent: crawlspace\nAllow:\n\nUser-agent: *\nDisallow: /\n")
    assert rules.allowed("http://h/x", AGENT)


def test_crawl_delay_per_group() -> None:
    rules = parse(
        b"User-agent: *\nCrawl-delay: 5\nDisallow: /x\n\nUser-agent: crawlspace\nCrawl-delay: 2.5\n"
        b"Crawl-delay: 1\nDisallow: /y\n\nUser-agent: badbot\nCrawl-delay: -3\nCrawl-delay: nan\nDisallow: /\n"
    )
    assert rules.crawl_delay(AGENT) == 2.5  # several values: the largest
    assert rules.crawl_delay("otherbot") == 5.0
    assert rules.crawl_delay("badbot") is None  # invalid values are ignored
    assert parse(b"").crawl_delay(AGENT) is None


def test_sitemaps_anywhere_deduplicated() -> None:
    rules = parse(
        b"Sitemap: http://h/s1.xml\nUser-agent: *\nSitemap: http://h/s2.xml.gz\nDisallow: /\n"
        b"sitemap: http://h/s1.xml\nSite-map: /relative.xml\n"
    )
    assert rules.sitemaps == ["http://h/s1.xml", "http://h/s2.xml.gz", "/relative.xml"]


def test_robots_txt_itself_is_always_allowed() -> None:
    rules = parse(b"User-agent: *\nDisallow: /\n")
    assert rules.allowed("http://h/robots.txt", AGENT)
    assert not rules.allowed("http://h/robots.txt.bak", AGENT)
    assert RobotsRules.disallow_all().allowed("http://h/robots.txt", AGENT)
    assert not RobotsRules.disallow_all().allowed("http://h/", AGENT)
    assert RobotsRules.allow_all().allowed("http://h/anything", AGENT)


def test_percent_encoding_equivalence_with_normalized_urls() -> None:
    rules = parse(b"User-agent: *\nDisallow: /%7Ejoe/\nDisallow: /a b\nDisallow: /caf\xc3\xa9\nDisallow: /q?x=%2f\n")
    for raw in ["http://h/%7Ejoe/p", "http://h/~joe/p", "http://h/a b", "http://h/café", "http://h/q?x=%2F"]:
        url = normalize(raw)
        assert not rules.allowed(url, AGENT), (raw, url)
    assert rules.allowed(normalize("http://h/q?x=/"), AGENT)  # %2F is not '/': reserved escapes stay distinct
    allow = parse(b"User-agent: *\nDisallow: /\nAllow: /~mak\nAllow: /%62%61%7A\n")
    assert allow.allowed("http://h/%7Emak/page", AGENT)  # the URL's unreserved escape is decoded
    assert allow.allowed("http://h/~mak/page", AGENT)
    assert not allow.allowed("http://h/baz", AGENT)  # Allow patterns are not decoded (Google ID_Encoding#6)
    assert allow.allowed("http://h/%62%61%7a", AGENT)  # hex case does not matter


@pytest.mark.parametrize("char", [" ", '"', "<", ">", "\\", "^", "`", "{", "|", "}", "é"])
def test_characters_urls_carry_escaped_match_in_either_spelling(char: str) -> None:
    """`Disallow: /a<d.html` must block the `/a%3Cd.html` a crawler requests (issue 14.4), and every
    spelling of the rule must match every spelling of the URL, in Allow and Disallow alike."""
    escaped = "".join(f"%{byte:02X}" for byte in char.encode())
    rule_spellings = [f"/a{char}d.html", f"/a{escaped}d.html", f"/a{escaped.lower()}d.html"]
    url_spellings = [f"http://h/a{escaped}d.html"]
    if char.isascii():  # Google leaves the escaping of non-ASCII in URLs to the caller (ID_Encoding#3)
        url_spellings.append(f"http://h/a{char}d.html")
    if char != "\\":  # a browser reads '\\' as '/' in an http URL: another path
        url_spellings.append(normalize(f"http://h/a{char}d.html"))
    for spelling in rule_spellings:
        disallow = parse(f"User-agent: *\nDisallow: {spelling}\n".encode())
        allow = parse(f"User-agent: *\nDisallow: /\nAllow: {spelling}\n".encode())
        for url in url_spellings:
            assert not disallow.allowed(url, AGENT), (spelling, url)
            assert allow.allowed(url, AGENT), (spelling, url)
        assert disallow.allowed("http://h/a%25d.html", AGENT)  # a literal '%' is another character
        assert disallow.allowed("http://h/ad.html", AGENT)
        assert not allow.allowed("http://h/ad.html", AGENT)


def test_escaped_characters_in_queries_and_wildcards() -> None:
    rules = parse(b"User-agent: *\nDisallow: /search?q={*}\nDisallow: /*|$\nAllow: /a^b\nDisallow: /a\n")
    assert not rules.allowed(normalize("http://h/search?q={x}"), AGENT)
    assert not rules.allowed("http://h/search?q=%7Bx%7D", AGENT)
    assert rules.allowed("http://h/search?q=x", AGENT)
    assert not rules.allowed("http://h/x/y%7C", AGENT)
    assert not rules.allowed("http://h/x/y|", AGENT)
    assert rules.allowed("http://h/x/y|z", AGENT)  # `$` still anchors after the escape
    assert rules.allowed(normalize("http://h/a^b"), AGENT)  # the longer Allow wins in either spelling
    assert rules.allowed("http://h/a^b", AGENT)
    assert not rules.allowed("http://h/ab", AGENT)


def test_reserved_escapes_stay_distinct() -> None:
    rules = parse(b"User-agent: *\nDisallow: /a[b]\nDisallow: /c%2Fd\n")
    assert not rules.allowed("http://h/a[b]", AGENT)
    assert rules.allowed("http://h/a%5Bb%5D", AGENT)  # '[' is reserved (RFC 3986 gen-delims): not the same
    assert not rules.allowed("http://h/c%2fd", AGENT)
    assert rules.allowed("http://h/c/d", AGENT)


def test_only_the_first_500_kib_count_and_a_cut_line_is_dropped() -> None:
    filler = b"# " + b"x" * 1000 + b"\n"
    head = b"User-agent: *\nDisallow: /\n"
    body = head + filler * (MAX_ROBOTS_BYTES // len(filler) + 1) + b"Allow: /late\n"
    assert len(body) - len(b"Allow: /late\n") > MAX_ROBOTS_BYTES
    rules = parse(body)
    assert not rules.allowed("http://h/late", AGENT)  # beyond 500 KiB: ignored
    cut = b"User-agent: *\nDisallow: /\n" + b"#" * (MAX_ROBOTS_BYTES - 40) + b"\nAllow: /abcdefghijklmnopqrstuvwxyz\n"
    assert len(cut) > MAX_ROBOTS_BYTES
    assert not parse(cut).allowed("http://h/abc", AGENT)  # "Allow: /abc..." cut short would allow /abc


def test_wildcard_matching_is_linear_on_hostile_patterns() -> None:
    pattern = "/" + "*a" * 200 + "b"
    path = "/" + "a" * 5000
    assert not _matches(path, pattern)  # a backtracking regex would not come back
    assert _matches(path + "b", pattern)


def _reference(path: str, pattern: str) -> bool:
    anchored = pattern.endswith("$")
    body = pattern[:-1] if anchored else pattern
    regex = "".join(".*" if ch == "*" else re.escape(ch) for ch in body) + ("$" if anchored else "")
    return re.match(regex, path, re.DOTALL) is not None


@given(path=st.text("ab/*$", max_size=12), pattern=st.text("ab/*$", max_size=8))
@settings(max_examples=400)
def test_matcher_agrees_with_a_regular_expression(path: str, pattern: str) -> None:
    assert _matches(path, pattern) is _reference(path, pattern)


@given(body=st.binary(max_size=2000))
@settings(max_examples=300)
def test_parse_never_raises_on_random_bytes(body: bytes) -> None:
    rules = parse(body)
    assert isinstance(rules.allowed("http://h/x", AGENT), bool)


@given(
    lines=st.lists(
        st.sampled_from(
            [
                b"User-agent: *",
                b"User-agent: crawlspace",
                b"Disallow: /a",
                b"Allow: /a/b",
                b"Disallow:",
                b"Crawl-delay: 3",
                b"Sitemap: /s.xml",
                b"garbage",
                b"Disallow /c",
                b"# comment",
                b"",
                b"\xff\xfe",
                b"Allow: /*.html$",
                b"\x00",
            ]
        ),
        max_size=30,
    ),
    path=st.sampled_from(["/", "/a", "/a/b", "/c", "/x.html", "/a/b.html"]),
)
@settings(max_examples=300)
def test_parse_never_raises_on_mutated_files(lines: list[bytes], path: str) -> None:
    rules = parse(b"\r\n".join(lines))
    assert isinstance(rules.allowed("http://h" + path, AGENT), bool)


def _peak_memory(function: object, *args: object) -> int:
    tracemalloc.start()
    try:
        function(*args)  # type: ignore[operator]
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.timeout(60)
def test_ten_megabyte_robots_txt_is_cut_at_500_kib() -> None:
    lines = [f"Disallow: /p{i}/*/x$".encode() for i in range(400_000)]
    body = b"User-agent: *\n" + b"\n".join(lines)
    assert len(body) > 8_000_000
    rules = parse(body)
    assert not rules.allowed("http://h/p1/a/x", AGENT)
    assert rules.allowed("http://h/p399999/a/x", AGENT)  # past the limit: not a rule
    assert rules.directives < 40_000
    # memory stays a small multiple of the 500 KiB that are read, not of the 10 MB received
    assert _peak_memory(parse, body) < 40 * MAX_ROBOTS_BYTES


def test_binary_robots_txt() -> None:
    body = random.Random(7).randbytes(1_000_000)
    rules = parse(body)
    assert rules.allowed("http://h/anything", AGENT)  # no rule could be read: no restriction
    assert rules.directives == 0


def test_html_error_page_served_as_robots_txt() -> None:
    body = (
        b"<!DOCTYPE html><html><head><title>404 Not Found</title></head>\n<body><h1>Not Found</h1>\n"
        b"<p>The requested URL /robots.txt was not found: try <a href='/'>home</a>.</p>\n"
        b"<script>var disallow = 1; user-agent: 'x'</script></body></html>\n"
    )
    rules = parse(body)
    assert rules.allowed("http://h/private", AGENT)
    assert rules.directives == 0 and rules.unknown_directives >= 1


def _reference_verdict(rules: RobotsRules, url: str) -> bool:
    """Longest match over every rule of the group, Allow winning ties: no index, no early exit."""
    group = rules._group(AGENT)
    if group is None:
        return True
    path = path_params_query(url)
    unreserved = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

    def decode(match: re.Match[str]) -> str:
        char = chr(int(match.group(1), 16))
        return char if char in unreserved else match.group(0).upper()

    paths = {path, re.sub(r"%([0-9A-Fa-f]{2})", decode, path)}
    best: tuple[int, bool] | None = None
    for rule in group.rules:
        if any(rule.matches(candidate) for candidate in paths):
            key = (rule.priority, rule.allow)
            best = key if best is None or key > best else best
    return True if best is None else best[1]


@given(
    lines=st.lists(
        st.builds(
            lambda verb, pattern: verb + pattern,
            st.sampled_from([b"Allow: ", b"Disallow: "]),
            st.text("/ab*$%7E~", min_size=0, max_size=7).map(str.encode),
        ),
        max_size=25,
    ),
    path=st.text("/ab~", max_size=8).map(lambda text: "/" + text.replace("~", "%7E")),
)
@settings(max_examples=400)
def test_indexed_matching_agrees_with_an_exhaustive_search(lines: list[bytes], path: str) -> None:
    rules = parse(b"User-agent: *\n" + b"\n".join(lines))
    url = "http://h" + path
    assert path == "/robots.txt" or rules.allowed(url, AGENT) is _reference_verdict(rules, url)
