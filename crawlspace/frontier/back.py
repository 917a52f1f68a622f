"""Back queues (IIR fig. 20.3, bottom half): per-host state, politeness groups and leases.

A host that owns a back queue is a `HostState` whose `queue` is set; the host table T of fig. 20.4
is the frontier's dict of HostStates. Hosts are scheduled through `HostGroup`s: with per-IP
politeness all hosts resolving to one address share a group, whose own contact time and
connection count bound them together; without it (or before an address is known to be
unresolvable) every host is alone in its group. The heap of earliest contact times holds groups,
each group a heap of its ready hosts: Mercator's one heap entry per back queue, lifted one level
so that hosts on one server are polite to that server too (BUbiNG's workbench of IP entries).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

import msgspec

from crawlspace.frontier.diskqueue import DiskQueue
from crawlspace.frontier.entry import FrontierEntry

IDLE = 0  # known (its timing or errors still matter) but without a back queue
ACTIVE = 1  # owns one of the B back queues
PARKED = 2  # has a back queue on disk but gave up its slot until its contact time (errors, long delays)
GIVEN_UP = 3  # failed too often: its URLs are dropped and counted
STATUS_NAMES = {IDLE: "idle", ACTIVE: "active", PARKED: "parked", GIVEN_UP: "given-up"}


class DelayCause(StrEnum):
    """Which term of the politeness formula set a host's current delay (what an operator asks first
    when a host is slow to crawl)."""

    CRAWL_DELAY = "crawl-delay"  # its robots.txt Crawl-delay
    MIN_DELAY = "min-delay"  # the configured minimum (the fetch was quick)
    FETCH_TIME = "10x-rule"  # Mercator's k x the last fetch's duration (k = delay_factor), up to max_delay
    BACKOFF = "backoff"  # errors, a 429/503 Retry-After, an unreachable robots.txt or a DNS failure


@dataclass(frozen=True, slots=True)
class Politeness:
    """When a host (and a server) may be contacted again. Times in seconds.

    After a fetch that took `d` seconds the host's next contact is at least
        now + max(Crawl-delay, min(max(min_delay, delay_factor x d), max_delay) / max_conn_per_host)
    Crawl-delay is never capped: politeness first. With per-IP politeness the host's address
    waits the same formula without Crawl-delay, divided by `max_conn_per_ip`. Consecutive errors
    add an exponential backoff (error_delay x 2^(n-1)); after `park_after_errors` of them the
    host is parked for park_seconds x 2^(parks-1), and after `give_up_after_parks` parks without
    a success it is given up. A host whose next contact is more than `park_threshold` seconds
    away (None: max_delay) leaves its back queue to another host meanwhile.
    """

    min_delay: float = 1.0
    delay_factor: float = 10.0
    max_delay: float = 60.0
    max_conn_per_host: int = 1
    per_ip: bool = False  # the sans-IO default; the crawl turns it on and feeds addresses
    max_conn_per_ip: int | None = None  # None: max_conn_per_host
    error_delay: float = 5.0
    park_after_errors: int = 5
    park_seconds: float = 900.0
    give_up_after_parks: int = 3
    park_threshold: float | None = None

    def __post_init__(self) -> None:
        for name in ("min_delay", "delay_factor", "max_delay", "error_delay", "park_seconds"):
            value = getattr(self, name)
            if not (value >= 0 and math.isfinite(value)):
                raise ValueError(f"Politeness.{name} must be a finite number >= 0, got {value!r}")
        if self.max_delay < self.min_delay:
            raise ValueError(f"Politeness.max_delay ({self.max_delay}) is less than min_delay ({self.min_delay})")
        if self.max_conn_per_host < 1 or (self.max_conn_per_ip is not None and self.max_conn_per_ip < 1):
            raise ValueError("Politeness: connection limits must be at least 1")
        if self.park_after_errors < 1 or self.give_up_after_parks < 0:
            raise ValueError("Politeness: park_after_errors must be >= 1 and give_up_after_parks >= 0")
        if self.park_threshold is not None and not self.park_threshold >= 0:
            raise ValueError(f"Politeness.park_threshold must be >= 0, got {self.park_threshold!r}")

    @property
    def ip_limit(self) -> int:
        return self.max_conn_per_host if self.max_conn_per_ip is None else self.max_conn_per_ip

    @property
    def parking_threshold(self) -> float:
        return self.max_delay if self.park_threshold is None else self.park_threshold

    def next_gap(self, duration: float, crawl_delay: float | None, connections: int = 1) -> float:
        """Seconds between the end of a fetch that took `duration` and the next contact: the formula
        above, for a host (its Crawl-delay, its `max_conn_per_host`) or for an address (no
        Crawl-delay, the group's limit). The one place it is written: `Frontier.release` calls it on
        every fetch, hence comparisons rather than min() and max(), which cost twice as much."""
        gap = self.delay_factor * duration
        if gap < self.min_delay:
            gap = self.min_delay
        if gap > self.max_delay:
            gap = self.max_delay
        gap /= connections
        if crawl_delay is not None and crawl_delay > gap:
            return crawl_delay
        return gap

    def gap_and_cause(
        self, duration: float, crawl_delay: float | None, connections: int = 1
    ) -> tuple[float, DelayCause]:
        """`next_gap` and the term that decided it, for reports (not the hot path, which keeps
        `next_gap`); the two agree on the gap for every input (tests/frontier check it)."""
        scaled = self.delay_factor * duration
        if scaled > self.min_delay:
            gap, cause = min(scaled, self.max_delay), DelayCause.FETCH_TIME
        else:
            gap, cause = self.min_delay, DelayCause.MIN_DELAY
        gap /= connections
        if crawl_delay is not None and crawl_delay > gap:
            return crawl_delay, DelayCause.CRAWL_DELAY
        return gap, cause

    def error_backoff(self, failures: int) -> float:
        return self.error_delay * 2.0 ** min(failures - 1, 30)

    def park_time(self, parks: int) -> float:
        return self.park_seconds * 2.0 ** min(parks - 1, 30)


class HostGroup(msgspec.Struct, eq=False):
    """Hosts that are polite together: one IP address (shared) or one host alone (not shared).

    `heap` holds (t_e, seq, host) for the group's ready hosts; entries whose seq is no longer the
    host's `heap_seq` are stale and skipped. The group has at most one live entry in the frontier's
    heap: seq `entry_seq`, key `key_time` = max(own t_e, earliest ready host's t_e).
    (msgspec Structs rather than slotted classes: created on every host activation, and a Struct
    is built in C at half the cost.)
    """

    key: str
    shared: bool
    limit: int
    t_e: float = -math.inf
    in_flight: int = 0
    heap: list[tuple[float, int, HostState]] = msgspec.field(default_factory=list)
    entry_seq: int = 0
    key_time: float = 0.0
    members: int = 0

    def __repr__(self) -> str:
        kind = "ip" if self.shared else "host"
        return f"HostGroup({kind} {self.key}, t_e={self.t_e:.3f}, in_flight={self.in_flight}/{self.limit})"


class HostState(msgspec.Struct, eq=False):
    """One row of the host table: a host's timing, errors, address and (when it has one) back queue."""

    name: str
    status: int = IDLE
    t_e: float = -math.inf  # earliest next contact
    crawl_delay: float = 0.0  # last robots.txt Crawl-delay reported
    in_flight: int = 0
    queue: DiskQueue | None = None
    group: HostGroup | None = None
    address: str | None = None
    address_known: bool = False
    failures: int = 0  # consecutive failed fetches
    parks: int = 0  # times parked for errors since the last success
    heap_seq: int = 0  # seq of its live entry in group.heap (0: none)
    park_seq: int = 0  # seq of its live entry in the parked heap (0: none)
    park_key: float = 0.0  # the time of that entry
    # for reports only (`Frontier.host_report`), not checkpointed: what set t_e at the last release
    last_duration: float = 0.0  # seconds the last fetch that reached the host took
    last_contact: float = -math.inf  # when that fetch ended
    backoff_until: float = -math.inf  # the t_e the last backoff (errors, Retry-After) asked for
    backoff_seconds: float = 0.0  # and how long it was

    def __repr__(self) -> str:
        queued = self.queue.size if self.queue is not None else 0
        return (
            f"HostState({self.name}, {STATUS_NAMES[self.status]}, t_e={self.t_e:.3f}, queued={queued}, "
            f"in_flight={self.in_flight}, failures={self.failures}, parks={self.parks})"
        )


class Lease(msgspec.Struct, frozen=True, gc=False, eq=False):
    """A URL handed out by `Frontier.acquire`; give it back with `Frontier.release` exactly once.

    Until then it counts against its host's (and, with per-IP politeness, its address's)
    connection limit. Equality is identity: two leases of one URL are distinct. The fields after
    `granted_at` are the frontier's own. (Not tracked by the cyclic GC: nothing refers back to a
    lease but the frontier's lease table, so it can be in no cycle, and a lease a second is saved
    a GC traversal.)
    """

    entry: FrontierEntry
    host: str
    granted_at: float
    number: int
    state: HostState
    group: HostGroup

    def __repr__(self) -> str:
        return f"Lease({self.entry.url!r}, host={self.host!r}, granted_at={self.granted_at:.3f})"
