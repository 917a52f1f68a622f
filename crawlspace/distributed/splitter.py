"""The host splitter's batches: URLs waiting for other owners (who owns what: distributed.assignment)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from crawlspace.frontier.entry import FrontierEntry

BATCH_URLS = 512


@dataclass(slots=True)
class Batch:
    peer: int
    number: int
    entries: list[FrontierEntry]
    forward: bool = False  # URLs of hosts moved to the partition that owns their IP address (per-IP politeness)


@dataclass
class Outbox:
    """URLs for other partitions: pending in an open batch until it is cut, then unacknowledged until
    the owner confirms. Batch numbers are per sender and never reused (they survive checkpoints).

    A batch has its number from its first URL on, so that the sender can journal each URL with it as
    it is queued, in the same write as the page it was found on: a page is never journaled done while
    links it found for other partitions are only in memory."""

    me: int
    partitions: int
    next_number: int = 1
    pending: dict[tuple[int, bool], Batch] = field(default_factory=dict)
    unacked: dict[tuple[int, int], Batch] = field(default_factory=dict)
    acked: int = 0

    def add(self, peer: int, entry: FrontierEntry, *, forward: bool = False) -> tuple[int, bool]:
        """Queue `entry` for `peer`: the number of the batch it is in, and whether that batch is full."""
        assert peer != self.me
        batch = self.pending.get((peer, forward))
        if batch is None:
            batch = self.pending[(peer, forward)] = Batch(peer, self.next_number, [], forward)
            self.next_number += 1
        batch.entries.append(entry)
        return batch.number, len(batch.entries) >= BATCH_URLS

    def cut(self) -> list[Batch]:
        """Close every open batch (to send once their URLs are journaled); they wait for acknowledgement."""
        batches = list(self.pending.values())
        for batch in batches:
            self.unacked[(batch.peer, batch.number)] = batch
        self.pending = {}
        return batches

    def acknowledge(self, peer: int, number: int) -> bool:
        """The owner journaled the batch; False for an unknown (already acknowledged) one."""
        if self.unacked.pop((peer, number), None) is None:
            return False
        self.acked += 1
        return True

    def restore(self, batches: Iterable[Batch], next_number: int) -> None:
        for batch in batches:
            self.unacked[(batch.peer, batch.number)] = batch
        self.next_number = max(self.next_number, next_number)

    @property
    def waiting(self) -> int:
        """Batches not yet acknowledged plus pending URLs: nonzero means the crawl is not settled."""
        return len(self.unacked) + sum(len(batch.entries) for batch in self.pending.values())
