"""join and normalize: RFC 3986 §6 rules, the optional query rules, and the cheap URL splitters."""

from __future__ import annotations

import pytest

from crawlspace.urls import InvalidURL, Normalizer, host_of, join, normalize, origin_of, url_fingerprint


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("HTTP://Example.COM/a", "http://example.com/a"),  # case of scheme and host
        ("http://example.com:80/a", "http://example.com/a"),  # default port
        ("https://example.com:443/a", "https://example.com/a"),
        ("http://example.com:8080/a", "http://example.com:8080/a"),
        ("http://example.com", "http://example.com/"),  # empty path
        ("http://example.com/a/./b/../c", "http://example.com/a/c"),  # dot segments
        ("http://example.com/a/%2e%2E/c", "http://example.com/c"),  # escaped dot segments (WHATWG)
        ("http://example.com/%7euser/%41b%2d", "http://example.com/~user/Ab-"),  # unreserved decoded
        ("http://example.com/a%2fb%3f%c3%a9", "http://example.com/a%2Fb%3F%C3%A9"),  # the rest upper-cased
        ("http://example.com/p?q=1#frag", "http://example.com/p?q=1"),  # fragment dropped
        ("http://example.com/p#", "http://example.com/p"),
        ("http://example.com/a b", "http://example.com/a%20b"),
        ("http://bücher.de/", "http://xn--bcher-kva.de/"),  # IDNA
        ("http://0x7f.1/", "http://127.0.0.1/"),  # IPv4 number forms
        ("  http://example.com/\t\n ", "http://example.com/"),
    ],
)
def test_rfc3986_normalization(raw: str, expected: str) -> None:
    assert normalize(raw) == expected
    assert normalize(expected) == expected


@pytest.mark.parametrize("raw", ["mailto:a@b.c", "javascript:void(0)", "ftp://example.com/", "data:,x", "/relative"])
def test_normalize_rejects_what_is_not_a_crawlable_url(raw: str) -> None:
    with pytest.raises(InvalidURL):
        normalize(raw)


def test_invalid_url_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="cannot resolve"):
        join("http://example.com/", "http://[::1")


def test_join_resolves_like_a_browser() -> None:
    base = "http://example.com/a/b/c.html?x=1"
    assert join(base, "../d") == "http://example.com/a/d"
    assert join(base, "//other.test/x") == "http://other.test/x"
    assert join(base, "?y=2") == "http://example.com/a/b/c.html?y=2"
    assert join(base, "\\\\other.test\\x") == "http://other.test/x"  # backslashes in special schemes
    assert join(base, "  #top") == "http://example.com/a/b/c.html?x=1#top"
    assert join(base, "mailto:x@y.z") == "mailto:x@y.z"
    assert join(None, "HTTP://EXAMPLE.com") == "http://example.com/"
    with pytest.raises(InvalidURL):
        join(None, "relative/path")
    with pytest.raises(InvalidURL):
        join(base, "http://exa mple.com/")


def test_join_rejects_lone_surrogates() -> None:
    with pytest.raises(InvalidURL):
        join("http://example.com/", "/\ud800")


def test_session_ids_are_removed_from_query_and_path() -> None:
    normalizer = Normalizer(strip_session_ids=True)
    assert normalizer("http://e.com/p?id=3&PHPSESSID=abc&x=1") == "http://e.com/p?id=3&x=1"
    assert normalizer("http://e.com/p;jsessionid=A1B2?x=1") == "http://e.com/p?x=1"
    assert normalizer("http://e.com/p?sid=1") == "http://e.com/p"
    assert normalizer("http://e.com/p?ASPSESSIONIDQQ=1&keep=2") == "http://e.com/p?keep=2"
    assert normalizer("http://e.com/p?sidebar=1") == "http://e.com/p?sidebar=1"  # whole names only
    assert normalize("http://e.com/p?PHPSESSID=abc") == "http://e.com/p?PHPSESSID=abc"  # off by default


def test_tracking_and_custom_parameters_are_removed() -> None:
    normalizer = Normalizer(strip_tracking=True, strip_params=["ref", "x-*"])
    assert normalizer("http://e.com/?utm_source=a&utm_Medium=b&id=7&gclid=z") == "http://e.com/?id=7"
    assert normalizer("http://e.com/?REF=1&x-trace=2&y=3") == "http://e.com/?y=3"
    assert normalizer("http://e.com/?%75tm_source=a") == "http://e.com/"  # names compared decoded


def test_sorting_makes_parameter_order_irrelevant() -> None:
    normalizer = Normalizer(sort_query=True)
    assert normalizer("http://e.com/?b=2&a=1&&c") == normalizer("http://e.com/?c&a=1&b=2") == "http://e.com/?a=1&b=2&c"
    assert normalizer("http://e.com/?") == "http://e.com/"
    assert normalize("http://e.com/?b=2&a=1") == "http://e.com/?b=2&a=1"


def test_optional_rules_are_idempotent() -> None:
    normalizer = Normalizer(strip_session_ids=True, strip_tracking=True, sort_query=True)
    for url in ["http://e.com/a;jsessionid=1/b?utm_x=1&z=%7e&a=%2f", "http://e.com/?&&", "http://e.com/p;sid=2"]:
        once = normalizer(url)
        assert normalizer(once) == once


def test_host_and_origin_of_normalized_urls() -> None:
    assert host_of("http://user:pw@example.com:8080/p?q") == "example.com:8080"
    assert host_of("https://[::1]/") == "[::1]"
    assert origin_of("http://user:pw@example.com:8080/p?q") == "http://example.com:8080"
    assert origin_of("https://example.com") == "https://example.com"


def test_fingerprint_is_stable_and_distinguishes() -> None:
    assert url_fingerprint("http://e.com/a") == url_fingerprint("http://e.com/a")
    assert url_fingerprint("http://e.com/a") != url_fingerprint("http://e.com/b")
    assert 0 <= url_fingerprint("http://e.com/\udcff") < 2**64  # surrogates survive (surrogatepass)
