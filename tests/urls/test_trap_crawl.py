"""A default crawl of the simulated web's trap host: a bounded number of calendar URLs, and the rest of the host.

The trap is an endless calendar (previous month, next month, next year: every URL new, short and
plausible). No syntactic guard can see it; the per-host depth guard stops it at its default.
Judged from the server's request log against the web's ground truth.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from crawlspace.config import CrawlConfig
from crawlspace.crawl.engine import CrawlEngine
from crawlspace.simweb import SimWeb, SimWebConfig
from crawlspace.simweb.server import serve_in_background
from crawlspace.urls.filter import MAX_HOST_DEPTH


def crawl_trap_host(directory: Path, **options: Any) -> tuple[SimWeb, str, dict[str, Any], list[str]]:
    """Crawl the trap host from its root; the web, the root, the stats and the URLs the server was asked for."""
    web = SimWeb.generate(SimWebConfig(hosts=12, seed=2, mean_pages_per_host=40, robots_crawl_delay=0.01))
    trap_host = web.trap_host
    assert trap_host is not None
    root = web.origin(trap_host) + "/"
    with serve_in_background(web, directory / "server", seeds=1) as server:
        config = CrawlConfig(  # trap guards, filters and robots at their defaults; only speed and scope set
            min_delay=0.0,
            delay_factor=0.0,
            allow_private_addresses=True,
            hosts_file=str(server.hosts_file),
            scope="host",
            max_seconds=120.0,
            progress_interval=60.0,
            **options,
        )

        async def run() -> dict[str, Any]:
            engine = CrawlEngine(config, directory / "crawl", live_progress=False)
            engine.add_seeds([root])
            return (await engine.run()).to_dict()

        stats = asyncio.run(run())
        server.stop()
        log = server.read_log()
    return web, root, stats, [f"http://{entry.host}{entry.path}" for entry in log if entry.path != "/robots.txt"]


@pytest.mark.timeout(180)
def test_default_guards_bound_the_trap_and_the_host_is_completed(tmp_path: Path) -> None:
    web, root, stats, fetched = crawl_trap_host(tmp_path)
    trap_host = web.trap_host
    assert trap_host is not None
    trap = [url for url in fetched if web.is_trap(url)]
    # the calendar's month index moves -1, +1 or +12 per link: within d links of its entrance
    # at most 13 d + 1 months are reachable, and d is capped by the host-depth guard
    assert 0 < len(trap) <= 13 * MAX_HOST_DEPTH
    assert len(set(fetched)) == len(fetched)  # nothing fetched twice
    expected = {url for url in web.expected_fetches([root]) if url.startswith(web.origin(trap_host) + "/")}
    assert len(expected) > 100
    assert expected <= set(fetched)  # the rest of the host is complete
    assert set(fetched) - set(trap) <= expected
    assert stats["termination"] == "frontier-empty"
    assert stats["filtered"]["host-depth"] > 0


@pytest.mark.timeout(180)
def test_without_the_host_depth_guard_the_trap_is_endless(tmp_path: Path) -> None:
    """The same crawl with the guard off is stopped only by its page limit, deep in the calendar."""
    web, _, stats, fetched = crawl_trap_host(tmp_path, max_host_depth=None, max_pages=1200)
    trap = [url for url in fetched if web.is_trap(url)]
    assert len(trap) > 13 * MAX_HOST_DEPTH + 500
    assert stats["termination"] == "max-pages"
