"""A page whose processing is abandoned at shutdown (its task cancelled after `shutdown_grace`, here
while it waited for the partitions' near-duplicate answers) keeps its lease: the checkpoint hands the
URL out again, so the page is fetched again and its links followed. Its lease used to be released
as done, and the links of the page were lost for good (a URL missing from a resized cluster crawl)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from crawlspace.config import CrawlConfig
from crawlspace.crawl.engine import CrawlEngine
from crawlspace.distributed.budget import PageBudget
from crawlspace.frontier import Frontier
from crawlspace.simweb import RunningServer
from tests.distributed import test_memory_peers as lossy
from tests.distributed.memory_peers import MemoryNetwork

web = lossy.web
served = lossy.served


async def crawl_until_pages_hang(served_web: RunningServer, out: Path) -> tuple[list[str], CrawlEngine]:
    config = CrawlConfig(
        min_delay=lossy.MIN_DELAY, concurrency=4, hosts_file=str(served_web.hosts_file),
        allow_private_addresses=True, store_near_duplicates=True, shutdown_grace=0.2,
    )  # fmt: skip
    network = MemoryNetwork()
    budget = PageBudget(None)
    engines = [
        CrawlEngine(
            config, out / str(k), live_progress=False, handle_signals=False,
            peers=network.mesh(k, 2, hold_until_settled=False), budget=budget,
        )
        for k in range(2)
    ]  # fmt: skip
    hung: list[str] = []
    never = asyncio.Event()

    async def unanswered(url: str, fetched_at: float, signature: object) -> None:
        hung.append(url)
        await never.wait()  # the partitions owning its band keys never answer

    for engine in engines:
        await engine.connect()
    assert engines[0].partition is not None
    engines[0].partition.near_match = unanswered  # type: ignore[assignment,method-assign]
    for engine in engines:
        engine.add_seeds(served_web.seeds)
    runs = [asyncio.create_task(engine.run()) for engine in engines]
    for _ in range(600):
        if len(hung) >= 2:
            break
        await asyncio.sleep(0.05)
    for engine in engines:
        engine.stop("interrupted")
    await asyncio.gather(*runs)
    return hung, engines[0]


def test_a_page_abandoned_at_shutdown_is_handed_out_again(served: RunningServer, tmp_path: Path) -> None:
    hung, engine = asyncio.run(crawl_until_pages_hang(served, tmp_path / "crawl"))
    assert len(hung) >= 2
    assert engine.stats.errors["abandoned-at-shutdown"] == len(hung)
    frontier = Frontier.open(tmp_path / "crawl" / "0" / "frontier")
    try:
        queued = {entry.url for entry in frontier.queued_entries()}
    finally:
        frontier.close()
    assert set(hung) <= queued, "an abandoned page must be fetched again, its links followed"
