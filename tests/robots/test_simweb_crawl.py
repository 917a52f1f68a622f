"""A crawl of the simulated web judged from the server's log: nothing robots.txt forbids, nothing missed,
nothing fetched twice (every link form normalized to one URL), the trap bounded."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

import pytest

from crawlspace.config import CrawlConfig
from crawlspace.crawl.engine import CrawlEngine
from crawlspace.simweb import SimWeb, SimWebConfig
from crawlspace.simweb.judge import judge_crawl
from crawlspace.simweb.server import serve_in_background
from crawlspace.urls.filter import MAX_HOST_DEPTH


@pytest.mark.timeout(300)
def test_crawl_of_the_simulated_web(tmp_path: Path) -> None:
    web = SimWeb.generate(SimWebConfig(hosts=40, seed=9, robots_crawl_delay=0.05))
    with serve_in_background(web, tmp_path / "server", seeds=6) as server:
        config = CrawlConfig(
            min_delay=0.0,
            delay_factor=0.0,
            allow_private_addresses=True,
            hosts_file=str(server.hosts_file),
            robots_retry_delay=0.05,
            concurrency=32,
            max_seconds=240.0,
            progress_interval=60.0,
        )

        async def run() -> dict[str, object]:
            engine = CrawlEngine(config, tmp_path / "crawl", live_progress=False)
            engine.add_seeds(server.seeds)
            return (await engine.run()).to_dict()

        stats = asyncio.run(run())
        server.stop()
        log = server.read_log()
        verdict = judge_crawl(web, log, server.seeds)
    assert stats["termination"] == "frontier-empty"
    assert stats["robots_unreachable"] + stats["robots_waiting"] > 0  # kept or dropped, never fetched
    assert not verdict.disallowed, verdict.summary()
    assert not verdict.missing, verdict.summary()
    assert not verdict.refetched, verdict.summary()
    assert not verdict.unexpected, verdict.summary()
    assert verdict.trap_fetches <= 13 * MAX_HOST_DEPTH
    failing = {host for host in verdict.robots_fetches if web.robots_status(host) >= 500}
    assert failing
    for host, count in verdict.robots_fetches.items():
        assert count == 1 or host in failing, (host, count)  # once per host unless it fails
    for host in failing:  # retried with doubling delays (from the end of one attempt to the next)
        attempts = sorted(
            (e for e in log if e.path == "/robots.txt" and e.host.split(":")[0] == host), key=lambda e: e.arrived
        )
        for number, (first, second) in enumerate(itertools.pairwise(attempts)):
            assert second.arrived - first.finished >= config.robots_retry_delay * 2**number - 0.01
    assert len(verdict.expected) > 300
