"""The composition root: each component gets what the configuration says (crawl/assembly.py)."""

from __future__ import annotations

from pathlib import Path

from crawlspace.config import CrawlConfig
from crawlspace.crawl import assembly
from crawlspace.dns import AddressGuard
from crawlspace.frontier import FrontierEntry
from crawlspace.hooks.runtime import Extensions
from crawlspace.urls.filter import Reason


def entry(url: str, depth: int = 1) -> FrontierEntry:
    return FrontierEntry(url, depth)


def test_url_filter() -> None:
    config = CrawlConfig(
        scope="domain",
        include=("/wiki/",),
        exclude=("action=edit",),
        allowed_schemes=("https",),
        exclude_extensions=("png",),
        max_depth=4,
        max_path_depth=5,
        host_page_budget=10,
        max_host_depth=None,
    )
    url_filter = assembly.url_filter(config)
    url_filter.add_seed("https://en.wikipedia.org/wiki/Main")
    assert url_filter.rejection(entry("https://de.wikipedia.org/wiki/X")) is None
    assert url_filter.rejection(entry("https://wikipedia.com/wiki/X")) is Reason.OUT_OF_SCOPE
    assert url_filter.rejection(entry("https://en.wikipedia.org/w/index.php")) is Reason.NOT_INCLUDED
    assert url_filter.rejection(entry("https://en.wikipedia.org/wiki/X?action=edit")) is Reason.EXCLUDED
    assert url_filter.rejection(entry("https://en.wikipedia.org/wiki/X.png")) is Reason.EXTENSION
    assert url_filter.rejection(entry("https://en.wikipedia.org/wiki/a/b/c/d/e")) is Reason.PATH_TOO_DEEP
    assert url_filter.rejection(entry("https://en.wikipedia.org/wiki/X", depth=5)) is Reason.MAX_DEPTH
    assert url_filter.host_page_budget == 10 and url_filter.max_host_depth is None


def test_fetcher_carries_identity_limits_and_timeouts() -> None:
    config = CrawlConfig(from_header="ops@example.org", max_body_bytes=4096, max_response_headers=64, read_timeout=7)
    fetcher = assembly.fetcher(config, assembly.resolver(CrawlConfig()), AddressGuard())
    assert fetcher.limits.max_body_bytes == 4096
    assert fetcher.limits.max_response_headers == 64
    headers = dict(fetcher._headers)
    assert headers["From"] == "ops@example.org"
    assert "+http" in headers["User-Agent"]  # a contact URL, always
    assert fetcher.read_timeout == 7


def test_resolver() -> None:
    config = CrawlConfig(
        resolve={"a.test": "192.0.2.1"}, dns_servers=["127.0.0.1:9"], dns_min_ttl=5, dns_retry_attempts=3
    )
    resolver = assembly.resolver(config)
    assert resolver.cached("a.test") == "192.0.2.1"
    assert resolver._min_ttl == 5 and resolver._backoff.attempts == 3
    assert resolver._nameservers == ["127.0.0.1:9"]


def test_guard() -> None:
    guard = assembly.guard(CrawlConfig(allow_networks=["192.168.0.0/16"]))
    assert guard.refusal_reason("192.168.3.4") is None
    assert guard.refusal_reason("10.0.0.1") == "private"
    assert assembly.guard(CrawlConfig(allow_private_addresses=True)).refusal_reason("::1") is None


def test_store_options() -> None:
    options = assembly.store_options(CrawlConfig(warc_max_bytes=1 << 20, table_fetch_versions=7, store_text=True))
    assert options.warc_max_bytes == 1 << 20 and options.max_versions["fetch"] == 7 and options.store_text


def test_assemble_opens_every_store_of_a_partition(tmp_path: Path) -> None:
    config = CrawlConfig(min_delay=0.5, concurrency=4, scope="domain")
    parts = assembly.assemble(
        config, tmp_path, resume=False, extensions=Extensions(), prioritizer=None, on_host_activated=lambda host: None
    )
    try:
        assert parts.politeness.min_delay == 0.5
        assert parts.url_filter.rejection(entry("ftp://a.test/x")) is Reason.SCHEME
        assert (tmp_path / "frontier").is_dir() and (tmp_path / "seen").is_dir()
    finally:
        parts.urlset.close(checkpoint=False)
        parts.content.close()
        parts.store.close()
        parts.robots_log.close()
        parts.frontier.close(checkpoint=False)
