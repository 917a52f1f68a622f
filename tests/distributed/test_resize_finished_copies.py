"""A resize after a kill -9: the "finished since the checkpoint" marks of the URL copies a handover
takes out of the frontier go with them, so that they never drop a live copy handed back later.

The window (test_kill_nine_during_the_handover lost 13 URLs of site0006.test and site0044.test in
CI this way): partition P owns host H by name and H's address belongs to partition Q, so P hands
H's leased URLs to Q (per-IP politeness), which queues them and pins H. P is killed after those
hand-overs and before its next checkpoint: resumed, its frontier holds the URLs again (the
checkpoint's copies) and its journal calls them finished (`ResumeState.done`: such a copy is
dropped, once, when the frontier hands it out). Then the crawl is resized and the old assignment's
moves end. P takes its copies of H's URLs out of its frontier (kept by P, they wait unconfirmed,
the finished ones left out since Q holds them; leaving P, they go to H's new owner, the finished
ones left behind), and Q hands its own queued copies to H's owner. When that copy reaches P (at
once, or in a later resize), a mark left behind by the copy taken out drops it unfetched at its
first lease, and nobody else holds the URL: lost.

One event loop over the in-memory `Peers`; nothing is fetched (P hands H's URLs over before any
request: the address decides), and a "kill" is a shutdown whose checkpoint fails (the stores then
close without one, as after a kill -9: the last checkpoint and the journal stand)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from crawlspace.config import CrawlConfig
from crawlspace.crawl.checkpoint import CheckpointError
from crawlspace.crawl.engine import CrawlEngine
from crawlspace.distributed.assignment import HostBucketAssignment
from crawlspace.distributed.budget import PageBudget
from crawlspace.distributed.resize import Resize
from crawlspace.urls import url_fingerprint
from tests.distributed.memory_peers import MemoryNetwork

P, Q = 0, 1  # P owns H by name before the first resize; Q owns H's address
TWO, THREE = HostBucketAssignment(2), HostBucketAssignment(3)
GROWN = Resize(previous=2, partitions=3, epoch=1)
SHRUNK = Resize(previous=3, partitions=2, epoch=2)


def first(fits: Callable[[str], bool], candidates: list[str]) -> str:
    return next(candidate for candidate in candidates if fits(candidate))


def host_and_address(owner_of_three: int) -> tuple[str, str]:
    """A host P owns under 2 partitions and `owner_of_three` under 3, and a loopback address Q owns
    under 2 (never contacted)."""
    host = first(
        lambda name: TWO.owner(name) == P and THREE.owner(name) == owner_of_three,
        [f"moved{n}.test" for n in range(1000)],
    )
    return host, first(lambda ip: TWO.owner(ip) == Q, [f"127.9.0.{n}" for n in range(1, 255)])


def config_for(hosts_file: Path) -> CrawlConfig:
    return CrawlConfig(
        hosts_file=str(hosts_file),
        allow_private_addresses=True,
        per_ip=True,
        checkpoint_interval=3600.0,  # no checkpoint but those the test makes or prevents
        progress_interval=3600.0,
        min_delay=0.0,
    )


def engines_of(
    config: CrawlConfig, out: Path, network: MemoryNetwork, workers: int, partitions: int, resize: Resize | None
) -> list[CrawlEngine]:
    return [
        CrawlEngine(
            config, out / str(k), live_progress=False, handle_signals=False, resume=(out / str(k)).exists(),
            peers=network.mesh(k, partitions, hold_until_settled=False), budget=PageBudget(None),
            assignment=HostBucketAssignment(partitions), resize=resize,
        )
        for k in range(workers)
    ]  # fmt: skip


def killed_checkpoint() -> None:
    raise CheckpointError("killed (test): the last checkpoint and the journal stand")


def kill(engine: CrawlEngine) -> None:
    """Close the engine as a kill -9 leaves it: no checkpoint since the last one."""
    engine.checkpoint = killed_checkpoint  # type: ignore[method-assign]
    engine.close_unstarted()
    assert engine.stats.errors["checkpoint-failed"] == 1


async def hand_over_then_die(config: CrawlConfig, out: Path, urls: list[str]) -> None:
    """Two partitions: P queues H's URLs and checkpoints, hands each to Q (the owner of H's address),
    which journals and acknowledges them, then checkpoints; P dies before its next checkpoint."""
    network = MemoryNetwork()
    owner, address_owner = engines_of(config, out, network, 2, 2, None)
    for engine in (owner, address_owner):
        await engine.connect()
    assert owner.add_seeds(urls) == len(urls)
    owner.checkpoint()  # the copies a resume of P finds queued
    run = asyncio.create_task(owner.run())
    for _ in range(500):
        await asyncio.sleep(0.01)
        if owner.stats.handed_over == len(urls) and not owner.router.outbox.unacked:  # type: ignore[union-attr]
            break
    assert owner.stats.handed_over == len(urls), "P hands H's URLs to the owner of H's address"
    owner.checkpoint = killed_checkpoint  # type: ignore[method-assign]
    owner.stop("killed")
    await run
    assert owner.stats.errors["checkpoint-failed"] == 1
    address_owner.close_unstarted()  # Q checkpoints: H pinned, its URLs queued


def assert_killed_after_the_hand_overs(engine: CrawlEngine, urls: list[str]) -> None:
    """P resumed: the checkpoint's copies of H's URLs queued, its journal calling them finished."""
    assert {url_fingerprint(url) for url in urls} <= engine.resume_state.done
    assert {entry.url for entry in engine.frontier.queued_entries()} >= set(urls)


async def phase(
    config: CrawlConfig, out: Path, network: MemoryNetwork, resize: Resize, urls: list[str]
) -> list[CrawlEngine]:
    """A resize's phase over `network`, for at most 2 s (a phase whose parts never arrive goes on)."""
    engines = engines_of(config, out, network, resize.workers, resize.partitions, resize)
    if resize.epoch == 1 and not engines[P].resume_state.resize_started:
        assert_killed_after_the_hand_overs(engines[P], urls)
    tasks = [asyncio.create_task(engine.repartition()) for engine in engines]
    _, pending = await asyncio.wait(tasks, timeout=2.0)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    assert all(not task.cancelled() and task.result() for task in tasks) == (not network.drop_parts)
    return engines


def resized(
    config: CrawlConfig, out: Path, resize: Resize, urls: list[str], *, killed_in_the_phase: bool = False
) -> list[CrawlEngine]:
    if killed_in_the_phase:  # no part arrives: every partition began (P took H's copies out), none is done
        for engine in asyncio.run(phase(config, out, MemoryNetwork(drop_parts=1_000_000), resize, urls)):
            kill(engine)
    return asyncio.run(phase(config, out, MemoryNetwork(), resize, urls))


def assert_queued_and_unmarked(engine: CrawlEngine, urls: list[str]) -> None:
    queued = [entry.url for entry in engine.frontier.queued_entries()]
    assert sorted(url for url in queued if url in urls) == sorted(urls), "each URL of H queued once at its owner"
    stale = {url_fingerprint(url) for url in urls} & engine.resume_state.done
    assert not stale, f"{len(stale)} of H's URLs would be dropped unfetched at their first lease, as finished"


def crawl_for(tmp_path: Path, owner_of_three: int) -> tuple[CrawlConfig, Path, list[str]]:
    host, address = host_and_address(owner_of_three)
    hosts_file = tmp_path / "hosts.txt"
    hosts_file.write_text(f"{address} {host}\n")
    config = config_for(hosts_file)
    out = tmp_path / "crawl"
    urls = [f"http://{host}/p{n}.html" for n in range(5)]
    asyncio.run(hand_over_then_die(config, out, urls))
    return config, out, urls


@pytest.mark.parametrize("killed_in_the_phase", [False, True], ids=["one-phase", "phase-repeated"])
def test_a_host_kept_gets_back_the_urls_it_handed_to_the_owner_of_its_address(
    tmp_path: Path, killed_in_the_phase: bool
) -> None:
    config, out, urls = crawl_for(tmp_path, owner_of_three=P)
    engines = resized(config, out, GROWN, urls, killed_in_the_phase=killed_in_the_phase)
    assert_queued_and_unmarked(engines[P], urls)
    for engine in engines:
        engine.close_unstarted()


def test_a_host_that_leaves_and_comes_back_gets_its_urls_back(tmp_path: Path) -> None:
    config, out, urls = crawl_for(tmp_path, owner_of_three=2)
    engines = resized(config, out, GROWN, urls)  # H to the new partition 2, which gets Q's copies
    assert_queued_and_unmarked(engines[2], urls)
    assert not {entry.url for entry in engines[P].frontier.queued_entries()} & set(urls)
    for engine in engines:
        engine.close_unstarted()
    engines = resized(config, out, SHRUNK, urls)  # partition 2 drains: H back to P
    assert_queued_and_unmarked(engines[P], urls)
    for engine in engines:
        engine.close_unstarted()
