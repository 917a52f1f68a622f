"""Peers over socketpairs: the partitions of a crawl on one machine (`--processes`), one channel per pair.

The coordinator (crawl.workers) makes a socketpair for every pair of partitions and one to each
partition for itself, and hands them to the worker processes. Messages (distributed.channel frames):

- partition -> partition: `urls`/`fwd` batches (forwarded: hosts handed over for per-IP
  politeness), `ack` once the receiver journaled one; `cq` content questions to the fingerprint's
  owner, `ca` answers, `cs` a first URL settled (distributed.claims); `nq` a near-duplicate
  question to an owner of some of a page's LSH band keys, `na` its answer (distributed.nearclaims);
  `od` a page's outdated notices, `oda` their acknowledgement once applied durably (distributed.outdated).
- partition -> coordinator: `ready`/`fatal` at start (no partition crawls unless all could open
  their state), `report` its telemetry at the engine's cadence, `probe` answers (idle, sent, received) for the
  termination test, `ended` when its engine stopped by itself.
- coordinator -> partition: `go`/`stop` at start, `probe`, `stop`.
- a resize (distributed.resize): `hand` parts partition -> new owner, `hack` once the receiver made
  one durable; `handed` partition -> coordinator when all of its parts are acknowledged, `resized`
  coordinator -> partitions when all have said so (the crawl begins).

A peer whose channel closed is gone: questions to it are answered None at once (the engine then
decides locally; a near-duplicate question counts as unanswered), batches to it are dropped (the
coordinator, seeing the process gone, ends the crawl; a resume sends them again).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import socket
from typing import Any

from crawlspace.distributed.asking import gather_near
from crawlspace.distributed.assignment import content_owner
from crawlspace.distributed.channel import Channel, ChannelClosed
from crawlspace.distributed.claims import Answer, ContentClaims
from crawlspace.distributed.nearclaims import NearMatch, NearQuestion, NearQuestionError
from crawlspace.distributed.outdated import OutdatedNoticeError, checked_notice
from crawlspace.distributed.protocols import Inbox
from crawlspace.distributed.resize import HandoverError, Part, decode_part, encode_part
from crawlspace.distributed.splitter import Batch
from crawlspace.frontier.entry import FrontierEntry
from crawlspace.seen.content import OutdatedNotice

QUERY_TIMEOUT = 10.0

log = logging.getLogger("crawlspace")


class SocketMesh:
    """One partition's end of the mesh: implements distributed.protocols.Peers."""

    def __init__(
        self,
        index: int,
        partitions: int,
        peer_sockets: dict[int, socket.socket],
        control_socket: socket.socket,
        *,
        hold_until_settled: bool = False,
        query_timeout: float = QUERY_TIMEOUT,
    ) -> None:
        self.index = index
        self.partitions = partitions
        self.sent = 0  # URL batches sent by this process, resends included (termination counting)
        self.received = 0  # URL batches received and journaled
        self._idle = False
        self._peer_sockets = peer_sockets
        self._control_socket = control_socket
        self._hold = hold_until_settled
        self._peers: dict[int, Channel] = {}
        self._control: Channel | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._query_timeout = query_timeout
        self._queries: dict[int, tuple[int, asyncio.Future[Answer | None]]] = {}
        self._near_queries: dict[int, tuple[int, asyncio.Future[NearMatch | None]]] = {}
        self._gone: set[int] = set()  # peers whose channel closed
        self._numbers = itertools.count(1)
        self._inbox: Inbox | None = None
        self._claims: ContentClaims | None = None
        self.malformed_handovers = 0
        self.malformed_notices = 0
        self._repartitioned: asyncio.Future[bool] | None = None
        self._asking = True  # False once the crawl stops (stop_asking)

    @property
    def idle(self) -> bool:
        return self._idle

    @idle.setter
    def idle(self, idle: bool) -> None:
        """Set by the engine; turning idle is told to the coordinator at once, which then probes at once and
        at the rate that decides the end (it probes a busy crawl seldom: every probe costs each process)."""
        if idle and not self._idle and self._control is not None:
            with contextlib.suppress(ChannelClosed):
                self._control.send(["idle", self.index])
        self._idle = idle

    def __repr__(self) -> str:
        return (
            f"SocketMesh({self.index} of {self.partitions}, sent {self.sent}, received {self.received}, "
            f"{len(self._queries)} questions open, gone {sorted(self._gone)})"
        )

    # -- lifecycle ---------------------------------------------------------------------------

    async def ready(self, problem: str | None = None) -> bool:
        """Tell the coordinator this partition could open its state (or why not); True when every
        partition could and the crawl goes ahead: no partition crawls unless all of them can."""
        self._control = await Channel.over(self._control_socket)
        self._control.send(["fatal", self.index, problem] if problem else ["ready", self.index])
        await self._control.drain()
        while True:
            try:
                message = await self._control.receive()
            except ChannelClosed:
                return False
            if message[0] in ("go", "stop"):
                return bool(message[0] == "go")

    async def start(self, inbox: Inbox) -> None:
        self._inbox = inbox
        self._repartitioned = asyncio.get_running_loop().create_future()  # a stop may come before the barrier
        self._claims = ContentClaims(inbox, hold_until_settled=self._hold)
        for peer, sock in self._peer_sockets.items():
            self._peers[peer] = await Channel.over(sock)
            self._tasks.append(asyncio.create_task(self._listen_peer(peer)))
        if self._control is not None:
            self._tasks.append(asyncio.create_task(self._listen_control()))

    async def close(self, termination: str = "") -> None:
        if self._control is not None and termination:
            with contextlib.suppress(ChannelClosed):
                self._control.send(["ended", self.index, termination])
        for task in self._tasks:
            task.cancel()
        for channel in [*self._peers.values(), *([self._control] if self._control else [])]:
            with contextlib.suppress(Exception):
                await channel.drain()
            channel.close()

    # -- URL batches -------------------------------------------------------------------------

    def transmit(self, batches: list[Batch]) -> None:
        self.sent += len(batches)
        for batch in batches:
            urls = [[entry.url, entry.depth, entry.hops] for entry in batch.entries]
            self._send(batch.peer, ["fwd" if batch.forward else "urls", self.index, batch.number, urls])

    def _send(self, peer: int, message: list[Any]) -> None:
        with contextlib.suppress(ChannelClosed):  # the peer is gone: the coordinator ends the crawl
            self._peers[peer].send(message)

    # -- outdated versions (distributed.outdated) ------------------------------------------------

    def transmit_outdated(self, peer: int, notices: list[OutdatedNotice]) -> None:
        self._send(peer, ["od", self.index, [[n.url, n.fingerprint, n.replaced_at] for n in notices]])

    def acknowledge_outdated(self, peer: int, keys: list[tuple[str, float]]) -> None:
        self._send(peer, ["oda", self.index, [[url, replaced_at] for url, replaced_at in keys]])

    def _outdated(self, inbox: Inbox, message: list[Any]) -> None:
        notices: list[OutdatedNotice] = []
        try:
            _, sender, raw = message
            if sender not in self._peers or not isinstance(raw, list):
                raise OutdatedNoticeError(f"outdated notices {message!r:.80}")
            for fields in raw:
                try:
                    notices.append(checked_notice(*fields))
                except (OutdatedNoticeError, TypeError) as exc:  # this one refused, the others applied
                    self._malformed_notice(exc)
        except (OutdatedNoticeError, ValueError) as exc:
            self._malformed_notice(exc)
            return
        if notices:
            inbox.receive_outdated(int(sender), notices)

    def _outdated_acknowledged(self, inbox: Inbox, message: list[Any]) -> None:
        try:
            _, sender, raw = message
            keys = [(str(url), float(replaced_at)) for url, replaced_at in raw]
        except (TypeError, ValueError) as exc:
            self._malformed_notice(exc)
            return
        inbox.outdated_acknowledged(int(sender), keys)

    def _malformed_notice(self, problem: Exception) -> None:
        self.malformed_notices += 1
        if self.malformed_notices == 1:
            log.warning("partition %d: an outdated notice skipped: %s", self.index, problem)

    # -- a resize's handover ---------------------------------------------------------------------

    def transmit_handover(self, peer: int, number: int, part: Part) -> None:
        self._send(peer, ["hand", self.index, number, encode_part(part)])

    async def repartitioned(self) -> bool:
        if self._control is None or self._repartitioned is None:
            return True
        with contextlib.suppress(ChannelClosed):
            self._control.send(["handed", self.index])
        return await self._repartitioned

    def _end_repartition(self, begin: bool) -> None:
        if self._repartitioned is not None and not self._repartitioned.done():
            self._repartitioned.set_result(begin)

    def _handover(self, inbox: Inbox, message: list[Any]) -> None:
        _, sender, number, data = message
        try:
            part = decode_part(bytes(data))
        except (HandoverError, TypeError) as exc:
            self.malformed_handovers += 1
            if self.malformed_handovers == 1:
                log.warning("partition %d: a handover part from %s skipped: %s", self.index, sender, exc)
            return
        if inbox.receive_handover(int(sender), int(number), part):  # durable: acknowledge it
            self._send(int(sender), ["hack", self.index, int(number)])

    # -- exact duplicates, partitioned by fingerprint -------------------------------------------

    async def claim_first(self, body_fingerprint: int, url: str, fetched_at: float) -> Answer | None:
        assert self._claims is not None, "claim_first before start"
        owner = content_owner(body_fingerprint, self.partitions)
        if owner in self._gone or not self._asking:
            return None
        number = next(self._numbers)
        if owner == self.index:
            first = self._claims.claim(self.index, number, body_fingerprint, url, fetched_at)
            if first is not None:
                return first
        future: asyncio.Future[Answer | None] = asyncio.get_running_loop().create_future()
        self._queries[number] = (owner, future)
        if owner != self.index:
            self._send(owner, ["cq", self.index, number, body_fingerprint, url, fetched_at])
        try:
            return await asyncio.wait_for(future, timeout=self._query_timeout)
        except TimeoutError:
            return None
        finally:
            self._queries.pop(number, None)

    def settle(self, body_fingerprint: int, url: str, *, stored: bool) -> None:
        owner = content_owner(body_fingerprint, self.partitions)
        if owner == self.index:
            self._settled(body_fingerprint, url, stored)
        else:
            self._send(owner, ["cs", body_fingerprint, url, stored])

    def stop_asking(self) -> None:
        self._asking = False
        for _, future in self._queries.values():
            if not future.done():
                future.set_result(None)
        for _, near in self._near_queries.values():
            near.cancel()  # unanswered, not "nothing similar"

    def _settled(self, fingerprint: int, url: str, stored: bool) -> None:
        assert self._claims is not None
        for asker, number, first in self._claims.settle(fingerprint, url, stored=stored):
            self._answer(asker, number, first)

    def _answer(self, asker: int, number: int, first: Answer) -> None:
        if asker != self.index:
            self._send(asker, ["ca", number, [first[0], first[1]]])
            return
        query = self._queries.get(number)
        if query is not None and not query[1].done():
            query[1].set_result(first)

    # -- near duplicates, partitioned by LSH band key --------------------------------------------

    async def ask_near(self, questions: dict[int, NearQuestion]) -> dict[int, NearMatch | None]:
        assert self._inbox is not None, "ask_near before start"
        waiting: dict[int, tuple[int, asyncio.Future[NearMatch | None]]] = {}
        loop = asyncio.get_running_loop()
        for owner, question in questions.items():
            if owner == self.index or owner in self._gone or not self._asking:
                continue
            number = next(self._numbers)
            future: asyncio.Future[NearMatch | None] = loop.create_future()
            waiting[owner] = (number, future)
            self._near_queries[number] = (owner, future)
            self._send(owner, ["nq", self.index, number, *_near_question_fields(question)])
        answers: dict[int, NearMatch | None] = {}
        if self.index in questions:  # while the others look theirs up
            answers[self.index] = self._inbox.answer_near(questions[self.index])
        try:
            heard, _ = await gather_near({owner: future for owner, (_, future) in waiting.items()}, self._query_timeout)
        finally:
            for number, _ in waiting.values():
                self._near_queries.pop(number, None)
        return {**answers, **heard}

    def _answer_near(self, fields: list[Any]) -> None:
        assert self._inbox is not None
        try:
            sender, number = int(fields[0]), int(fields[1])
            question = _near_question(fields[2:])
        except (NearQuestionError, TypeError, ValueError, IndexError):
            return  # unanswered: the asker counts it and treats the page as new here
        if sender not in self._peers:
            return
        match = self._inbox.answer_near(question)
        self._send(sender, ["na", number, None if match is None else [match.url, match.fetched_at, match.similarity]])

    def _near_answered(self, fields: list[Any]) -> None:
        try:
            number, found = fields
            query = self._near_queries.get(number)
            if query is None or query[1].done():
                return  # late: the asker stopped waiting
            match = None if found is None else NearMatch(str(found[0]), float(found[1]), float(found[2]))
        except (TypeError, ValueError, IndexError):
            return  # malformed: as if unanswered
        query[1].set_result(match)

    # -- listening ---------------------------------------------------------------------------

    async def _listen_peer(self, peer: int) -> None:
        channel = self._peers[peer]
        inbox, claims = self._inbox, self._claims
        assert inbox is not None and claims is not None
        while True:
            try:
                message = await channel.receive()
            except ChannelClosed:
                self._gone.add(peer)
                for owner, future in list(self._queries.values()):
                    if owner == peer and not future.done():
                        future.set_result(None)
                for owner, near in list(self._near_queries.values()):
                    if owner == peer and not near.done():
                        near.cancel()  # unanswered, not "nothing similar"
                return
            kind = message[0]
            if kind in ("urls", "fwd"):
                _, sender, number, raw = message
                entries = [FrontierEntry(url, int(depth), int(hops)) for url, depth, hops in raw]
                if inbox.receive_urls(entries, forwarded=kind == "fwd"):  # journaled: acknowledge it
                    self.received += 1
                    self._send(sender, ["ack", self.index, number])
            elif kind == "ack":
                _, sender, number = message
                inbox.batch_acknowledged(int(sender), int(number))
            elif kind == "cq":
                _, sender, number, fingerprint, url, fetched_at = message
                first = claims.claim(int(sender), int(number), int(fingerprint), str(url), float(fetched_at))
                if first is not None:
                    self._answer(int(sender), int(number), first)
            elif kind == "cs":
                _, fingerprint, url, stored = message
                self._settled(int(fingerprint), str(url), bool(stored))
            elif kind == "nq":
                self._answer_near(message[1:])
            elif kind == "na":
                self._near_answered(message[1:])
            elif kind == "ca":
                _, number, first = message
                query = self._queries.get(int(number))
                if query is not None and not query[1].done():
                    query[1].set_result((str(first[0]), float(first[1])))
            elif kind == "od":
                self._outdated(inbox, message)
            elif kind == "oda":
                self._outdated_acknowledged(inbox, message)
            elif kind == "hand":
                self._handover(inbox, message)
            elif kind == "hack":
                _, sender, number = message
                inbox.handover_acknowledged(int(sender), int(number))

    async def _listen_control(self) -> None:
        assert self._control is not None and self._inbox is not None
        while True:
            try:
                message = await self._control.receive()
            except ChannelClosed:
                self._end_repartition(False)
                self._inbox.stop("coordinator-gone")
                return
            if message[0] == "probe":
                self._control.send(["probe", message[1], self.idle, self.sent, self.received])
            elif message[0] == "stop":
                self._end_repartition(False)
                self._inbox.stop(str(message[1]))
            elif message[0] == "resized":
                self._end_repartition(True)

    def report(self, snapshot: dict[str, Any]) -> None:
        """A partition's telemetry (a Snapshot as builtins) to the coordinator, which merges the partitions'."""
        if self._control is not None:
            with contextlib.suppress(ChannelClosed):
                self._control.send(["report", self.index, snapshot])


def _near_question_fields(question: NearQuestion) -> list[Any]:
    bands = list(itertools.chain.from_iterable(question.bands))
    return [question.url, question.fetched_at, question.asked_at, question.signature, bands]


def _near_question(fields: list[Any]) -> NearQuestion:
    url, fetched_at, asked_at, signature, bands = fields
    if not isinstance(url, str) or not isinstance(signature, bytes) or not isinstance(bands, list) or len(bands) % 2:
        raise NearQuestionError(f"malformed near-duplicate question {fields!r:.120}")
    pairs = tuple(zip(map(int, bands[0::2]), map(int, bands[1::2]), strict=True))
    return NearQuestion(url, float(fetched_at), float(asked_at), signature, pairs)
