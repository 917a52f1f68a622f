"""Politeness judged from the simulated web's request log: the server's clock, not the crawler's.

Several hosts share one loopback address. With per-IP politeness on, the log must show no two
requests in flight at once to a host or to an address, at least the configured delay between
requests to a host and to an address, every Crawl-delay honoured (never shorter, and the
crawler not more than 5% slower than the host allows). With per-IP politeness off, requests to
hosts of one address do overlap: the control that shows the check can fail.
"""

from __future__ import annotations

import itertools
import statistics
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

from crawlspace.simweb import RunningServer, SimWeb, SimWebConfig, judge_crawl, serve_in_background
from crawlspace.simweb.server import LogEntry
from tests.conftest import run_cli

MIN_DELAY = 0.08
CRAWL_DELAY = 0.4
TOLERANCE = 0.002  # the log's timestamps and the judge's own slack

WEB = SimWebConfig(
    hosts=30,
    seed=5,
    mean_pages_per_host=6.0,
    max_pages_per_host=16,
    robots_crawl_delay=CRAWL_DELAY,
    include_trap=False,
    shared_ip_hosts=5,
    latency=0.02,
)


@pytest.fixture(scope="module")
def web() -> SimWeb:
    return SimWeb.generate(WEB)


@pytest.fixture
def served(web: SimWeb, tmp_path: Path) -> Iterator[RunningServer]:
    with serve_in_background(web, tmp_path / "simweb", seeds=8) as running:
        yield running


def crawl(served: RunningServer, out: Path, *extra: str) -> None:
    result = run_cli(
        "crawl", str(served.seeds_file), "--out", str(out),
        "--hosts-file", str(served.hosts_file), "--allow-private-addresses",
        "--min-delay", str(MIN_DELAY), "--delay-factor", "2", "--concurrency", "8",
        "--max-seconds", "120", "--no-progress", *extra,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr


def gaps(entries: list[LogEntry]) -> list[float]:
    """End of one response to the arrival of the next request, in arrival order."""
    ordered = sorted(entries, key=lambda entry: entry.arrived)
    return [second.arrived - first.finished for first, second in itertools.pairwise(ordered)]


def test_per_host_and_per_ip_politeness_from_the_server_log(web: SimWeb, served: RunningServer, tmp_path: Path) -> None:
    crawl(served, tmp_path / "crawl", "--per-ip")
    served.stop()
    log = served.read_log()
    verdict = judge_crawl(web, log, served.seeds, min_delay=MIN_DELAY)
    assert verdict.expected and not verdict.missing, verdict.summary()
    assert not verdict.host_overlaps, verdict.summary()
    assert not verdict.ip_overlaps, verdict.summary()
    assert not verdict.delay_violations, verdict.summary()
    assert verdict.ok, verdict.summary()

    by_ip: dict[str, list[LogEntry]] = defaultdict(list)
    hosts_of_ip: dict[str, set[str]] = defaultdict(set)
    by_host: dict[str, list[LogEntry]] = defaultdict(list)
    for entry in log:
        by_ip[entry.server_ip].append(entry)
        hosts_of_ip[entry.server_ip].add(entry.host)
        if entry.path != "/robots.txt":
            by_host[entry.host].append(entry)
    shared = [ip for ip, hosts in hosts_of_ip.items() if len(hosts) > 1]
    assert shared, "the simulated web should put several crawled hosts on one address"
    for ip in shared:
        # the address's own delay: robots.txt requests included, they reach the server too
        assert min(gaps(by_ip[ip])) >= MIN_DELAY - TOLERANCE, f"requests to {ip} closer than {MIN_DELAY}s"

    delayed = 0
    for host, entries in by_host.items():
        delay = web.crawl_delay(host)
        if delay is None or len(entries) < 4:
            continue
        host_gaps = gaps(entries)
        assert min(host_gaps) >= delay - TOLERANCE, f"{host}: Crawl-delay {delay}s, gap {min(host_gaps):.3f}s"
        if len(hosts_of_ip[entries[0].server_ip]) == 1:  # alone on its address: nothing else holds it up
            assert statistics.median(host_gaps) <= delay * 1.05, f"{host}: gaps {host_gaps} exceed Crawl-delay + 5%"
            delayed += 1
    assert delayed, "some crawled host alone on its address should have a Crawl-delay"


def test_without_per_ip_hosts_on_one_address_overlap(web: SimWeb, served: RunningServer, tmp_path: Path) -> None:
    crawl(served, tmp_path / "crawl", "--no-per-ip", "--max-pages", "60")
    served.stop()
    verdict = judge_crawl(web, served.read_log(), served.seeds, min_delay=MIN_DELAY)
    assert not verdict.host_overlaps and not verdict.delay_violations, verdict.summary()
    assert verdict.ip_overlaps, "hosts sharing an address were never fetched at once: the per-IP test proves nothing"
