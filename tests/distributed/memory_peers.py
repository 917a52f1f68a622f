"""An in-memory `Peers` for crawls of several partitions in one event loop, with a network that can
drop and repeat messages: the fake every transport's contract is tested against (distributed.protocols).

Delivery goes through `loop.call_soon`, as a socket's would arrive on a later turn of the loop. A
dropped batch or acknowledgement is gone; the sender keeps the batch unacknowledged, and
`reconnect` (what a resume does: `CrawlEngine.connect`) sends every such batch again. A repeated
batch is delivered twice; the receiver's URL set must drop the second copy. A resize's handover parts
go the same way (`drop_parts` of them lost, repeated with `repeat`), and `repartitioned` is a barrier
over the meshes of the network. Near-duplicate questions to another partition are answered on a later
turn of the loop, or, for the next `unanswered_near` of them, never (the transport's timeout: the asker
hears nothing from that owner). Outdated notices and their acknowledgements (distributed.outdated) go
on a later turn too; the next `drop_outdated` of them (notices or acknowledgements) are lost, and with
`repeat` every notice is delivered twice.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from crawlspace.distributed.assignment import content_owner
from crawlspace.distributed.claims import Answer, ContentClaims
from crawlspace.distributed.nearclaims import NearMatch, NearQuestion
from crawlspace.distributed.protocols import Inbox
from crawlspace.distributed.resize import Part, decode_part, encode_part
from crawlspace.distributed.splitter import Batch
from crawlspace.distributed.termination import ProbeAnswer
from crawlspace.seen.content import OutdatedNotice
from crawlspace.seen.sortedruns import SeenStateError

_Answered = TypeVar("_Answered")


@dataclass
class MemoryNetwork:
    drop_batches: int = 0  # the next this many URL batches are lost
    drop_acks: int = 0  # the next this many acknowledgements are lost
    repeat: bool = False  # every URL batch (and handover part) is delivered twice
    drop_parts: int = 0  # the next this many handover parts are lost
    unanswered_near: int = 0  # the next this many near-duplicate questions to another partition get no answer
    drop_outdated: int = 0  # the next this many outdated notices or their acknowledgements are lost
    handed: dict[int, asyncio.Future[bool]] = field(default_factory=dict)  # the resize barrier
    meshes: dict[int, MemoryMesh] = field(default_factory=dict)
    counts: Counter[str] = field(default_factory=Counter)

    def mesh(self, index: int, partitions: int, *, hold_until_settled: bool) -> MemoryMesh:
        mesh = self.meshes[index] = MemoryMesh(self, index, partitions, hold_until_settled)
        return mesh

    def probe(self) -> dict[int, ProbeAnswer]:
        return {index: ProbeAnswer(m.idle, m.sent, m.received) for index, m in self.meshes.items()}

    def reconnect(self) -> None:
        """As after a resume: counters start again, every unacknowledged batch is sent again."""
        self.counts["reconnects"] += 1
        for mesh in self.meshes.values():
            mesh.sent = mesh.received = 0
        for mesh in self.meshes.values():
            mesh.resend()

    def carry_batch(self, batch: Batch, sender: int) -> None:
        if self.drop_batches > 0:
            self.drop_batches -= 1
            self.counts["batches dropped"] += 1
            return
        loop = asyncio.get_running_loop()
        for _ in range(2 if self.repeat else 1):
            loop.call_soon(self.meshes[batch.peer].deliver, batch, sender)
            self.counts["batches delivered"] += 1

    def carry_part(self, peer: int, sender: int, number: int, part: Part) -> None:
        if self.drop_parts > 0:
            self.drop_parts -= 1
            self.counts["parts dropped"] += 1
            return
        loop = asyncio.get_running_loop()
        data = encode_part(part)  # over the wire as bytes, as a real transport carries it
        for _ in range(2 if self.repeat else 1):
            loop.call_soon(self.meshes[peer].deliver_part, sender, number, data)
            self.counts["parts delivered"] += 1

    def hand(self, index: int, future: asyncio.Future[bool]) -> None:
        self.handed[index] = future
        if len(self.handed) == len(self.meshes):
            for waiting in self.handed.values():
                if not waiting.done():
                    waiting.set_result(True)

    def carry_outdated(self, peer: int, sender: int, notices: list[OutdatedNotice]) -> None:
        if self._dropped("outdated notices"):
            return
        for _ in range(2 if self.repeat else 1):
            asyncio.get_running_loop().call_soon(self.meshes[peer].deliver_outdated, sender, list(notices))
            self.counts["outdated notices delivered"] += 1

    def carry_outdated_ack(self, peer: int, sender: int, keys: list[tuple[str, float]]) -> None:
        if self._dropped("outdated acknowledgements"):
            return
        asyncio.get_running_loop().call_soon(self.meshes[peer].outdated_acknowledged, sender, list(keys))

    def _dropped(self, what: str) -> bool:
        if self.drop_outdated <= 0:
            return False
        self.drop_outdated -= 1
        self.counts[f"{what} dropped"] += 1
        return True

    def carry_ack(self, receiver: int, sender: int, number: int) -> None:
        if self.drop_acks > 0:
            self.drop_acks -= 1
            self.counts["acks dropped"] += 1
            return
        asyncio.get_running_loop().call_soon(self.meshes[receiver].acknowledged, sender, number)


class MemoryMesh:
    """One partition's end: implements distributed.protocols.Peers."""

    def __init__(self, network: MemoryNetwork, index: int, partitions: int, hold_until_settled: bool) -> None:
        self.index = index
        self.partitions = partitions
        self.sent = 0
        self.received = 0
        self.idle = False
        self._network = network
        self._hold = hold_until_settled
        self.inbox: Inbox | None = None
        self.claims: ContentClaims | None = None
        self.resend_batches: list[Batch] = []

    async def start(self, inbox: Inbox) -> None:
        self.inbox = inbox
        self.claims = ContentClaims(inbox, hold_until_settled=self._hold)

    def transmit(self, batches: list[Batch]) -> None:
        self.sent += len(batches)
        for batch in batches:
            self._network.carry_batch(batch, self.index)

    def resend(self) -> None:
        engine = self.inbox
        router = getattr(engine, "router", None)
        if router is not None:
            self.transmit(router.unacknowledged)

    def deliver(self, batch: Batch, sender: int) -> None:
        assert self.inbox is not None
        if self.inbox.receive_urls(list(batch.entries), forwarded=batch.forward):
            self.received += 1
            self._network.carry_ack(sender, self.index, batch.number)

    def acknowledged(self, receiver: int, number: int) -> None:
        assert self.inbox is not None
        self.inbox.batch_acknowledged(receiver, number)

    def transmit_outdated(self, peer: int, notices: list[OutdatedNotice]) -> None:
        self._network.carry_outdated(peer, self.index, notices)

    def acknowledge_outdated(self, peer: int, keys: list[tuple[str, float]]) -> None:
        self._network.carry_outdated_ack(peer, self.index, keys)

    def deliver_outdated(self, sender: int, notices: list[OutdatedNotice]) -> None:
        if self.inbox is not None:
            self.inbox.receive_outdated(sender, notices)

    def outdated_acknowledged(self, receiver: int, keys: list[tuple[str, float]]) -> None:
        if self.inbox is not None:
            self.inbox.outdated_acknowledged(receiver, keys)

    def transmit_handover(self, peer: int, number: int, part: Part) -> None:
        self._network.carry_part(peer, self.index, number, part)

    def deliver_part(self, sender: int, number: int, data: bytes) -> None:
        if self.inbox is not None and self.inbox.receive_handover(sender, number, decode_part(data)):
            sender_inbox = self._network.meshes[sender].inbox
            if self._network.drop_acks > 0:
                self._network.drop_acks -= 1
                self._network.counts["acks dropped"] += 1
            elif sender_inbox is not None:
                asyncio.get_running_loop().call_soon(sender_inbox.handover_acknowledged, self.index, number)

    async def repartitioned(self) -> bool:
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._network.hand(self.index, future)
        return await future

    def _to_owner(self, owner: MemoryMesh, call: Callable[[], _Answered]) -> _Answered | None:
        """`call()` on the owner's state; None (no answer, as a real transport's timeout or a gone peer
        gives) from another partition that has shut down: its content set closed, its error is not the
        asking page's (the page was retried and fetched twice when the partition that owned its content
        had ended first)."""
        if owner is self:
            return call()
        if owner.inbox is None:
            return None
        try:
            return call()
        except SeenStateError:
            return None

    async def claim_first(self, body_fingerprint: int, url: str, fetched_at: float) -> Answer | None:
        owner = self._network.meshes[content_owner(body_fingerprint, self.partitions)]
        claims = owner.claims
        assert claims is not None
        return self._to_owner(owner, lambda: claims.claim(self.index, 0, body_fingerprint, url, fetched_at))

    async def ask_near(self, questions: dict[int, NearQuestion]) -> dict[int, NearMatch | None]:
        answers: dict[int, NearMatch | None] = {}
        for owner, question in questions.items():
            if owner != self.index and self._network.unanswered_near > 0:
                self._network.unanswered_near -= 1
                self._network.counts["near questions unanswered"] += 1
                continue
            if owner != self.index:
                await asyncio.sleep(0)  # the owner answers on a later turn of the loop, as over a socket
                self._network.counts["near questions"] += 1
            inbox = self._network.meshes[owner].inbox
            if owner == self.index:
                assert inbox is not None
                answers[owner] = inbox.answer_near(question)
                continue
            # an owner that has shut down (its inbox gone, or its content set closed) gives no answer, as over
            # a real transport, whose timeout passes the owner over; its error is not the asking page's
            try:
                if inbox is not None:
                    answers[owner] = inbox.answer_near(question)
                    continue
            except SeenStateError:
                pass
            self._network.counts["near questions unanswered"] += 1
        return answers

    def settle(self, body_fingerprint: int, url: str, *, stored: bool) -> None:
        owner = self._network.meshes[content_owner(body_fingerprint, self.partitions)]
        claims = owner.claims
        assert claims is not None
        self._to_owner(owner, lambda: claims.settle(body_fingerprint, url, stored=stored))

    def stop_asking(self) -> None:
        """Nothing to end: the fake answers every question at once."""

    async def close(self, termination: str = "") -> None:
        self.inbox = None
