"""Property tests: random sequences of add / acquire / release / resolve / give up / reopen against a
fake clock, with a model of the politeness rules that the frontier must never break.

The model knows nothing of back queues or heaps; it only tracks, per host and per address, the
earliest time the rules of `Politeness` allow the next request, the leases out, and the URLs
queued per host in FIFO order. After every step the frontier's own audit (`check_invariants`,
reading every block from disk) must pass and no URL may have been lost; at the end the frontier
must drain completely (nothing starves).
"""

from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass, field

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from crawlspace.frontier import ByDepth, Frontier, FrontierEntry, Lease, MemoryStore, Politeness
from crawlspace.urls import host_of
from tests.frontier.conftest import FakeClock

HOSTS = ["a.test", "b.test", "c.test", "d.test:8080", "e.test", "f.test"]
ADDRESSES = ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
CRAWL_DELAYS = {"a.test": 0.0, "b.test": 0.5, "c.test": 3.0, "d.test:8080": 0.0, "e.test": 8.0, "f.test": 0.0}
EPSILON = 1e-9


@dataclass
class HostModel:
    ready: float = float("-inf")  # earliest allowed next request
    failures: int = 0
    parks: int = 0
    given_up: bool = False
    queue: deque[str] = field(default_factory=deque)
    leases: list[Lease] = field(default_factory=list)


class FrontierMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.store = MemoryStore()
        self.hosts: dict[str, HostModel] = {name: HostModel() for name in HOSTS}
        self.ip_ready: dict[str, float] = {}
        self.ip_leases: dict[str, int] = {}
        self.lease_ip: dict[int, str | None] = {}
        self.address: dict[str, str | None] = {}
        self.pending: list[str] = []
        self.activations = 0
        self.added = 0
        self.done = 0
        self.counter = 0

    @initialize(
        host_conns=st.sampled_from([1, 1, 2]),
        per_ip=st.booleans(),
        ip_conns=st.sampled_from([1, 2]),
        levels=st.sampled_from([1, 1, 3]),
        back_queues=st.integers(1, 4),
        windows=st.sampled_from([(1, 1), (3, 2), (64, 64)]),
        initial=st.lists(st.tuples(st.sampled_from(HOSTS), st.integers(0, 4)), max_size=30),
    )
    def start(
        self,
        host_conns: int,
        per_ip: bool,
        ip_conns: int,
        levels: int,
        back_queues: int,
        windows: tuple[int, int],
        initial: list[tuple[str, int]],
    ) -> None:
        self.politeness = Politeness(
            min_delay=1.0,
            delay_factor=2.0,
            max_delay=5.0,
            max_conn_per_host=host_conns,
            per_ip=per_ip,
            max_conn_per_ip=ip_conns,
            error_delay=2.0,
            park_after_errors=2,
            park_seconds=10.0,
            give_up_after_parks=1,
        )
        self.levels = levels
        self.options = dict(
            back_queues=back_queues,
            front_window=windows[0],
            back_window=windows[1],
            front_file_bytes=300,
            back_file_bytes=200,
            refill_budget=1000,
        )
        self.frontier = self._open()
        for host, depth in initial:
            self.add(host, depth, 1, False)

    def _open(self) -> Frontier:
        return Frontier(
            self.politeness,
            store=self.store,
            clock=self.clock,
            prioritizer=ByDepth(self.levels),
            on_activate=self._activated,
            seed=7,
            **self.options,  # type: ignore[arg-type]
        )

    def _activated(self, host: str) -> None:
        self.activations += 1
        if host not in self.pending:
            self.pending.append(host)

    # -- rules ------------------------------------------------------------------------------

    @rule(host=st.sampled_from(HOSTS), depth=st.integers(0, 4), count=st.integers(1, 4), batch=st.booleans())
    def add_urls(self, host: str, depth: int, count: int, batch: bool) -> None:
        self.add(host, depth, count, batch)

    def add(self, host: str, depth: int, count: int, batch: bool) -> None:
        entries = []
        for _ in range(count):
            self.counter += 1
            scheme = "https" if self.counter % 3 == 0 else "http"
            entries.append(FrontierEntry(f"{scheme}://{host}/p{self.counter}", depth, 0))
        if batch:
            assert self.frontier.add_many(entries) == count
        else:
            for entry in entries:
                self.frontier.add(entry)
        self.added += count
        if self.levels == 1:
            self.hosts[host].queue.extend(entry.url for entry in entries)

    @rule(times=st.integers(1, 3))
    def acquire(self, times: int) -> None:
        for _ in range(times):
            self._acquire_one()

    def _acquire_one(self) -> None:
        if self.pending and self.counter % 2:
            self.resolve(self.counter, ADDRESSES[self.counter % len(ADDRESSES)])
        lease = self.frontier.acquire()
        now = self.clock.now
        if lease is None:
            wake = self.frontier.next_contact()
            assert wake is None or wake > now, "nothing handed out although a host is due"
            return
        host = lease.host
        assert host == host_of(lease.entry.url)
        model = self.hosts[host]
        assert not model.given_up, f"{host} was given up but {lease.entry.url} was handed out"
        assert now + EPSILON >= model.ready, f"{host} contacted at {now}, allowed from {model.ready}"
        assert len(model.leases) < self.politeness.max_conn_per_host, f"{host}: too many leases"
        if self.levels == 1:
            expected = model.queue.popleft()
            assert lease.entry.url == expected, f"{host}: got {lease.entry.url}, FIFO says {expected}"
        ip: str | None = None
        if self.politeness.per_ip:
            assert host in self.address, f"{host} handed out before its address was set"
            ip = self.address[host]
            if ip is not None:
                assert now + EPSILON >= self.ip_ready.get(ip, float("-inf")), f"address {ip} contacted too early"
                assert self.ip_leases.get(ip, 0) < self.politeness.ip_limit, f"address {ip}: too many leases"
                self.ip_leases[ip] = self.ip_leases.get(ip, 0) + 1
        self.lease_ip[id(lease)] = ip
        model.leases.append(lease)
        if self.politeness.max_conn_per_host > 1 and CRAWL_DELAYS[host] and model.ready > float("-inf"):
            model.ready = max(model.ready, now + CRAWL_DELAYS[host])

    @precondition(lambda self: any(model.leases for model in self.hosts.values()))
    @rule(
        pick=st.integers(0, 1000),
        duration=st.sampled_from([0.0, 0.1, 0.4, 3.0]),
        outcome=st.sampled_from(["ok", "ok", "error", "error", "retry-after", "not-contacted", "put-back"]),
    )
    def release(self, pick: int, duration: float, outcome: str) -> None:
        leases = [lease for model in self.hosts.values() for lease in model.leases]
        lease = leases[pick % len(leases)]
        host = lease.host
        model = self.hosts[host]
        model.leases.remove(lease)
        now = self.clock.now
        politeness = self.politeness
        crawl_delay = CRAWL_DELAYS[host]
        contacted = outcome != "not-contacted"
        retry_after = 7.0 if outcome == "retry-after" else None
        error = outcome in ("error", "retry-after")
        put_back = lease.entry if outcome == "put-back" else None
        self.frontier.release(
            lease,
            duration,
            put_back=put_back,
            crawl_delay=crawl_delay,
            retry_after=retry_after,
            contacted=contacted,
            error=error,
        )
        ip = self.lease_ip.pop(id(lease))
        if ip is not None:
            self.ip_leases[ip] -= 1
            if contacted:
                gap = politeness.next_gap(duration, None, politeness.ip_limit)
                self.ip_ready[ip] = max(self.ip_ready.get(ip, float("-inf")), now + gap)
        if contacted:
            gap = politeness.next_gap(duration, crawl_delay, politeness.max_conn_per_host)
            model.ready = max(model.ready, now + gap)
        if retry_after:
            model.ready = max(model.ready, now + retry_after)
        if put_back is not None:
            if self.levels == 1 and not model.given_up:
                model.queue.appendleft(put_back.url)
        else:
            self.done += 1
        if error:
            model.failures += 1
            if model.failures >= politeness.park_after_errors:
                model.failures = 0
                model.parks += 1
                if model.parks > politeness.give_up_after_parks:
                    self._given_up(model)
                else:
                    model.ready = max(model.ready, now + politeness.park_time(model.parks))
            else:
                model.ready = max(model.ready, now + politeness.error_backoff(model.failures))
        elif contacted:
            model.failures = model.parks = 0

    def _given_up(self, model: HostModel) -> None:
        model.given_up = True
        model.queue.clear()

    @rule(seconds=st.sampled_from([0.05, 0.5, 1.0, 4.0, 12.0]))
    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @rule()
    def advance_to_next_contact(self) -> None:
        wake = self.frontier.next_contact()
        if wake is not None and wake > self.clock.now:
            self.clock.now = wake

    @precondition(lambda self: self.pending)
    @rule(pick=st.integers(0, 100), address=st.sampled_from([*ADDRESSES, None]))
    def resolve(self, pick: int, address: str | None) -> None:
        host = self.pending.pop(pick % len(self.pending))
        self.frontier.set_host_address(host, address)
        self.address[host] = address

    @precondition(lambda self: self.address)
    @rule(pick=st.integers(0, 100), address=st.sampled_from(ADDRESSES))
    def readdress(self, pick: int, address: str) -> None:
        """DNS changed: later leases count against the new address, outstanding ones the old."""
        host = sorted(self.address)[pick % len(self.address)]
        if self.frontier.host_info(host) is not None:
            self.frontier.set_host_address(host, address)
            self.address[host] = address

    @rule(host=st.sampled_from(HOSTS), dice=st.integers(0, 5))
    def give_up(self, host: str, dice: int) -> None:
        if dice:
            return  # rarely: a given-up host takes no further part
        self.frontier.give_up(host, "test")
        self._given_up(self.hosts[host])

    @rule()
    def checkpoint_and_reopen(self) -> None:
        """A clean restart: leases out are void and their URLs handed out again, first."""
        self.frontier.checkpoint()
        for model in self.hosts.values():
            if self.levels == 1 and not model.given_up:
                model.queue.extendleft(reversed([lease.entry.url for lease in model.leases]))
            model.leases.clear()
        self.ip_leases.clear()
        self.lease_ip.clear()
        self.frontier = self._open()
        self.pending = self.frontier.hosts_awaiting_address()

    # -- invariants ------------------------------------------------------------------------

    @invariant()
    def audited(self) -> None:
        if hasattr(self, "frontier"):
            self.frontier.check_invariants(deep=True)

    @invariant()
    def nothing_lost(self) -> None:
        if hasattr(self, "frontier"):
            frontier = self.frontier
            out = sum(len(model.leases) for model in self.hosts.values())
            assert frontier.in_flight == out
            accounted = len(frontier) + out + self.done + frontier.stats.urls_given_up
            assert accounted == self.added, f"{self.added} added, {accounted} accounted for"

    def teardown(self) -> None:
        """Release everything, resolve every host and run to empty: every URL comes out or was given up."""
        if not hasattr(self, "frontier"):
            return
        for model in self.hosts.values():
            for lease in list(model.leases):
                self.frontier.release(lease, 0.1, crawl_delay=CRAWL_DELAYS[lease.host])
                model.leases.remove(lease)
                self.done += 1
        for _ in range(20_000):
            for host in self.frontier.hosts_awaiting_address():
                self.frontier.set_host_address(host, ADDRESSES[0])
            if len(self.frontier) == 0:
                break
            lease = self.frontier.acquire()
            if lease is None:
                wake = self.frontier.next_contact()
                assert wake is not None, f"stuck with {len(self.frontier)} URLs: {self.frontier.gauges()}"
                self.clock.now = max(self.clock.now, wake)
                continue
            self.clock.advance(0.1)
            self.frontier.release(lease, 0.1, crawl_delay=CRAWL_DELAYS[lease.host])
            self.done += 1
        assert len(self.frontier) == 0 and self.frontier.in_flight == 0
        assert self.done + self.frontier.stats.urls_given_up == self.added
        self.frontier.check_invariants(deep=True)
        log = self.frontier._log
        assert set(self.store.files) <= log.pinned | log.doomed | log.writing, "consumed segment files not deleted"


FrontierMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("FRONTIER_EXAMPLES", "250")),
    stateful_step_count=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestFrontierProperties = FrontierMachine.TestCase


def test_host_parked_after_a_readdress_leaves_its_new_group_correctly_keyed() -> None:
    """Found by the state machine: a host readdressed while leased, then parked by its release, left
    a void entry at the head of its new group's heap, keying that group at -inf."""
    machine = FrontierMachine()
    machine.start(
        host_conns=2, per_ip=True, ip_conns=1, levels=1, back_queues=2, windows=(1, 1),
        initial=[("a.test", 0), ("b.test", 0), ("b.test", 0), ("a.test", 0), ("a.test", 0)],
    )  # fmt: skip
    machine.resolve(address="10.0.0.1", pick=0)
    machine.acquire(times=1)
    machine.acquire(times=1)
    machine.readdress(address="10.0.0.2", pick=0)
    machine.readdress(address="10.0.0.2", pick=1)
    machine.release(duration=0.0, outcome="ok", pick=0)
    machine.release(duration=0.0, outcome="retry-after", pick=0)
    machine.frontier.check_invariants(deep=True)
    machine.teardown()
