"""The host splitter: which partition owns a host, and the batches of URLs waiting for other owners."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import xxhash

from crawlspace.frontier.entry import FrontierEntry

BATCH_URLS = 512


def owner_of(host: str, partitions: int) -> int:
    """The partition that fetches `host` (host[:port] as in normalized URLs): a stable hash mod N."""
    if partitions == 1:
        return 0
    return int(xxhash.xxh3_64_intdigest(host.encode("utf-8", "surrogatepass")) % partitions)


@dataclass(slots=True)
class Batch:
    peer: int
    number: int
    entries: list[FrontierEntry]
    forward: bool = False  # URLs of hosts moved to the partition that owns their IP address (per-IP politeness)


@dataclass
class Outbox:
    """URLs for other partitions: pending until a batch is cut, then unacknowledged until the owner
    confirms. Batch numbers are per sender and never reused (they survive checkpoints)."""

    me: int
    partitions: int
    next_number: int = 1
    pending: dict[tuple[int, bool], list[FrontierEntry]] = field(default_factory=dict)
    unacked: dict[tuple[int, int], Batch] = field(default_factory=dict)
    acked: int = 0

    def add(self, peer: int, entry: FrontierEntry, *, forward: bool = False) -> bool:
        """Queue `entry` for `peer`; True when that peer's pending batch is full."""
        assert peer != self.me
        queue = self.pending.setdefault((peer, forward), [])
        queue.append(entry)
        return len(queue) >= BATCH_URLS

    def cut(self) -> list[Batch]:
        """Turn every pending queue into a numbered batch (to journal, then send)."""
        batches = []
        for (peer, forward), entries in self.pending.items():
            if entries:
                batch = Batch(peer, self.next_number, entries, forward)
                self.next_number += 1
                self.unacked[(peer, batch.number)] = batch
                batches.append(batch)
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
        return len(self.unacked) + sum(len(entries) for entries in self.pending.values())
