"""The per-origin robots.txt cache: RFC 9309 status semantics, lifetimes, retries, outages, bounds."""

from __future__ import annotations

import pytest

from crawlspace.robots import RobotsCache
from crawlspace.robots.cache import RobotsStatus

ORIGIN = "http://h.test"
AGENT = "crawlspace"
BODY = b"User-agent: *\nDisallow: /private/\n"


def test_2xx_is_parsed_and_kept_for_the_ttl() -> None:
    cache = RobotsCache(ttl=100.0)
    rules = cache.store_response(ORIGIN, 200, BODY, now=0.0)
    assert not rules.allowed(ORIGIN + "/private/x", AGENT)
    assert cache.get(ORIGIN, 99.0) is rules
    assert cache.get(ORIGIN, 100.0) is None  # expired: fetch again (checked before every fetch)
    entry = cache.entry(ORIGIN, 1.0)
    assert entry is not None and entry.status is RobotsStatus.PARSED and not entry.unreachable


def test_default_lifetime_is_24_hours() -> None:
    cache = RobotsCache()
    cache.store_response(ORIGIN, 200, BODY, now=0.0)
    assert cache.get(ORIGIN, 86399.0) is not None and cache.get(ORIGIN, 86400.0) is None


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410, 451])
def test_4xx_means_no_restrictions(status: int) -> None:
    cache = RobotsCache(ttl=100.0)
    rules = cache.store_response(ORIGIN, status, b"User-agent: *\nDisallow: /\n", now=0.0)
    assert rules.allowed(ORIGIN + "/anything", AGENT)
    entry = cache.entry(ORIGIN, 0.0)
    assert entry is not None and entry.status is RobotsStatus.UNAVAILABLE and entry.expires == 100.0


@pytest.mark.parametrize("status", [500, 502, 503, 599, 429, 999, 102])
def test_5xx_429_and_odd_statuses_mean_complete_disallow(status: int) -> None:
    cache = RobotsCache(ttl=1000.0, retry_delay=10.0)
    rules = cache.store_response(ORIGIN, status, b"", now=0.0)
    assert not rules.allowed(ORIGIN + "/", AGENT)
    assert rules.allowed(ORIGIN + "/robots.txt", AGENT)
    entry = cache.entry(ORIGIN, 0.0)
    assert entry is not None and entry.unreachable and entry.failures == 1 and entry.expires == 10.0


def test_unreachable_is_retried_with_doubling_delays_up_to_the_ttl() -> None:
    cache = RobotsCache(ttl=100.0, retry_delay=10.0)
    now = 0.0
    waits = []
    for _ in range(6):
        cache.store_unreachable(ORIGIN, now)
        entry = cache.entry(ORIGIN, now)
        assert entry is not None
        waits.append(entry.expires - now)
        now = entry.expires
    assert waits == [10.0, 20.0, 40.0, 80.0, 100.0, 100.0]
    assert entry.failures == 6 and entry.unreachable_since == 0.0
    cache.store_response(ORIGIN, 200, BODY, now)  # back: failures are forgotten
    entry = cache.entry(ORIGIN, now)
    assert entry is not None and entry.failures == 0 and entry.unreachable_since is None


def test_an_outage_keeps_the_last_good_copy() -> None:
    cache = RobotsCache(ttl=100.0, retry_delay=10.0)
    good = cache.store_response(ORIGIN, 200, BODY, now=0.0)
    during = cache.store_response(ORIGIN, 503, b"", now=150.0)  # expired copy, server down
    assert during is good
    assert during.allowed(ORIGIN + "/public", AGENT) and not during.allowed(ORIGIN + "/private/", AGENT)
    entry = cache.entry(ORIGIN, 150.0)
    assert entry is not None and entry.unreachable and entry.expires == 160.0
    # and for as long as it lasts (RFC 9309 §2.4: the cached copy may outlive 24 h when unreachable)
    assert cache.store_unreachable(ORIGIN, 40 * 86400.0) is good


def test_a_host_never_reached_stays_disallowed() -> None:
    cache = RobotsCache(ttl=100.0, retry_delay=10.0)
    for day in range(40):
        rules = cache.store_unreachable(ORIGIN, day * 86400.0)
    assert not rules.allowed(ORIGIN + "/", AGENT)


def test_origins_are_separate() -> None:
    cache = RobotsCache()
    cache.store_response("http://h.test", 200, BODY, 0.0)
    assert cache.get("https://h.test", 0.0) is None
    assert cache.get("http://h.test:8080", 0.0) is None


def test_cache_is_bounded_least_recently_used_first() -> None:
    cache = RobotsCache(max_entries=3)
    for name in "abc":
        cache.store_response(f"http://{name}.test", 200, BODY, 0.0)
    assert cache.get("http://a.test", 1.0) is not None  # a is now the most recently used
    cache.store_response("http://d.test", 200, BODY, 0.0)
    assert len(cache) == 3
    assert cache.get("http://b.test", 1.0) is None
    assert cache.get("http://a.test", 1.0) is not None and cache.get("http://d.test", 1.0) is not None


def test_invalid_settings() -> None:
    with pytest.raises(ValueError):
        RobotsCache(ttl=0)
    with pytest.raises(ValueError):
        RobotsCache(max_entries=0)


def test_failures_that_waiting_will_not_cure_are_marked() -> None:
    cache = RobotsCache(retry_delay=10.0)
    cache.store_unreachable(ORIGIN, 0.0, transient=False)
    entry = cache.entry(ORIGIN, 0.0)
    assert entry is not None and entry.unreachable and not entry.transient
    cache.store_response(ORIGIN, 503, b"", 20.0)
    entry = cache.entry(ORIGIN, 20.0)
    assert entry is not None and entry.transient and entry.failures == 2
