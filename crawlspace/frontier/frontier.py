"""The frontier proper: front queues, B back queues, the host table and the heap of contact times."""

from __future__ import annotations

import heapq
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from crawlspace.frontier.back import HostState, Politeness
from crawlspace.frontier.entry import FrontierEntry
from crawlspace.frontier.front import BreadthFirst, FrontQueues, Prioritizer
from crawlspace.urls import host_of

__all__ = ["Frontier", "FrontierEntry", "Lease"]


@dataclass(slots=True, frozen=True)
class Lease:
    entry: FrontierEntry
    host: str
    granted_at: float


class Frontier:
    def __init__(
        self,
        politeness: Politeness,
        *,
        back_queues: int = 192,
        prioritizer: Prioritizer | None = None,
        clock: Callable[[], float] = time.monotonic,
        seed: int = 0,
    ) -> None:
        self.politeness = politeness
        self.prioritizer: Prioritizer = prioritizer or BreadthFirst()
        self._front = FrontQueues(self.prioritizer.levels, random.Random(seed))
        self._admit = getattr(self.prioritizer, "admit", None)  # optional hook, see Prioritizer
        self._max_back = back_queues
        self._hosts: dict[str, HostState] = {}
        self._heap: list[tuple[float, int, str]] = []
        self._tiebreak = 0
        self._active = 0
        self._queued = 0
        self._in_flight = 0
        self._clock = clock

    # -- filling -----------------------------------------------------------------------------

    def add(self, entry: FrontierEntry) -> None:
        level = self.prioritizer.priority(entry)
        self._front.push(min(max(level, 0), self.prioritizer.levels - 1), entry)
        self._queued += 1
        self._refill()

    def _refill(self) -> None:
        """Move URLs from the front queues to back queues until B hosts are active or the front is dry."""
        while self._active < self._max_back:
            entry = self._front.pop()
            if entry is None:
                return
            if self._admit is not None and not self._admit(entry):
                self._queued -= 1  # a stale copy: the prioritizer requeued the URL at a better level
                continue
            host = host_of(entry.url)
            state = self._hosts.get(host)
            if state is None:
                state = self._hosts[host] = HostState(host)
            state.queue.append(entry)
            if not state.active:
                state.active = True
                self._active += 1
                self._schedule(state)

    def _schedule(self, state: HostState) -> None:
        if state.in_heap or not state.queue or state.in_flight >= self.politeness.max_conn_per_host:
            return
        state.in_heap = True
        self._tiebreak += 1
        heapq.heappush(self._heap, (state.next_contact, self._tiebreak, state.name))

    # -- draining ----------------------------------------------------------------------------

    def next_contact(self) -> float | None:
        """Earliest time at which `acquire` can hand out a URL, or None if no host is ready to wait on."""
        return self._heap[0][0] if self._heap else None

    def acquire(self) -> Lease | None:
        """The head URL of a host whose earliest contact time has come, or None."""
        if not self._heap:
            return None
        now = self._clock()
        when, _, host = self._heap[0]
        if when > now:
            return None
        heapq.heappop(self._heap)
        state = self._hosts[host]
        state.in_heap = False
        assert state.active and state.queue, f"heap entry for idle host {host}"
        assert state.next_contact <= now, f"{host} handed out before its contact time"
        entry = state.queue.popleft()
        state.in_flight += 1
        assert state.in_flight <= self.politeness.max_conn_per_host, f"{host}: too many leases"
        self._queued -= 1
        self._in_flight += 1
        if state.in_flight < self.politeness.max_conn_per_host:
            state.next_contact = now + self.politeness.min_delay
            self._schedule(state)
        return Lease(entry, host, now)

    def release(
        self,
        lease: Lease,
        duration: float,
        *,
        put_back: FrontierEntry | None = None,
        crawl_delay: float | None = None,
        retry_after: float | None = None,
        contacted: bool = True,
    ) -> None:
        """End a lease. `contacted=False` when no request went to the host (e.g. excluded by robots)."""
        state = self._hosts[lease.host]
        assert state.in_flight > 0, f"release without lease for {lease.host}"
        state.in_flight -= 1
        self._in_flight -= 1
        now = self._clock()
        if contacted:
            gap = self.politeness.next_gap(duration, crawl_delay)
            if retry_after is not None:
                gap = max(gap, retry_after)
            state.next_contact = max(state.next_contact, now + gap)
        if put_back is not None:
            state.queue.appendleft(put_back)
            self._queued += 1
        if state.queue:
            self._schedule(state)
        elif state.in_flight == 0:
            state.active = False
            self._active -= 1
            if state.next_contact <= now:
                del self._hosts[lease.host]
            self._refill()

    # -- housekeeping ------------------------------------------------------------------------

    def __len__(self) -> int:
        """URLs queued (front and back), not counting those in flight."""
        return self._queued

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @property
    def active_hosts(self) -> int:
        return self._active

    @property
    def back_queues(self) -> int:
        return self._max_back

    def prune_idle_hosts(self) -> None:
        """Forget timing of inactive hosts whose delay has passed (bounded per-host memory)."""
        now = self._clock()
        for name in [n for n, s in self._hosts.items() if not s.active and s.next_contact <= now]:
            del self._hosts[name]
