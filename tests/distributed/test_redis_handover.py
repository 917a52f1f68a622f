"""A resize's handover over Redis (RedisPeers.transmit_handover / repartitioned) against a redis-server of
the test's own: parts delivered whole and acknowledged only once durable, repeated after a lost server,
the barrier passed only when every member of the resize has joined it (False on the cluster's stop),
and the URL batches of the run before the resize dropped unacknowledged (their senders route them again)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio

from crawlspace.distributed import wire
from crawlspace.distributed.redislink import GROUP, Keys
from crawlspace.distributed.redisstreams import RedisPeers
from crawlspace.distributed.resize import FrontierPart, HostsPart, Part, Resize, SeenPart
from tests.distributed.redis_server import RedisServer
from tests.distributed.test_redis_peers import FakeInbox, batch, until

KEYS = Keys("resize")
SHRINK = Resize(previous=3, partitions=2, epoch=1)


@dataclass
class HandoverInbox(FakeInbox):
    durable: bool = True
    parts: list[tuple[int, int, Part]] = field(default_factory=list)
    parts_acknowledged: list[tuple[int, int]] = field(default_factory=list)

    def receive_handover(self, sender: int, number: int, part: Part) -> bool:
        if self.durable:
            self.parts.append((sender, number, part))
        return self.durable

    def handover_acknowledged(self, peer: int, number: int) -> None:
        self.parts_acknowledged.append((peer, number))


def with_resized_nodes(
    server: RedisServer, body: Callable[[list[RedisPeers], list[HandoverInbox], Any], Awaitable[None]]
) -> None:
    async def run() -> None:
        connection = redis.asyncio.Redis.from_url(server.url)
        nodes = [
            RedisPeers(redis.asyncio.Redis.from_url(server.url), KEYS, k, SHRINK.partitions, resize=SHRINK)
            for k in range(SHRINK.workers)
        ]
        inboxes = [HandoverInbox() for _ in nodes]
        try:
            await body(nodes, inboxes, connection)
        finally:
            for node in nodes:
                await node.close()
            await connection.aclose()

    asyncio.run(run())


def test_parts_are_acknowledged_once_durable_and_the_barrier_waits_for_every_member(redis_server: RedisServer) -> None:
    frontier = FrontierPart([("http://a.test/x", 2, 0)], sitemaps=["http://a.test/x"])
    seen = SeenPart(bytes(range(16)))
    hosts = HostsPart({"a.test": (5, 1)}, seeds=["http://a.test/"])

    async def body(nodes: list[RedisPeers], inboxes: list[HandoverInbox], connection: Any) -> None:
        inboxes[1].durable = False
        for node, inbox in zip(nodes, inboxes, strict=True):
            await node.start(inbox)
        nodes[2].transmit_handover(0, 1, frontier)  # the draining node, to the members that stay
        nodes[2].transmit_handover(0, 2, seen)
        nodes[2].transmit_handover(1, 3, hosts)
        await until(lambda: inboxes[2].parts_acknowledged == [(0, 1), (0, 2)])
        assert inboxes[0].parts == [(2, 1, frontier), (2, 2, seen)]  # decoded, whole
        await asyncio.sleep(0.3)
        assert (1, 3) not in inboxes[2].parts_acknowledged  # not durable at node 1: not acknowledged
        pending = await connection.xpending(KEYS.stream(1), GROUP)
        assert pending["pending"] == 1  # and left pending, read again after a restart
        inboxes[1].durable = True
        nodes[2].transmit_handover(1, 3, hosts)  # the phase sends an unacknowledged part again
        await until(lambda: (1, 3) in inboxes[2].parts_acknowledged)
        assert inboxes[1].parts == [(2, 3, hosts)]

        barrier = [asyncio.create_task(node.repartitioned()) for node in nodes[:2]]
        await asyncio.sleep(0.6)
        assert not any(task.done() for task in barrier)  # node 2 has not said so yet
        assert await nodes[2].repartitioned()
        assert await asyncio.gather(*barrier) == [True, True]
        assert await connection.smembers(KEYS.handed(1)) == {b"0", b"1", b"2"}

    with_resized_nodes(redis_server, body)


def test_batches_of_the_run_before_the_resize_are_dropped_unacknowledged(redis_server: RedisServer) -> None:
    async def body(nodes: list[RedisPeers], inboxes: list[HandoverInbox], connection: Any) -> None:
        stale = wire.encode([wire.UrlBatch(2, 9, [("http://old.test/", 1, 0)])])
        await connection.xadd(KEYS.stream(0), {b"m": stale})  # sent by node 2 before the crawl stopped
        for node, inbox in zip(nodes, inboxes, strict=True):
            await node.start(inbox)
        assert await asyncio.gather(*(node.repartitioned() for node in nodes)) == [True, True, True]
        nodes[1].transmit([batch(0, 4, "http://new.test/")])  # the new run's
        await until(lambda: inboxes[1].acknowledged == [(0, 4)])
        assert inboxes[0].batches == [(["http://new.test/"], False)]
        assert nodes[0].stale_batches == 1 and inboxes[2].acknowledged == []  # node 2 routes it again itself
        await until(lambda: nodes[0].wire.entries_in >= 2)
        assert (await connection.xpending(KEYS.stream(0), GROUP))["pending"] == 0

    with_resized_nodes(redis_server, body)


def test_the_barrier_gives_up_on_the_cluster_s_stop_and_a_draining_node_stops_nobody(
    redis_server: RedisServer,
) -> None:
    async def body(nodes: list[RedisPeers], inboxes: list[HandoverInbox], connection: Any) -> None:
        for node, inbox in zip(nodes, inboxes, strict=True):
            await node.start(inbox)
        waiting = asyncio.create_task(nodes[0].repartitioned())
        await nodes[2].close("drained")  # a draining node's end is not the crawl's
        await asyncio.sleep(0.5)
        assert await connection.get(KEYS.stop) is None and not waiting.done()
        await connection.set(KEYS.stop, wire.encode([wire.Stop("interrupted", 1)]))
        assert await asyncio.wait_for(waiting, 5.0) is False
        assert inboxes[0].stops == ["interrupted"]

    with_resized_nodes(redis_server, body)


def test_unacknowledged_parts_are_sent_again_after_a_lost_server(redis_server: RedisServer) -> None:
    part = HostsPart({"b.test": (1, 0)})

    async def body(nodes: list[RedisPeers], inboxes: list[HandoverInbox], connection: Any) -> None:
        for node, inbox in zip(nodes, inboxes, strict=True):
            await node.start(inbox)
        redis_server.kill()
        nodes[2].transmit_handover(0, 1, part)  # written nowhere: the server is gone
        await until(lambda: not nodes[2].connected)
        redis_server.start()
        await until(lambda: inboxes[2].parts_acknowledged == [(0, 1)], timeout=30)
        assert inboxes[0].parts[-1] == (2, 1, part)

    with_resized_nodes(redis_server, body)
