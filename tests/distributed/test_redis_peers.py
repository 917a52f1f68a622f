"""RedisPeers against a real redis-server of the test's own, with fake inboxes in one event loop: the
contract of distributed.protocols.Peers (delivery at least once, acknowledgement only once journaled,
content claims, probes, the stop), and what a stream transport adds (pending entries read again after a
restart, garbage skipped, a lost server survived, streams trimmed)."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import redis.asyncio

from crawlspace.distributed import redisstreams, wire
from crawlspace.distributed.assignment import content_owner
from crawlspace.distributed.claims import Answer
from crawlspace.distributed.nearclaims import NearMatch, NearQuestion
from crawlspace.distributed.redislink import GROUP, Keys
from crawlspace.distributed.redisstreams import WRITE_CHUNK, RedisPeers
from crawlspace.distributed.splitter import Batch
from crawlspace.frontier.entry import FrontierEntry
from tests.distributed.redis_server import RedisServer

KEYS = Keys("test")


@dataclass
class FakeInbox:
    """An engine as the transport sees it: journals (or fails to), counts, answers from a dict."""

    journaled: bool = True
    batches: list[tuple[list[str], bool]] = field(default_factory=list)
    acknowledged: list[tuple[int, int]] = field(default_factory=list)
    firsts: dict[int, Answer] = field(default_factory=dict)
    stops: list[str] = field(default_factory=list)
    near_asked: list[NearQuestion] = field(default_factory=list)
    near_match: NearMatch | None = None

    def receive_urls(self, entries: list[FrontierEntry], *, forwarded: bool = False) -> bool:
        if self.journaled:
            self.batches.append(([entry.url for entry in entries], forwarded))
        return self.journaled

    def batch_acknowledged(self, peer: int, number: int) -> None:
        self.acknowledged.append((peer, number))

    def claim_first(self, body_fingerprint: int, url: str, fetched_at: float) -> Answer:
        return self.firsts.setdefault(body_fingerprint, (url, fetched_at))

    def release_first(self, body_fingerprint: int, url: str) -> None:
        self.firsts.pop(body_fingerprint, None)

    def stop(self, reason: str) -> None:
        self.stops.append(reason)

    def answer_near(self, question: NearQuestion) -> NearMatch | None:
        self.near_asked.append(question)
        return self.near_match


def batch(peer: int, number: int, *urls: str, forward: bool = False) -> Batch:
    return Batch(peer, number, [FrontierEntry(url, 1, 0) for url in urls], forward)


async def until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


async def emptied(connection: Any, stream: str, timeout: float = 10.0) -> bool:
    """The stream's entries are deleted (soon after they were done with: ACK_DELAY, with a later read)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while await connection.xlen(stream) != 0:
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


def with_nodes(
    server: RedisServer,
    count: int,
    body: Callable[[list[RedisPeers], list[FakeInbox], Any], Awaitable[None]],
    **options: Any,
) -> None:
    async def run() -> None:
        connection = redis.asyncio.Redis.from_url(server.url)
        nodes = [RedisPeers(redis.asyncio.Redis.from_url(server.url), KEYS, k, count, **options) for k in range(count)]
        inboxes = [FakeInbox() for _ in range(count)]
        for node, inbox in zip(nodes, inboxes, strict=True):
            await node.start(inbox)
        try:
            await body(nodes, inboxes, connection)
        finally:
            for node in nodes:
                await node.close()
            await connection.aclose()

    asyncio.run(run())


def test_a_batch_is_delivered_acknowledged_and_deleted_from_the_stream(redis_server: RedisServer) -> None:
    async def body(nodes: list[RedisPeers], inboxes: list[FakeInbox], connection: Any) -> None:
        nodes[0].transmit(
            [batch(1, 7, "http://a.test/", "http://b.test/"), batch(1, 8, "http://c.test/", forward=True)]
        )
        await until(lambda: inboxes[0].acknowledged == [(1, 7), (1, 8)])
        assert inboxes[1].batches == [(["http://a.test/", "http://b.test/"], False), (["http://c.test/"], True)]
        assert (nodes[0].sent, nodes[1].received, nodes[0].unacknowledged) == (2, 2, 0)
        assert await emptied(connection, KEYS.stream(1))  # acknowledged entries are deleted
        assert await emptied(connection, KEYS.stream(0))  # the acknowledgements too, once read

    with_nodes(redis_server, 2, body)


def test_a_batch_waits_in_the_stream_for_a_node_not_started_yet(redis_server: RedisServer) -> None:
    async def run() -> None:
        sender = RedisPeers(redis.asyncio.Redis.from_url(redis_server.url), KEYS, 0, 2)
        sender_inbox = FakeInbox()
        await sender.start(sender_inbox)
        sender.transmit([batch(1, 1, "http://late.test/")])
        await asyncio.sleep(0.3)
        late = RedisPeers(redis.asyncio.Redis.from_url(redis_server.url), KEYS, 1, 2)
        late_inbox = FakeInbox()
        await late.start(late_inbox)
        await until(lambda: sender_inbox.acknowledged == [(1, 1)])
        assert late_inbox.batches == [(["http://late.test/"], False)]
        await sender.close()
        await late.close()

    asyncio.run(run())


def test_unacknowledged_batches_are_counted_per_receiver_with_forwards_apart(redis_server: RedisServer) -> None:
    """For `crawlspace status`: whom the backlog waits on, and how much of it a resize would route again."""

    async def run() -> None:
        sender = RedisPeers(redis.asyncio.Redis.from_url(redis_server.url), KEYS, 0, 3)
        await sender.start(FakeInbox())
        sender.transmit([batch(1, 1, "http://a.test/"), batch(2, 2, "http://b.test/", forward=True)])
        sender.transmit([batch(2, 3, "http://c.test/"), batch(2, 4, "http://d.test/")])
        assert sender.unacknowledged_by_node == {
            "1": {"batches": 1, "forwards": 0},
            "2": {"batches": 2, "forwards": 1},
        }
        receiver = RedisPeers(redis.asyncio.Redis.from_url(redis_server.url), KEYS, 2, 3)
        await receiver.start(FakeInbox())
        await until(lambda: "2" not in sender.unacknowledged_by_node)
        assert sender.unacknowledged_by_node == {"1": {"batches": 1, "forwards": 0}}
        await receiver.close()
        await sender.close()

    asyncio.run(run())


def test_an_entry_not_journaled_stays_pending_and_a_restarted_node_reads_it_again(redis_server: RedisServer) -> None:
    async def run() -> None:
        sender = RedisPeers(redis.asyncio.Redis.from_url(redis_server.url), KEYS, 0, 2)
        sender_inbox = FakeInbox()
        await sender.start(sender_inbox)
        failing = RedisPeers(redis.asyncio.Redis.from_url(redis_server.url), KEYS, 1, 2)
        await failing.start(FakeInbox(journaled=False))  # its journal fails: nothing is acknowledged
        sender.transmit([batch(1, 3, "http://pending.test/")])
        connection = redis.asyncio.Redis.from_url(redis_server.url)
        await asyncio.sleep(0.5)
        pending = await connection.xpending(KEYS.stream(1), GROUP)
        assert pending["pending"] == 1 and sender_inbox.acknowledged == []
        await failing.close()
        restarted = RedisPeers(redis.asyncio.Redis.from_url(redis_server.url), KEYS, 1, 2)
        inbox = FakeInbox()
        await restarted.start(inbox)  # its own pending entries first
        await until(lambda: sender_inbox.acknowledged == [(1, 3)])
        assert inbox.batches == [(["http://pending.test/"], False)]
        assert (await connection.xpending(KEYS.stream(1), GROUP))["pending"] == 0
        await restarted.close()
        await sender.close()
        await connection.aclose()

    asyncio.run(run())


def test_garbage_on_a_stream_is_counted_and_skipped(redis_server: RedisServer) -> None:
    async def body(nodes: list[RedisPeers], inboxes: list[FakeInbox], connection: Any) -> None:
        stream = KEYS.stream(1)
        await connection.xadd(stream, {b"m": b"\x00garbage\xff"})
        await connection.xadd(stream, {b"other": b"field"})
        await connection.xadd(stream, {b"m": wire.encode([wire.Ack(7, [1])])})  # from a node the crawl has not
        await connection.xadd(stream, {b"m": wire.encode([wire.Stop("x", 0)])})  # no place on a stream
        nodes[0].transmit([batch(1, 1, "http://after.test/")])
        await until(lambda: inboxes[0].acknowledged == [(1, 1)])
        assert nodes[1].errors["transport:malformed-message"] == 4
        assert inboxes[1].batches == [(["http://after.test/"], False)]
        assert await emptied(connection, stream)  # skipped entries are acknowledged and deleted too

    with_nodes(redis_server, 2, body)


def test_content_claims_go_to_the_fingerprint_owner(redis_server: RedisServer) -> None:
    async def body(nodes: list[RedisPeers], inboxes: list[FakeInbox], connection: Any) -> None:
        fingerprint = next(fp for fp in range(100, 200) if content_owner(fp, 2) == 1)
        assert await nodes[0].claim_first(fingerprint, "http://first.test/", 1.0) == ("http://first.test/", 1.0)
        assert await nodes[1].claim_first(fingerprint, "http://copy.test/", 2.0) == ("http://first.test/", 1.0)
        assert inboxes[1].firsts[fingerprint] == ("http://first.test/", 1.0)  # the owner's content set
        nodes[0].settle(fingerprint, "http://first.test/", stored=False)  # released: the next copy is first
        await until(lambda: fingerprint not in inboxes[1].firsts)
        assert await nodes[0].claim_first(fingerprint, "http://copy.test/", 3.0) == ("http://copy.test/", 3.0)

    with_nodes(redis_server, 2, body)


def test_a_question_to_a_node_that_does_not_run_is_answered_none_without_blocking(redis_server: RedisServer) -> None:
    async def run() -> None:
        alone = RedisPeers(redis.asyncio.Redis.from_url(redis_server.url), KEYS, 0, 2, query_timeout=0.3)
        await alone.start(FakeInbox())
        fingerprint = next(fp for fp in range(100, 200) if content_owner(fp, 2) == 1)
        loop = asyncio.get_running_loop()
        started = loop.time()
        assert await alone.claim_first(fingerprint, "http://a.test/", 1.0) is None
        assert 0.25 < loop.time() - started < 2
        started = loop.time()
        assert await alone.claim_first(fingerprint, "http://b.test/", 1.0) is None  # not asked again for a while
        assert loop.time() - started < 0.1
        assert alone.errors["transport:claim-timeout"] == 1
        await alone.close()

    asyncio.run(run())


def test_a_node_that_stops_by_itself_stops_the_others(redis_server: RedisServer) -> None:
    async def body(nodes: list[RedisPeers], inboxes: list[FakeInbox], connection: Any) -> None:
        await nodes[2].close("max-seconds")
        await until(lambda: inboxes[0].stops == ["max-seconds"] and inboxes[1].stops == ["max-seconds"])
        assert wire.decode_one(await connection.get(KEYS.stop), wire.Stop) == wire.Stop("max-seconds", 2)

    with_nodes(redis_server, 3, body)


def test_every_node_answers_each_termination_round(redis_server: RedisServer) -> None:
    async def body(nodes: list[RedisPeers], inboxes: list[FakeInbox], connection: Any) -> None:
        nodes[1].idle = True
        nodes[0].transmit([batch(1, 1, "http://a.test/")])
        await until(lambda: nodes[1].received == 1)
        await connection.set(KEYS.round, 5)

        async def answers() -> dict[int, wire.ProbeReply]:
            raw = await connection.hgetall(KEYS.answers(5))
            return {int(node): wire.decode_one(value, wire.ProbeReply) for node, value in raw.items()}

        for _ in range(100):
            if len(found := await answers()) == 2:
                break
            await asyncio.sleep(0.05)
        assert found == {0: wire.ProbeReply(5, 0, False, 1, 0), 1: wire.ProbeReply(5, 1, True, 0, 1)}

    with_nodes(redis_server, 2, body)


def test_a_lost_server_is_survived_and_unacknowledged_batches_are_sent_again(redis_server: RedisServer) -> None:
    async def body(nodes: list[RedisPeers], inboxes: list[FakeInbox], connection: Any) -> None:
        nodes[0].transmit([batch(1, 1, "http://before.test/")])
        await until(lambda: inboxes[0].acknowledged == [(1, 1)])
        redis_server.kill()
        fingerprint = next(fp for fp in range(100, 200) if content_owner(fp, 2) == 1)
        nodes[0].transmit([batch(1, 2, "http://during.test/")])  # written nowhere: the server is gone
        await until(lambda: not nodes[0].connected and not nodes[1].connected)
        assert await nodes[0].claim_first(fingerprint, "http://x.test/", 1.0) is None  # at once, decided locally
        assert nodes[0].unacknowledged == 1
        redis_server.start()  # same directory: its append-only file
        await until(lambda: inboxes[0].acknowledged == [(1, 1), (1, 2)], timeout=30)
        assert nodes[0].connected and nodes[1].connected
        assert inboxes[1].batches[-1] == (["http://during.test/"], False)
        assert nodes[0].errors["transport:redis-lost"] == 1

    with_nodes(redis_server, 2, body)


def test_a_hung_server_counts_as_lost_after_the_link_timeout(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The client has no socket timeout (redislink.client: it cost a task per command): a server that
    hangs (SIGSTOP) is found by the control poll's LINK_TIMEOUT, and the link comes back when it does."""
    monkeypatch.setattr(redisstreams, "LINK_TIMEOUT", 0.5)

    async def body(nodes: list[RedisPeers], inboxes: list[FakeInbox], connection: Any) -> None:
        assert redis_server.process is not None
        os.kill(redis_server.process.pid, signal.SIGSTOP)
        try:
            await until(lambda: not nodes[0].connected and not nodes[1].connected, timeout=5)
            nodes[0].transmit([batch(1, 1, "http://during.test/")])  # waits for the link
        finally:
            os.kill(redis_server.process.pid, signal.SIGCONT)
        await until(lambda: inboxes[0].acknowledged == [(1, 1)], timeout=30)
        assert nodes[0].connected and nodes[1].connected
        assert nodes[0].errors["transport:redis-lost"] == 1

    with_nodes(redis_server, 2, body)


def near_question(url: str, bands: tuple[tuple[int, int], ...]) -> NearQuestion:
    return NearQuestion(url, 1.0, 2.0, bytes(range(16)), bands)


def test_near_duplicate_questions_are_answered_by_the_owners_of_the_band_keys(redis_server: RedisServer) -> None:
    async def body(nodes: list[RedisPeers], inboxes: list[FakeInbox], connection: Any) -> None:
        inboxes[1].near_match = NearMatch("http://original.test/", 0.5, 0.93)
        asked = {0: near_question("http://copy.test/", ((0, 10),)), 1: near_question("http://copy.test/", ((1, 7),))}
        answers = await nodes[0].ask_near(asked)
        assert answers == {0: None, 1: NearMatch("http://original.test/", 0.5, 0.93)}
        assert inboxes[0].near_asked == [asked[0]]  # its own keys: a call, not a message
        assert inboxes[1].near_asked == [asked[1]]  # the owner's: through its stream, whole
        assert nodes[0].wire.messages_out >= 1 and nodes[1].wire.messages_out >= 1

    with_nodes(redis_server, 2, body)


def test_a_near_question_to_a_silent_node_is_left_out_counted_and_not_repeated_at_once(
    redis_server: RedisServer,
) -> None:
    async def run() -> None:
        inbox = FakeInbox()
        alone = RedisPeers(redis.asyncio.Redis.from_url(redis_server.url), KEYS, 0, 2, query_timeout=0.3)
        await alone.start(inbox)
        asked = {0: near_question("http://a.test/", ((0, 1),)), 1: near_question("http://a.test/", ((1, 2),))}
        loop = asyncio.get_running_loop()
        started = loop.time()
        assert await alone.ask_near(asked) == {0: None}  # owner 1 missing: the page is new there
        assert 0.25 < loop.time() - started < 2
        started = loop.time()
        assert await alone.ask_near(asked) == {0: None}  # not asked again for a while
        assert loop.time() - started < 0.1
        assert alone.errors["transport:near-timeout"] == 1
        await alone.close()

    asyncio.run(run())


def test_a_malformed_near_question_is_counted_and_left_unanswered(redis_server: RedisServer) -> None:
    async def body(nodes: list[RedisPeers], inboxes: list[FakeInbox], connection: Any) -> None:
        odd = wire.NearQuestion(0, 99, "http://odd.test/", 1.0, 1.0, b"\x01\x02\x03", [(0, 1)])  # half a uint16
        await connection.xadd(KEYS.stream(1), {b"m": wire.encode([odd])})
        await until(lambda: nodes[1].errors["transport:malformed-message"] == 1)
        assert inboxes[1].near_asked == []
        assert await emptied(connection, KEYS.stream(1))  # skipped, not left to be read again

    with_nodes(redis_server, 2, body)


def test_questions_queued_within_the_linger_share_one_stream_entry(redis_server: RedisServer) -> None:
    async def body(nodes: list[RedisPeers], inboxes: list[FakeInbox], connection: Any) -> None:
        owned = [fp for fp in range(100, 400) if content_owner(fp, 2) == 1][:10]
        entries_before = nodes[0].wire.entries_out
        answers = await asyncio.gather(
            *(nodes[0].claim_first(fp, f"http://page{fp}.test/", 1.0) for fp in owned)
        )  # fmt: skip
        assert answers == [(f"http://page{fp}.test/", 1.0) for fp in owned]
        assert nodes[0].wire.kinds_out["ContentQuestion"] == 10
        assert nodes[0].wire.entries_out - entries_before == 1  # ten questions, one XADD
        assert nodes[1].wire.kinds_out["ContentAnswer"] == 10
        assert nodes[1].wire.entries_out == 1  # and their ten answers, one more

    with_nodes(redis_server, 2, body, linger=0.2)


def test_a_full_chunk_does_not_wait_for_the_linger(redis_server: RedisServer) -> None:
    async def body(nodes: list[RedisPeers], inboxes: list[FakeInbox], connection: Any) -> None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        nodes[0].transmit([batch(1, number, f"http://b{number}.test/") for number in range(1, WRITE_CHUNK + 1)])
        await until(lambda: nodes[1].received == WRITE_CHUNK)
        assert loop.time() - started < 5  # not the 30 s linger
        assert nodes[0].wire.entries_out == 1

    with_nodes(redis_server, 2, body, linger=30.0)


def test_an_entry_is_acknowledged_after_it_was_journaled_and_at_the_latest_on_close(
    redis_server: RedisServer, monkeypatch: Any
) -> None:
    monkeypatch.setattr(redisstreams, "ACK_DELAY", 30.0)  # only the close acknowledges

    async def run() -> None:
        connection = redis.asyncio.Redis.from_url(redis_server.url)
        sender, sender_inbox = RedisPeers(redis.asyncio.Redis.from_url(redis_server.url), KEYS, 0, 2), FakeInbox()
        await sender.start(sender_inbox)
        failing = RedisPeers(redis.asyncio.Redis.from_url(redis_server.url), KEYS, 1, 2)
        await failing.start(FakeInbox(journaled=False))
        sender.transmit([batch(1, 1, "http://a.test/")])
        await until(lambda: failing.wire.entries_in == 1)
        await asyncio.sleep(0.3)
        assert sender_inbox.acknowledged == []  # receive_urls said False: no Ack, the entry stays pending
        await failing.close()
        assert (await connection.xpending(KEYS.stream(1), GROUP))["pending"] == 1

        receiver, inbox = RedisPeers(redis.asyncio.Redis.from_url(redis_server.url), KEYS, 1, 2), FakeInbox()
        await receiver.start(inbox)
        await until(lambda: sender_inbox.acknowledged == [(1, 1)])  # journaled: the Ack went at once
        assert (await connection.xpending(KEYS.stream(1), GROUP))["pending"] == 0  # read again at start: XACKed
        sender.transmit([batch(1, 2, "http://b.test/")])
        await until(lambda: sender_inbox.acknowledged == [(1, 1), (1, 2)])
        assert inbox.batches == [(["http://a.test/"], False), (["http://b.test/"], False)]
        assert (await connection.xpending(KEYS.stream(1), GROUP))["pending"] == 1  # a new one's XACK waits
        for task in receiver._tasks:  # killed: what was journaled and not XACKed is read again
            task.cancel()
        await asyncio.wait(receiver._tasks)

        restarted, again = RedisPeers(redis.asyncio.Redis.from_url(redis_server.url), KEYS, 1, 2), FakeInbox()
        await restarted.start(again)
        await until(lambda: again.batches == [(["http://b.test/"], False)])  # a repeat: the URL set drops it
        await restarted.close()  # acknowledges what it was done with
        assert (await connection.xpending(KEYS.stream(1), GROUP))["pending"] == 0
        assert await connection.xlen(KEYS.stream(1)) == 0
        await sender.close()
        await connection.aclose()

    asyncio.run(run())
