"""A resize through the in-memory `Peers` (tests/distributed/memory_peers.py): two engines crawl part of
the simulated web and stop; three engines resume it (the third new), hand hosts over while handover
parts and acknowledgements are lost and repeated, then crawl to the end. Every page is fetched once,
politely: the protocol's promises hold whatever the transport does with the parts."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from crawlspace.config import CrawlConfig
from crawlspace.crawl.engine import CrawlEngine
from crawlspace.distributed.assignment import HostBucketAssignment
from crawlspace.distributed.budget import PageBudget
from crawlspace.distributed.resize import Resize
from crawlspace.distributed.termination import ProbeAnswer, crawl_over, settled
from crawlspace.simweb import RunningServer, SimWeb, judge_crawl
from tests.distributed import test_memory_peers as lossy
from tests.distributed.memory_peers import MemoryNetwork

web = lossy.web
served = lossy.served


def config_for(served_web: RunningServer, max_pages: int | None) -> CrawlConfig:
    return CrawlConfig(
        min_delay=lossy.MIN_DELAY,
        concurrency=8,
        hosts_file=str(served_web.hosts_file),
        allow_private_addresses=True,
        store_near_duplicates=True,
        progress_interval=0.1,
        max_pages=max_pages,
        checkpoint_interval=0.3,
        # Hosts placed by name, the same in every run. Per-IP placement follows the server's random
        # address octet: in a few octets the new partition owns the address of no host left to crawl,
        # and fetched nothing (a CI failure of the assertion below). Per-IP resizes are tested end to
        # end in tests/crawl/test_resize_e2e.py.
        per_ip=False,
    )


async def run_to_the_end(engines: list[CrawlEngine], network: MemoryNetwork) -> None:
    runs = [asyncio.create_task(engine.run()) for engine in engines]
    previous: dict[int, ProbeAnswer] | None = None
    for _ in range(1200):
        await asyncio.sleep(0.1)
        if all(run.done() for run in runs):
            break
        answers = network.probe()
        if crawl_over(previous, answers, len(engines)):
            break
        previous = answers if settled(answers) else None
    for engine in engines:
        engine.stop("frontier-empty")
    await asyncio.gather(*runs)


async def first_part(served_web: RunningServer, out: Path) -> None:
    network = MemoryNetwork()
    config = config_for(served_web, 40)
    budget = PageBudget(40)
    engines = [
        CrawlEngine(
            config, out / str(k), live_progress=False, handle_signals=False,
            peers=network.mesh(k, 2, hold_until_settled=False), budget=budget,
            assignment=HostBucketAssignment(2),
        )
        for k in range(2)
    ]  # fmt: skip
    for engine in engines:
        await engine.connect()
        engine.add_seeds(served_web.seeds)
    await run_to_the_end(engines, network)


async def resized(served_web: RunningServer, out: Path, network: MemoryNetwork) -> list[CrawlEngine]:
    resize = Resize(previous=2, partitions=3, epoch=1)
    config = config_for(served_web, None)
    budget = PageBudget(None)
    engines = [
        CrawlEngine(
            config, out / str(k), live_progress=False, handle_signals=False, resume=k < 2,
            peers=network.mesh(k, 3, hold_until_settled=False), budget=budget,
            assignment=HostBucketAssignment(3), resize=resize,
        )
        for k in range(3)
    ]  # fmt: skip
    began = await asyncio.gather(*(engine.repartition() for engine in engines))
    assert began == [True, True, True]
    await run_to_the_end(engines, network)
    return engines


@pytest.mark.slow
@pytest.mark.parametrize(
    "faults",
    [{}, {"drop_parts": 3, "repeat": True}, {"drop_acks": 2}],
    ids=["reliable", "parts-dropped-and-repeated", "acks-dropped"],
)
def test_a_resize_over_a_lossy_transport_fetches_every_page_once(
    web: SimWeb, served: RunningServer, tmp_path: Path, faults: dict[str, int]
) -> None:
    out = tmp_path / "crawl"
    asyncio.run(first_part(served, out))
    network = MemoryNetwork(**faults)  # type: ignore[arg-type]
    engines = asyncio.run(resized(served, out, network))
    served.stop()
    verdict = judge_crawl(web, served.read_log(), served.seeds, min_delay=lossy.MIN_DELAY)
    assert not verdict.missing and not verdict.refetched, verdict.summary()
    assert not verdict.unexpected and not verdict.disallowed and not verdict.host_overlaps, verdict.summary()
    moved = [engine.stats.sections["resize"] for engine in engines]
    assert moved[2]["urls_in"] > 0 and moved[2]["fingerprints_in"] > 0, moved  # the new partition took hosts
    assert engines[2].stats.pages_fetched > 0
    if faults.get("drop_parts"):
        assert network.counts["parts dropped"] == 3
        sent, distinct = (sum(int(m[key]) for m in moved) for key in ("parts_sent", "parts"))
        assert sent >= distinct + 3, moved  # each lost part was sent again
        assert sum(int(m["parts_received"]) for m in moved) > distinct, moved  # repeats were delivered, and dropped
    if faults.get("drop_acks"):
        assert network.counts["acks dropped"] == 2
