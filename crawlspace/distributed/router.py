"""The host splitter's bookkeeping in one partition: which URLs stay, which leave, and what must be journaled.

Who fills it: the link pipeline routes every URL it submits (`route`); the lease path asks
`owner_by_address` once a host's IP address is known and hands a leased URL over when another
partition owns that address (`hand_over`); the transport delivers batches (`pin` for handed-over
hosts) and acknowledgements (`acknowledge`). Who drains it: the engine cuts the open batches
(`cut`) and gives them to its `Peers` once the journal holding their URLs is written.

Ownership: a host pinned here (handed to this partition for per-IP politeness) stays here; a host
moved away stays with the partition it was handed to; any other host belongs to whoever the
`Assignment` names. Moves and pins are permanent for the crawl, so they are journaled (M, P lines)
and checkpointed, like the unacknowledged batches (X lines as each URL is queued, in the same
journal write as the page that found it; K lines when the owner acknowledges), which are sent
again after a resume: delivery is at least once, the owner's URL set drops repeats.

Pure bookkeeping: no sockets, no clock, no file format. What must be journaled goes to the
`RouterJournal` it is given (the engine's ledger, which writes the lines), in the order the events
happen; a resume replays them back through the `replay_*` methods.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from crawlspace.distributed.assignment import Assignment
from crawlspace.distributed.splitter import Batch, Outbox
from crawlspace.frontier.entry import FrontierEntry
from crawlspace.urls import host_of

UnackedBatch = tuple[int, int, bool, list[tuple[str, int, int]]]
"""A batch as checkpointed: (peer, number, forward, [(url, depth, hops)])."""


class RouterJournal(Protocol):
    """Records the router's events durably (in the next journal write, with the page that caused them)."""

    def sent(self, peer: int, number: int, entry: FrontierEntry, *, forward: bool) -> None:
        """`entry` is in batch `number` for `peer` (forward: a host handed over for per-IP politeness)."""
        ...

    def acked(self, peer: int, number: int) -> None:
        """`peer` journaled batch `number`: it need not be sent again."""
        ...

    def moved(self, host: str, owner: int) -> None:
        """`host` belongs to `owner` from now on (the partition owning its IP address)."""
        ...

    def pinned(self, host: str) -> None:
        """`host` belongs to this partition from now on (another handed it over)."""
        ...


class PartitionRouter:
    def __init__(self, index: int, assignment: Assignment, journal: RouterJournal, *, per_ip: bool) -> None:
        self.index = index
        self.assignment = assignment
        self.per_ip = per_ip
        self.outbox = Outbox(index, assignment.partitions)
        self.moved: dict[str, int] = {}  # hosts this partition handed to the owner of their IP address
        self.pinned: set[str] = set()  # hosts another partition handed to this one
        self._journal = journal
        self._replayed: dict[tuple[int, int], Batch] = {}  # batches of the checkpoint and journal, in a replay
        self._next_batch = 1

    def __repr__(self) -> str:
        return (
            f"PartitionRouter({self.index} of {self.assignment.partitions}, {len(self.moved)} moved, "
            f"{len(self.pinned)} pinned, {self.outbox.waiting} waiting)"
        )

    def owner(self, host: str) -> int:
        if host in self.pinned:
            return self.index
        moved = self.moved.get(host)
        return moved if moved is not None else self.assignment.owner(host)

    def mine(self, url: str) -> bool:
        return self.owner(host_of(url)) == self.index

    def route(self, entries: Iterable[FrontierEntry]) -> tuple[list[FrontierEntry], bool]:
        """This partition's entries; the others are queued (and journaled) for their owners. The flag
        says a batch is full: cut and send now rather than at the next periodic send."""
        mine: list[FrontierEntry] = []
        full = False
        for entry in entries:
            owner = self.owner(host_of(entry.url))
            if owner == self.index:
                mine.append(entry)
                continue
            number, now_full = self.outbox.add(owner, entry)
            self._journal.sent(owner, number, entry, forward=False)
            full |= now_full
        return mine, full

    def owner_by_address(self, host: str, address: str | None) -> int | None:
        """With per-IP politeness, hosts live with the partition owning their address: another
        partition's index when this host should be handed over (once, for good), else None."""
        if not self.per_ip or host in self.pinned:
            return None
        owner = self.moved.get(host)
        if owner is None and address:
            owner = self.assignment.owner(address)
            if owner != self.index:
                self.moved[host] = owner
                self._journal.moved(host, owner)
        return None if owner is None or owner == self.index else owner

    def hand_over(self, entry: FrontierEntry, owner: int) -> None:
        """Queue a leased URL for the partition that now owns its host (no request was made for it)."""
        number, _ = self.outbox.add(owner, entry, forward=True)
        self._journal.sent(owner, number, entry, forward=True)

    def pin(self, entries: Iterable[FrontierEntry]) -> None:
        """Hosts of a forwarded batch: this partition keeps them from now on."""
        for host in {host_of(entry.url) for entry in entries} - self.pinned:
            self.pinned.add(host)
            self._journal.pinned(host)

    def acknowledge(self, peer: int, number: int) -> bool:
        """The owner journaled batch `number`; False (nothing journaled) for a repeat acknowledgement."""
        if not self.outbox.acknowledge(peer, number):
            return False
        self._journal.acked(peer, number)
        return True

    def cut(self) -> list[Batch]:
        """The open batches, closed: the caller sends them once their X lines are written."""
        return self.outbox.cut() if self.outbox.pending else []

    @property
    def unacknowledged(self) -> list[Batch]:
        return sorted(self.outbox.unacked.values(), key=lambda batch: batch.number)

    # -- checkpoint and replay ----------------------------------------------------------------

    def checkpointed(self) -> tuple[list[UnackedBatch], int, dict[str, int], list[str]]:
        """(unacknowledged batches, next batch number, moved hosts, pinned hosts) for CrawlState."""
        batches = [
            (batch.peer, batch.number, batch.forward, [(e.url, e.depth, e.hops) for e in batch.entries])
            for batch in self.outbox.unacked.values()
        ]
        return batches, self.outbox.next_number, dict(self.moved), sorted(self.pinned)

    def start_replay(
        self, batches: list[UnackedBatch], next_batch: int, moved: dict[str, int], pinned: Iterable[str]
    ) -> None:
        """Restore a checkpoint's part; the journal's lines since then follow through `replay`."""
        self.moved = dict(moved)
        self.pinned = set(pinned)
        self._replayed = {
            (peer, number): Batch(peer, number, [FrontierEntry(url, depth, hops) for url, depth, hops in entries], fwd)
            for peer, number, fwd, entries in batches
        }
        self._next_batch = next_batch

    def replay_sent(self, peer: int, number: int, entry: FrontierEntry, *, forward: bool) -> None:
        batch = self._replayed.setdefault((peer, number), Batch(peer, number, [], forward))
        batch.entries.append(entry)

    def replay_acked(self, peer: int, number: int) -> None:
        self._replayed.pop((peer, number), None)

    def replay_moved(self, host: str, owner: int) -> None:
        self.moved[host] = owner

    def replay_pinned(self, host: str) -> None:
        self.pinned.add(host)

    def finish_replay(self) -> None:
        """Every batch journaled and not acknowledged waits to be sent again."""
        replayed = self._replayed
        self.outbox.restore(
            [replayed[key] for key in sorted(replayed)],
            max([self._next_batch, *(number + 1 for _, number in replayed)]),
        )
        self._replayed = {}
