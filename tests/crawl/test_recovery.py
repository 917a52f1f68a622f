"""Crash recovery, judged from the simulated web's server log: kill -9 at random moments and resume,
SIGTERM and resume, damaged checkpoints and journals, a full disk."""

from __future__ import annotations

import errno
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from warcio.archiveiterator import ArchiveIterator

from crawlspace.simweb import CrawlVerdict, RunningServer, SimWeb, SimWebConfig, judge_crawl, serve_in_background
from crawlspace.store.reader import CrawlReader
from tests.conftest import REPO
from tests.crawl.whereabouts import whereabouts
from tests.killing import kill_at_first_line

MIN_DELAY = 0.05
CONCURRENCY = 16
WEB = SimWebConfig(
    hosts=50, seed=23, mean_pages_per_host=10.0, max_pages_per_host=60, robots_crawl_delay=0.1, include_trap=False
)


@pytest.fixture(scope="module")
def web() -> SimWeb:
    return SimWeb.generate(WEB)


@pytest.fixture
def served(web: SimWeb, tmp_path: Path) -> Iterator[RunningServer]:
    with serve_in_background(web, tmp_path / "simweb", seeds=6) as running:
        yield running


def start(*args: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.Popen(
        [sys.executable, "-m", "crawlspace", "crawl", *args, "--no-progress"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,  # its own process group: a crash kills the crawler and all its workers
    )


def crash(process: subprocess.Popen[str]) -> None:
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def first_run(served: RunningServer, out: Path, config: Path, processes: int = 2) -> subprocess.Popen[str]:
    return start(
        str(served.seeds_file), "--out", str(out), "--config", str(config), "--hosts-file", str(served.hosts_file),
        "--allow-private-addresses", "--min-delay", str(MIN_DELAY), "--concurrency", str(CONCURRENCY),
        "--processes", str(processes),
    )  # fmt: skip


def wait_for_start(out: Path, process: subprocess.Popen[str], timeout: float = 60.0) -> None:
    """Until the crawl has written config.json: the tests' kills and signals must fall on a crawl, and a
    loaded machine can take longer to import and start than their delays (one before config.json leaves
    nothing to resume, and `--resume` rightly says so)."""
    deadline = time.monotonic() + timeout
    while not (out / "config.json").exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (out / "config.json").exists(), "the crawl did not start"


def state_directory(out: Path) -> Path:
    """Where a crawl keeps its frontier and journal: the first partition's when there are several."""
    return out / "workers" / "0" if (out / "workers").is_dir() else out


def write_config(tmp_path: Path, **values: float) -> Path:
    path = tmp_path / "crawl.toml"
    path.write_text("".join(f"{key} = {value}\n" for key, value in values.items()))
    return path


def finish(process: subprocess.Popen[str], timeout: float = 120) -> str:
    _, stderr = process.communicate(timeout=timeout)
    assert process.returncode == 0, stderr
    return stderr


def warc_captures(out: Path) -> Counter[str]:
    captures: Counter[str] = Counter()
    for path in sorted((out / "warc").glob("*.warc.gz")):
        with path.open("rb") as stream:
            for record in ArchiveIterator(stream):  # raises on a damaged file
                if record.rec_type in ("response", "revisit"):
                    url = record.rec_headers.get_header("WARC-Target-URI")
                    if not url.endswith("/robots.txt"):
                        captures[url] += 1
    return captures


@pytest.mark.parametrize("processes", [1, 2])
def test_kill_nine_at_random_moments_loses_nothing(
    web: SimWeb, served: RunningServer, tmp_path: Path, processes: int
) -> None:
    out = tmp_path / "crawl"
    config = write_config(tmp_path, checkpoint_interval=0.7)
    rng = random.Random(9)
    process = first_run(served, out, config, processes)
    wait_for_start(out, process)
    kills = 0
    for _ in range(12):
        time.sleep(rng.uniform(0.8, 1.6))
        if process.poll() is not None:
            break
        crash(process)
        kills += 1
        if kills >= 6:
            break
        process = start("--resume", str(out))
    if process.poll() is not None and kills < 6:
        assert process.returncode == 0, process.stderr.read() if process.stderr else ""
    process = start("--resume", str(out))
    stderr = finish(process)
    assert "resuming" in stderr
    assert kills >= 5, f"the crawl ended after {kills} kills: make the web bigger"

    served.stop()
    log = served.read_log()
    verdict = judge_crawl(web, log, served.seeds, min_delay=MIN_DELAY)
    assert not verdict.missing, verdict.summary() + "\n" + whereabouts(out, verdict.missing)  # every page fetched
    assert not verdict.unexpected and not verdict.disallowed, verdict.summary()
    assert not verdict.host_overlaps, verdict.summary()
    extra = sum(count - 1 for count in verdict.refetched.values())
    in_flight = kills * CONCURRENCY * processes  # the most that can be in flight at the kills
    assert extra <= in_flight, f"{extra} extra fetches for {kills} kills: {verdict.summary()}"

    captures = warc_captures(out)  # every WARC file readable
    assert set(captures) == verdict.expected
    with CrawlReader(out) as reader:  # and every fetched page has its row in the crawl table, however the kills fell
        missing_rows = [url for url in verdict.expected if not reader.fetch_history(url)]
    assert not missing_rows, missing_rows[:5]
    stats = json.loads((out / "stats.json").read_text())
    requests = sum(1 for entry in log if entry.path != "/robots.txt")
    assert stats["termination"] == "frontier-empty"
    assert 2 <= stats["runs"] <= kills + 1  # a run killed before its first checkpoint is not counted
    # the statistics count every fetch the journal recorded: all but those in flight at the kills
    assert requests - in_flight <= stats["pages_fetched"] <= requests
    assert abs(stats["pages_fetched"] - sum(captures.values())) <= in_flight
    print(f"kills {kills}, pages {len(verdict.expected)}, extra fetches {extra}, runs {stats['runs']}")


def test_sigterm_then_resume_fetches_nothing_twice(web: SimWeb, served: RunningServer, tmp_path: Path) -> None:
    out = tmp_path / "crawl"
    config = write_config(tmp_path, checkpoint_interval=30.0)  # only the graceful stop checkpoints
    process = first_run(served, out, config)
    wait_for_start(out, process)
    time.sleep(2.0)
    assert process.poll() is None, "the crawl ended before it could be interrupted"
    process.send_signal(signal.SIGTERM)
    finish(process, timeout=30)
    stats = json.loads((out / "stats.json").read_text())
    assert stats["termination"] == "interrupted"
    finish(start("--resume", str(out)))
    served.stop()
    verdict = judge_crawl(web, served.read_log(), served.seeds, min_delay=MIN_DELAY)
    assert not verdict.missing and not verdict.refetched and not verdict.disallowed, verdict.summary()
    assert verdict.ok, verdict.summary()
    assert json.loads((out / "stats.json").read_text())["pages_fetched"] == len(verdict.expected)


def _stopped_crawl(served: RunningServer, tmp_path: Path) -> Path:
    """A crawl stopped by its page limit after a few checkpoints."""
    out = tmp_path / "crawl"
    config = write_config(tmp_path, checkpoint_interval=0.3, max_pages=150)
    finish(first_run(served, out, config))
    return out


@pytest.mark.parametrize("damage", ["truncated", "bit-flipped"])
def test_damaged_checkpoint_falls_back_to_the_previous_one(
    web: SimWeb, served: RunningServer, tmp_path: Path, damage: str
) -> None:
    out = _stopped_crawl(served, tmp_path)
    state = state_directory(out) / "frontier" / "frontier.state"
    data = state.read_bytes()
    if damage == "truncated":
        state.write_bytes(data[: len(data) // 2])
    else:
        flipped = bytearray(data)
        flipped[len(flipped) // 3] ^= 0x04
        state.write_bytes(bytes(flipped))
    process = start("--resume", str(out), "--max-pages", "100000")
    stderr = finish(process)
    assert str(state) in stderr and "resumed from the previous checkpoint" in stderr
    served.stop()
    verdict = judge_crawl(web, served.read_log(), served.seeds, min_delay=MIN_DELAY)
    assert not verdict.missing and not verdict.disallowed, verdict.summary()
    assert "max_pages = 100000 (was 150)" in stderr


def test_unusable_checkpoint_is_an_error_not_a_fresh_start(served: RunningServer, tmp_path: Path) -> None:
    out = _stopped_crawl(served, tmp_path)
    for name in ("frontier.state", "frontier.state.prev"):
        (state_directory(out) / "frontier" / name).write_bytes(b"\x00" * 64)
    before = sorted(path.name for path in (out / "warc").iterdir())
    process = start("--resume", str(out))
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 2
    errors = [line for line in stderr.splitlines() if line.startswith("crawlspace: error:")]
    assert len(errors) == 1 and "frontier.state" in errors[0] and "unusable" in errors[0]  # one line naming it
    assert sorted(path.name for path in (out / "warc").iterdir()) == before  # nothing was started over


def test_damaged_journal_is_named(served: RunningServer, tmp_path: Path) -> None:
    out = tmp_path / "crawl"
    config = write_config(tmp_path, checkpoint_interval=1000.0)
    process = first_run(served, out, config)
    wait_for_start(out, process)
    time.sleep(1.5)
    crash(process)
    journals = sorted((state_directory(out) / "journal").glob("journal-*.log"))
    data = bytearray(journals[-1].read_bytes())
    assert data.count(b"\nE\t") >= 2, "the journal should hold several batches"
    data[10] ^= 0x01
    journals[-1].write_bytes(bytes(data))
    process = start("--resume", str(out))
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 2, stderr
    assert journals[-1].name in stderr and "corrupt" in stderr


def test_resume_of_a_directory_without_a_crawl(tmp_path: Path) -> None:
    process = start("--resume", str(tmp_path / "nothing-here"))
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 2 and "no crawl to resume" in stderr


def crawl_in_process(served: RunningServer, out: Path, *, resume: bool, **settings: float) -> dict[str, Any]:
    """One run of the crawl in this process (so that a test can patch the writes under it); its stats."""
    import asyncio

    from crawlspace.config import CrawlConfig
    from crawlspace.crawl.engine import CrawlEngine

    config = CrawlConfig(
        min_delay=MIN_DELAY, concurrency=CONCURRENCY, allow_private_addresses=True,
        hosts_file=str(served.hosts_file), **{"checkpoint_interval": 0.5, "progress_interval": 0.25, **settings},
    )  # fmt: skip

    async def crawl() -> dict[str, Any]:
        engine = CrawlEngine(config, out, live_progress=False, resume=resume)
        if not resume:
            engine.add_seeds(served.seeds)
        return (await engine.run()).to_dict()

    return asyncio.run(crawl())


def resume_and_judge(web: SimWeb, served: RunningServer, out: Path) -> CrawlVerdict:
    """Resume the stopped crawl to its end; the server's verdict on both runs, nothing missing or disallowed."""
    resumed = crawl_in_process(served, out, resume=True)
    assert resumed["termination"] == "frontier-empty"
    served.stop()
    verdict = judge_crawl(web, served.read_log(), served.seeds, min_delay=MIN_DELAY)
    assert not verdict.missing and not verdict.disallowed, verdict.summary()
    return verdict


def test_disk_full_stops_cleanly_and_resumes(
    web: SimWeb, served: RunningServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every file write fails with ENOSPC from some moment on (after one short write, as a filling disk
    does): the crawl stops with termination "disk-full", and a resume once space is back loses nothing."""
    out = tmp_path / "crawl"
    real_write = os.write
    # the disk holds a third of the ~150 KB the crawl writes through os.write: counted in bytes, not in
    # calls, since a loaded machine batches the same bytes into fewer writes (under a CPU hog the crawl
    # made fewer than the 400 calls a count of calls once waited for, and the disk never filled)
    state = {"room": 50_000, "full": False}

    def filling_write(fd: int, data: bytes | memoryview) -> int:
        if state["full"]:
            raise OSError(errno.ENOSPC, "No space left on device")
        if len(data) >= state["room"]:  # the disk fills up: one short write, then nothing fits
            state["full"] = True
            data = bytes(data[: max(1, state["room"])])
        written = real_write(fd, data)
        state["room"] -= written
        return written

    monkeypatch.setattr(os, "write", filling_write)
    stopped = crawl_in_process(served, out, resume=False)
    monkeypatch.setattr(os, "write", real_write)
    assert state["full"], "the disk never filled up: lower its room"
    assert stopped["termination"] == "disk-full"
    assert stopped["errors"]["disk-full"] >= 1
    verdict = resume_and_judge(web, served, out)
    assert sum(count - 1 for count in verdict.refetched.values()) <= CONCURRENCY, verdict.summary()
    warc_captures(out)  # every WARC file readable after the recovery


def test_journal_io_error_stops_the_crawl_and_resume_loses_nothing(
    web: SimWeb, served: RunningServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A journal write fails with EIO (a bad sector): nothing crawled after it could be made durable, so
    the crawl stops ("journal-failed") without a checkpoint ahead of the journal; a resume loses nothing."""
    from crawlspace.crawl.journal import Journal

    out = tmp_path / "crawl"
    real_record = Journal.record
    calls = {"n": 0}

    def failing_record(self: Journal, lines: list[str]) -> None:
        calls["n"] += 1
        if calls["n"] == 60:
            raise OSError(errno.EIO, "Input/output error")
        real_record(self, lines)

    monkeypatch.setattr(Journal, "record", failing_record)
    stopped = crawl_in_process(served, out, resume=False)
    monkeypatch.setattr(Journal, "record", real_record)
    assert calls["n"] >= 60, "the journal was written too few times: lower the failing call"
    assert stopped["termination"] == "journal-failed"
    assert stopped["errors"]["journal-write-failed"] == 1
    assert stopped["errors"]["checkpoint-failed"] == 1  # the last one was refused
    resume_and_judge(web, served, out)


def test_checkpoint_io_error_stops_the_crawl_and_resume_loses_nothing(
    web: SimWeb, served: RunningServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A periodic checkpoint fails with EIO: the crawl stops ("checkpoint-failed") instead of crawling on
    with nothing made durable, and a resume from the previous checkpoint and the journal loses nothing."""
    from crawlspace.seen import ContentSeen

    out = tmp_path / "crawl"
    real_checkpoint = ContentSeen.checkpoint
    calls = {"n": 0}

    def failing_checkpoint(self: ContentSeen) -> None:
        calls["n"] += 1
        if calls["n"] == 3:  # the third checkpoint: after the one at the start and a periodic one
            raise OSError(errno.EIO, "Input/output error")
        real_checkpoint(self)

    monkeypatch.setattr(ContentSeen, "checkpoint", failing_checkpoint)
    stopped = crawl_in_process(served, out, resume=False, checkpoint_interval=0.3, progress_interval=0.1)
    monkeypatch.setattr(ContentSeen, "checkpoint", real_checkpoint)
    assert calls["n"] >= 3, "the crawl ended before its third checkpoint"
    assert stopped["termination"] == "checkpoint-failed"
    assert stopped["errors"]["checkpoint-failed"] >= 1
    resume_and_judge(web, served, out)


def test_a_process_that_stops_by_itself_stops_the_others(tmp_path: Path) -> None:
    """A crawl process whose journal failed tells the coordinator how it ended; the coordinator stops
    every other process for the same reason (else they would wait for it forever, idle)."""
    import asyncio
    import socket

    from crawlspace.config import CrawlConfig
    from crawlspace.crawl.workers import ParallelCrawl
    from crawlspace.distributed.channel import Channel

    coordinator = ParallelCrawl(CrawlConfig(), tmp_path, [], processes=2, resume=False)

    async def exchange() -> list[object]:
        pairs = [socket.socketpair() for _ in range(2)]
        coordinator._channels = [await Channel.over(ours) for ours, _ in pairs]
        workers = [await Channel.over(theirs) for _, theirs in pairs]
        listener = asyncio.create_task(coordinator._listen(0, coordinator._channels[0], {}))
        workers[0].send(["ended", 0, "journal-failed"])
        told = await asyncio.wait_for(workers[1].receive(), timeout=10)
        listener.cancel()
        return told

    assert asyncio.run(exchange()) == ["stop", "journal-failed"]
    assert coordinator.termination == "journal-failed"


def test_parallel_crawl_after_an_in_process_crawl(web: SimWeb, served: RunningServer, tmp_path: Path) -> None:
    """A process that has crawled holds RocksDB's background threads; crawl processes started from it
    must not inherit them (a plain fork hung on closing the crawl table): two processes crawl to the end."""
    from crawlspace.api import Crawler
    from crawlspace.config import CrawlConfig

    first = crawl_in_process(served, tmp_path / "first", resume=False)
    assert first["termination"] == "frontier-empty"
    config = CrawlConfig(
        min_delay=MIN_DELAY, concurrency=CONCURRENCY, allow_private_addresses=True,
        hosts_file=str(served.hosts_file), processes=2,
    )  # fmt: skip
    started = time.monotonic()
    stats = Crawler(config, out=tmp_path / "second", seeds=served.seeds, progress=False).run().to_dict()
    assert stats["termination"] == "frontier-empty"
    assert time.monotonic() - started < 60
    assert stats["pages_fetched"] == first["pages_fetched"]


@pytest.mark.parametrize("processes", [1, 2])
def test_killed_before_the_first_checkpoint_resumes_from_the_saved_seeds(
    web: SimWeb, served: RunningServer, tmp_path: Path, processes: int
) -> None:
    """A crawl killed after it saved its configuration and seeds but before any process wrote its first
    checkpoint (a slow start under load): the resume starts it again from the seeds and loses nothing."""
    from crawlspace.api import _record_start
    from crawlspace.config import CrawlConfig

    out = tmp_path / "crawl"
    out.mkdir()
    config = CrawlConfig(
        min_delay=MIN_DELAY, concurrency=CONCURRENCY, allow_private_addresses=True,
        hosts_file=str(served.hosts_file), processes=processes,
    )  # fmt: skip
    _record_start(out, config, served.seeds, resume=False)
    if processes > 1:  # one process got as far as creating its directory, no further
        (out / "workers" / "1" / "frontier").mkdir(parents=True)
    stderr = finish(start("--resume", str(out)))
    assert "resuming" in stderr
    served.stop()
    verdict = judge_crawl(web, served.read_log(), served.seeds, min_delay=MIN_DELAY)
    assert not verdict.missing and not verdict.unexpected and not verdict.disallowed, verdict.summary()
    assert not verdict.refetched, verdict.summary()


@pytest.mark.parametrize("processes", [1, 2])
def test_robots_txt_fetched_before_a_kill_is_not_fetched_again(
    web: SimWeb, served: RunningServer, tmp_path: Path, processes: int
) -> None:
    """robots.txt outcomes are durable at the journal's cadence, not only at checkpoints (issue 14.5):
    after kill -9s between checkpoints, a resumed crawl fetches again no robots.txt whose response
    had been received well before the kill (they are valid for a day), judged from the server's log."""
    out = tmp_path / "crawl"
    config = write_config(tmp_path, checkpoint_interval=3600)  # no checkpoint but the first one
    process = first_run(served, out, config, processes)
    kills: list[float] = []
    for _ in range(3):
        wait_for_start(out, process)
        time.sleep(1.5)
        if process.poll() is not None:
            break
        kills.append(time.time())
        crash(process)
        process = start("--resume", str(out))
    finish(process)
    assert len(kills) >= 2, "the crawl ended before the kills: make the web bigger"

    served.stop()
    log = served.read_log()
    fetches: dict[str, list[Any]] = {}
    for entry in log:
        if entry.path == "/robots.txt":
            fetches.setdefault(entry.host, []).append(entry)
    again = {host: len(entries) - 1 for host, entries in fetches.items() if len(entries) > 1}
    kept = [entries[0] for entries in fetches.values() if entries[0].status < 500 and entries[0].status != 429]
    needless = [
        first.host
        for first in kept
        if len(fetches[first.host]) > 1
        and any(first.finished + 0.5 < kill < fetches[first.host][1].arrived for kill in kills)
    ]
    print(f"robots.txt: {sum(map(len, fetches.values()))} requests, {len(fetches)} hosts, again {again}")
    assert len(kept) >= 20, fetches  # most hosts answered their robots.txt
    assert not needless, f"robots.txt fetched again after a kill although received before it: {needless}"
    verdict = judge_crawl(web, log, served.seeds, min_delay=MIN_DELAY)
    assert not verdict.missing and not verdict.disallowed, verdict.summary()


_KILLED_BEFORE_THE_SEEDS = """
import asyncio, sys
from pathlib import Path
from crawlspace.api import _record_start
from crawlspace.config import CrawlConfig
from crawlspace.crawl.engine import CrawlEngine

out, hosts_file, seeds = Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
config = CrawlConfig(
    min_delay=0.05, concurrency=16, allow_private_addresses=True, hosts_file=hosts_file, processes=1
)
out.mkdir(parents=True)
_record_start(out, config, seeds, resume=False)

async def opened() -> None:
    CrawlEngine(config, out, live_progress=False)  # its first checkpoint: nothing queued yet
    print("checkpointed", flush=True)
    sys.stdin.read()

asyncio.run(opened())
"""


def test_a_kill_between_the_first_checkpoint_and_the_seeds_loses_no_seed(
    web: SimWeb, served: RunningServer, tmp_path: Path
) -> None:
    """A crawl process checkpoints when it opens its state, before its seeds are queued (a partition
    waits for the others in between, for as long as a loaded machine makes it): killed there, the
    resumed crawl had an empty frontier and ended at once, having fetched nothing. Its seeds now enter
    again at every resume, and the URL set drops those already seen."""
    out = tmp_path / "crawl"
    line = kill_at_first_line(_KILLED_BEFORE_THE_SEEDS, str(out), str(served.hosts_file), *served.seeds)
    assert line == "checkpointed"
    stderr = finish(start("--resume", str(out)))
    assert "resuming" in stderr
    served.stop()
    verdict = judge_crawl(web, served.read_log(), served.seeds, min_delay=MIN_DELAY)
    assert not verdict.missing and not verdict.refetched and not verdict.disallowed, verdict.summary()
