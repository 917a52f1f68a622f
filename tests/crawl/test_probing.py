"""The coordinator's termination probes cost every process a message each round, so a busy crawl is
probed seldom (BUSY_PROBE_INTERVAL) and the end is still found at once: a partition that turns idle tells
the coordinator, which probes then and at PROBE_INTERVAL while every partition answers idle. Before, the
rounds came every 0.2 s whatever the crawl did: in a crawl that politeness holds to a page a second, they
were most of the CPU it spent per page (bench/README.md, issue 17)."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path
from typing import Any

from crawlspace.crawl.workers import BUSY_PROBE_INTERVAL
from crawlspace.distributed.channel import Channel
from crawlspace.distributed.socketmesh import SocketMesh
from crawlspace.simweb import RunningServer, SimWeb, judge_crawl
from tests.conftest import run_cli


def test_a_partition_tells_the_coordinator_once_each_time_it_turns_idle() -> None:
    class Inbox:
        def stop(self, reason: str) -> None:
            raise AssertionError(f"stopped: {reason}")

    async def run() -> list[Any]:
        control = socket.socketpair()
        mesh = SocketMesh(0, 1, {}, control[0])
        coordinator = await Channel.over(control[1])
        coordinator.send(["go"])
        assert await mesh.ready()
        await mesh.start(Inbox())  # type: ignore[arg-type]
        for idle in (True, True, False, False, True, True):
            mesh.idle = idle
        coordinator.send(["probe", 7])
        heard = [await coordinator.receive() for _ in range(4)]
        await mesh.close()
        return heard

    heard = asyncio.run(run())
    assert heard == [["ready", 0], ["idle", 0], ["idle", 0], ["probe", 7, True, 0, 0]]


def test_a_busy_crawl_is_probed_about_once_a_second_and_ends_as_before(
    small_web: SimWeb, served_small_web: RunningServer, tmp_path: Path
) -> None:
    out = tmp_path / "crawl"
    result = run_cli(
        "crawl", str(served_small_web.seeds_file), "--out", str(out), "--processes", "2",
        "--hosts-file", str(served_small_web.hosts_file), "--allow-private-addresses",
        "--min-delay", "1.0", "--max-pages", "60", "--no-progress",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    served_small_web.stop()
    verdict = judge_crawl(small_web, served_small_web.read_log(), served_small_web.seeds, min_delay=1.0)
    assert not verdict.refetched and not verdict.host_overlaps and not verdict.delay_violations, verdict.summary()
    stats = json.loads((out / "stats.json").read_text())
    assert stats["termination"] == "max-pages"
    elapsed = stats["finished_at"] - stats["started_at"]
    rounds, notices = stats["coordinator"]["probe_rounds"], stats["coordinator"]["idle_notices"]
    # about a round per BUSY_PROBE_INTERVAL while the partitions fetch (a few more where a progress report
    # falls due between two), and at most two for each notice of a partition that turned idle (at once,
    # and one more at PROBE_INTERVAL); before, a round every 0.2 s: 5 a second. A loaded machine makes
    # fewer rounds, never more.
    assert 1 <= rounds <= 1.5 * elapsed / BUSY_PROBE_INTERVAL + 2 * notices + 3, (rounds, notices, elapsed)
