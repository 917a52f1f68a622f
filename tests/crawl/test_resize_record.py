"""When the coordinator records a resize as over (partitions.json `resizing_from` back to None).

A crawl of 3 processes resumed as 2: once all three have handed over, the crawl begins (`resized`),
and the draining partition 2 sends the old assignment's unacknowledged URL batches to their new
owners. Until those acknowledge them, partition 2's directory alone holds those URLs, and a resume
after the resize starts only partitions 0 and 1: a kill -9 then would lose them for good. So the
record waits for partition 2's `drained` (its batches acknowledged); a kill before it repeats the
phase, and partition 2 sends them again. Growing, nobody drains: recorded at the barrier."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

from crawlspace.config import CrawlConfig
from crawlspace.crawl import partitioning as layout
from crawlspace.crawl.partitioning import Partitioning
from crawlspace.crawl.workers import ParallelCrawl
from crawlspace.distributed.channel import Channel


def recorded(out: Path) -> int | None:
    return json.loads((out / layout.LAYOUT_FILE).read_text())["resizing_from"]  # type: ignore[no-any-return]


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0.005)


def resize(out: Path, previous: int, partitions: int, *steps: tuple[int, list[object]]) -> list[int | None]:
    """Play the workers' messages to the coordinator of a resize; `resizing_from` after each step."""
    resizing = Partitioning(partitions, epoch=1, resizing_from=previous)
    layout.write(out, resizing)  # as ParallelCrawl.run does before it starts a worker
    coordinator = ParallelCrawl(CrawlConfig(), out, [], processes=partitions, resume=True, partitioning=resizing)

    async def play() -> list[int | None]:
        pairs = [socket.socketpair() for _ in range(resizing.workers)]
        coordinator._channels = [await Channel.over(ours) for ours, _ in pairs]
        workers = [await Channel.over(theirs) for _, theirs in pairs]
        listeners = [
            asyncio.create_task(coordinator._listen(k, channel, {})) for k, channel in enumerate(coordinator._channels)
        ]
        seen = []
        for index, message in steps:
            workers[index].send(message)
            await settle()
            seen.append(recorded(out))
        for listener in listeners:
            listener.cancel()
        told = [await asyncio.wait_for(worker.receive(), timeout=10) for worker in workers]
        assert told == [["resized"]] * len(workers)  # the crawl began at the barrier, in every case
        return seen

    return asyncio.run(play())


def test_a_shrinking_resize_is_over_once_the_draining_partition_has_drained(tmp_path: Path) -> None:
    steps = [(0, ["handed", 0]), (1, ["handed", 1]), (2, ["handed", 2]), (2, ["ended", 2, "drained"])]
    assert resize(tmp_path, 3, 2, *steps) == [3, 3, 3, None]


def test_a_growing_resize_is_over_at_the_barrier(tmp_path: Path) -> None:
    steps = [(0, ["handed", 0]), (2, ["handed", 2]), (1, ["handed", 1])]
    assert resize(tmp_path, 2, 3, *steps) == [2, 2, None]
