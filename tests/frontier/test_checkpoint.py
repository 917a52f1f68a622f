"""Close and reopen, and crash and reopen: the same URLs come out in the same order at the same
times; leases out at a checkpoint are handed out again; bad checkpoints are clear errors."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from crawlspace.frontier import (
    ByDepth,
    Frontier,
    FrontierEntry,
    FrontierStateError,
    Lease,
    MemoryStore,
    Politeness,
)
from crawlspace.frontier.store import STATE_NAME
from tests.frontier.conftest import FakeClock

POLITENESS = Politeness(
    min_delay=1.0,
    delay_factor=5.0,
    max_delay=8.0,
    per_ip=True,
    error_delay=2.0,
    park_after_errors=2,
    park_seconds=20.0,
    give_up_after_parks=2,
)
HOSTS = [f"h{i}.test" for i in range(25)]
SYNC_POINTS = (40, 90, 150)


class Driver:
    """A deterministic crawl-like workload: each step discovers a few URLs, takes what is due,
    finishes leases after a pseudo-random fetch time with pseudo-random outcomes. Everything a
    step does depends only on the step number, so a run can be resumed at a sync point."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.frontier: Frontier | None = None
        self.out: list[tuple[int, float, str]] = []
        self.leases: list[tuple[float, Lease]] = []

    def open(self, directory: Path, **options: object) -> Frontier:
        self.frontier = Frontier.open(
            directory,
            POLITENESS,
            clock=self.clock,
            prioritizer=ByDepth(3),
            back_queues=6,
            front_window=16,
            back_window=4,
            front_file_bytes=2048,
            back_file_bytes=1024,
            on_activate=self._resolve,
            **options,  # type: ignore[arg-type]
        )
        return self.frontier

    def _resolve(self, host: str) -> None:
        assert self.frontier is not None
        number = int(host[1:].split(".")[0])
        self.frontier.set_host_address(host, None if number == 24 else f"10.0.0.{number % 7}")

    def step(self, index: int) -> None:
        frontier = self.frontier
        assert frontier is not None
        rng = random.Random(index)
        for n in range(rng.randrange(0, 6)):
            host = HOSTS[rng.randrange(len(HOSTS))]
            frontier.add(FrontierEntry(f"http://{host}/s{index}-{n}", rng.randrange(4)))
        while (lease := frontier.acquire()) is not None:
            self.out.append((index, self.clock.now, lease.entry.url))
            self.leases.append((self.clock.now + rng.choice([0.05, 0.2, 0.7]), lease))
        self.clock.advance(0.25)
        self._finish(rng, due=self.clock.now)

    def _finish(self, rng: random.Random, due: float) -> None:
        frontier = self.frontier
        assert frontier is not None
        keep = []
        for finish, lease in self.leases:
            if finish > due:
                keep.append((finish, lease))
                continue
            outcome = rng.random()
            frontier.release(
                lease,
                0.2,
                error=outcome < 0.1,
                retry_after=30.0 if outcome > 0.97 else None,
                crawl_delay=2.0 if lease.host == "h3.test" else None,
                put_back=lease.entry if 0.1 <= outcome < 0.13 else None,
            )
        self.leases = keep

    def sync(self, index: int) -> None:
        """Finish every lease (a quiet point at which both runs are in the same state)."""
        self._finish(random.Random(-index), due=float("inf"))


def run(directory: Path, steps: range, *, reopen_at: tuple[int, ...] = ()) -> list[tuple[int, float, str]]:
    clock = FakeClock()
    driver = Driver(clock)
    driver.open(directory)
    for index in steps:
        driver.step(index)
        if index in SYNC_POINTS:
            driver.sync(index)
            if index in reopen_at:
                assert driver.frontier is not None
                driver.frontier.close()
                frontier = driver.open(directory)
                assert frontier.hosts_awaiting_address() == [], "addresses survive a reopen"
                frontier.check_invariants(deep=True)
    assert driver.frontier is not None
    driver.frontier.close()
    return driver.out


def test_close_and_reopen_gives_the_same_urls_in_the_same_order_at_the_same_times(tmp_path: Path) -> None:
    straight = run(tmp_path / "straight", range(220))
    assert len(straight) > 150
    reopened = run(tmp_path / "reopened", range(220), reopen_at=SYNC_POINTS)
    assert reopened == straight


def test_crash_goes_back_to_the_last_checkpoint(tmp_path: Path) -> None:
    straight = run(tmp_path / "straight", range(220))
    crashed = tmp_path / "crashed"
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child crashes on purpose
        try:
            clock = FakeClock()
            driver = Driver(clock)
            frontier = driver.open(crashed)
            for index in range(91):
                driver.step(index)
                if index in SYNC_POINTS:
                    driver.sync(index)
            frontier.checkpoint()
            for index in range(91, 140):  # work that is lost: new blocks, consumed segments
                driver.step(index)
        finally:
            os._exit(0)  # no close, no checkpoint: a crash
    os.waitpid(pid, 0)
    left_by_the_crash = {path.name for path in crashed.rglob("*.seg")}
    clock = FakeClock(1000.0 + 91 * 0.25)  # where the clock was at the checkpoint, after step 90
    driver = Driver(clock)
    frontier = driver.open(crashed)
    frontier.check_invariants(deep=True)
    kept = {path.name for path in crashed.rglob("*.seg")}
    assert kept < left_by_the_crash, "segments written after the checkpoint are orphans, deleted on reopen"
    assert set(frontier._store.file_ids()) == set(frontier._log.live)
    for index in range(91, 220):
        driver.step(index)
        if index in SYNC_POINTS:
            driver.sync(index)
    frontier.close()
    assert driver.out == [item for item in straight if item[0] > 90]


def test_leases_out_at_a_checkpoint_are_handed_out_again(clock: FakeClock) -> None:
    store = MemoryStore()
    frontier = Frontier(Politeness(min_delay=1.0, delay_factor=0.0), store=store, clock=clock)
    frontier.add_many([FrontierEntry(f"http://a.test/{i}") for i in range(3)] + [FrontierEntry("http://b.test/0")])
    out = [frontier.acquire(), frontier.acquire()]
    assert all(lease is not None for lease in out)
    frontier.checkpoint()  # the process dies with both leases out
    reopened = Frontier(Politeness(min_delay=1.0, delay_factor=0.0), store=store, clock=clock)
    assert len(reopened) == 4 and reopened.in_flight == 0
    assert reopened.acquire() is None, "a request may have been under way: the hosts wait min_delay"
    clock.advance(1.0)
    again = [reopened.acquire(), reopened.acquire()]
    assert {lease.entry.url for lease in again if lease} == {"http://a.test/0", "http://b.test/0"}


def test_times_are_rebased_on_the_new_clock(tmp_path: Path) -> None:
    clock = FakeClock(5000.0)
    frontier = Frontier.open(tmp_path, Politeness(min_delay=3.0, delay_factor=0.0), clock=clock)
    frontier.add_many([FrontierEntry("http://a.test/0"), FrontierEntry("http://a.test/1")])
    lease = frontier.acquire()
    assert lease is not None
    frontier.release(lease, 0.1)
    frontier.close()
    later = FakeClock(12.0)  # another process: monotonic time started elsewhere
    reopened = Frontier.open(tmp_path, Politeness(min_delay=3.0, delay_factor=0.0), clock=later)
    assert reopened.next_contact() == pytest.approx(15.0)
    reopened.close()


def test_corrupt_checkpoint_is_a_clear_error_and_is_left_alone(tmp_path: Path) -> None:
    frontier = Frontier.open(tmp_path)
    frontier.add(FrontierEntry("http://a.test/"))
    frontier.close()
    state = tmp_path / STATE_NAME
    damaged = bytearray(state.read_bytes())
    damaged[len(damaged) // 2] ^= 0x55
    state.write_bytes(bytes(damaged))
    with pytest.raises(FrontierStateError, match="corrupt"):
        Frontier.open(tmp_path)
    assert state.read_bytes() == bytes(damaged)
    Frontier.open(tmp_path, fresh=True).close()  # the operator's way out: start the frontier afresh


def test_reopen_with_another_number_of_levels_is_refused(tmp_path: Path) -> None:
    Frontier.open(tmp_path, prioritizer=ByDepth(3)).close()
    with pytest.raises(FrontierStateError, match="3 front queues but the prioritizer has 2 levels"):
        Frontier.open(tmp_path, prioritizer=ByDepth(2))
    Frontier.open(tmp_path, prioritizer=ByDepth(3)).close()  # the lock was released by the failed open


def test_everything_consumed_leaves_no_segments(tmp_path: Path, clock: FakeClock) -> None:
    frontier = Frontier.open(
        tmp_path, Politeness(min_delay=0.0, delay_factor=0.0), clock=clock, front_window=16, back_window=4
    )
    frontier.add_many(FrontierEntry(f"http://h{i % 7}.test/{i}") for i in range(2000))
    frontier.checkpoint()
    assert frontier._store.file_ids()
    while len(frontier):
        lease = frontier.acquire()
        assert lease is not None
        frontier.release(lease, 0.0)
    frontier.checkpoint()
    assert len(frontier._store.file_ids()) > 1, "the previous checkpoint (the fallback) still needs its files"
    frontier.checkpoint()
    assert len(frontier._store.file_ids()) <= 1, "only the front queue's open segment may remain"
    frontier.close()


def test_a_corrupt_segment_loses_only_its_block_and_is_counted(tmp_path: Path, clock: FakeClock) -> None:
    politeness = Politeness(min_delay=0.0, delay_factor=0.0)
    frontier = Frontier.open(tmp_path, politeness, clock=clock, front_window=100, back_queues=1)
    frontier.add_many(FrontierEntry(f"http://h{i % 3}.test/{i}") for i in range(1000))
    frontier.close()
    segment = sorted((tmp_path / "segments").rglob("*.seg"))[0]
    damaged = bytearray(segment.read_bytes())
    damaged[40] ^= 0xFF  # inside the first block
    segment.write_bytes(bytes(damaged))
    reopened = Frontier.open(tmp_path, politeness, clock=clock, front_window=100, back_queues=1)
    handed = 0
    while len(reopened):
        lease = reopened.acquire()
        if lease is None:
            assert len(reopened) == 0
            break
        handed += 1
        reopened.release(lease, 0.0)
    lost = reopened.stats.urls_lost
    assert lost == 100, "exactly the damaged block's URLs are lost"
    assert handed + lost == 1000
    reopened.close()
    again = Frontier.open(tmp_path, politeness, clock=clock, front_window=100, back_queues=1)
    assert again.stats.urls_lost == 100, "the loss stays on record across a reopen"
    again.close()


def _drain_order(frontier: Frontier) -> list[str]:
    order = []
    while len(frontier):
        lease = frontier.acquire()
        assert lease is not None
        order.append(lease.entry.url)
        frontier.release(lease, 0.0)
    return order


def test_extra_state_commits_with_the_checkpoint(tmp_path: Path, clock: FakeClock) -> None:
    politeness = Politeness(min_delay=0.0, delay_factor=0.0)
    frontier = Frontier.open(tmp_path, politeness, clock=clock)
    frontier.add(FrontierEntry("http://a.test/"))
    frontier.checkpoint(b"generation 1")
    frontier.checkpoint()  # None keeps the last extra
    frontier.close()
    reopened = Frontier.open(tmp_path, politeness, clock=clock)
    assert reopened.extra == b"generation 1" and reopened.fallback is None
    reopened.close()


@pytest.mark.parametrize("damage", ["bit-flip", "truncated", "missing"])
def test_a_damaged_checkpoint_falls_back_to_the_previous_one(tmp_path: Path, clock: FakeClock, damage: str) -> None:
    politeness = Politeness(min_delay=0.0, delay_factor=0.0)
    frontier = Frontier.open(tmp_path, politeness, clock=clock, front_window=8, back_window=4)
    frontier.add_many(FrontierEntry(f"http://h{i % 5}.test/{i}") for i in range(300))
    frontier.checkpoint(b"first")
    for _ in range(40):  # consume some URLs (and blocks) after the first checkpoint
        lease = frontier.acquire()
        assert lease is not None
        frontier.release(lease, 0.0)
    frontier.add_many(FrontierEntry(f"http://h{i % 5}.test/late/{i}") for i in range(100))
    frontier.checkpoint(b"second")
    frontier.close()  # a third checkpoint: "second" becomes the fallback
    state = tmp_path / STATE_NAME
    if damage == "bit-flip":
        data = bytearray(state.read_bytes())
        data[len(data) // 2] ^= 0x10
        state.write_bytes(bytes(data))
    elif damage == "truncated":
        state.write_bytes(state.read_bytes()[: len(state.read_bytes()) // 3])
    else:
        state.unlink()
    reopened = Frontier.open(tmp_path, politeness, clock=clock)
    assert reopened.fallback is not None and (STATE_NAME in reopened.fallback)
    assert reopened.extra == b"second"
    assert len(reopened) == 300 - 40 + 100
    urls = _drain_order(reopened)
    assert len(urls) == len(set(urls)) == 360  # every block the fallback refers to is still on disk
    assert reopened.stats.urls_lost == 0
    reopened.close()


def test_both_checkpoints_damaged_is_a_clear_error(tmp_path: Path, clock: FakeClock) -> None:
    politeness = Politeness(min_delay=0.0, delay_factor=0.0)
    frontier = Frontier.open(tmp_path, politeness, clock=clock)
    frontier.add(FrontierEntry("http://a.test/"))
    frontier.checkpoint()
    frontier.close()
    for name in (STATE_NAME, STATE_NAME + ".prev"):
        (tmp_path / name).write_bytes(b"garbage")
    with pytest.raises(FrontierStateError, match="previous checkpoint is unusable too"):
        Frontier.open(tmp_path, politeness, clock=clock)
