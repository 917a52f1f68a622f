"""judge_crawl: a perfect, polite log passes; each kind of fault in it is reported."""

from __future__ import annotations

from crawlspace.simweb import SimWeb, judge_crawl
from crawlspace.simweb.server import LogEntry


def perfect_log(web: SimWeb, seeds: list[str], delay: float) -> list[LogEntry]:
    """One request per expected URL, hosts taking turns, each host's requests `delay` apart."""
    by_host: dict[str, list[str]] = {}
    for url in sorted(web.expected_fetches(seeds)):
        by_host.setdefault(url.split("/")[2], []).append(url)
    entries: list[LogEntry] = []
    for connection, (host, urls) in enumerate(by_host.items(), start=1):
        ip = web.host_ip(host, 99)
        clock = 1000.0 + web.host_index(host) * 0.0001  # hosts interleave in time but never on one IP at once
        need = max(delay, web.crawl_delay(host) or 0.0)
        for path in ["/robots.txt"] + ["/" + url.split("/", 3)[3] for url in urls]:
            entries.append(LogEntry(clock, clock + 0.00001, connection, ip, host, path, 200, 100, "GET"))
            clock += 0.00001 + (need if path != "/robots.txt" else 0.00002)
    return entries


def test_a_perfect_crawl_passes_and_faults_are_found(web: SimWeb) -> None:
    seeds = web.seeds(5)
    log = perfect_log(web, seeds, delay=0.5)
    verdict = judge_crawl(web, log, seeds, min_delay=0.5)
    assert verdict.ok, verdict.summary()
    assert verdict.robots_fetches and all(count == 1 for count in verdict.robots_fetches.values())

    dropped = log[1]
    verdict = judge_crawl(web, log[:1] + log[2:], seeds, min_delay=0.5)
    assert verdict.missing == {web.origin(dropped.host) + dropped.path} and not verdict.ok

    blocked = next(url for url in web.all_urls() if not web.robots_allowed(url))
    host, path = blocked.split("/")[2], "/" + blocked.split("/", 3)[3]
    extra = LogEntry(5000.0, 5000.001, 999, web.host_ip(host, 99), host, path, 200, 1, "GET")
    verdict = judge_crawl(web, [*log, extra], seeds, min_delay=0.5)
    assert blocked in verdict.disallowed and blocked in verdict.unexpected

    again = log[1]._replace(arrived=6000.0, finished=6000.001)
    verdict = judge_crawl(web, [*log, again], seeds, min_delay=0.5)
    assert verdict.refetched == {web.origin(again.host) + again.path: 2}

    first, second = log[1], log[2]
    overlapping = second._replace(arrived=first.finished - 0.000001)
    verdict = judge_crawl(web, [entry if entry is not second else overlapping for entry in log], seeds)
    assert verdict.host_overlaps

    verdict = judge_crawl(web, log, seeds, min_delay=2.0)
    assert verdict.delay_violations and not verdict.ok
    assert "too close together" in verdict.summary()


def test_trap_and_percent_encoded_paths(web: SimWeb) -> None:
    trap = web.trap_host
    assert trap is not None
    tilde = next(url for url in web.expected_fetches(web.seeds(5)) if "/~user/" in url)
    host = tilde.split("/")[2]
    entries = [
        LogEntry(1.0, 1.1, 1, web.host_ip(trap, 99), trap, "/cal/2030/01/", 200, 10, "GET"),
        LogEntry(
            1.0, 1.1, 2, web.host_ip(host, 99), host, "/" + tilde.split("/", 3)[3].replace("~", "%7E"), 200, 1, "GET"
        ),
    ]
    verdict = judge_crawl(web, entries, web.seeds(5))
    assert verdict.trap_fetches == 1
    assert tilde in verdict.fetched and tilde not in verdict.unexpected
