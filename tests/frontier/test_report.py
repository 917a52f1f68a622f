"""The frontier's host report: each host's delay and what set it (Crawl-delay, min delay, the 10x rule,
a backoff), queued URLs and next contact, bounded to the hosts with most URLs queued. Fake clock, no I/O."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from crawlspace.frontier import Frontier, FrontierEntry, Politeness
from crawlspace.frontier.back import DelayCause
from tests.frontier.conftest import FakeClock

POLITENESS = Politeness(min_delay=1.0, delay_factor=10.0, max_delay=60.0, error_delay=5.0)


def _frontier(clock: FakeClock, **hosts: int) -> Frontier:
    frontier = Frontier(POLITENESS, clock=clock)
    for host, n in hosts.items():
        frontier.add_many(FrontierEntry(f"http://{host}.test/{i}", 0) for i in range(n))
    return frontier


def _fetch_once(frontier: Frontier, clock: FakeClock, duration: float, **release: object) -> str:
    lease = frontier.acquire()
    assert lease is not None
    clock.advance(duration)
    frontier.release(lease, duration, **release)  # type: ignore[arg-type]
    return lease.host


def _row(frontier: Frontier, host: str) -> dict[str, object]:
    rows = {row.host: row.to_dict() for row in frontier.host_report(limit=10).rows}
    return rows[host]


def test_a_quick_fetch_waits_the_min_delay(clock: FakeClock) -> None:
    frontier = _frontier(clock, a=3)
    _fetch_once(frontier, clock, 0.02)  # 10 x 0.02 = 0.2 s < min_delay 1 s
    row = _row(frontier, "a.test")
    assert (row["delay_cause"], row["delay"], row["next_contact_in"]) == ("min-delay", 1.0, 1.0)
    assert (row["queued"], row["status"], row["last_fetch_seconds"]) == (2, "active", 0.02)


def test_a_slow_fetch_waits_ten_times_its_duration(clock: FakeClock) -> None:
    frontier = _frontier(clock, a=3)
    _fetch_once(frontier, clock, 0.4)
    clock.advance(1.0)
    row = _row(frontier, "a.test")
    assert (row["delay_cause"], row["delay"], row["next_contact_in"]) == ("10x-rule", 4.0, 3.0)
    assert row["last_contact_ago"] == 1.0


def test_a_crawl_delay_longer_than_the_gap_decides(clock: FakeClock) -> None:
    frontier = _frontier(clock, a=3)
    _fetch_once(frontier, clock, 0.1, crawl_delay=7.5)
    row = _row(frontier, "a.test")
    assert (row["delay_cause"], row["delay"], row["crawl_delay"]) == ("crawl-delay", 7.5, 7.5)
    clock.advance(7.5)
    _fetch_once(frontier, clock, 1.0)
    row = _row(frontier, "a.test")  # 10 x 1.0 s beats the kept Crawl-delay of 7.5 s
    assert (row["delay_cause"], row["delay"]) == ("10x-rule", 10.0)


def test_errors_and_retry_after_back_off_until_a_success(clock: FakeClock) -> None:
    frontier = _frontier(clock, a=5)
    _fetch_once(frontier, clock, 0.1, error=True)  # a 503: error_delay 5 s beats the 1 s gap
    row = _row(frontier, "a.test")
    assert (row["delay_cause"], row["delay"], row["failures"]) == ("backoff", 5.0, 1)
    clock.advance(5.0)
    _fetch_once(frontier, clock, 0.1, retry_after=30.0, error=True)  # a 429 with Retry-After: 30
    row = _row(frontier, "a.test")
    assert (row["delay_cause"], row["delay"], row["next_contact_in"], row["failures"]) == ("backoff", 30.0, 30.0, 2)
    clock.advance(30.0)
    _fetch_once(frontier, clock, 0.05)  # recovered: the min delay again
    row = _row(frontier, "a.test")
    assert (row["delay_cause"], row["failures"]) == ("min-delay", 0)


def test_a_backoff_shorter_than_the_crawl_delay_is_not_the_cause(clock: FakeClock) -> None:
    frontier = _frontier(clock, a=3)
    _fetch_once(frontier, clock, 0.1, crawl_delay=20.0, error=True)  # backoff 5 s < Crawl-delay 20 s
    assert _row(frontier, "a.test")["delay_cause"] == "crawl-delay"


def test_the_report_lists_the_hosts_with_most_queued_and_counts_the_rest(clock: FakeClock) -> None:
    frontier = _frontier(clock, a=2, b=9, c=5, d=1)
    frontier.acquire()  # activates every host (4 back queues of the default 192)
    report = frontier.host_report(limit=2)
    assert [row.host for row in report.rows] == ["b.test", "c.test"]
    assert report.hosts == 4 and report.limit == 2
    assert report.back_queued == 16  # 17 added, one handed out
    assert sum(report.by_cause.values()) == 4 and report.front_queued == 0
    assert report.to_dict()["listed"] == 2
    assert frontier.host_report(limit=0).rows == []


@given(
    duration=st.floats(0, 100, allow_nan=False),
    crawl_delay=st.one_of(st.none(), st.floats(0, 1000, allow_nan=False)),
    connections=st.integers(1, 8),
)
def test_the_reported_gap_is_the_scheduling_gap(duration: float, crawl_delay: float | None, connections: int) -> None:
    gap, cause = POLITENESS.gap_and_cause(duration, crawl_delay, connections)
    assert gap == POLITENESS.next_gap(duration, crawl_delay, connections)
    assert cause in (DelayCause.CRAWL_DELAY, DelayCause.MIN_DELAY, DelayCause.FETCH_TIME)
