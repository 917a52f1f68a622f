"""What the frontier knows of its hosts, as plain data for an operator: queued URLs, next contact, the
current delay and what set it (Crawl-delay, min delay, Mercator's 10x rule, or a backoff).

Sans-IO like the rest of the frontier: times are the frontier's clock's, given back relative to
`now`, so the caller (the engine, writing DIR/hosts.json) turns them into wall-clock times. A report
is bounded: the `limit` hosts with the most URLs queued in full, every other host only counted in the
summary, so that a crawl of millions of hosts writes the same few kilobytes as one of ten.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from crawlspace.frontier.back import ACTIVE, PARKED, STATUS_NAMES, DelayCause, HostState, Politeness


@dataclass(frozen=True, slots=True)
class HostDelay:
    """A host's delay between two contacts as its last release set it."""

    seconds: float
    cause: DelayCause


def host_delay(host: HostState, politeness: Politeness, connections: int = 1) -> HostDelay:
    """The delay the host's last release asked for, and which term of the formula decided it: a
    backoff when the backoff's time is the host's next contact (nothing later has pushed it further),
    else the politeness gap of its last fetch's duration and its Crawl-delay (`Politeness.next_gap`)."""
    if host.backoff_until >= host.t_e and host.backoff_until > -math.inf:
        return HostDelay(host.backoff_seconds, DelayCause.BACKOFF)
    gap, cause = politeness.gap_and_cause(host.last_duration, host.crawl_delay or None, connections)
    return HostDelay(gap, cause)


@dataclass(frozen=True, slots=True)
class HostRow:
    """One host of a report; `next_contact_in` is seconds from the report's `now` (0: may be
    contacted now), the later of the host's and, with per-IP politeness, its address's time."""

    host: str
    status: str
    queued: int
    in_flight: int
    next_contact_in: float
    delay: float
    delay_cause: str
    crawl_delay: float | None
    failures: int
    parks: int
    last_fetch_seconds: float | None
    last_contact_ago: float | None
    address: str | None

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


@dataclass(frozen=True, slots=True)
class HostReport:
    """The `limit` hosts with most URLs queued, and every host counted by status and delay cause."""

    rows: list[HostRow]
    hosts: int
    by_status: dict[str, int]
    by_cause: dict[str, int]
    """Hosts with URLs queued (active or parked), by what sets their delay."""
    back_queued: int
    """URLs in back queues (of every host, listed or not)."""
    front_queued: int
    """URLs still in the front queues, not yet given to a host's back queue."""
    limit: int
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "hosts": self.hosts,
            "listed": len(self.rows),
            "limit": self.limit,
            "by_status": self.by_status,
            "by_cause": self.by_cause,
            "back_queued": self.back_queued,
            "front_queued": self.front_queued,
            "rows": [row.to_dict() for row in self.rows],
            **self.extra,
        }


def _queued(host: HostState) -> int:
    return host.queue.size if host.queue is not None else 0


def host_report(
    hosts: list[HostState], politeness: Politeness, *, now: float, front_queued: int, limit: int, connections: int = 1
) -> HostReport:
    """The report of the host table `hosts` at `now` (the frontier's clock), listing at most `limit`."""
    by_status: Counter[str] = Counter()
    by_cause: Counter[str] = Counter()
    back_queued = 0
    for host in hosts:
        by_status[STATUS_NAMES[host.status]] += 1
        queued = _queued(host)
        back_queued += queued
        if host.status in (ACTIVE, PARKED) and queued:
            by_cause[host_delay(host, politeness, connections).cause] += 1
    top = heapq.nlargest(limit, hosts, key=lambda h: (_queued(h), h.in_flight, h.name)) if limit > 0 else []
    rows = []
    for host in top:
        delay = host_delay(host, politeness, connections)
        contact = host.t_e
        group = host.group
        if group is not None and group.shared and group.t_e > contact:
            contact = group.t_e
        rows.append(
            HostRow(
                host=host.name,
                status=STATUS_NAMES[host.status],
                queued=_queued(host),
                in_flight=host.in_flight,
                next_contact_in=round(max(0.0, contact - now), 3),
                delay=round(delay.seconds, 3),
                delay_cause=str(delay.cause),
                crawl_delay=host.crawl_delay or None,
                failures=host.failures,
                parks=host.parks,
                last_fetch_seconds=None if host.last_contact == -math.inf else round(host.last_duration, 4),
                last_contact_ago=None if host.last_contact == -math.inf else round(now - host.last_contact, 3),
                address=host.address,
            )
        )
    return HostReport(
        rows=rows,
        hosts=len(hosts),
        by_status=dict(sorted(by_status.items())),
        by_cause=dict(sorted(by_cause.items())),
        back_queued=back_queued,
        front_queued=front_queued,
        limit=limit,
    )
