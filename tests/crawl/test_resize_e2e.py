"""A crawl resumed with another number of processes, judged from the simulated web's server log:
2 processes stopped part-way, resumed as 3, then as 2 (one partition drains and ends), and the same
with kill -9 at random moments: in each resize once early in its phase, once just after it (the
crawl's first fraction of a second under the new assignment) and once later. Every page is fetched,
none twice (beyond pages in flight at a kill), politely, as a correct one-process crawl would."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

from crawlspace.simweb import RunningServer, SimWeb, judge_crawl
from tests.crawl import test_recovery as recovery
from tests.crawl.test_recovery import CONCURRENCY, MIN_DELAY, finish, start, warc_captures, write_config
from tests.crawl.whereabouts import whereabouts

web = recovery.web  # the web of the recovery tests, and its server
served = recovery.served


def first_run(served_web: RunningServer, out: Path, config: Path, *options: str) -> None:
    """Two processes, stopped part-way by the page limit."""
    arguments = [
        str(served_web.seeds_file), "--out", str(out), "--config", str(config), "--hosts-file",
        str(served_web.hosts_file), "--allow-private-addresses", "--min-delay", str(MIN_DELAY),
        "--concurrency", str(CONCURRENCY), "--processes", "2", "--max-pages", "80", *options,
    ]  # fmt: skip
    finish(start(*arguments))


def resume(out: Path, processes: int, max_pages: int) -> list[str]:
    return ["--resume", str(out), "--processes", str(processes), "--max-pages", str(max_pages)]


def worker_stats(out: Path, index: int) -> dict[str, object]:
    return json.loads((out / "workers" / str(index) / "stats.json").read_text())  # type: ignore[no-any-return]


@pytest.mark.slow
@pytest.mark.parametrize("per_ip", [True, False], ids=["per-ip", "per-host"])
def test_two_then_three_then_two_processes_fetch_every_page_once(
    web: SimWeb, served: RunningServer, tmp_path: Path, per_ip: bool
) -> None:
    out = tmp_path / "crawl"
    config = tmp_path / "crawl.toml"
    config.write_text(f"checkpoint_interval = 0.5\nper_ip = {str(per_ip).lower()}\n")
    first_run(served, out, config)
    stderr = finish(start(*resume(out, 3, 170)))
    assert "resuming with processes = 3 (was 2)" in stderr
    grown = json.loads((out / "partitions.json").read_text())
    assert (grown["partitions"], grown["epoch"], grown["resizing_from"]) == (3, 1, None)
    assert worker_stats(out, 2)["pages_fetched"], "the new partition crawled hosts of its own"
    resize = worker_stats(out, 2)["resize"]
    assert isinstance(resize, dict) and resize["urls_in"] > 0 and resize["fingerprints_in"] > 0
    finish(start(*resume(out, 2, 100_000)))
    shrunk = json.loads((out / "partitions.json").read_text())
    assert (shrunk["partitions"], shrunk["epoch"], shrunk["resizing_from"]) == (2, 2, None)
    assert worker_stats(out, 2)["termination"] == "drained"

    served.stop()
    verdict = judge_crawl(web, served.read_log(), served.seeds, min_delay=MIN_DELAY)
    assert verdict.ok, verdict.summary()  # nothing missing, nothing twice, polite per host and per address
    assert set(verdict.fetched) == verdict.expected  # what a correct one-process crawl of the web fetches
    captures = warc_captures(out)
    assert set(captures) == verdict.expected and set(captures.values()) == {1}
    print(verdict.summary())


def wait_for_phase(out: Path, process: subprocess.Popen[str], *, over: bool, timeout: float = 60.0) -> None:
    """Until partitions.json says the resize's handover phase is on (over=False) or has ended."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        with contextlib.suppress(OSError, ValueError, KeyError):
            if (json.loads((out / "partitions.json").read_text())["resizing_from"] is None) == over:
                return
        time.sleep(0.005)


def kill_group(process: subprocess.Popen[str], timeout: float = 30.0) -> None:
    """SIGKILL the crawl and its workers, and wait until every one of them is gone: a worker still
    dying holds the crawl directory's lock, and the resume that follows would be refused."""
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    deadline = time.monotonic() + timeout
    while living_members(process.pid):
        assert time.monotonic() < deadline, f"processes of group {process.pid} outlived SIGKILL for {timeout} s"
        time.sleep(0.01)


def living_members(group: int) -> list[int]:
    """Processes of a process group that have not exited (a zombie has closed its files: not counted)."""
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if fields[0] != "Z" and int(fields[2]) == group:
                    members.append(int(entry.name))
    return members


@pytest.mark.slow
def test_kill_nine_during_the_handover_and_resume_loses_nothing(
    web: SimWeb, served: RunningServer, tmp_path: Path
) -> None:
    out = tmp_path / "crawl"
    config = write_config(tmp_path, checkpoint_interval=0.5)
    first_run(served, out, config)
    rng = random.Random(11)
    kills = 0
    in_phase = 0
    for processes, max_pages in ((3, 170), (2, 100_000)):
        for moment in ("in the phase", "just after it", "later"):
            process = start(*resume(out, processes, max_pages))
            if moment == "in the phase":
                wait_for_phase(out, process, over=False)
                time.sleep(rng.uniform(0.0, 0.1))  # the phase lasts a fraction of a second
            elif moment == "just after it":
                wait_for_phase(out, process, over=True)
                time.sleep(rng.uniform(0.0, 0.6))
            else:
                time.sleep(rng.uniform(0.8, 3.0))
            if process.poll() is not None:
                assert process.returncode == 0, process.communicate()[1]
                break
            kill_group(process)
            kills += 1
            in_phase += json.loads((out / "partitions.json").read_text())["resizing_from"] is not None
        finish(start(*resume(out, processes, max_pages)))
        assert json.loads((out / "partitions.json").read_text())["partitions"] == processes
    assert kills >= 4, "the resumed runs ended before they could be killed: make the web bigger"
    assert in_phase >= 1, "no kill fell in a handover phase"

    served.stop()
    verdict = judge_crawl(web, served.read_log(), served.seeds, min_delay=MIN_DELAY)
    assert not verdict.missing, verdict.summary() + "\n" + whereabouts(out, verdict.missing)
    assert not verdict.unexpected and not verdict.disallowed and not verdict.host_overlaps, verdict.summary()
    extra = sum(count - 1 for count in verdict.refetched.values())
    assert extra <= kills * CONCURRENCY * 3, verdict.summary()  # at most the pages in flight at the kills
    assert set(warc_captures(out)) == verdict.expected
    print(f"kills {kills} ({in_phase} in a handover phase), extra fetches {extra}: {verdict.summary()}")
