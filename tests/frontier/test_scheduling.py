"""Scheduling by example, on a fake clock: the Mercator structure, the politeness rules, per-IP
groups, Retry-After, errors, parking and giving up, and the engine-facing contract."""

from __future__ import annotations

import itertools

import pytest

from crawlspace.frontier import (
    ByDepth,
    Frontier,
    FrontierEntry,
    FrontierError,
    Politeness,
)
from tests.frontier.conftest import FakeClock, drain

FAST = Politeness(min_delay=1.0, delay_factor=10.0, max_delay=60.0)


def urls(host: str, n: int, depth: int = 0) -> list[FrontierEntry]:
    return [FrontierEntry(f"http://{host}/{i}", depth) for i in range(n)]


def by_host(trace: list[tuple[float, str]]) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {}
    for when, url in trace:
        times.setdefault(url.split("/")[2], []).append(when)
    return times


# -- the delay rule ------------------------------------------------------------------------


def test_gap_formula() -> None:
    p = Politeness(min_delay=2.0, delay_factor=10.0, max_delay=30.0)
    assert p.next_gap(0.05, None) == 2.0  # min_delay
    assert p.next_gap(0.5, None) == 5.0  # k x duration
    assert p.next_gap(9.0, None) == 30.0  # capped
    assert p.next_gap(0.5, 12.0) == 12.0  # Crawl-delay lengthens
    assert p.next_gap(0.5, 120.0) == 120.0  # and is never capped
    assert p.next_gap(0.5, None, connections=2) == 2.5
    with pytest.raises(ValueError, match="max_delay"):
        Politeness(min_delay=5.0, max_delay=1.0)
    with pytest.raises(ValueError, match="min_delay"):
        Politeness(min_delay=float("nan"))


def test_one_host_is_spaced_by_k_times_the_fetch_duration(clock: FakeClock) -> None:
    frontier = Frontier(FAST, clock=clock)
    frontier.add_many(urls("a.test", 4))
    trace = drain(frontier, clock, duration=0.3)
    starts = [when for when, _ in trace]
    gaps = [later - earlier for earlier, later in itertools.pairwise(starts)]
    assert gaps == pytest.approx([0.3 + 3.0] * 3)  # fetch time, then k x 0.3 = 3 s of silence


def test_crawl_delay_is_honoured_beyond_max_delay(clock: FakeClock) -> None:
    frontier = Frontier(Politeness(min_delay=1.0, delay_factor=0.0, max_delay=5.0), clock=clock)
    frontier.add_many(urls("slow.test", 3))
    trace = drain(frontier, clock, duration=0.1, on_lease=lambda lease: {"crawl_delay": 90.0})
    starts = [when for when, _ in trace]
    assert starts[1] - starts[0] == pytest.approx(90.1)
    assert starts[2] - starts[1] == pytest.approx(90.1)


def test_hosts_are_independent_without_per_ip(clock: FakeClock) -> None:
    frontier = Frontier(FAST, clock=clock)
    frontier.add_many(urls("a.test", 2) + urls("b.test", 2))
    first, second = frontier.acquire(), frontier.acquire()
    assert first is not None and second is not None
    assert {first.host, second.host} == {"a.test", "b.test"}
    assert frontier.acquire() is None
    assert frontier.next_contact() is None  # both hosts are leased out: nothing to wait for


# -- Mercator's structure -----------------------------------------------------------------


def test_hosts_beyond_b_wait_in_the_front_queues(clock: FakeClock) -> None:
    frontier = Frontier(FAST, clock=clock, back_queues=2)
    frontier.add_many(urls("a.test", 1) + urls("b.test", 1) + urls("c.test", 1))
    assert frontier.active_hosts == 2
    assert frontier.front_sizes() == [1]
    assert frontier.host_info("c.test") is None
    leases = [frontier.acquire(), frontier.acquire()]
    assert frontier.acquire() is None, "c.test must wait for a back queue"
    for lease in leases:
        assert lease is not None
        frontier.release(lease, 0.1)
    assert frontier.host_info("c.test") is not None
    lease = frontier.acquire()
    assert lease is not None and lease.host == "c.test"


def test_a_drawn_url_joins_its_hosts_back_queue(clock: FakeClock) -> None:
    frontier = Frontier(FAST, clock=clock, back_queues=2)
    frontier.add_many([*urls("a.test", 3), FrontierEntry("http://b.test/0")])
    a = frontier.host_info("a.test")
    assert a is not None and a.queue is not None and len(a.queue) == 3
    assert frontier.front_sizes() == [0]
    frontier.check_invariants()


def test_refill_is_bounded_per_call_but_finishes(clock: FakeClock) -> None:
    frontier = Frontier(FAST, clock=clock, back_queues=2, refill_budget=100)
    frontier.add_many([*urls("big.test", 1000), FrontierEntry("http://small.test/0")])
    assert frontier.active_hosts == 1, "one call moved at most 100 URLs"
    hosts = set()
    for _ in range(20):
        lease = frontier.acquire()
        if lease is not None:
            hosts.add(lease.host)
            frontier.release(lease, 0.0)
    assert hosts == {"big.test", "small.test"}
    assert clock.now == 1000.0, "small.test was served without waiting for big.test's queue"


def test_biased_front_queue_choice(clock: FakeClock) -> None:
    frontier = Frontier(FAST, clock=clock, back_queues=1, prioritizer=ByDepth(2), seed=3)
    for i in range(3000):
        frontier.add(FrontierEntry(f"http://deep{i}.test/", 1))
        frontier.add(FrontierEntry(f"http://top{i}.test/", 0))
    first = [lease.entry.depth for lease in _take(frontier, 1500)]
    share = first.count(0) / len(first)
    assert 0.62 < share < 0.71, f"level 0 got {share:.2%} of the draws, expected 2/3"
    assert 1 in first[:50], "the low-priority level must not starve"


def _take(frontier: Frontier, n: int) -> list:  # type: ignore[type-arg]
    out = []
    for _ in range(n):
        lease = frontier.acquire()
        assert lease is not None
        out.append(lease)
        frontier.release(lease, 0.0)
    return out


def test_out_of_range_priorities_are_clamped_and_counted(clock: FakeClock) -> None:
    class Wild:
        levels = 3

        def priority(self, entry: FrontierEntry) -> int:
            return {"a": -4, "b": 99}.get(entry.url[7], 1)

    frontier = Frontier(FAST, clock=clock, prioritizer=Wild(), back_queues=1)
    frontier.add_many(
        [FrontierEntry("http://a.test/"), FrontierEntry("http://b.test/"), FrontierEntry("http://c.test/")]
    )
    assert frontier.stats.priorities_clamped == 2
    assert len(frontier) == 3


# -- connection limits and per-IP politeness -----------------------------------------------


def test_two_connections_per_host_when_configured(clock: FakeClock) -> None:
    frontier = Frontier(Politeness(min_delay=1.0, delay_factor=10.0, max_conn_per_host=2), clock=clock)
    frontier.add_many(urls("a.test", 5))
    first, second = frontier.acquire(), frontier.acquire()
    assert first is not None and second is not None
    assert frontier.acquire() is None
    clock.advance(0.2)
    frontier.release(first, 0.2)
    assert frontier.acquire() is None, "the gap after a fetch still applies"
    clock.advance(1.0)  # gap = 2 s / 2 connections
    third = frontier.acquire()
    assert third is not None


def test_crawl_delay_spaces_starts_even_with_two_connections(clock: FakeClock) -> None:
    frontier = Frontier(Politeness(min_delay=0.0, delay_factor=0.0, max_conn_per_host=2), clock=clock)
    frontier.add_many(urls("a.test", 5))
    lease = frontier.acquire()
    assert lease is not None
    frontier.release(lease, 0.0, crawl_delay=4.0)
    clock.advance(4.0)
    first = frontier.acquire()
    assert first is not None
    assert frontier.acquire() is None, "Crawl-delay: 4 s between request starts"
    clock.advance(4.0)
    assert frontier.acquire() is not None


def _resolver(frontier_ref: list[Frontier], table: dict[str, str | None], seen: list[str]):  # type: ignore[no-untyped-def]
    def on_activate(host: str) -> None:
        seen.append(host)
        if host in table:
            frontier_ref[0].set_host_address(host, table[host])

    return on_activate


def test_hosts_on_one_address_share_its_politeness(clock: FakeClock) -> None:
    ref: list[Frontier] = []
    seen: list[str] = []
    table: dict[str, str | None] = {"a.test": "10.0.0.1", "b.test": "10.0.0.1", "c.test": "10.0.0.2"}
    politeness = Politeness(min_delay=2.0, delay_factor=0.0, per_ip=True)
    frontier = Frontier(politeness, clock=clock, on_activate=_resolver(ref, table, seen))
    ref.append(frontier)
    frontier.add_many(urls("a.test", 3) + urls("b.test", 3) + urls("c.test", 3))
    assert sorted(seen) == ["a.test", "b.test", "c.test"]
    trace = drain(frontier, clock, duration=0.5)
    shared = sorted(when for when, url in trace if "/a.test/" in url or "/b.test/" in url)
    assert all(later - earlier >= 2.5 - 1e-9 for earlier, later in itertools.pairwise(shared))
    alone = [when for when, url in trace if "/c.test/" in url]
    assert alone[0] < shared[1], "another address is not held up"
    frontier.check_invariants()


def test_host_waits_for_its_address(clock: FakeClock) -> None:
    seen: list[str] = []
    frontier = Frontier(Politeness(per_ip=True), clock=clock, on_activate=seen.append)
    frontier.add_many(urls("a.test", 2) + urls("b.test", 1))
    assert seen == ["a.test", "b.test"]
    assert sorted(frontier.hosts_awaiting_address()) == ["a.test", "b.test"]
    assert frontier.acquire() is None
    assert frontier.next_contact() is None
    frontier.set_host_address("b.test", None)  # unresolvable: scheduled alone, its fetch will fail
    lease = frontier.acquire()
    assert lease is not None and lease.host == "b.test"
    assert frontier.hosts_awaiting_address() == ["a.test"]
    frontier.set_host_address("a.test", "192.0.2.7")
    lease = frontier.acquire()
    assert lease is not None and lease.host == "a.test"
    frontier.check_invariants()


def test_address_change_moves_the_host(clock: FakeClock) -> None:
    ref: list[Frontier] = []
    table: dict[str, str | None] = {"a.test": "10.0.0.1", "b.test": "10.0.0.1"}
    frontier = Frontier(
        Politeness(min_delay=5.0, delay_factor=0.0, per_ip=True), clock=clock, on_activate=_resolver(ref, table, [])
    )
    ref.append(frontier)
    frontier.add_many(urls("a.test", 1) + urls("b.test", 1))
    lease = frontier.acquire()
    assert lease is not None
    assert frontier.acquire() is None, "same address: one at a time"
    other = "b.test" if lease.host == "a.test" else "a.test"
    frontier.set_host_address(other, "10.0.0.9")
    moved = frontier.acquire()
    assert moved is not None and moved.host == other
    frontier.check_invariants()


# -- Retry-After, errors, parking, giving up ------------------------------------------------


def test_retry_after_delays_the_host(clock: FakeClock) -> None:
    frontier = Frontier(FAST, clock=clock)
    frontier.add_many(urls("a.test", 2))
    lease = frontier.acquire()
    assert lease is not None
    frontier.release(lease, 0.1, retry_after=30.0, error=True)
    assert frontier.next_contact() == pytest.approx(1030.0)
    clock.advance(29.9)
    assert frontier.acquire() is None
    clock.advance(0.1)
    assert frontier.acquire() is not None


def test_a_far_contact_time_gives_the_back_queue_to_another_host(clock: FakeClock) -> None:
    frontier = Frontier(FAST, clock=clock, back_queues=1)
    frontier.add_many(urls("a.test", 3) + urls("b.test", 2))
    lease = frontier.acquire()
    assert lease is not None and lease.host == "a.test"
    frontier.release(lease, 0.1, retry_after=600.0)
    assert frontier.parked_hosts == 1 and frontier.stats.hosts_snoozed == 1
    assert frontier.active_hosts == 1  # b.test took the back queue
    served = drain(frontier, clock, duration=0.1)
    times = by_host(served)
    assert times["b.test"][0] == 1000.0  # at once, in the back queue a.test left
    assert times["a.test"][0] >= 1600.0
    assert len(times["a.test"]) == 2


def test_errors_back_off_then_park_then_give_up(clock: FakeClock) -> None:
    politeness = Politeness(
        min_delay=1.0, delay_factor=0.0, error_delay=2.0, park_after_errors=3, park_seconds=100.0, give_up_after_parks=1
    )
    frontier = Frontier(politeness, clock=clock, back_queues=1)
    frontier.add_many(urls("bad.test", 10) + urls("ok.test", 1))
    starts = []
    while True:
        lease = frontier.acquire()
        if lease is None:
            wake = frontier.next_contact()
            if wake is None:
                break
            clock.now = wake
            continue
        starts.append((clock.now, lease.host))
        if lease.host == "ok.test":
            frontier.release(lease, 0.0)
            continue
        frontier.release(lease, 0.0, error=True)
    bad = [when - 1000.0 for when, host in starts if host == "bad.test"]
    # backoffs 2, 4, then parked 100 s; again 2, 4, then given up (second park > give_up_after_parks)
    assert bad == pytest.approx([0, 2, 6, 106, 108, 112])
    assert [host for _, host in starts].count("ok.test") == 1
    assert frontier.stats.hosts_parked == 1
    assert frontier.stats.hosts_given_up == 1
    assert frontier.stats.urls_given_up == 4
    assert frontier.given_up_reasons == {"errors": 1}
    assert len(frontier) == 0
    frontier.add(FrontierEntry("http://bad.test/late"))
    assert len(frontier) == 0 and frontier.stats.urls_given_up == 5, "later URLs of a given-up host are dropped"


def test_success_resets_the_error_count(clock: FakeClock) -> None:
    politeness = Politeness(min_delay=1.0, delay_factor=0.0, error_delay=2.0, park_after_errors=2)
    frontier = Frontier(politeness, clock=clock)
    frontier.add_many(urls("flaky.test", 6))
    for error in (True, False, True, False, True):
        lease = frontier.acquire()
        while lease is None:
            clock.now = frontier.next_contact() or clock.now
            lease = frontier.acquire()
        frontier.release(lease, 0.0, error=error)
    assert frontier.stats.hosts_parked == 0
    host = frontier.host_info("flaky.test")
    assert host is not None and host.failures == 1


def test_give_up_drops_and_counts(clock: FakeClock) -> None:
    frontier = Frontier(FAST, clock=clock, back_queues=1)
    frontier.add_many(urls("a.test", 3) + urls("evil.test", 4))
    assert frontier.give_up("evil.test", "guard-refused") == 0  # still in the front queue
    assert frontier.give_up("evil.test", "guard-refused") == 0
    trace = drain(frontier, clock)
    assert [url for _, url in trace] == [f"http://a.test/{i}" for i in range(3)]
    assert frontier.stats.urls_given_up == 4
    assert frontier.given_up_reasons == {"guard-refused": 1}


def test_not_contacted_adds_no_gap(clock: FakeClock) -> None:
    frontier = Frontier(FAST, clock=clock)
    frontier.add_many(urls("a.test", 2))
    lease = frontier.acquire()
    assert lease is not None
    frontier.release(lease, 0.0, contacted=False)  # robots.txt excluded it: no request was sent
    assert frontier.acquire() is not None


# -- the engine-facing contract --------------------------------------------------------------


def test_put_back_comes_out_first(clock: FakeClock) -> None:
    frontier = Frontier(FAST, clock=clock)
    frontier.add_many(urls("a.test", 3))
    lease = frontier.acquire()
    assert lease is not None
    frontier.release(lease, 0.2, put_back=lease.entry)  # robots.txt was fetched through the lease
    clock.advance(2.0)
    again = frontier.acquire()
    assert again is not None and again.entry == lease.entry


def test_release_twice_is_an_error(clock: FakeClock) -> None:
    frontier = Frontier(FAST, clock=clock)
    frontier.add(FrontierEntry("http://a.test/"))
    lease = frontier.acquire()
    assert lease is not None
    frontier.release(lease, 0.1)
    with pytest.raises(FrontierError, match="not outstanding"):
        frontier.release(lease, 0.1)


def test_closed_frontier_refuses_work(clock: FakeClock) -> None:
    frontier = Frontier(FAST, clock=clock)
    frontier.close()
    frontier.close()
    with pytest.raises(FrontierError, match="closed"):
        frontier.acquire()


def test_host_rows_are_forgotten_once_their_delay_passed(clock: FakeClock) -> None:
    frontier = Frontier(FAST, clock=clock, back_queues=8)
    frontier.add_many(FrontierEntry(f"http://h{i}.test/") for i in range(20_000))
    drain(frontier, clock, duration=0.01)
    # rows are pruned whenever the table doubles past 4096: only hosts contacted within the
    # last second (8 back queues x 1 s / 0.01 s) still matter
    assert frontier.known_hosts <= 4096, "the host table must not keep every host ever seen"
    clock.advance(120.0)
    frontier.add_many(FrontierEntry(f"http://n{i}.test/") for i in range(5000))
    drain(frontier, clock, duration=0.01)
    assert frontier.known_hosts <= 4096


def test_gauges(clock: FakeClock) -> None:
    frontier = Frontier(FAST, clock=clock, back_queues=1)
    frontier.add_many(urls("a.test", 2) + urls("b.test", 1))
    lease = frontier.acquire()
    assert lease is not None
    gauges = frontier.gauges()
    assert gauges["frontier"] == 2 and gauges["in_flight"] == 1 and gauges["active_hosts"] == 1
    assert gauges["front_queues"] == [2]  # a.test/1 and b.test/0: B = 1
    assert "a.test" in repr(frontier.host_info("a.test"))


def test_a_lease_out_when_its_host_is_given_up_is_counted_once(clock: FakeClock) -> None:
    politeness = Politeness(min_delay=0.0, delay_factor=0.0, park_after_errors=1, give_up_after_parks=0)
    frontier = Frontier(politeness, clock=clock)
    frontier.add_many(urls("a.test", 3))
    lease = frontier.acquire()
    assert lease is not None
    assert frontier.give_up("a.test", "guard-refused") == 2
    frontier.release(lease, 0.0, error=True, put_back=lease.entry)
    assert frontier.stats.hosts_given_up == 1
    assert frontier.stats.urls_given_up == 3
    assert len(frontier) == 0 and frontier.in_flight == 0
    frontier.check_invariants()
