"""The frontier proper: front queues, B back queues, the host table, the heaps, leases, checkpoints.

Pure scheduling: time comes from the injected clock, bytes go through a `SegmentStore`, and the
engine tells the frontier what happened (`release`, `set_host_address`); nothing here waits,
resolves or fetches. See the package docstring for a URL's life and the invariants.
"""

from __future__ import annotations

import contextlib
import heapq
import math
import random
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import msgspec

from crawlspace.frontier import state as state_format
from crawlspace.frontier.back import (
    ACTIVE,
    GIVEN_UP,
    IDLE,
    PARKED,
    HostGroup,
    HostState,
    Lease,
    Politeness,
)
from crawlspace.frontier.diskqueue import BlockRef, DiskQueue, SegmentLog
from crawlspace.frontier.entry import FrontierEntry
from crawlspace.frontier.front import BreadthFirst, FrontQueues, Prioritizer
from crawlspace.frontier.report import HostReport, host_report
from crawlspace.frontier.state import FrontierStateError
from crawlspace.frontier.store import DirectoryStore, MemoryStore, SegmentStore
from crawlspace.urls import host_of

__all__ = ["Frontier", "FrontierEntry", "FrontierError", "FrontierStats", "Lease"]

BACK_BLOCK_GROWTH = 8  # a long back queue spills blocks of up to 8 x back_window URLs
PRUNE_FLOOR = 4096  # host rows kept before the first sweep

_heappush = heapq.heappush
_heappop = heapq.heappop


class FrontierError(Exception):
    """The frontier was used against its contract (a lease released twice, use after close)."""


@dataclass
class FrontierStats:
    """Counters of the frontier's life (gauges are properties of `Frontier`); checkpointed."""

    hosts_activated: int = 0  # a host got a back queue
    host_errors: int = 0  # releases with error=True
    hosts_parked: int = 0  # parked after repeated errors
    hosts_snoozed: int = 0  # left their back queue because their next contact was far (Crawl-delay, Retry-After)
    hosts_given_up: int = 0
    urls_given_up: int = 0  # dropped because their host was given up
    urls_lost: int = 0  # in segment blocks that could not be read back (disk corruption)
    priorities_clamped: int = 0  # the prioritizer answered outside 0..levels-1
    urls_superseded: int = 0  # stale copies of requeued URLs, not admitted by the prioritizer when drawn

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


class Frontier:
    """The Mercator URL frontier (IIR §20.2.3) with per-IP politeness, on disk with bounded memory.

    Construct with a `store` (a `MemoryStore` by default) or use `Frontier.open(directory)`; when
    the store holds a checkpoint the frontier continues from it. The engine's contract:
    `add` URLs that passed the URL-seen test; `acquire` a `Lease` when a fetch slot is free (None:
    nothing is due, ask `next_contact` when to try again); `release` every lease exactly once with
    what happened; call `set_host_address` when `on_activate(host)` asked for an address (with
    `politeness.per_ip`, a host is handed out only once its address is set, None meaning
    "unresolvable": the host is then scheduled alone and its fetch will fail); `checkpoint` or
    `close` to make the state durable.
    """

    def __init__(
        self,
        politeness: Politeness | None = None,
        *,
        store: SegmentStore | None = None,
        back_queues: int = 192,
        prioritizer: Prioritizer | None = None,
        clock: Callable[[], float] = time.monotonic,
        seed: int = 0,
        on_activate: Callable[[str], None] | None = None,
        front_window: int = 4096,
        back_window: int = 64,
        front_file_bytes: int = 8 << 20,
        back_file_bytes: int = 256 << 10,
        compression_level: int = 3,
        refill_budget: int = 100_000,
    ) -> None:
        if back_queues < 1:
            raise ValueError(f"back_queues must be at least 1, got {back_queues}")
        if front_window < 1 or back_window < 1 or refill_budget < 1:
            raise ValueError("front_window, back_window and refill_budget must be at least 1")
        self.politeness = politeness or Politeness()
        self.prioritizer: Prioritizer = prioritizer or BreadthFirst()
        self._store: SegmentStore = store if store is not None else MemoryStore()
        self._clock = clock
        self._on_activate = on_activate
        self._max_back = back_queues
        self._back_window = back_window
        self._back_max_block = BACK_BLOCK_GROWTH * back_window
        self._back_file_bytes = back_file_bytes
        self._refill_budget = refill_budget
        self._host_limit = self.politeness.max_conn_per_host
        self._ip_limit = self.politeness.ip_limit
        self._per_ip = self.politeness.per_ip
        self._park_threshold = self.politeness.parking_threshold
        self._next_gap = self.politeness.next_gap  # bound once: release calls it on every fetch
        self._levels = self.prioritizer.levels
        self._plain_bfs = type(self.prioritizer) is BreadthFirst
        self._admit: Callable[[FrontierEntry], bool] | None = getattr(self.prioritizer, "admit", None)
        self._rng = random.Random(seed)
        self._log = SegmentLog(self._store, level=compression_level)
        self._front = FrontQueues(self._levels, self._log, front_window, front_file_bytes, self._rng)
        self._hosts: dict[str, HostState] = {}
        self._groups: dict[str, HostGroup] = {}  # shared groups by IP address
        self._heap: list[tuple[float, int, HostGroup]] = []
        self._parked: list[tuple[float, int, HostState]] = []
        self._awaiting: dict[str, HostState] = {}  # hosts with a back queue waiting for their address
        self._spare_queues: list[DiskQueue] = []  # emptied back queues, reused (activation is the hot path)
        self._seq = 0
        self._active = 0
        self._parked_count = 0
        self._queued = 0  # added, not handed out nor dropped (entries lost to corruption subtracted in __len__)
        self._leases: dict[int, Lease] = {}  # out, by number, in the order handed out
        self._lease_number = 0
        self._prune_at = PRUNE_FLOOR
        self._lost_before = 0  # urls_lost of the runs before the last reopen
        self._closed = False
        self._stats = FrontierStats()
        self.given_up_reasons: Counter[str] = Counter()
        self.extra = b""  # the caller's state committed with the last checkpoint (see `checkpoint`)
        self.fallback: str | None = None  # why the previous checkpoint was restored instead of the last
        record, fallback_files = self._choose_checkpoint()
        if record is not None:
            self._restore(record, fallback_files)
            self.extra = record.extra

    def _choose_checkpoint(self) -> tuple[state_format.FrontierRecord | None, set[int]]:
        """The last checkpoint, or the one before it when the last is damaged or was being replaced
        when the process died; with the files the fallback checkpoint needs kept alive."""
        store = self._store
        saved, previous = store.read_state(), store.read_previous_state()
        if saved is None and previous is None:
            return None, set()
        if saved is not None:
            try:
                record = state_format.decode(saved)
            except FrontierStateError as exc:
                problem = f"{store.state_name()}: {exc}"
            else:
                fallback_files: set[int] = set()
                if previous is not None:
                    with contextlib.suppress(FrontierStateError):
                        fallback_files = state_format.referenced_files(state_format.decode(previous))
                return record, fallback_files
        else:
            problem = f"{store.state_name()} is missing (the process stopped while replacing it)"
        if previous is None:
            raise FrontierStateError(f"{problem}; there is no previous checkpoint to fall back to")
        try:
            record = state_format.decode(previous)
        except FrontierStateError as exc:
            raise FrontierStateError(f"{problem}; the previous checkpoint is unusable too: {exc}") from None
        self.fallback = problem
        return record, set()

    @classmethod
    def open(
        cls, directory: str | Path, politeness: Politeness | None = None, *, fresh: bool = False, **options: Any
    ) -> Frontier:
        """A frontier kept in `directory`: continued from its checkpoint if there is one (unless `fresh`)."""
        store = DirectoryStore(directory, fresh=fresh)
        try:
            return cls(politeness, store=store, **options)
        except BaseException:
            store.close()
            raise

    # -- filling -----------------------------------------------------------------------------

    def add(self, entry: FrontierEntry) -> None:
        """Queue a URL (already through the URL-seen test) at the level its prioritizer assigns."""
        level = 0 if self._plain_bfs else self._level(entry)
        self._front.push(level, entry)
        self._queued += 1
        if self._active < self._max_back:
            self._refill(self._clock())

    def add_many(self, entries: Iterable[FrontierEntry]) -> int:
        """`add` for a batch (a page's links): one refill at the end. Returns how many were queued."""
        queues = self._front.queues
        plain = self._plain_bfs
        level_of = self._level
        count = 0
        for entry in entries:
            queue = queues[0 if plain else level_of(entry)]
            tail = queue.tail
            tail.append(entry)
            queue.size += 1
            if len(tail) >= queue.window:
                queue.spill_tail()
            count += 1
        self._front.size += count
        self._queued += count
        if count and self._active < self._max_back:
            self._refill(self._clock())
        return count

    def _level(self, entry: FrontierEntry) -> int:
        level = self.prioritizer.priority(entry)
        if type(level) is not int or not 0 <= level < self._levels:
            self._stats.priorities_clamped += 1
            try:
                level = min(max(int(level), 0), self._levels - 1)
            except (TypeError, ValueError):
                level = self._levels - 1
        return level

    def _refill(self, now: float) -> None:
        """Give free back queues to hosts: parked hosts whose time has come first, then the front queues.

        A URL drawn from the front whose host already has a back queue (or is parked) joins that
        queue and the draw goes on (IIR §20.2.3), for at most `refill_budget` URLs per call so that
        a long run of one host's URLs cannot stall the caller; the next call continues.
        """
        parked = self._parked
        front = self._front
        hosts = self._hosts
        budget = self._refill_budget
        single = front.queues[0] if len(front.queues) == 1 else None
        admit = self._admit
        while self._active < self._max_back:
            if parked and parked[0][0] <= now:
                _, seq, host = _heappop(parked)
                if seq == host.park_seq:
                    self._unpark(host, now)
                continue
            if not front.size or budget <= 0:
                return
            budget -= 1
            if single is not None and single.head:  # BFS: pop the head window directly
                entry = single.head.popleft()
                single.size -= 1
                front.size -= 1
            else:
                popped = front.pop()
                if popped is None:
                    continue
                entry = popped
            if admit is not None and not admit(entry):  # a stale copy: the URL was requeued at a better level
                self._queued -= 1
                self._stats.urls_superseded += 1
                continue
            name = host_of(entry.url)
            known = hosts.get(name)
            if known is None:
                host = hosts[name] = HostState(name)
            else:
                host = known
            status = host.status
            if status == IDLE:
                self._activate(host, entry, now)
            elif status == GIVEN_UP:
                self._queued -= 1
                self._stats.urls_given_up += 1
            else:
                queue = host.queue
                assert queue is not None, f"{name}: {status} without a back queue"
                queue.push(entry)
                if (
                    status == ACTIVE
                    and host.heap_seq == 0
                    and host.in_flight < self._host_limit
                    and host.group is not None
                ):
                    self._offer(host)

    def _activate(self, host: HostState, entry: FrontierEntry, now: float) -> None:
        spare = self._spare_queues
        queue = (
            spare.pop()
            if spare
            else DiskQueue(self._log, self._back_window, self._back_file_bytes, self._back_max_block)
        )
        queue.push(entry)
        host.queue = queue
        host.status = ACTIVE
        self._active += 1
        self._stats.hosts_activated += 1
        if host.group is None:
            if not self._per_ip or host.address_known:
                self._join_group(host)
            else:
                self._awaiting[host.name] = host
        if host.t_e - now > self._park_threshold:
            self._park(host)
        elif host.group is not None and host.in_flight < self._host_limit:
            self._offer(host)
        if self._on_activate is not None:
            self._on_activate(host.name)

    # -- scheduling ---------------------------------------------------------------------------

    def _join_group(self, host: HostState) -> None:
        address = host.address if self._per_ip else None
        if address is None:
            host.group = HostGroup(host.name, False, self._host_limit)
            return
        group = self._groups.get(address)
        if group is None:
            group = self._groups[address] = HostGroup(address, True, self._ip_limit)
        group.members += 1
        host.group = group

    def _leave_group(self, host: HostState, now: float) -> None:
        group = host.group
        host.group = None
        if host.heap_seq:
            host.heap_seq = 0
            if group is not None:
                self._schedule(group)
        if group is not None and group.shared:
            group.members -= 1
            if group.members == 0 and group.in_flight == 0 and group.t_e <= now:
                del self._groups[group.key]

    def _offer(self, host: HostState) -> None:
        """Put a host with a URL to hand out into its group's heap at its contact time."""
        group = host.group
        assert group is not None
        self._seq += 1
        host.heap_seq = self._seq
        gheap = group.heap
        _heappush(gheap, (host.t_e, self._seq, host))
        if len(gheap) > 2 * self._max_back + 16:
            gheap[:] = [item for item in gheap if item[1] == item[2].heap_seq]
            heapq.heapify(gheap)
        self._schedule(group)

    def _schedule(self, group: HostGroup) -> None:
        """Keep the group's one live entry in the frontier heap at max(group t_e, earliest host t_e)."""
        gheap = group.heap
        while gheap and gheap[0][1] != gheap[0][2].heap_seq:
            _heappop(gheap)
        if not gheap or group.in_flight >= group.limit:
            group.entry_seq = 0
            return
        key = gheap[0][0]
        if group.t_e > key:
            key = group.t_e
        if group.entry_seq and group.key_time == key:
            return
        self._seq += 1
        group.entry_seq = self._seq
        group.key_time = key
        heap = self._heap
        _heappush(heap, (key, self._seq, group))
        if len(heap) > 4 * (self._active + 16):
            heap[:] = [item for item in heap if item[1] == item[2].entry_seq]
            heapq.heapify(heap)

    def _park(self, host: HostState) -> None:
        """The host gives up its back queue (its URLs go to disk) until its contact time."""
        assert host.status == ACTIVE and host.queue is not None
        if not host.failures and not host.parks:
            self._stats.hosts_snoozed += 1  # not for errors: a long Crawl-delay or Retry-After
        host.status = PARKED
        self._active -= 1
        self._parked_count += 1
        if host.heap_seq:  # its entry in its group's heap is void now: the group's key may change
            host.heap_seq = 0
            if host.group is not None:
                self._schedule(host.group)
        host.queue.spill_all()
        self._seq += 1
        host.park_seq = self._seq
        host.park_key = host.t_e
        _heappush(self._parked, (host.t_e, self._seq, host))

    def _unpark(self, host: HostState, now: float) -> None:
        host.park_seq = 0
        host.status = ACTIVE
        self._parked_count -= 1
        self._active += 1
        queue = host.queue
        assert queue is not None
        if host.t_e - now > self._park_threshold:
            self._park(host)  # its time moved on while parked (a late release)
        elif not queue.size:
            if host.in_flight == 0:
                self._deactivate(host, now)
        elif host.group is not None and host.in_flight < self._host_limit:
            self._offer(host)

    def _deactivate(self, host: HostState, now: float) -> None:
        """The host's back queue ran dry: free it; keep the host's row only while it still matters."""
        host.status = IDLE
        self._active -= 1
        host.heap_seq = 0
        queue = host.queue
        assert queue is not None and queue.size == 0
        queue.close()
        host.queue = None
        if len(self._spare_queues) < 64:
            self._spare_queues.append(queue)
        self._awaiting.pop(host.name, None)
        if host.group is not None and not host.group.shared:
            host.group = None  # an own group carries nothing once the host has no leases
        if host.t_e <= now and self._forgettable(host, now):
            self._forget(host, now)
        elif len(self._hosts) >= self._prune_at:
            self._prune(now)

    def _forgettable(self, host: HostState, now: float) -> bool:
        """An idle row carries nothing once its delay has passed, unless it remembers errors, or a
        Crawl-delay that must space the starts of several connections."""
        return (
            host.t_e <= now
            and not host.failures
            and not host.parks
            and not host.in_flight
            and not (host.crawl_delay and self._host_limit > 1)
        )

    def _forget(self, host: HostState, now: float) -> None:
        del self._hosts[host.name]
        self._leave_group(host, now)

    def _prune(self, now: float) -> None:
        """Drop rows of idle hosts whose delay has passed; amortized O(1) per deactivation (a sweep
        happens when the table has doubled since the last one, and at PRUNE_FLOOR rows at the least)."""
        for host in [h for h in self._hosts.values() if h.status == IDLE and self._forgettable(h, now)]:
            self._forget(host, now)
        for key in [k for k, g in self._groups.items() if not g.members and not g.in_flight and g.t_e <= now]:
            del self._groups[key]
        self._prune_at = max(PRUNE_FLOOR, 2 * len(self._hosts))

    # -- draining ----------------------------------------------------------------------------

    def next_contact(self) -> float | None:
        """Earliest time at which `acquire` may hand out a URL; None when nothing is waiting on a time
        (the frontier is empty, or every host with URLs is leased out or waits for its address)."""
        heap = self._heap
        while heap and heap[0][1] != heap[0][2].entry_seq:
            _heappop(heap)
        wake = heap[0][0] if heap else None
        if self._active < self._max_back:
            if self._front.size:
                return self._clock()
            if self._parked:
                when = self._parked[0][0]
                wake = when if wake is None or when < wake else wake
        return wake

    def acquire(self) -> Lease | None:
        """The head URL of a back queue whose host (and address) may be contacted now, or None."""
        if self._closed:
            raise FrontierError("the frontier is closed")
        now = self._clock()
        if self._active < self._max_back:
            self._refill(now)
        heap = self._heap
        while heap:
            key, seq, group = heap[0]
            if seq != group.entry_seq:
                _heappop(heap)
                continue
            if key > now:
                return None
            _heappop(heap)
            group.entry_seq = 0
            gheap = group.heap
            while gheap and gheap[0][1] != gheap[0][2].heap_seq:
                _heappop(gheap)
            if not gheap:
                continue
            host = gheap[0][2]
            if gheap[0][0] > now or group.t_e > now or group.in_flight >= group.limit:
                self._schedule(group)  # the entry's key was out of date
                continue
            _heappop(gheap)
            host.heap_seq = 0
            lease = self._grant(host, group, now)
            if lease is not None:
                return lease
        return None

    def _grant(self, host: HostState, group: HostGroup, now: float) -> Lease | None:
        queue = host.queue
        assert host.status == ACTIVE and queue is not None, f"heap entry for {host!r}"
        assert host.group is group, f"{host.name} scheduled in a group it left"
        assert host.t_e <= now and group.t_e <= now, f"{host.name} handed out before its contact time"
        head = queue.head
        if head:
            entry: FrontierEntry | None = head.popleft()
            queue.size -= 1
        else:
            entry = queue.pop()
        if entry is None:  # its blocks were unreadable
            self._sync_lost()
            if host.in_flight == 0:
                self._deactivate(host, now)
            self._schedule(group)
            return None
        host.in_flight += 1
        group.in_flight += 1
        assert host.in_flight <= self._host_limit, f"{host.name}: more than {self._host_limit} leases"
        assert group.in_flight <= group.limit, f"{group!r}: more leases than allowed"
        self._queued -= 1
        if self._host_limit > 1:
            if host.crawl_delay:
                host.t_e = now + host.crawl_delay  # Crawl-delay spaces request starts too
            if host.in_flight < self._host_limit and queue.size:
                self._offer(host)
        if group.in_flight < group.limit:
            self._schedule(group)
        else:
            group.entry_seq = 0
        self._lease_number += 1
        lease = Lease(entry, host.name, now, self._lease_number, host, group)
        self._leases[self._lease_number] = lease
        return lease

    def release(
        self,
        lease: Lease,
        duration: float,
        *,
        put_back: FrontierEntry | None = None,
        crawl_delay: float | None = None,
        retry_after: float | None = None,
        contacted: bool = True,
        error: bool = False,
    ) -> None:
        """End a lease and schedule its host's next contact.

        `duration`: seconds the fetch took (Mercator's k x duration). `put_back`: an entry to
        hand out again first (the URL whose robots.txt was fetched through this lease, or a retry).
        `crawl_delay`: the host's robots.txt Crawl-delay. `retry_after`: a 429/503 Retry-After in
        seconds. `contacted=False`: no request reached the host (robots exclusion, DNS failure),
        so no politeness gap is added. `error=True`: the fetch failed in a way that reflects on
        the host rather than the URL (connection errors, timeouts, DNS, 429, 503); repeated errors
        back off, park and finally give the host up.
        """
        if self._leases.get(lease.number) is not lease:
            raise FrontierError(f"{lease!r} is not outstanding (released twice, or from another frontier)")
        del self._leases[lease.number]
        host = lease.state
        group = lease.group
        now = self._clock()
        host.in_flight -= 1
        group.in_flight -= 1
        if crawl_delay is not None and crawl_delay >= 0 and math.isfinite(crawl_delay):
            host.crawl_delay = crawl_delay
        if contacted:
            host.last_duration = duration
            host.last_contact = now
            next_gap = self._next_gap
            until = now + next_gap(duration, host.crawl_delay, self._host_limit)
            if until > host.t_e:
                host.t_e = until
            if group.shared:  # the address: the same formula without Crawl-delay, over the group's limit
                until = now + next_gap(duration, None, group.limit)
                if until > group.t_e:
                    group.t_e = until
        if retry_after is not None and retry_after > 0 and math.isfinite(retry_after):
            until = now + retry_after
            if until > host.t_e:
                host.t_e = host.backoff_until = until
                host.backoff_seconds = retry_after
        if put_back is not None:
            self._put_back(host, put_back)
        if error:
            self._failed(host, now)
        elif contacted:
            host.failures = 0
            host.parks = 0
        if host.status == ACTIVE:
            queue = host.queue
            assert queue is not None
            if queue.size:
                if host.t_e - now > self._park_threshold:
                    self._park(host)
                elif host.in_flight < self._host_limit and host.group is not None:
                    self._offer(host)
            elif host.in_flight == 0:
                self._deactivate(host, now)
        if group.heap:
            self._schedule(group)
        if host.group is not None and host.group is not group and host.group.heap:
            self._schedule(host.group)  # readdressed while leased: its new group's key may have moved
        if self._active < self._max_back:
            self._refill(now)

    def _put_back(self, host: HostState, entry: FrontierEntry) -> None:
        assert host_of(entry.url) == host.name, f"put back {entry.url} into the back queue of {host.name}"
        if host.status == GIVEN_UP:
            self._stats.urls_given_up += 1
            return
        assert host.queue is not None
        host.queue.push_front(entry)
        self._queued += 1

    def _failed(self, host: HostState, now: float) -> None:
        politeness = self.politeness
        self._stats.host_errors += 1
        if host.status == GIVEN_UP:
            return  # a lease that was out when the host was given up
        host.failures += 1
        if host.failures >= politeness.park_after_errors:
            host.failures = 0
            host.parks += 1
            if host.parks > politeness.give_up_after_parks:
                self._give_up(host, "errors")
                return
            self._stats.hosts_parked += 1
            until = now + politeness.park_time(host.parks)
        else:
            until = now + politeness.error_backoff(host.failures)
        if until > host.t_e:
            host.t_e = host.backoff_until = until
            host.backoff_seconds = until - now

    def give_up(self, host: str, reason: str) -> int:
        """Drop a host and every URL of it, now and later (e.g. it resolves to a refused address).
        Returns the number of queued URLs dropped; they are counted in `stats.urls_given_up`."""
        state = self._hosts.get(host)
        if state is None:
            state = self._hosts[host] = HostState(host)
        if state.status == GIVEN_UP:
            return 0
        return self._give_up(state, reason)

    def _give_up(self, host: HostState, reason: str) -> int:
        if host.status == ACTIVE:
            self._active -= 1
        elif host.status == PARKED:
            self._parked_count -= 1
            host.park_seq = 0
        host.status = GIVEN_UP
        self._leave_group(host, self._clock())  # leases still out keep their own group
        self._awaiting.pop(host.name, None)
        dropped = host.queue.discard() if host.queue is not None else 0
        host.queue = None
        self._queued -= dropped
        self._stats.hosts_given_up += 1
        self._stats.urls_given_up += dropped
        self.given_up_reasons[reason] += 1
        if self._active < self._max_back:
            self._refill(self._clock())
        return dropped

    # -- re-partitioning (a crawl resized to another number of partitions) ---------------------

    def queued_entries(self) -> Iterator[FrontierEntry]:
        """Every queued URL (front, back and parked queues), taking none out, in no particular
        order: a resized crawl reads what it will hand over before it may remove anything."""
        for queue in self._front.queues:
            yield from queue.entries()
        for host in self._hosts.values():
            if host.queue is not None:
                yield from host.queue.entries()

    def take_out(self, leaving: Callable[[str], bool]) -> list[FrontierEntry]:
        """Remove every queued URL of the hosts `leaving(host)` names, and those hosts' rows, and
        return the URLs: their new owner has journaled them (a resized crawl). Front queues are
        rewritten without them; a leaving host's back queue goes whole. Only while no lease is out
        (a lease's URL would come back to a host that is no longer here)."""
        self._check_open()
        if self._leases:
            raise FrontierError(f"take_out with {len(self._leases)} leases out")
        now = self._clock()
        taken: list[FrontierEntry] = []
        for host in [host for host in self._hosts.values() if leaving(host.name)]:
            if host.queue is not None:
                taken.extend(host.queue.entries())
            self._remove_host(host, now)
        front = self._front
        for level, queue in enumerate(front.queues):
            if not queue.size:
                continue
            kept = DiskQueue(self._log, queue.window, queue.file_bytes)
            while (entry := queue.pop()) is not None:
                if leaving(host_of(entry.url)):
                    taken.append(entry)
                else:
                    kept.push(entry)
            queue.close()
            front.queues[level] = kept
        front.size = sum(queue.size for queue in front.queues)
        self._queued -= len(taken)
        if self._active < self._max_back:
            self._refill(now)
        return taken

    def _remove_host(self, host: HostState, now: float) -> None:
        if host.status == ACTIVE:
            self._active -= 1
        elif host.status == PARKED:
            self._parked_count -= 1
            host.park_seq = 0
        self._leave_group(host, now)
        self._awaiting.pop(host.name, None)
        if host.queue is not None:
            host.queue.discard()
            host.queue = None
        host.status = IDLE
        del self._hosts[host.name]

    def set_host_address(self, host: str, address: str | None) -> None:
        """The address `host` resolves to (None: it does not resolve). With per-IP politeness the
        host then joins its address's group and may be handed out; call again when it changes."""
        state = self._hosts.get(host)
        if state is None or state.status == GIVEN_UP:
            return
        changed = state.address != address or not state.address_known
        state.address = address
        state.address_known = True
        if not self._per_ip or (not changed and state.group is not None):
            return
        self._awaiting.pop(host, None)
        if state.group is not None:
            self._leave_group(state, self._clock())
        if state.status != IDLE or address is not None:
            self._join_group(state)
        queue = state.queue
        if state.status == ACTIVE and queue is not None and queue.size and state.in_flight < self._host_limit:
            self._offer(state)

    def _sync_lost(self) -> None:
        self._stats.urls_lost = self._lost_before + self._log.lost_entries

    @property
    def stats(self) -> FrontierStats:
        self._sync_lost()
        return self._stats

    # -- gauges ------------------------------------------------------------------------------

    def __len__(self) -> int:
        """URLs queued (front, back and parked queues), not counting those in flight."""
        return self._queued - self._log.lost_entries

    @property
    def in_flight(self) -> int:
        return len(self._leases)

    @property
    def active_hosts(self) -> int:
        """Hosts owning one of the B back queues."""
        return self._active

    @property
    def back_queues(self) -> int:
        return self._max_back

    @property
    def parked_hosts(self) -> int:
        return self._parked_count

    @property
    def known_hosts(self) -> int:
        """Rows of the host table (active, parked, given up, and idle ones whose timing still matters)."""
        return len(self._hosts)

    def hosts_awaiting_address(self) -> list[str]:
        """Hosts with a back queue that cannot be handed out until `set_host_address` (per-IP)."""
        return list(self._awaiting)

    def front_sizes(self) -> list[int]:
        return self._front.sizes()

    def holds(self, host: str) -> bool:
        """Has `host` URLs in a back queue here (active or parked)?"""
        state = self._hosts.get(host)
        return state is not None and state.queue is not None and state.queue.size > 0

    def host_info(self, host: str) -> HostState | None:
        """The host table row of `host` (read-only use: for diagnostics and tests)."""
        return self._hosts.get(host)

    def gauges(self) -> dict[str, Any]:
        self._sync_lost()
        return {
            "frontier": len(self),
            "in_flight": len(self._leases),
            "active_hosts": self._active,
            "parked_hosts": self._parked_count,
            "known_hosts": len(self._hosts),
            "awaiting_address": len(self._awaiting),
            "front_queues": self._front.sizes(),
        }

    def host_report(self, limit: int) -> HostReport:
        """The hosts with most URLs queued (at most `limit`), their delays and what set them, and
        every host counted (frontier/report.py). O(hosts): the caller decides how often."""
        return host_report(
            list(self._hosts.values()), self.politeness, now=self._clock(), front_queued=self._front.size,
            limit=limit, connections=self._host_limit,
        )  # fmt: skip

    def disk_bytes(self) -> int:
        return self._store.disk_bytes()

    # -- durability ---------------------------------------------------------------------------

    def checkpoint(self, extra: bytes | None = None) -> None:
        """Make the whole frontier durable and atomic: sync the segment blocks written since the
        last checkpoint, then replace the state file (write, fsync, rename). Leases out now are
        handed out again after a reopen. Segment files consumed since the previous checkpoint are
        deleted only now, so a crash at any point reopens to one checkpoint or the other.

        `extra` is committed in the same atomic write (the engine's own state: the crawl checkpoint);
        it stays as it was when None. The checkpoint before this one is kept as the fallback."""
        self._check_open()
        if extra is not None:
            self.extra = extra
        record = msgspec.structs.replace(self._snapshot(self._clock()), extra=self.extra)
        data = state_format.encode(record)
        self._log.sync()
        self._store.write_state(data)
        self._log.committed(state_format.referenced_files(record))

    def close(self, *, checkpoint: bool = True) -> None:
        """Checkpoint (unless told not to: the last checkpoint then stands) and release the store and
        its directory lock. Idempotent."""
        if self._closed:
            return
        try:
            if checkpoint:
                self.checkpoint()
        finally:  # even when the checkpoint fails (a full disk): the directory lock is released
            self._closed = True
            self._store.close()

    def __enter__(self) -> Frontier:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise FrontierError("the frontier is closed")

    def _snapshot(self, now: float) -> state_format.FrontierRecord:
        def queue_record(queue: DiskQueue) -> state_format.QueueRecord:
            return state_format.QueueRecord(list(queue.head), list(queue.blocks), list(queue.tail), queue.size)

        leased: dict[str, list[FrontierEntry]] = {}
        for lease in self._leases.values():
            leased.setdefault(lease.host, []).append(lease.entry)
        hosts: list[state_format.HostRecord] = []
        own_groups: list[state_format.GroupRecord] = []
        for host in self._hosts.values():
            group = host.group
            if group is not None and not group.shared and group.entry_seq:
                own_groups.append(_group_record(group, now))
            hosts.append(
                state_format.HostRecord(
                    name=host.name,
                    status=host.status,
                    t_e=host.t_e - now,
                    crawl_delay=host.crawl_delay,
                    failures=host.failures,
                    parks=host.parks,
                    address=host.address,
                    address_known=host.address_known,
                    heap_seq=host.heap_seq,
                    park_seq=host.park_seq,
                    park_key=host.park_key - now if host.park_seq else 0.0,
                    queue=queue_record(host.queue) if host.queue is not None else None,
                    leased=leased.get(host.name, []),
                )
            )
        groups = [_group_record(group, now) for group in self._groups.values()] + own_groups
        version, internal, gauss = self._rng.getstate()
        self._sync_lost()
        return state_format.FrontierRecord(
            format=state_format.FORMAT,
            version=state_format.VERSION,
            levels=self._levels,
            per_ip=self._per_ip,
            seq=self._seq,
            next_file_id=self._log.next_file_id,
            rng_state=[version, list(internal), gauss],
            front=[queue_record(queue) for queue in self._front.queues],
            hosts=hosts,
            groups=groups,
            stats=self._stats.to_dict(),
            given_up_reasons=dict(self.given_up_reasons),
        )

    def _restore(self, record: state_format.FrontierRecord, fallback_files: set[int]) -> None:
        if record.levels != self._levels:
            raise FrontierStateError(
                f"the checkpoint has {record.levels} front queues but the prioritizer has {self._levels} levels"
            )
        now = self._clock()
        log = self._log
        log.next_file_id = record.next_file_id
        self._seq = record.seq
        try:
            version, internal, gauss = record.rng_state
            self._rng.setstate((version, tuple(internal), gauss))  # type: ignore[arg-type]
        except (TypeError, ValueError) as exc:
            raise FrontierStateError(f"frontier checkpoint has a bad RNG state: {exc}") from None
        for field_name, value in record.stats.items():
            if hasattr(self._stats, field_name):
                setattr(self._stats, field_name, value)
        self._lost_before = self._stats.urls_lost
        self.given_up_reasons.update(record.given_up_reasons)
        refs: list[BlockRef] = []
        for queue, saved_queue in zip(self._front.queues, record.front, strict=True):
            _fill_queue(queue, saved_queue)
            refs.extend(saved_queue.blocks)
        self._front.size = sum(queue.size for queue in self._front.queues)
        self._queued = self._front.size
        # Heap entries are restored with their sequence numbers only when the grouping is the same.
        same_grouping = record.per_ip == self._per_ip
        saved_groups = {(g.shared, g.key): g for g in record.groups} if same_grouping else {}
        for saved_group in record.groups:
            if saved_group.shared and same_grouping:
                group = self._groups[saved_group.key] = HostGroup(saved_group.key, True, self._ip_limit)
                group.t_e = saved_group.t_e + now
        for saved in record.hosts:
            host = self._hosts[saved.name] = HostState(saved.name)
            host.status = saved.status
            host.t_e = saved.t_e + now
            host.crawl_delay = saved.crawl_delay
            host.failures = saved.failures
            host.parks = saved.parks
            host.address = saved.address
            host.address_known = saved.address_known
            if saved.queue is not None and host.status in (ACTIVE, PARKED):
                back = host.queue = DiskQueue(log, self._back_window, self._back_file_bytes, self._back_max_block)
                _fill_queue(back, saved.queue)
                refs.extend(saved.queue.blocks)
                for entry in reversed(saved.leased):
                    back.push_front(entry)
                self._queued += back.size
            elif saved.leased:
                self._stats.urls_given_up += len(saved.leased)
            if saved.leased:
                host.t_e = max(host.t_e, now + self.politeness.min_delay)  # a request may have been under way
            if host.status == ACTIVE:
                self._active += 1
            elif host.status == PARKED:
                self._parked_count += 1
                host.park_seq = saved.park_seq
                host.park_key = saved.park_key + now
                self._parked.append((host.park_key, host.park_seq, host))
            if host.status == GIVEN_UP:
                continue
            if self._per_ip and not host.address_known:
                if host.status != IDLE:
                    self._awaiting[host.name] = host
            elif host.status != IDLE or (self._per_ip and host.address is not None):
                self._join_group(host)
            ready = saved.heap_seq and not saved.leased and host.status == ACTIVE and same_grouping
            if ready and host.group is not None:
                host.heap_seq = saved.heap_seq
                host.group.heap.append((host.t_e, host.heap_seq, host))
        heapq.heapify(self._parked)
        groups = {id(h.group): h.group for h in self._hosts.values() if h.group is not None}
        for group in groups.values():
            heapq.heapify(group.heap)
            entry_of = saved_groups.get((group.shared, group.key))
            if entry_of is not None and entry_of.entry_seq and group.heap:
                group.entry_seq = entry_of.entry_seq
                group.key_time = entry_of.key_time + now
                self._heap.append((group.key_time, group.entry_seq, group))
        heapq.heapify(self._heap)
        log.adopt(refs, fallback_files)
        for file_id in self._store.file_ids() - set(log.live) - fallback_files:
            self._store.delete(file_id)  # written after the checkpoint: nothing refers to it
        for host in list(self._hosts.values()):  # leased out at checkpoint time, or regrouped
            if host.status == ACTIVE and not host.heap_seq and host.group is not None and host.queue is not None:
                if host.t_e - now > self._park_threshold:
                    self._park(host)
                elif host.queue.size:
                    self._offer(host)
        for group in groups.values():
            self._schedule(group)

    # -- invariants ---------------------------------------------------------------------------

    def check_invariants(self, *, deep: bool = False) -> None:
        """Audit every invariant of the package docstring; O(hosts + URLs in memory), or also
        reading every block from disk with `deep`. Raises AssertionError naming the first breach."""
        queues_seen: set[int] = set()
        active = parked = queued = in_flight = 0
        group_leases: Counter[int] = Counter()
        host_leases: Counter[str] = Counter()
        groups: dict[int, HostGroup] = {}
        for number, lease in self._leases.items():
            assert lease.number == number and self._hosts.get(lease.host) is lease.state, f"stray {lease!r}"
            host_leases[lease.host] += 1
            group_leases[id(lease.group)] += 1
            groups[id(lease.group)] = lease.group
        for name, host in self._hosts.items():
            assert host.name == name, f"host table row {name} holds {host.name}"
            queue = host.queue
            if host.status in (ACTIVE, PARKED):
                assert queue is not None, f"{host!r} has no back queue"
                assert id(queue) not in queues_seen, f"{name} shares a back queue"
                queues_seen.add(id(queue))
                queued += queue.size
                entries = list(queue.entries_in_memory())
                if deep:
                    entries.extend(e for ref in queue.blocks for e in self._log.read(ref))
                for entry in entries:
                    assert host_of(entry.url) == name, f"back queue of {name} holds {entry.url}"
                if host.status == ACTIVE:
                    active += 1
                else:
                    parked += 1
                    assert host.park_seq and not host.heap_seq, f"{host!r} parked without a parked-heap entry"
                    # URLs reaching a parked host wait in its tail until a block's worth is there
                    bound = queue.max_block + self._host_limit
                    assert queue.in_memory() <= bound, f"parked {name} keeps {queue.in_memory()} URLs in memory"
            else:
                assert queue is None, f"{host!r} keeps a back queue"
                assert not host.heap_seq and not host.park_seq, f"{host!r} is still scheduled"
            assert host.in_flight == host_leases[name], f"{name}: in_flight {host.in_flight} != leases"
            assert host.in_flight <= self._host_limit, f"{name}: {host.in_flight} leases > {self._host_limit}"
            in_flight += host.in_flight
            awaiting = self._per_ip and host.status in (ACTIVE, PARKED) and not host.address_known
            assert (name in self._awaiting) == awaiting, f"{host!r} awaiting-address mismatch"
            if host.group is not None:
                groups[id(host.group)] = host.group
                assert host.group.shared == (self._per_ip and host.address is not None), f"{name} in wrong group"
            if host.heap_seq:
                assert host.status == ACTIVE and queue is not None and queue.size > 0, f"{host!r} offered while idle"
                assert host.in_flight < self._host_limit, f"{host!r} offered at its connection limit"
                assert host.group is not None
                live = [item for item in host.group.heap if item[1] == host.heap_seq]
                assert len(live) == 1 and live[0][2] is host and live[0][0] == host.t_e, f"{name}: bad heap entry"
            elif (
                host.status == ACTIVE
                and queue is not None
                and queue.size
                and host.in_flight < self._host_limit
                and host.group is not None
            ):
                raise AssertionError(f"{host!r} has URLs, a free connection and no heap entry: it would starve")
        assert active == self._active <= self._max_back, f"active {active}/{self._active} > B={self._max_back}"
        assert parked == self._parked_count, f"parked {parked} != {self._parked_count}"
        assert in_flight == len(self._leases), f"in flight {in_flight} != {len(self._leases)}"
        front = sum(queue.size for queue in self._front.queues)
        assert front == self._front.size, f"front size {front} != {self._front.size}"
        assert queued + front == len(self), f"queued {queued} + {front} != {len(self)}"
        live_groups = {id(item[2]) for item in self._heap if item[1] == item[2].entry_seq}
        for key, group in self._groups.items():
            assert group.shared and group.key == key
        for group_id, group in groups.items():
            assert group.in_flight == group_leases[group_id], f"{group!r}: in_flight != its leases"
            assert group.in_flight <= group.limit, f"{group!r} over its limit"
            ready = [item for item in group.heap if item[1] == item[2].heap_seq]
            if ready and group.in_flight < group.limit:
                assert group_id in live_groups, f"{group!r} has ready hosts and no heap entry"
                due = max(group.t_e, min(item[0] for item in ready))
                assert group.key_time == due, f"{group!r}: heap key {group.key_time} != {due}"


def _group_record(group: HostGroup, now: float) -> state_format.GroupRecord:
    return state_format.GroupRecord(
        key=group.key,
        shared=group.shared,
        t_e=group.t_e - now,
        entry_seq=group.entry_seq,
        key_time=group.key_time - now if group.entry_seq else 0.0,
    )


def _fill_queue(queue: DiskQueue, saved: state_format.QueueRecord) -> None:
    queue.head.extend(saved.head)
    queue.blocks.extend(tuple(ref) for ref in saved.blocks)  # type: ignore[misc]
    queue.tail.extend(saved.tail)
    queue.size = saved.size
    expected = len(saved.head) + len(saved.tail) + sum(ref[3] for ref in saved.blocks)
    if expected != saved.size:
        raise FrontierStateError(f"frontier checkpoint: a queue records {saved.size} URLs but holds {expected}")
