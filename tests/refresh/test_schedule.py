"""The refresh schedule on disk against its in-memory twin: the same answers for any sequence of
operations, URLs handed out at least once (a lease brings back what a dead process took), state kept
across a reopen and a kill -9, clear errors for a directory that is not a schedule."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import rocksdict
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crawlspace.refresh.schedule import MemorySchedule, RefreshSchedule, Schedule, ScheduleError
from tests.conftest import REPO

URLS = [f"http://h{i % 7}.test/p{i}" for i in range(40)]

operations = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.sampled_from(URLS), st.floats(0, 1e6), st.integers(0, 3), st.binary(max_size=8)),
        st.tuples(st.just("remove"), st.sampled_from(URLS)),
        st.tuples(st.just("take"), st.floats(0, 1e6), st.integers(0, 10), st.floats(1, 1e5)),
        st.tuples(st.just("commit")),
    ),
    max_size=60,
)


def apply(schedule: Schedule, operation: tuple[object, ...]) -> object:
    match operation:
        case ("put", url, due, priority, data):
            return schedule.put(str(url), float(due), int(priority), bytes(data))  # type: ignore[arg-type,func-returns-value]
        case ("remove", url):
            return schedule.remove(str(url))
        case ("take", now, limit, lease):
            return schedule.take(float(now), int(limit), float(lease))  # type: ignore[arg-type]
        case _:
            return schedule.commit()  # type: ignore[func-returns-value]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(operations)
def test_the_disk_schedule_behaves_like_the_memory_one(tmp_path: Path, sequence: list[tuple[object, ...]]) -> None:
    directory = tmp_path / f"s{abs(hash(tuple(sequence)))}"
    memory = MemorySchedule()
    with RefreshSchedule(directory, sync=False) as disk:
        for operation in sequence:
            assert apply(disk, operation) == apply(memory, operation), operation
            assert len(disk) == len(memory)
            assert disk.next_due() == memory.next_due()
        for url in URLS:
            assert disk.due_time(url) == memory.due_time(url)
            assert disk.entry(url) == memory.entry(url)
    with RefreshSchedule(directory) as reopened:  # everything survives a close and reopen
        assert len(reopened) == len(memory)
        assert reopened.take(2e6, 100) == memory.take(2e6, 100)


def test_due_urls_come_out_earliest_first_and_are_leased(tmp_path: Path) -> None:
    with RefreshSchedule(tmp_path / "schedule") as schedule:
        schedule.put("http://a.test/1", 300.0)
        schedule.put("http://a.test/2", 100.0, priority=2, data=b"history")
        schedule.put("http://a.test/3", 200.0)
        schedule.put("http://a.test/4", 900.0)
        schedule.put("http://a.test/3", 50.0)  # rescheduled: once, at its new time
        assert len(schedule) == 4
        assert schedule.take(250.0, 10, lease=1000.0) == [
            ("http://a.test/3", 50.0, 0, b""), ("http://a.test/2", 100.0, 2, b"history"),
        ]  # fmt: skip
        assert schedule.entry("http://a.test/2") == ("http://a.test/2", 1250.0, 2, b"history")  # data kept
        assert schedule.take(250.0, 10) == []  # leased: not handed out twice
        assert schedule.due_time("http://a.test/3") == 1250.0
        later = [item.url for item in schedule.take(1250.0, 10)]
        assert later[:2] == ["http://a.test/1", "http://a.test/4"] and set(later[2:]) == {
            "http://a.test/2",
            "http://a.test/3",
        }
        assert schedule.remove("http://a.test/4") and not schedule.remove("http://a.test/4")
        assert len(schedule) == 3


def test_a_url_taken_by_a_process_killed_comes_back_after_its_lease(tmp_path: Path) -> None:
    directory = tmp_path / "schedule"
    script = textwrap.dedent(
        f"""
        import os
        from crawlspace.refresh.schedule import RefreshSchedule
        schedule = RefreshSchedule({str(directory)!r})
        for i in range(100):
            schedule.put(f"http://a.test/{{i}}", float(i))
        schedule.commit()
        print(len(schedule.take(49.0, 1000, lease=500.0)), flush=True)  # 50 taken, then the process dies
        schedule.put("http://a.test/uncommitted", 1.0)
        os._exit(137)
        """
    )
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(REPO))
    )
    assert run.returncode == 137 and run.stdout.strip() == "50", run.stderr
    with RefreshSchedule(directory) as schedule:
        assert len(schedule) == 100  # nothing lost; the uncommitted put never happened
        assert schedule.due_time("http://a.test/uncommitted") is None
        assert [item.due for item in schedule.take(499.0, 1000)] == [float(i) for i in range(50, 100)]
        assert len(schedule.take(549.0, 1000)) == 50  # the taken ones, back at the end of their lease


def test_a_directory_that_is_not_a_schedule_is_refused(tmp_path: Path) -> None:
    other = rocksdict.Rdict(str(tmp_path / "other"), options=rocksdict.Options(raw_mode=True))
    other.put(b"key", b"value")
    other.close()
    with pytest.raises(ScheduleError, match="not a refresh schedule"):
        RefreshSchedule(tmp_path / "other")
    with RefreshSchedule(tmp_path / "schedule"), pytest.raises(ScheduleError, match="in use by another process"):
        RefreshSchedule(tmp_path / "schedule")


def test_a_corrupt_entry_is_named(tmp_path: Path) -> None:
    with RefreshSchedule(tmp_path / "schedule") as schedule:
        schedule.put("http://a.test/", 10.0)
    raw = rocksdict.Rdict(str(tmp_path / "schedule"), options=rocksdict.Options(raw_mode=True))
    keys = raw.iter()
    keys.seek(b"d")
    due_key = bytes(keys.key())
    del keys  # an open iterator keeps the database (and its lock) open
    raw.put(due_key, b"\xc1not msgpack")
    raw.close()
    with RefreshSchedule(tmp_path / "schedule") as schedule, pytest.raises(ScheduleError, match=due_key.hex()):
        schedule.take(20.0, 10)


def test_in_link_counts_are_kept_with_the_schedule_and_committed_with_it(tmp_path: Path) -> None:
    with RefreshSchedule(tmp_path / "s") as schedule:
        schedule.put("http://a.test/", 10.0)
        schedule.add_inlinks(["http://b.test/", "http://c.test/"])
        schedule.add_inlinks(["http://b.test/"])
        assert (schedule.inlinks("http://b.test/"), schedule.inlinks("http://c.test/")) == (2, 1)
        assert schedule.inlinks("http://a.test/") == 0
        schedule.commit()
        schedule.put("http://d.test/", 10.0)  # never committed: lost together with its links' counts
        schedule.add_inlinks(["http://b.test/"])
        schedule._db.close()  # as a kill -9 would leave it: the uncommitted batch is gone
        schedule._closed = True
    with RefreshSchedule(tmp_path / "s") as reopened:
        assert reopened.entry("http://d.test/") is None and reopened.inlinks("http://b.test/") == 2
        assert [item.url for item in reopened.take(100.0, 10)] == ["http://a.test/"]  # counts are not due URLs
    memory = MemorySchedule()
    memory.add_inlinks(["http://b.test/", "http://b.test/"])
    assert memory.inlinks("http://b.test/") == 2 and len(memory) == 0
