"""Judging a crawl from the server's side: the request log against the ground truth.

A crawler's own statistics can be wrong in the same way as the crawler; the server's log
cannot. `judge_crawl` compares what was requested (each log line) with what a correct crawler
requests from the same seeds (`SimWeb.expected_fetches`), and checks politeness: no two
requests to one host (or one IP) in flight at once, and between two requests to a host at
least the larger of the crawler's minimum delay and the host's robots.txt Crawl-delay,
measured from the end of one response to the arrival of the next request.
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from crawlspace.simweb.generator import SimWeb, unescape_unreserved
from crawlspace.simweb.server import LogEntry


@dataclass(frozen=True)
class Gap:
    """Two consecutive requests to one host (or IP) closer than allowed; negative `seconds` is an overlap."""

    key: str
    first: LogEntry
    second: LogEntry
    seconds: float
    required: float


@dataclass
class CrawlVerdict:
    """Everything that differs from a correct, polite crawl; `ok` when nothing does."""

    expected: set[str]
    fetched: collections.Counter[str]
    missing: set[str] = field(default_factory=set)
    unexpected: set[str] = field(default_factory=set)
    disallowed: set[str] = field(default_factory=set)
    refetched: dict[str, int] = field(default_factory=dict)
    trap_fetches: int = 0
    robots_fetches: collections.Counter[str] = field(default_factory=collections.Counter)
    host_overlaps: list[Gap] = field(default_factory=list)
    ip_overlaps: list[Gap] = field(default_factory=list)
    delay_violations: list[Gap] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (
            self.missing
            or self.unexpected
            or self.disallowed
            or self.refetched
            or self.host_overlaps
            or self.ip_overlaps
            or self.delay_violations
        )

    def summary(self) -> str:
        """One line per kind of problem, with up to three examples each."""

        def sample(items: Iterable[object]) -> str:
            return ", ".join(str(item) for item in list(items)[:3])

        lines = [
            f"expected {len(self.expected)} URLs, fetched {len(self.fetched)} distinct "
            f"({sum(self.fetched.values())} requests, {self.trap_fetches} in the trap)"
        ]
        for name, items in (
            ("missing", sorted(self.missing)),
            ("unexpected", sorted(self.unexpected)),
            ("disallowed by robots.txt", sorted(self.disallowed)),
            ("fetched more than once", sorted(self.refetched.items())),
            ("overlapping requests to a host", self.host_overlaps),
            ("overlapping requests to an IP", self.ip_overlaps),
            ("requests to a host too close together", self.delay_violations),
        ):
            if items:
                lines.append(f"{len(items)} {name}: {sample(items)}")
        return "\n".join(lines)


def _gaps(entries: Sequence[LogEntry], key: str, required: float, tolerance: float) -> list[Gap]:
    ordered = sorted(entries, key=lambda entry: entry.arrived)
    return [
        Gap(key, first, second, second.arrived - first.finished, required)
        for first, second in itertools.pairwise(ordered)
        if second.arrived - first.finished < required - tolerance
    ]


def judge_crawl(
    web: SimWeb,
    entries: Iterable[LogEntry],
    seeds: Iterable[str],
    *,
    agent: str = "crawlspace",
    min_delay: float = 0.0,
    follow_nofollow: bool = False,
    max_redirects: int = 10,
    tolerance: float = 0.002,
) -> CrawlVerdict:
    """Compare a finished crawl's request log with the ground truth.

    robots.txt requests are counted per host and kept out of the URL comparison and of the
    delay check (a crawler fetches robots.txt right before a host's first page), but not out
    of the overlap checks. Trap URLs are counted, not judged: a crawler may step into the
    trap a little way before its guard stops it.
    """
    log = list(entries)
    expected = web.expected_fetches(seeds, agent=agent, follow_nofollow=follow_nofollow, max_redirects=max_redirects)
    verdict = CrawlVerdict(expected=expected, fetched=collections.Counter())
    by_host: dict[str, list[LogEntry]] = collections.defaultdict(list)
    by_ip: dict[str, list[LogEntry]] = collections.defaultdict(list)
    for entry in log:
        host = entry.host.rsplit(":", 1)[0].lower() if ":" in entry.host else entry.host.lower()
        by_host[host].append(entry)
        by_ip[entry.server_ip].append(entry)
        if entry.path == "/robots.txt":
            verdict.robots_fetches[host] += 1
            continue
        try:
            url = web.origin(host) + unescape_unreserved(entry.path)
        except KeyError:
            verdict.unexpected.add(f"http://{entry.host}{entry.path}")
            continue
        if web.is_trap(url):
            verdict.trap_fetches += 1
            continue
        verdict.fetched[url] += 1
        if not web.robots_allowed(url, agent):
            verdict.disallowed.add(url)
    verdict.missing = expected - set(verdict.fetched)
    verdict.unexpected |= set(verdict.fetched) - expected
    verdict.refetched = {url: count for url, count in verdict.fetched.items() if count > 1}
    for host, requests in by_host.items():
        verdict.host_overlaps += _gaps(requests, host, 0.0, 0.0)
        pages = [entry for entry in requests if entry.path != "/robots.txt"]
        delay = max(min_delay, web.crawl_delay(host, agent) or 0.0) if web.has_host(host) else min_delay
        verdict.delay_violations += [gap for gap in _gaps(pages, host, delay, tolerance) if gap.seconds >= 0]
    for ip, requests in by_ip.items():
        verdict.ip_overlaps += _gaps(requests, ip, 0.0, 0.0)
    return verdict
