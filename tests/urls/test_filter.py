"""The URL filter chain: scope, patterns, extensions, depth, spider-trap guards, per-host admission."""

from __future__ import annotations

import pytest

from crawlspace.config import ConfigError, CrawlConfig
from crawlspace.frontier.entry import FrontierEntry
from crawlspace.urls.filter import (
    DomainResolver,
    Reason,
    Scope,
    UrlFilter,
    repeated_segments,
    split_url,
)


@pytest.fixture(scope="module")
def domains() -> DomainResolver:
    return DomainResolver()


def entry(url: str, depth: int = 1, hops: int = 0) -> FrontierEntry:
    return FrontierEntry(url, depth, hops)


def open_filter(**options: object) -> UrlFilter:
    """A filter with no default trap guard or extension list, so each test turns on what it checks."""
    settings: dict[str, object] = {
        "exclude_extensions": (),
        "max_url_length": None,
        "max_path_depth": None,
        "max_segment_repeats": None,
        "max_query_params": None,
        "host_page_budget": None,
        "max_host_depth": None,
    }
    settings.update(options)
    return UrlFilter(**settings)  # type: ignore[arg-type]


def test_split_url() -> None:
    assert split_url("http://u:p@Example.com:81/a/b?x=1&y") == ("http", "Example.com", "/a/b", "x=1&y")
    assert split_url("https://[::1]:8443/") == ("https", "[::1]", "/", "")
    assert split_url("http://e.com?q") == ("http", "e.com", "", "q")


def test_registered_domains(domains: DomainResolver) -> None:
    assert domains("a.b.example.co.uk") == "example.co.uk"
    assert domains("foo.github.io") == "foo.github.io"  # private suffixes are on
    assert domains("www.site0001.test") == "site0001.test"  # unknown suffix: the PSL's default rule '*'
    assert domains("127.0.0.1") == "127.0.0.1"
    assert domains("[::1]") == "[::1]"
    assert domains("localhost") == "localhost"
    assert domains("WWW.Example.COM.") == "example.com"


def test_scope_by_host() -> None:
    scope = Scope("host")
    scope.add_seed("http://www.example.com/start")
    assert scope.contains("https://www.example.com:8443/other")  # any scheme and port
    assert not scope.contains("http://example.com/")
    assert not scope.contains("http://other.test/")


def test_scope_by_registered_domain() -> None:
    scope = Scope("domain")
    scope.add_seed("http://www.example.co.uk/")
    assert scope.contains("http://shop.example.co.uk/x")
    assert scope.contains("http://example.co.uk/")
    assert not scope.contains("http://other.co.uk/")
    scope.add_seed("http://alice.github.io/")
    assert not scope.contains("http://bob.github.io/")  # github.io is a public suffix


def test_scope_by_prefix() -> None:
    scope = Scope("prefix")
    scope.add_seed("http://example.com/docs/index.html")
    assert scope.contains("https://example.com/docs/api/x.html")
    assert not scope.contains("http://example.com/blog/")
    assert not scope.contains("http://example.com/docsearch")


def test_allowed_domains_restrict_any_scope() -> None:
    scope = Scope("any", ["example.com"])
    assert scope.contains("http://example.com/") and scope.contains("http://a.b.example.com/")
    assert not scope.contains("http://notexample.com/") and not scope.contains("http://example.org/")


def test_seeds_are_in_scope_and_exempt_from_include_and_depth() -> None:
    url_filter = open_filter(scope=Scope("host"), include=[r"/docs/"], max_depth=0)
    url_filter.add_seed("http://example.com/")
    assert url_filter.rejection(entry("http://example.com/", depth=0)) is None
    assert url_filter.rejection(entry("http://example.com/docs/a", depth=0)) is None
    assert url_filter.rejection(entry("http://example.com/docs/a")) is Reason.MAX_DEPTH
    assert url_filter.rejection(entry("http://other.com/docs/a", depth=0)) is Reason.OUT_OF_SCOPE
    assert url_filter.rejection(entry("http://example.com/blog", depth=0)) is Reason.NOT_INCLUDED


def test_include_exclude_and_schemes() -> None:
    url_filter = open_filter(include=[r"\.html\b", r"/api/"], exclude=[r"/private/", r"\?print="], schemes=["https"])
    assert url_filter.rejection(entry("https://e.com/a.html")) is None
    assert url_filter.rejection(entry("https://e.com/api/v1")) is None
    assert url_filter.rejection(entry("https://e.com/a.php")) is Reason.NOT_INCLUDED
    assert url_filter.rejection(entry("https://e.com/private/a.html")) is Reason.EXCLUDED
    assert url_filter.rejection(entry("https://e.com/a.html?print=1")) is Reason.EXCLUDED
    assert url_filter.rejection(entry("http://e.com/a.html")) is Reason.SCHEME


def test_extensions() -> None:
    url_filter = UrlFilter()  # default extension list
    for url in ["http://e.com/a.JPG", "http://e.com/d/f.tar.gz", "http://e.com/x.pdf?download=1", "http://e.com/s.css"]:
        assert url_filter.rejection(entry(url)) is Reason.EXTENSION, url
    for url in ["http://e.com/a.html", "http://e.com/v1.2/", "http://e.com/a.php?f=x.jpg", "http://e.com/README"]:
        assert url_filter.rejection(entry(url)) is None, url


def test_redirect_hops() -> None:
    url_filter = open_filter(max_redirects=2)
    assert url_filter.rejection(entry("http://e.com/", hops=2)) is None
    assert url_filter.rejection(entry("http://e.com/", hops=3)) is Reason.TOO_MANY_REDIRECTS


def test_trap_guards_with_their_defaults() -> None:
    url_filter = UrlFilter()
    assert url_filter.rejection(entry("http://e.com/" + "a" * 2100)) is Reason.URL_TOO_LONG
    assert url_filter.rejection(entry("http://e.com" + "/s" * 21)) is Reason.PATH_TOO_DEEP
    assert url_filter.rejection(entry("http://e.com" + "/s" * 20 + "/")) is Reason.REPEATED_SEGMENTS
    assert url_filter.rejection(entry("http://e.com" + "".join(f"/s{i}" for i in range(20)))) is None
    assert url_filter.rejection(entry("http://e.com/a/b/a/b/a/b")) is Reason.REPEATED_SEGMENTS
    assert url_filter.rejection(entry("http://e.com/a/b/a/b/c")) is None
    query = "&".join(f"p{i}=1" for i in range(26))
    assert url_filter.rejection(entry("http://e.com/?" + query)) is Reason.TOO_MANY_QUERY_PARAMS
    assert url_filter.rejection(entry("http://e.com/?" + query.rsplit("&", 1)[0])) is None


@pytest.mark.parametrize(
    ("path", "repeats", "expected"),
    [
        ("a/b/a/b/a/b", 2, True),
        ("a/b/a/b", 2, False),
        ("x/a/a/a", 2, True),
        ("x/a/a/a", 3, False),
        ("a/b/c/a/b/c/a/b/c/d", 2, True),
        ("a/b/c/a/b/c/d", 2, False),
        ("a/x/a/y/a/z", 2, False),  # not in a row
        ("", 2, False),
        ("//////", 2, True),  # empty segments repeat too
    ],
)
def test_repeated_segments(path: str, repeats: int, expected: bool) -> None:
    assert repeated_segments(path.split("/") if path else [], repeats) is expected


def test_host_budget_counts_admitted_urls() -> None:
    url_filter = open_filter(host_page_budget=3)
    results = [url_filter.admission(entry(f"http://e.com/{i}"), "e.com") for i in range(5)]
    assert results == [None, None, None, Reason.HOST_BUDGET, Reason.HOST_BUDGET]
    assert url_filter.admission(entry("http://f.com/"), "f.com") is None  # per host
    assert url_filter.admitted("e.com") == 3


def test_host_depth_is_relative_to_the_shallowest_url_of_the_host() -> None:
    url_filter = open_filter(max_host_depth=2)
    assert url_filter.admission(entry("http://t.com/", depth=5), "t.com") is None
    assert url_filter.admission(entry("http://t.com/1", depth=7), "t.com") is None
    assert url_filter.admission(entry("http://t.com/2", depth=8), "t.com") is Reason.HOST_DEPTH
    assert url_filter.admission(entry("http://t.com/0", depth=4), "t.com") is None  # shallower: new minimum
    assert url_filter.admission(entry("http://t.com/3", depth=6), "t.com") is None
    assert url_filter.admission(entry("http://u.com/", depth=40), "u.com") is None  # another host starts afresh


def test_none_turns_guards_off() -> None:
    url_filter = open_filter()
    assert url_filter.rejection(entry("http://e.com" + "/a" * 50 + "?" + "&".join("x" * 40))) is None
    for i in range(200):
        assert url_filter.admission(entry(f"http://e.com/{i}", depth=i), "e.com") is None


def test_config_rejects_bad_scope_settings() -> None:
    with pytest.raises(ConfigError, match="include: invalid regular expression"):
        CrawlConfig(include=("a(",))
    with pytest.raises(ConfigError, match="scope"):
        CrawlConfig.from_mapping({"scope": "planet"})
    with pytest.raises(ConfigError, match="allowed_schemes"):
        CrawlConfig.from_mapping({"allowed_schemes": ["ftp"]})
    with pytest.raises(ConfigError, match="max_path_depth"):
        CrawlConfig.from_mapping({"max_path_depth": 0})
    with pytest.raises(ConfigError, match="did you mean 'max_host_depth'"):
        CrawlConfig.from_mapping({"max_hostdepth": 3})
