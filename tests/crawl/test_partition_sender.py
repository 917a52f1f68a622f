"""The partition's sender: an open batch leaves SEND_INTERVAL after its first URL, and with no batch
open the sender sleeps (it used to cut every 20 ms whatever there was: CPU that grew with time).
Before the transport is started nothing is transmitted (a resumed engine's first checkpoint cuts the
batches its journal replayed; a socket mesh has no channel yet): `connect` sends them, once."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, cast

from crawlspace.crawl.partition import SEND_INTERVAL, PartitionInbox
from crawlspace.crawl.telemetry import CrawlStats
from crawlspace.distributed.assignment import ModuloAssignment
from crawlspace.distributed.router import PartitionRouter
from crawlspace.frontier import FrontierEntry


class RecordingLedger:
    """The router's journal and the ledger's flush, kept in memory."""

    def __init__(self) -> None:
        self.lines: list[tuple[Any, ...]] = []
        self.flushes = 0

    def sent(self, peer: int, number: int, entry: FrontierEntry, *, forward: bool) -> None:
        self.lines.append(("sent", peer, number, entry.url, forward))

    def acked(self, peer: int, number: int) -> None:
        self.lines.append(("acked", peer, number))

    def moved(self, host: str, owner: int) -> None:
        self.lines.append(("moved", host, owner))

    def pinned(self, host: str) -> None:
        self.lines.append(("pinned", host))

    def flush(self) -> bool:
        self.flushes += 1
        return True


class RecordingPeers:
    index = 0
    partitions = 2
    idle = False

    def __init__(self) -> None:
        self.transmitted: list[list[str]] = []
        self.started = False

    async def start(self, inbox: Any) -> None:
        self.started = True

    def transmit(self, batches: list[Any]) -> None:
        self.transmitted.extend([entry.url for entry in batch.entries] for batch in batches)


def url_of_partition(owner: int, assignment: ModuloAssignment) -> str:
    return next(f"http://site{n}.test/" for n in range(1000) if assignment.owner(f"site{n}.test") == owner)


def inbox_of(peers: RecordingPeers, router: PartitionRouter, ledger: RecordingLedger) -> PartitionInbox:
    return PartitionInbox(
        cast(Any, peers), router, links=cast(Any, None), ledger=cast(Any, ledger), content=cast(Any, SimpleNamespace()),
        stats=CrawlStats(), wake=lambda: None, stop=lambda reason: None,
    )  # fmt: skip


def test_an_open_batch_leaves_soon_and_an_idle_sender_sleeps() -> None:
    assignment = ModuloAssignment(2)
    ledger = RecordingLedger()
    peers = RecordingPeers()
    router = PartitionRouter(0, assignment, ledger, per_ip=False)
    inbox = inbox_of(peers, router, ledger)
    cuts = 0
    send_batches = inbox.send_batches

    def counting_send() -> None:
        nonlocal cuts
        cuts += 1
        send_batches()

    inbox.send_batches = counting_send  # type: ignore[method-assign]

    async def scenario() -> tuple[int, int, list[list[str]]]:
        await inbox.connect()
        sender = asyncio.create_task(inbox.send_periodically())
        await asyncio.sleep(15 * SEND_INTERVAL)
        idle_cuts = cuts  # nothing was open: the old sender had cut about 15 times by now
        theirs = url_of_partition(1, assignment)
        mine, _ = router.route([FrontierEntry(theirs), FrontierEntry(url_of_partition(0, assignment))])
        inbox.send_soon()
        await asyncio.sleep(5 * SEND_INTERVAL)
        sender.cancel()
        return idle_cuts, len(mine), list(peers.transmitted)

    idle_cuts, kept, transmitted = asyncio.run(scenario())
    assert idle_cuts == 0
    assert kept == 1  # the URL of this partition's host stays here
    assert transmitted == [[url_of_partition(1, assignment)]]  # sent once, within a few intervals
    assert ("sent", 1, 1, url_of_partition(1, assignment), False) in ledger.lines


def test_batches_cut_before_the_transport_started_leave_when_it_does_and_once() -> None:
    assignment = ModuloAssignment(2)
    ledger = RecordingLedger()
    peers = RecordingPeers()
    router = PartitionRouter(0, assignment, ledger, per_ip=False)
    inbox = inbox_of(peers, router, ledger)
    theirs = url_of_partition(1, assignment)
    router.route([FrontierEntry(theirs)])
    inbox.send_batches()  # the checkpoint in a resumed engine's constructor: the mesh has no channel yet
    assert peers.transmitted == [] and not router.outbox.pending
    assert [batch.entries[0].url for batch in router.unacknowledged] == [theirs]  # kept, cut
    asyncio.run(inbox.connect())
    assert peers.started and peers.transmitted == [[theirs]]
    inbox.send_batches()  # nothing open: nothing again
    assert peers.transmitted == [[theirs]]
