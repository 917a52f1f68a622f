"""Peers over Redis Streams: the partitions of a crawl on several machines (`crawlspace crawl --cluster`).

Every node has one stream (`Keys.stream(node)`) that carries everything sent to it, as wire messages:
URL batches (`urls`, or `fwd` for hosts handed over for per-IP politeness), acknowledgements, content
questions, answers and settlements (distributed.claims), near-duplicate questions and answers
(distributed.nearclaims), outdated notices and their acknowledgements (distributed.outdated). A sender
XADDs to the owner's stream; the owner reads its stream through a consumer group (XREADGROUP), hands a
batch to `Inbox.receive_urls`, and only when that returns True (journaled) XACKs and XDELs the entry (so
a stream holds only what its node has not journaled yet and never grows with the crawl) and sends the
acknowledgement. The sender keeps the batch (journaled already, by the router) until then: after a lost
connection it sends every unacknowledged batch again, and a batch still unacknowledged after
`resend_after` seconds (Redis lost it: `appendfsync everysec` may drop the last second of writes) is
sent again, with a doubling delay. Repeats are harmless: the owner's URL set drops them.

What the transport costs is per Redis round trip and command, not per byte (bench/README.md), so few are
made: the writer lingers LINGER (5 ms) after a message is queued, and what was queued meanwhile goes in
one entry per receiver; the reader lingers as long after entries that called for answers or
acknowledgements, and its next XREADGROUP is one pipeline with what was queued meanwhile and
the XACK + XDEL of the entries done with, which wait up to ACK_DELAY for a read to ride with. An entry
is acknowledged late, never before it is done with: killed before, a node reads it again on restart.
Those two loops' commands go over connections of their own (distributed.resp), not through redis-py's
client, whose machinery costs several times the round trip's own CPU; the rest stays on redis-py.

A node that starts reads its own pending entries first (read but never acknowledged: it died between
the two), then new ones, and takes over with XAUTOCLAIM what another consumer of its group left pending.

Redis lost during the crawl: the node crawls its own hosts on; batches wait in its journal (and
memory), content questions are answered None at once (the engine decides locally), and the link is
retried with backoff; `connected` says so (the engine shows it in its progress: Gauges.transport_down).

A message that is not one (garbage XADDed by another program, a newer release's) is counted in the
crawl's errors (`transport:malformed-message`), logged once, acknowledged and skipped.

The termination probes and the stop travel by keys, not streams: a node polls `Keys.round` and answers
each new round in `Keys.answers(round)` (distributed.cluster's leader decides), and polls `Keys.stop`;
a node whose engine stopped by itself (max-seconds, Ctrl-C, a full disk) sets it on `close`, and every
other node stops for the same reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import math
import time
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio
import redis.exceptions

from crawlspace.distributed import wire
from crawlspace.distributed.asking import gather_near
from crawlspace.distributed.assignment import content_owner
from crawlspace.distributed.claims import Answer, ContentClaims
from crawlspace.distributed.nearclaims import NearMatch, NearQuestion, NearQuestionError
from crawlspace.distributed.outdated import OutdatedNoticeError, checked_notice
from crawlspace.distributed.protocols import Inbox
from crawlspace.distributed.redislink import (
    GROUP,
    LINK_TIMEOUT,
    REDIS_ERRORS,
    Backoff,
    Keys,
    consumer,
    raise_if_cancelled,
)
from crawlspace.distributed.resize import HandoverError, Part, Resize, decode_part, encode_part
from crawlspace.distributed.resp import Argument, RespLink
from crawlspace.distributed.splitter import Batch
from crawlspace.frontier.entry import FrontierEntry
from crawlspace.seen.content import OutdatedNotice

log = logging.getLogger(__name__)

QUERY_TIMEOUT = 10.0  # seconds a content question waits for its owner
UNRESPONSIVE_FOR = 30.0  # after a question timed out, its owner is not asked again for this long
RESEND_AFTER = 60.0  # an unacknowledged batch is sent again after this long (then twice as long...)
RESEND_MAX = 600.0
CONTROL_INTERVAL = 0.2  # how often a node polls for a new termination round and for the stop
READ_COUNT = 64  # stream entries per XREADGROUP
BLOCK_MS = 1000  # a read waits this long for new entries
ACK_DELAY = 0.1  # seconds an entry done with may wait for its XACK + XDEL to ride along with a read
ACK_MAX = 512  # entries done with that are acknowledged with the next read, however soon
WRITE_CHUNK = 256  # messages per pipeline
LINGER = 0.005  # seconds the writer waits after a message is queued, for more to share its stream entries
ANSWERS_TTL = 120  # seconds a round's answers stay in Redis
HANDED_TTL = 30 * 86400  # a resize's barrier outlives its phase: a node may resume long after


@dataclass(slots=True)
class _Unacked:
    batch: Batch
    sent_at: float  # its last transmission
    wait: float  # before the next resend
    first_sent: float  # for the batch latency: transmitted to acknowledged


@dataclass
class WireCounters:
    """What went over the wire, for stats.json's `transport` section and the benchmark."""

    messages_out: int = 0
    kinds_out: Counter[str] = field(default_factory=Counter)  # messages sent, by type (wire.Message's class)
    entries_out: int = 0  # stream entries (XADDs), each with the messages for one receiver of one write
    bytes_out: int = 0
    messages_in: int = 0
    entries_in: int = 0
    bytes_in: int = 0
    round_trips: int = 0  # the stream reader's, writer's and control poll's commands and pipelines sent
    latencies: list[float] = field(default_factory=list)  # seconds from transmit to acknowledgement

    def report(self) -> dict[str, Any]:
        ordered = sorted(self.latencies)

        def quantile(q: float) -> float | None:
            return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 2) if ordered else None

        return {
            "messages_out": self.messages_out, "entries_out": self.entries_out, "bytes_out": self.bytes_out,
            "messages_in": self.messages_in, "entries_in": self.entries_in, "bytes_in": self.bytes_in,
            "round_trips": self.round_trips, "batches_acknowledged": len(ordered),
            "batch_latency_ms_p50": quantile(0.5), "batch_latency_ms_p99": quantile(0.99),
            "messages_out_by_kind": dict(sorted(self.kinds_out.items())),
        }  # fmt: skip


class RedisPeers:
    """One node's end of the cluster: implements distributed.protocols.Peers (and TransportHealth)."""

    def __init__(
        self,
        connection: redis.asyncio.Redis,
        keys: Keys,
        index: int,
        partitions: int,
        *,
        hold_until_settled: bool = False,
        query_timeout: float = QUERY_TIMEOUT,
        resend_after: float = RESEND_AFTER,
        where: str = "Redis",
        resize: Resize | None = None,
        linger: float = LINGER,
    ) -> None:
        """`where`: the server as logs show it (a redacted URL). `resize`: the crawl was resumed with
        another number of nodes; `partitions` is the new one, and every node of the old and the new
        count (`resize.workers`) takes part in its handover phase."""
        self.index = index
        self.partitions = partitions
        self.resize = resize
        self.members = resize.workers if resize is not None else partitions  # who may send to this node
        self.draining = resize is not None and resize.draining(index)  # it ends after the phase
        self.sent = 0  # URL batches sent, resends included (termination counting)
        self.received = 0  # URL batches received and journaled, repeats included
        self.idle = False
        self.connected = True
        self.errors: Counter[str] = Counter()  # the engine's, once attached: malformed messages, lost links
        self.wire = WireCounters()
        self._redis = connection
        # the per-page commands (the writer's XADDs, the reader's XREADGROUP and what rides with it) go on
        # links of their own, not through redis-py's command machinery: distributed.resp says why
        self._write_link = RespLink(connection.connection_pool, name=f"node {index} writer")
        self._read_link = RespLink(connection.connection_pool, name=f"node {index} reader")
        self._keys = keys
        self._stream = keys.stream(index)
        self._consumer = consumer(index)
        self._hold = hold_until_settled
        self._query_timeout = query_timeout
        self._resend_after = resend_after
        self._where = where
        self._outgoing: deque[tuple[int, wire.Message, bool]] = deque()  # (peer, message, kept through a lost link)
        self._wake_writer = asyncio.Event()
        self._chunk_waits = asyncio.Event()  # WRITE_CHUNK messages are queued: the writer lingers no more
        self._linger = linger
        self._regained = asyncio.Event()
        self._unacked: dict[tuple[int, int], _Unacked] = {}
        self._queries: dict[int, tuple[int, asyncio.Future[Answer | None]]] = {}
        self._near_queries: dict[int, asyncio.Future[NearMatch | None]] = {}
        self._asking = True  # False once the crawl stops (stop_asking)
        self._unresponsive: dict[int, float] = {}  # owner -> until when its questions are answered None
        self._numbers = itertools.count(1)
        self._tasks: list[asyncio.Task[None]] = []
        self._reconnecting: asyncio.Task[None] | None = None
        self._inbox: Inbox | None = None
        self._claims: ContentClaims | None = None
        self._answered_round = 0
        self.stopped_by: wire.Stop | None = None  # the cluster's stop, once seen
        self._malformed_logged = False
        self._lost_at = 0.0
        self._done: list[Any] = []  # ids of entries done with, to XACK + XDEL (_read)
        self._done_since = 0.0  # when the first of them was done
        self._links = 1  # connections so far: the reader reads its pending entries again on a new one
        self._handover_unacked: dict[tuple[int, int], bytes] = {}  # (peer, number) -> the encoded part
        self._handover_queue: dict[tuple[int, int], None] = {}  # parts to write, in order (an ordered set)
        self._wake_handover = asyncio.Event()
        self._handover_writer: asyncio.Task[None] | None = None
        self._handover_over = resize is None  # the phase's barrier passed: a repeated part is dropped
        self._resize_mark: tuple[int, int] | None = None  # the last entry of this stream before the barrier
        self.stale_batches = 0  # URL batches of the run before the resize, dropped

    def __repr__(self) -> str:
        return (
            f"RedisPeers({self.index} of {self.partitions} via {self._where}, sent {self.sent}, received "
            f"{self.received}, {len(self._unacked)} unacknowledged, {'connected' if self.connected else 'LOST'})"
        )

    def attach(self, errors: Counter[str]) -> None:
        """Count the transport's errors in the crawl's own counters (stats.json, progress, status)."""
        errors.update(self.errors)
        self.errors = errors

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self, inbox: Inbox) -> None:
        self._inbox = inbox
        self._claims = ContentClaims(inbox, hold_until_settled=self._hold)
        try:
            await self._prepare_stream()
        except REDIS_ERRORS:
            raise_if_cancelled()
            self._lost()
        else:
            self._regained.set()
        self._tasks = [
            asyncio.create_task(self._read(), name=f"redis-read-{self.index}"),
            asyncio.create_task(self._write(), name=f"redis-write-{self.index}"),
            asyncio.create_task(self._control(), name=f"redis-control-{self.index}"),
            asyncio.create_task(self._resend_stale(), name=f"redis-resend-{self.index}"),
        ]

    async def _prepare_stream(self) -> None:
        """The node's consumer group (reading from the stream's first entry: batches may wait for a node
        that was not started yet), and what other consumers of it left pending, taken over."""
        try:
            await self._redis.xgroup_create(self._stream, GROUP, id="0", mkstream=True)
        except redis.exceptions.ResponseError as exc:
            raise_if_cancelled()
            if "BUSYGROUP" not in str(exc):
                raise
        start = "0-0"
        while True:
            reply = await self._redis.xautoclaim(self._stream, GROUP, self._consumer, 0, start_id=start, count=500)
            start = reply[0].decode() if isinstance(reply[0], bytes) else str(reply[0])
            if start == "0-0":
                return

    async def close(self, termination: str = "") -> None:
        if termination and self.stopped_by is None and self.connected and not self.draining:
            stop = wire.encode([wire.Stop(termination, self.index)])
            try:  # it stopped by itself: the crawl stops, for the same reason (unless a stop came first)
                await self._redis.set(self._keys.stop, stop, nx=True)
            except REDIS_ERRORS:
                raise_if_cancelled()
                log.warning("node %d could not tell the cluster it stopped (%s): Redis lost", self.index, termination)
        with contextlib.suppress(*REDIS_ERRORS, TimeoutError):  # acknowledgements owed, then go
            await asyncio.wait_for(self._flush(), timeout=2.0)
        for task in [*self._tasks, *([self._reconnecting] if self._reconnecting else [])]:
            task.cancel()
        await asyncio.wait(self._tasks, timeout=5.0)
        with contextlib.suppress(*REDIS_ERRORS, TimeoutError):  # what a read cut short put back, then the XACKs
            await asyncio.wait_for(self._flush(), timeout=2.0)
            await asyncio.wait_for(self._acknowledge_done(), timeout=2.0)
        if termination and self.connected:  # a leaving node too: the crawl's rounds count it until it drains
            await self._say_ended()
        self._write_link.close()
        self._read_link.close()
        for _, future in self._queries.values():
            if not future.done():
                future.set_result(None)

    async def _say_ended(self) -> None:
        """This node's last answer, for the rounds run while it is not running (ClusterControl): after
        its run's last checkpoint, with nothing read or sent since (the tasks have ended), so that a
        node resumed alone after the others ended can end too, and one left with work keeps the
        crawl waiting for it. `join` removes it when the node runs again."""
        final = wire.ProbeReply(0, self.index, self.idle, self.sent, self.received)
        try:
            await self._redis.hset(self._keys.ended, str(self.index), wire.encode([final]))
        except REDIS_ERRORS:
            raise_if_cancelled()
            log.warning("node %d could not leave its last answer: the crawl waits for it until it runs again",
                        self.index)  # fmt: skip

    # -- the link ------------------------------------------------------------------------------

    def _lost(self) -> None:
        """The server is gone: crawl on alone, answer open questions None, retry with backoff."""
        if not self.connected:
            return
        self.connected = False
        self._regained.clear()
        self._write_link.close()  # what waits on them fails now, not when a hung server's TCP gives up
        self._read_link.close()
        self._lost_at = time.monotonic()
        self.errors["transport:redis-lost"] += 1
        log.warning(
            "node %d lost Redis at %s: crawling its own hosts; batches wait in its journal; retrying", self.index,
            self._where,
        )  # fmt: skip
        # batches are sent again from _unacked once the link is back, questions were answered None: both go;
        # acknowledgements, answers and settlements wait for the link
        self._outgoing = deque(item for item in self._outgoing if item[2])
        for _, future in self._queries.values():
            if not future.done():
                future.set_result(None)
        if self._reconnecting is None or self._reconnecting.done():
            self._reconnecting = asyncio.create_task(self._reconnect())

    async def _reconnect(self) -> None:
        backoff = Backoff()
        while True:
            await asyncio.sleep(backoff.next())
            try:
                async with asyncio.timeout(LINK_TIMEOUT):
                    await self._redis.ping()
                    await self._prepare_stream()  # a server that lost its data: the group again
            except REDIS_ERRORS:
                raise_if_cancelled()
                continue
            except redis.exceptions.ResponseError as exc:  # not ready after a restart
                raise_if_cancelled()
                log.debug("Redis not ready yet: %s", exc)
                continue
            break
        self.connected = True
        self._links += 1
        log.warning("node %d has Redis back after %.1f s", self.index, time.monotonic() - self._lost_at)
        self._resend(list(self._unacked.values()))  # it may have lost its last second of writes
        self._resend_handover()
        self._wake_writer.set()  # what waited for the link
        self._regained.set()

    def _queue(self, peer: int, message: wire.Message, *, keep: bool = True) -> None:
        self._outgoing.append((peer, message, keep))
        self._wake_writer.set()
        if len(self._outgoing) >= WRITE_CHUNK:
            self._chunk_waits.set()

    async def _write(self) -> None:
        """Each message queued alone used to be a stream entry of its own, that is an XADD, a read and an
        XACK + XDEL on its receiver: the cost of the transport is per Redis command, not per byte
        (bench/README.md). So the writer lingers a few milliseconds after the first message (like Kafka's
        linger.ms), and what was queued meanwhile (the content questions, answers, settlements and
        acknowledgements of other pages) shares one entry per receiver. A full chunk goes at once."""
        while True:
            await self._wake_writer.wait()
            if self._linger > 0 and len(self._outgoing) < WRITE_CHUNK:
                self._chunk_waits.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._linger):
                        await self._chunk_waits.wait()
            self._wake_writer.clear()
            if not self.connected:
                continue
            try:
                await self._flush()
            except REDIS_ERRORS:
                raise_if_cancelled()
                self._lost()

    async def _flush(self) -> None:
        while self._outgoing and self.connected:
            commands: list[Sequence[Argument]] = []
            chunk = self._take_chunk(commands)
            try:
                self.wire.round_trips += 1
                await self._write_link.execute(commands)
            except BaseException:
                self._outgoing.extendleft(reversed(chunk))  # some may have been written: repeats are harmless
                raise

    def _take_chunk(self, commands: list[Sequence[Argument]]) -> list[tuple[int, wire.Message, bool]]:
        """Up to WRITE_CHUNK queued messages, taken from the queue and XADDed by `commands`: one stream entry
        per receiver, its messages in order. The caller puts them back if the pipeline fails."""
        chunk = [self._outgoing.popleft() for _ in range(min(WRITE_CHUNK, len(self._outgoing)))]
        by_peer: dict[int, list[wire.Message]] = {}
        for peer, message, _ in chunk:
            by_peer.setdefault(peer, []).append(message)
        for peer, messages in by_peer.items():
            unit = wire.encode(messages)
            commands.append(("XADD", self._keys.stream(peer), "*", b"m", unit))
            self.wire.messages_out += len(messages)
            self.wire.kinds_out.update(type(message).__name__ for message in messages)
            self.wire.entries_out += 1
            self.wire.bytes_out += len(unit)
        return chunk

    # -- URL batches -------------------------------------------------------------------------

    def transmit(self, batches: list[Batch]) -> None:
        now = time.monotonic()
        for batch in batches:
            self._unacked[(batch.peer, batch.number)] = _Unacked(batch, now, self._resend_after, now)
        if self.connected:
            self._send_batches(batches)

    def _send_batches(self, batches: list[Batch]) -> None:
        self.sent += len(batches)
        for batch in batches:
            urls = [(entry.url, entry.depth, entry.hops) for entry in batch.entries]
            self._queue(batch.peer, wire.UrlBatch(self.index, batch.number, urls, batch.forward), keep=False)

    def _resend(self, waiting: list[_Unacked]) -> None:
        now = time.monotonic()
        for item in waiting:
            item.sent_at = now
        self._send_batches([item.batch for item in waiting])

    async def _resend_stale(self) -> None:
        while True:
            await asyncio.sleep(min(5.0, self._resend_after / 2))
            if not self.connected:
                continue
            now = time.monotonic()
            stale = [item for item in self._unacked.values() if now - item.sent_at >= item.wait]
            for item in stale:
                item.wait = min(RESEND_MAX, item.wait * 2)
            if stale:
                self.errors["transport:batches-resent"] += len(stale)
                self._resend(stale)

    @property
    def unacknowledged(self) -> int:
        return len(self._unacked)

    @property
    def unacknowledged_by_node(self) -> dict[str, dict[str, int]]:
        """Unacknowledged batches per receiving node (its index as a string, as JSON keys are): whom a
        backlog waits on, for `crawlspace status`. The per-IP forwards (leased URLs handed to the owner
        of their host's address) are counted apart: a resize hands those over as queued URLs, while it
        routes the other batches again under the new assignment."""
        counts: dict[str, dict[str, int]] = {}
        for (peer, _), waiting in sorted(self._unacked.items()):
            kinds = counts.setdefault(str(peer), {"batches": 0, "forwards": 0})
            kinds["forwards" if waiting.batch.forward else "batches"] += 1
        return counts

    # -- exact duplicates, partitioned by fingerprint -------------------------------------------

    async def claim_first(self, body_fingerprint: int, url: str, fetched_at: float) -> Answer | None:
        assert self._claims is not None, "claim_first before start"
        owner = content_owner(body_fingerprint, self.partitions)
        if not self._asking or (
            owner != self.index and (not self.connected or self._unresponsive.get(owner, 0.0) > time.monotonic())
        ):
            return None
        number = next(self._numbers)
        if owner == self.index:
            first = self._claims.claim(self.index, number, body_fingerprint, url, fetched_at)
            if first is not None:
                return first
        future: asyncio.Future[Answer | None] = asyncio.get_running_loop().create_future()
        self._queries[number] = (owner, future)
        if owner != self.index:
            question = wire.ContentQuestion(self.index, number, body_fingerprint, url, fetched_at)
            self._queue(owner, question, keep=False)
        try:
            return await asyncio.wait_for(future, timeout=self._query_timeout)
        except TimeoutError:
            self.errors["transport:claim-timeout"] += 1
            if owner != self.index:  # a dead node: its share of the pages is decided locally for a while
                self._unresponsive[owner] = time.monotonic() + UNRESPONSIVE_FOR
            return None
        finally:
            self._queries.pop(number, None)

    def settle(self, body_fingerprint: int, url: str, *, stored: bool) -> None:
        owner = content_owner(body_fingerprint, self.partitions)
        if owner == self.index:
            self._settled(body_fingerprint, url, stored)
        else:
            self._queue(owner, wire.ContentSettle(body_fingerprint, url, stored))

    def stop_asking(self) -> None:
        self._asking = False
        for _, future in self._queries.values():
            if not future.done():
                future.set_result(None)
        for near in self._near_queries.values():
            near.cancel()  # unanswered, not "nothing similar"

    def _settled(self, fingerprint: int, url: str, stored: bool) -> None:
        assert self._claims is not None
        for asker, number, first in self._claims.settle(fingerprint, url, stored=stored):
            self._answer(asker, number, first)

    def _answer(self, asker: int, number: int, first: Answer) -> None:
        if asker != self.index:
            self._queue(asker, wire.ContentAnswer(number, first[0], first[1]))
            return
        query = self._queries.get(number)
        if query is not None and not query[1].done():
            query[1].set_result(first)

    # -- outdated versions (distributed.outdated) ------------------------------------------------

    def transmit_outdated(self, peer: int, notices: list[OutdatedNotice]) -> None:
        """Not kept through a lost link: the engine sends unacknowledged notices again itself."""
        if self.connected:
            fields = [(notice.url, notice.fingerprint, notice.replaced_at) for notice in notices]
            self._queue(peer, wire.Outdated(self.index, fields), keep=False)

    def acknowledge_outdated(self, peer: int, keys: list[tuple[str, float]]) -> None:
        self._queue(peer, wire.OutdatedAck(self.index, list(keys)))

    def _outdated(self, message: wire.Outdated, inbox: Inbox) -> None:
        notices: list[OutdatedNotice] = []
        for fields in message.notices:
            try:
                notices.append(checked_notice(*fields))
            except OutdatedNoticeError as exc:  # this one refused, the others applied
                self.errors["transport:malformed-outdated-notice"] += 1
                log.debug("node %d skipped an outdated notice: %s", self.index, exc)
        if notices:
            inbox.receive_outdated(message.sender, notices)

    # -- near duplicates, partitioned by LSH band key --------------------------------------------

    async def ask_near(self, questions: dict[int, NearQuestion]) -> dict[int, NearMatch | None]:
        """Each owner's answer (distributed.nearclaims); an owner missing from the result did not answer in
        time, is known unresponsive, or cannot be reached now (the link is down): the page is new there."""
        assert self._inbox is not None, "ask_near before start"
        loop = asyncio.get_running_loop()
        waiting: dict[int, tuple[int, asyncio.Future[NearMatch | None]]] = {}
        now = time.monotonic()
        for owner, question in questions.items():
            reachable = self.connected and self._asking and self._unresponsive.get(owner, 0.0) <= now
            if owner == self.index or not reachable:
                continue
            number = next(self._numbers)
            future: asyncio.Future[NearMatch | None] = loop.create_future()
            waiting[owner] = (number, future)
            self._near_queries[number] = future
            message = wire.NearQuestion(
                self.index, number, question.url, question.fetched_at, question.asked_at, question.signature,
                list(question.bands),
            )  # fmt: skip
            self._queue(owner, message, keep=False)
        answers: dict[int, NearMatch | None] = {}
        if self.index in questions:  # while the others look theirs up
            answers[self.index] = self._inbox.answer_near(questions[self.index])
        try:
            heard, silent = await gather_near(
                {owner: future for owner, (_, future) in waiting.items()}, self._query_timeout
            )
        finally:
            for number, _ in waiting.values():
                self._near_queries.pop(number, None)
        for owner in silent if self._asking else ():  # not silent: this node stopped asking
            self.errors["transport:near-timeout"] += 1
            self._unresponsive[owner] = time.monotonic() + UNRESPONSIVE_FOR
        return {**answers, **heard}

    def _answer_near(self, message: wire.NearQuestion, inbox: Inbox) -> None:
        try:
            question = NearQuestion(
                message.url, message.fetched_at, message.asked_at, message.signature,
                tuple((int(band), int(key)) for band, key in message.bands),
            )  # fmt: skip
        except NearQuestionError as exc:  # unanswered: the asker treats the page as new here
            self._malformed("near-question", wire.WireError(str(exc)))
            return
        match = inbox.answer_near(question)
        found = None if match is None else (match.url, match.fetched_at, match.similarity)
        self._queue(message.sender, wire.NearAnswer(message.number, found))

    # -- a resize's handover (distributed.resize, crawl/repartition.py) ---------------------------

    def transmit_handover(self, peer: int, number: int, part: Part) -> None:
        self._handover_unacked[(peer, number)] = wire.encode([wire.HandoverPart(self.index, number, encode_part(part))])
        self._handover_queue[(peer, number)] = None
        if self._handover_writer is None:
            self._handover_writer = asyncio.create_task(self._write_handover(), name=f"redis-handover-{self.index}")
            self._tasks.append(self._handover_writer)
        self._wake_handover.set()

    def _resend_handover(self) -> None:
        """After a lost link: every part not acknowledged (Redis may have lost it, or its acknowledgement)."""
        self._handover_queue.update(dict.fromkeys(sorted(self._handover_unacked, key=lambda key: key[1])))
        self._wake_handover.set()

    async def _write_handover(self) -> None:
        """Parts go one per stream entry, apart from the other messages: a part is up to a MiB, and an
        entry of many would pass what a receiver accepts (wire.MAX_MESSAGE)."""
        while True:
            await self._wake_handover.wait()
            self._wake_handover.clear()
            while self._handover_queue and self.connected:
                peer, _ = key = next(iter(self._handover_queue))
                unit = self._handover_unacked.get(key)
                if unit is not None:
                    try:
                        await self._redis.xadd(self._keys.stream(peer), {b"m": unit})
                    except REDIS_ERRORS:
                        raise_if_cancelled()
                        self._lost()  # the reconnection queues every unacknowledged part again
                        break
                    self.wire.messages_out += 1
                    self.wire.kinds_out["HandoverPart"] += 1
                    self.wire.entries_out += 1
                    self.wire.bytes_out += len(unit)
                self._handover_queue.pop(key, None)

    def _receive_handover(self, message: wire.HandoverPart, inbox: Inbox) -> bool:
        """False leaves the entry pending (not made durable: read again after a restart)."""
        if self._handover_over:  # a repeat: every part was durable before the barrier passed
            self._queue(message.sender, wire.HandoverAck(self.index, [message.number]))
            return True
        try:
            part = decode_part(message.part)
        except HandoverError as exc:
            return self._malformed(f"handover part {message.number} from node {message.sender}", wire.WireError(exc))
        if not inbox.receive_handover(message.sender, message.number, part):
            return False
        self._queue(message.sender, wire.HandoverAck(self.index, [message.number]))
        return True

    def _without_stale_batches(self, entry_id: Any, messages: list[wire.Message]) -> list[wire.Message]:
        """A resized crawl drops the URL batches of its run before the resize, unacknowledged: each sender
        routes what it had not heard acknowledged under the new assignment (crawl/repartition.py), and
        the old receiver may not own those hosts any more. Every batch of the new run was written after
        this node joined the barrier (no node sends one before it has seen every member there), that is
        after `_resize_mark`; a batch of the new run taken for a stale one (this node killed and resumed
        after the barrier passed, a later mark) is only late: its sender sends it again (`resend_after`)."""
        if self._resize_mark is None or _stream_id(entry_id) > self._resize_mark:
            return messages
        kept: list[wire.Message] = [message for message in messages if not isinstance(message, wire.UrlBatch)]
        self.stale_batches += len(messages) - len(kept)
        return kept

    def _handover_acknowledged(self, message: wire.HandoverAck, inbox: Inbox) -> None:
        for number in message.numbers:
            if self._handover_unacked.pop((message.sender, number), None) is not None:
                inbox.handover_acknowledged(message.sender, number)

    async def repartitioned(self) -> bool:
        """The phase's barrier, a set in Redis (`Keys.handed(epoch)`): this node joins it, then waits until
        every member of the resize has; False once the cluster's stop came (the `_control` task polls it).
        The set outlives the phase, so a node killed after the barrier passes finds it passed again."""
        if self.resize is None:
            return True
        key = self._keys.handed(self.resize.epoch)
        joined = False
        while self.stopped_by is None:
            if self.connected:
                try:
                    if not joined:
                        pipe = self._redis.pipeline(transaction=True)  # the mark and the barrier at once
                        pipe.sadd(key, str(self.index))
                        pipe.expire(key, HANDED_TTL)
                        pipe.xinfo_stream(self._stream)
                        info = (await pipe.execute())[-1]
                        self._resize_mark = _stream_id(info["last-generated-id"])
                        joined = True
                        log.info("node %d handed over its share of resize %d", self.index, self.resize.epoch)
                    members = {int(_text(member)) for member in await self._redis.smembers(key)}
                    if members >= set(range(self.members)):
                        self._handover_over = True
                        self._links += 1  # the reader reads the batches it left pending again
                        return True
                except REDIS_ERRORS:
                    raise_if_cancelled()
                    self._lost()
                    joined = False  # a server that lost its data lost the set too
                except (redis.exceptions.ResponseError, ValueError) as exc:  # a member that is not a number
                    raise_if_cancelled()
                    self.errors["transport:bad-control-key"] += 1
                    log.debug("resize barrier unreadable: %s", exc)
            await asyncio.sleep(CONTROL_INTERVAL)
        return False

    # -- reading the node's stream ---------------------------------------------------------------

    async def _read(self) -> None:
        """Every read is one round trip that carries what else is owed: the messages queued meanwhile (the
        answers and acknowledgements the last read's entries called for: they leave at once, not after the
        writer's linger, and in no round trip of their own), and the XACK + XDEL of the entries done with,
        at most ACK_DELAY after the first of them was done (the read blocks no longer than that
        meanwhile), or at once when ACK_MAX wait. An entry is acknowledged late, never early; killed
        before, a node reads it again on restart (a repeat, which the URL set drops)."""
        pending_from: str | None = "0"  # the node's own pending entries first, then new ones (None)
        link = self._links
        while True:
            if not self.connected:
                await self._regained.wait()
            if link != self._links:  # what was read and not acknowledged before the loss: again
                link, pending_from = self._links, "0"
            done = self._done
            wait_ms = BLOCK_MS
            if done:
                wait_ms = min(BLOCK_MS, math.ceil((self._done_since + ACK_DELAY - time.monotonic()) * 1000))
            due = bool(done) and (pending_from is not None or wait_ms <= 0 or len(done) >= ACK_MAX)
            read: list[Argument] = ["XREADGROUP", "GROUP", GROUP, self._consumer, "COUNT", READ_COUNT]
            if not (pending_from or due):
                read += ["BLOCK", max(wait_ms, 1)]  # (0 would block for good)
            read += ["STREAMS", self._stream, pending_from or ">"]
            reply: Any
            try:
                commands: list[Sequence[Argument]] = []
                chunk = self._take_chunk(commands)
                if due:
                    commands.append(("XACK", self._stream, GROUP, *done))
                    commands.append(("XDEL", self._stream, *done))
                commands.append(read)
                try:
                    self.wire.round_trips += 1
                    reply = (await self._read_link.execute(commands))[-1]
                except BaseException:
                    self._outgoing.extendleft(reversed(chunk))  # repeats are harmless
                    raise
                if due:
                    done.clear()  # only this task adds to it, after the read
            except redis.exceptions.ResponseError as exc:
                raise_if_cancelled()
                if "NOGROUP" not in str(exc):
                    raise
                self._lost()  # the server lost the stream: the reconnection makes the group again
                continue
            except REDIS_ERRORS:
                raise_if_cancelled()
                self._lost()
                continue
            entries: list[tuple[Any, Any]] = reply[0][1] if reply else []
            if pending_from is not None:
                if not entries:
                    pending_from = None
                    continue
                pending_from = _text(entries[-1][0])
            acks: dict[int, list[int]] = {}
            handled = [entry_id for entry_id, fields in entries if self._handle(entry_id, _fields(fields), acks)]
            for sender, numbers in acks.items():  # once journaled (receive_urls returned True)
                self._queue(sender, wire.Ack(self.index, numbers))
            if handled and not done:
                self._done_since = time.monotonic()
            done += handled
            if self._outgoing and entries and pending_from is None and self._linger > 0:
                # answers owed: more entries come meanwhile, and all the answers leave with the next read (a
                # read that brought only answers to this node lingers not: its pages wait for them)
                await asyncio.sleep(self._linger)

    async def _acknowledge_done(self) -> None:
        """At close: the entries done with and not yet acknowledged (else read again on the next start)."""
        done = list(self._done)
        if done and self.connected:
            await self._read_link.execute([("XACK", self._stream, GROUP, *done), ("XDEL", self._stream, *done)])
            self._done.clear()

    def _handle(self, entry_id: Any, fields: dict[bytes, bytes] | None, acks: dict[int, list[int]]) -> bool:
        """Act on one entry; True when it is done with (acknowledge and delete it). Batches journaled are
        added to `acks` (sender -> numbers), acknowledged together after the read."""
        inbox, claims = self._inbox, self._claims
        assert inbox is not None and claims is not None
        data = (fields or {}).get(b"m")
        if data is None:
            if fields is None:  # deleted after it was read: nothing left to do
                return True
            return self._malformed(entry_id, wire.WireError(f"no 'm' field (fields {sorted(fields)!r:.80})"))
        self.wire.entries_in += 1
        self.wire.bytes_in += len(data)
        try:  # an entry is refused whole or taken whole
            messages = wire.decode(data)
            for message in messages:
                if isinstance(message, (wire.ProbeReply, wire.Stop)):
                    raise wire.WireError(f"a {type(message).__name__} has no place on a stream")
                sender = getattr(message, "sender", None)
                if sender is not None and not (0 <= sender < self.members and sender != self.index):
                    raise wire.WireError(f"from node {sender}, not another of the crawl's {self.members}")
        except wire.WireError as exc:
            return self._malformed(entry_id, exc)
        self.wire.messages_in += len(messages)
        messages = self._without_stale_batches(entry_id, messages)
        done = True
        for message in messages:
            done &= self._act(message, inbox, claims, acks)
        return done

    def _act(self, message: wire.Message, inbox: Inbox, claims: ContentClaims, acks: dict[int, list[int]]) -> bool:
        """One message; False for a batch that could not be journaled (its entry stays pending)."""
        sender = getattr(message, "sender", None)
        if sender is not None:
            self._unresponsive.pop(sender, None)
        match message:
            case wire.UrlBatch(sender=sender, number=number, urls=urls, forward=forward):
                if not self._handover_over:
                    return False  # before the barrier: of the old run, or not; told apart once it passes
                entries = [FrontierEntry(url, depth, hops) for url, depth, hops in urls]
                if not inbox.receive_urls(entries, forwarded=forward):
                    return False  # not journaled: left pending, read again after a restart
                self.received += 1
                acks.setdefault(sender, []).append(number)
            case wire.Ack(sender=sender, numbers=numbers):
                now = time.monotonic()
                for number in numbers:
                    waited = self._unacked.pop((sender, number), None)
                    if waited is not None:
                        self.wire.latencies.append(now - waited.first_sent)
                        inbox.batch_acknowledged(sender, number)
            case wire.ContentQuestion(sender=sender, number=number, fingerprint=fingerprint, url=url, fetched_at=at):
                first = claims.claim(sender, number, fingerprint, url, at)
                if first is not None:
                    self._answer(sender, number, first)
            case wire.ContentAnswer(number=number, url=url, fetched_at=at):
                query = self._queries.get(number)
                if query is not None and not query[1].done():
                    query[1].set_result((url, at))
            case wire.ContentSettle(fingerprint=fingerprint, url=url, stored=stored):
                self._settled(fingerprint, url, stored)
            case wire.HandoverPart():
                return self._receive_handover(message, inbox)
            case wire.HandoverAck():
                self._handover_acknowledged(message, inbox)
            case wire.NearQuestion():
                self._answer_near(message, inbox)
            case wire.Outdated():
                self._outdated(message, inbox)
            case wire.OutdatedAck(sender=sender, keys=keys):
                inbox.outdated_acknowledged(sender, list(keys))
            case wire.NearAnswer(number=number, match=found):
                future = self._near_queries.get(number)
                if future is not None and not future.done():
                    future.set_result(None if found is None else NearMatch(found[0], found[1], found[2]))
        return True

    def _malformed(self, entry_id: Any, problem: wire.WireError) -> bool:
        self.errors["transport:malformed-message"] += 1
        if not self._malformed_logged:
            self._malformed_logged = True
            log.warning(
                "node %d skipped stream entry %s: %s (logged once; counted as transport:malformed-message)",
                self.index, _text(entry_id), problem,
            )  # fmt: skip
        return True

    # -- the cluster's termination rounds and stop ------------------------------------------------

    async def _control(self) -> None:
        inbox = self._inbox
        assert inbox is not None
        while True:
            await asyncio.sleep(CONTROL_INTERVAL)
            if not self.connected:
                continue
            try:
                async with asyncio.timeout(LINK_TIMEOUT):  # the link's heartbeat: a hung server counts as lost
                    await self._poll_control(inbox)
            except REDIS_ERRORS:  # TimeoutError is one (an OSError)
                raise_if_cancelled()
                self._lost()
            except (redis.exceptions.ResponseError, ValueError) as exc:  # a round key that is not a number
                raise_if_cancelled()
                self.errors["transport:bad-control-key"] += 1
                log.debug("control keys unreadable: %s", exc)

    async def _poll_control(self, inbox: Inbox) -> None:
        """The cluster's stop, and this node's answer to a new termination round."""
        self.wire.round_trips += 1
        round_value, stop_value = await self._redis.mget(self._keys.round, self._keys.stop)
        if stop_value is not None and self.stopped_by is None:
            try:
                self.stopped_by = stop = wire.decode_one(stop_value, wire.Stop)
            except wire.WireError as exc:
                self._malformed("stop", exc)
                self.stopped_by = stop = wire.Stop("stopped", -1)
            log.info("node %d stops: the cluster's stop (%s, from node %d)", self.index, stop.reason, stop.node)
            inbox.stop(stop.reason)
        number = int(round_value or 0)
        if number > self._answered_round:
            reply = wire.ProbeReply(number, self.index, self.idle, self.sent, self.received)
            pipe = self._redis.pipeline(transaction=False)
            pipe.hset(self._keys.answers(number), str(self.index), wire.encode([reply]))
            pipe.expire(self._keys.answers(number), ANSWERS_TTL)
            self.wire.round_trips += 1
            await pipe.execute()
            self._answered_round = number


def _fields(values: list[bytes] | None) -> dict[bytes, bytes] | None:
    """An entry's [field, value, ...] as RESP2 sends it; None for an entry deleted after it was read."""
    return None if values is None else dict(zip(values[::2], values[1::2], strict=True))


def _text(entry_id: Any) -> str:
    return entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)


def _stream_id(entry_id: Any) -> tuple[int, int]:
    milliseconds, _, sequence = _text(entry_id).partition("-")
    return int(milliseconds), int(sequence or 0)
