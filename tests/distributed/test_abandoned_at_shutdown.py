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


async def crawl_until_pages_hang(
    served_web: RunningServer, out: Path, *, concurrency: int = 4, hang: int = 2
) -> tuple[list[str], CrawlEngine]:
    """Two partitions crawl; partition 0's pages wait for near-duplicate answers that never come; once
    `hang` of them wait, both partitions are stopped."""
    config = CrawlConfig(
        min_delay=lossy.MIN_DELAY, concurrency=concurrency, hosts_file=str(served_web.hosts_file),
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
        if len(hung) >= hang:
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


def test_a_crawl_whose_every_slot_is_held_by_a_page_that_never_ends_still_stops(
    served: RunningServer, tmp_path: Path
) -> None:
    """Every fetch slot of partition 0 holds a page that waits for ever: the stop must still reach the
    dispatcher (it waited for a free slot and never saw it), so that the grace period cancels them."""

    async def bounded() -> tuple[list[str], CrawlEngine]:
        return await asyncio.wait_for(
            crawl_until_pages_hang(served, tmp_path / "crawl", concurrency=2, hang=2), timeout=60
        )

    hung, engine = asyncio.run(bounded())
    assert len(hung) >= 2
    assert engine.stats.termination == "interrupted"
    assert engine.stats.errors["abandoned-at-shutdown"] == len(hung)
