"""Where did a URL go? The state of a finished crawl, per partition, for URLs a test found missing.

A kill -9 test that finds a URL never fetched can only fail; what it prints decides whether the
failure can be understood after the run (CI keeps no crawl directory). For each missing URL this
says, in every partition's directory: whether the frontier still queues it, whether an
unacknowledged batch holds it, whether the URL set knows it, whether a `done` mark stands for it,
and what the partition decided about its host (moved, pinned) and counted (given up, robots).
"""

from __future__ import annotations

import json
from pathlib import Path

from crawlspace.crawl.checkpoint import CrawlState
from crawlspace.frontier import Frontier
from crawlspace.seen.urlset import UrlSet
from crawlspace.urls import host_of, url_fingerprint

COUNTERS = ("robots_unreachable", "robots_excluded", "urls_given_up", "hosts_given_up", "handed_over", "errors")


def partition_directories(out: Path) -> list[Path]:
    workers = out / "workers"
    return sorted(path for path in workers.iterdir() if path.is_dir()) if workers.is_dir() else [out]


def whereabouts(out: Path, urls: set[str], limit: int = 8) -> str:
    """A report on (at most `limit` of) `urls` in the crawl at `out`; never raises."""
    chosen = sorted(urls)[:limit]
    lines = [f"whereabouts of {len(chosen)} of {len(urls)} missing URLs:"]
    for directory in partition_directories(out):
        try:
            lines += _partition(directory, chosen)
        except Exception as exc:  # a diagnosis must not hide the failure it explains
            lines.append(f"  {directory.name}: cannot read ({type(exc).__name__}: {exc})")
    return "\n".join(lines)


def _partition(directory: Path, urls: list[str]) -> list[str]:
    lines = [f"  partition {directory.name}:"]
    stats_path = directory / "stats.json"
    if stats_path.exists():
        stats = json.loads(stats_path.read_text())
        lines.append("    " + ", ".join(f"{key}={stats.get(key)}" for key in COUNTERS if key in stats))
    frontier = Frontier.open(directory / "frontier")
    try:
        state = CrawlState.decode(frontier.extra, str(directory)) if frontier.extra else None
        queued = {entry.url for entry in frontier.queued_entries()}
    finally:
        frontier.close(checkpoint=False)
    urlset: UrlSet[object] = UrlSet.open(directory / "seen" / "urls")
    try:
        fingerprints = [urlset.scheme.function(url) for url in urls]
        known = urlset.contains(fingerprints).tolist()
    finally:
        urlset.close(checkpoint=False)
    in_outbox = (
        {url: (peer, number, forward) for peer, number, forward, rows in state.outbox for url, _, _ in rows}
        if state
        else {}
    )
    done = set(state.done) if state else set()
    for url, seen in zip(urls, known, strict=True):
        host = host_of(url)
        facts = [
            "queued" if url in queued else "not queued",
            "in the URL set" if seen else "unknown to the URL set",
        ]
        if url in in_outbox:
            peer, number, forward = in_outbox[url]
            facts.append(f"in unacknowledged batch {number} to {peer} (forward {forward})")
        if url_fingerprint(url) in done:
            facts.append("a done mark stands")
        if state and host in state.moved:
            facts.append(f"host moved to {state.moved[host]}")
        if state and host in state.pinned:
            facts.append("host pinned here")
        if state and host in state.robots_waiting:
            facts.append("host waits for robots.txt")
        lines.append(f"    {url}: {', '.join(facts)}")
    return lines
