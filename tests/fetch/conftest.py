"""Fixtures for the fetch tests: a hostile host, a well-behaved host on another loopback address,
and a fetcher with short timeouts (set by the tests, so no test waits long)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from crawlspace.dns import AddressGuard, Resolver
from crawlspace.fetch import FetchResult, Outcome
from crawlspace.fetch.fetcher import Fetcher, FetchLimits
from tests.fetch.hostile_server import HostileServer

CONNECT_TIMEOUT = 1.0
READ_TIMEOUT = 1.5  # more than the slowloris server's 1 s between bytes
TOTAL_TIMEOUT = 3.0
MAX_BODY = 1 << 20
NO_DNS_SERVER = "127.0.0.1:9"  # discard port: nothing listens, nothing leaves the machine


@pytest.fixture(scope="module")
def hostile() -> Iterator[HostileServer]:
    with HostileServer("127.0.0.1", prebuild_bombs=True) as server:
        yield server


@pytest.fixture(scope="module")
def good() -> Iterator[HostileServer]:
    """Another host (another loopback address) whose crawl must go on whatever `hostile` does."""
    with HostileServer("127.0.0.2", site_pages=50) as server:
        yield server


def make_fetcher(**overrides: object) -> Fetcher:
    options: dict[str, object] = {
        "user_agent": "crawlspace-test/1.0 (+https://example.org/bot)",
        "connect_timeout": CONNECT_TIMEOUT,
        "read_timeout": READ_TIMEOUT,
        "total_timeout": TOTAL_TIMEOUT,
        "limits": FetchLimits(max_body_bytes=MAX_BODY, max_decoded_bytes=MAX_BODY),
    }
    options.update(overrides)
    resolver = options.pop("resolver", None)
    if resolver is None:
        resolver = offline_resolver()
    guard = options.pop("guard", None)
    if guard is None:
        guard = AddressGuard(allow_networks=["127.0.0.0/8"])
    return Fetcher(resolver, guard, **options)  # type: ignore[arg-type]


def offline_resolver(overrides: dict[str, str] | None = None, **options: object) -> Resolver:
    """A resolver that can never send a query off this machine: names not mapped in `overrides` go to
    a loopback port where nothing answers (tests that need DNS answers use tests.dns.fake_dns)."""
    options.setdefault("nameservers", [NO_DNS_SERVER])
    options.setdefault("timeout", 0.5)
    options.setdefault("tries", 1)
    return Resolver(overrides, use_system_hosts=False, **options)  # type: ignore[arg-type]


@dataclass
class Alongside:
    result: FetchResult
    elapsed: float
    others: list[FetchResult]


async def fetch_alongside(fetcher: Fetcher, url: str, other: HostileServer) -> Alongside:
    """Fetch `url` while a loop keeps crawling `other`: the fetch's result, its duration, and what
    the other crawl fetched meanwhile."""
    stop = asyncio.Event()
    others: list[FetchResult] = []

    async def crawl_other_host() -> None:
        page = 0
        while not stop.is_set():
            others.append(await fetcher.fetch(other.url(f"/site/{page % other.site_pages}")))
            page += 1
            await asyncio.sleep(0.01)

    crawl = asyncio.create_task(crawl_other_host())
    await asyncio.sleep(0)
    started = time.monotonic()
    result = await fetcher.fetch(url)
    elapsed = time.monotonic() - started
    stop.set()
    await crawl
    return Alongside(result, elapsed, others)


def assert_other_crawl_went_on(run: Alongside) -> None:
    assert run.others, "the other host was not fetched at all"
    assert all(r.outcome is Outcome.OK for r in run.others), {r.outcome for r in run.others}
    # Well-behaved fetches take milliseconds: while the hostile fetch lasted, they kept coming.
    assert len(run.others) >= int(run.elapsed * 5), (len(run.others), run.elapsed)
