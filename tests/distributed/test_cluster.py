"""Cluster control through Redis: joining (published configuration, refusals naming the differing keys),
one process per node, the leader's termination rounds, the password kept out of every message."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import redis.asyncio
import trustme

from crawlspace.config import CrawlConfig
from crawlspace.distributed import wire
from crawlspace.distributed.cluster import (
    ClusterControl,
    ClusterSpec,
    finish_resize,
    join,
    published_config,
    read_meta,
)
from crawlspace.distributed.redisbudget import RedisBudget
from crawlspace.distributed.redislink import ClusterError, Keys, redact
from crawlspace.distributed.redisstreams import RedisPeers
from tests.conftest import run_cli
from tests.distributed.redis_server import RedisServer, free_port
from tests.distributed.test_redis_peers import FakeInbox, batch, until

SEEDS = ["http://a.test/", "http://b.test/"]


def spec(server: RedisServer, node: int, nodes: int = 3) -> ClusterSpec:
    return ClusterSpec(server.url, node, nodes, "joined")


def test_the_first_node_publishes_and_the_others_must_agree(redis_server: RedisServer) -> None:
    config = CrawlConfig(min_delay=0.5, max_depth=3, concurrency=8)

    async def run() -> None:
        connection = redis.asyncio.Redis.from_url(redis_server.url)
        first = await join(connection, spec(redis_server, 0), config, SEEDS, resume=False)
        assert first.publisher and first.seeds == SEEDS
        meta = await read_meta(connection, spec(redis_server, 0).keys)
        assert meta is not None and published_config(meta).max_depth == 3
        assert "concurrency" not in meta["config"]  # a node's own: sizes one machine
        other = await join(connection, spec(redis_server, 1), config.replace(concurrency=64), [], resume=False)
        assert not other.publisher and other.seeds == SEEDS
        with pytest.raises(ClusterError, match=r"max_depth \(crawl: 3, this node: 5\).*min_delay \(crawl: 0.5"):
            await join(connection, spec(redis_server, 2), config.replace(max_depth=5, min_delay=1.0), [], resume=False)
        with pytest.raises(ClusterError, match="has run before: continue it with --resume"):
            await join(connection, spec(redis_server, 1), config, [], resume=False)
        assert not (await join(connection, spec(redis_server, 1), config, [], resume=True)).publisher
        with pytest.raises(ClusterError, match="has 3 nodes, this node says 2: resume every node with the same"):
            await join(connection, spec(redis_server, 1, nodes=2), config, [], resume=True)
        with pytest.raises(ClusterError, match="other seeds"):
            await join(connection, spec(redis_server, 2), config, ["http://c.test/"], resume=False)
        with pytest.raises(ClusterError, match="no crawl 'nothing'"):
            await join(connection, ClusterSpec(redis_server.url, 1, 3, "nothing"), config, [], resume=False)
        await connection.aclose()

    asyncio.run(run())


def test_a_resume_with_another_number_of_nodes_resizes_the_published_crawl(redis_server: RedisServer) -> None:
    config = CrawlConfig(min_delay=0.5)

    async def run() -> None:
        connection = redis.asyncio.Redis.from_url(redis_server.url)
        for node in range(3):
            await join(connection, spec(redis_server, node), config, SEEDS if node == 0 else [], resume=False)
        shrunk = spec(redis_server, 2).resized_to(2)  # node 2 of 3 resumed with --nodes 2: it drains
        assert (shrunk.nodes, shrunk.epoch, shrunk.resizing_from, shrunk.members) == (2, 1, 3, 3)
        assert shrunk.resize is not None and shrunk.resize.draining(2)
        assert shrunk.resized_to(2) is shrunk  # killed in the phase: the same phase
        with pytest.raises(ClusterError, match="being resized from 3 to 2 nodes: resume every node with --nodes 2"):
            shrunk.resized_to(4)
        assert (await join(connection, shrunk, config, [], resume=True)).spec == shrunk
        meta = await read_meta(connection, shrunk.keys)
        assert meta is not None and (meta["nodes"], meta["epoch"], meta["resizing_from"]) == (2, 1, 3)
        await join(connection, spec(redis_server, 0).resized_to(2), config, [], resume=True)  # the same resize
        with pytest.raises(ClusterError, match=r"has 2 nodes \(resize 1\), this node says 3: resume every node"):
            await join(connection, spec(redis_server, 1), config, [], resume=True)  # not resized: refused
        with pytest.raises(ClusterError, match="this node says 4 \\(resize 1\\)"):
            await join(connection, spec(redis_server, 1).resized_to(4), config, [], resume=True)
        await finish_resize(connection, shrunk)  # past the barrier, node 2 not drained: not over
        meta = await read_meta(connection, shrunk.keys)
        assert meta is not None and meta["resizing_from"] == 3
        again = replace(spec(redis_server, 0), nodes=2, epoch=1).resized_to(3)  # node 0 over for itself
        with pytest.raises(ClusterError, match="still being resized from 3 to 2 nodes"):
            await join(connection, again, config, [], resume=True)  # node 2's URLs would be left behind
        await connection.sadd(shrunk.keys.drained(1), "2")  # node 2 drained (crawl/node.py)
        await finish_resize(connection, shrunk)
        meta = await read_meta(connection, shrunk.keys)
        assert meta is not None and (meta["nodes"], meta["epoch"], meta["resizing_from"]) == (2, 1, None)
        assert (await join(connection, again, config, [], resume=True)).spec == again  # resized again now
        await connection.aclose()

    asyncio.run(run())


def test_one_process_per_node(redis_server: RedisServer) -> None:
    async def run() -> None:
        connection = redis.asyncio.Redis.from_url(redis_server.url)
        holder = ClusterControl(connection, spec(redis_server, 0))
        await holder.acquire()
        with pytest.raises(ClusterError, match="node 0 of crawl 'joined' is running already"):
            await ClusterControl(connection, spec(redis_server, 0)).acquire(wait=0.3)
        await holder.close()  # released: the next process takes it at once
        await ClusterControl(connection, spec(redis_server, 0)).acquire(wait=0.0)
        await connection.aclose()

    asyncio.run(run())


def test_the_leader_ends_the_crawl_only_when_every_node_is_idle_and_nothing_moved(redis_server: RedisServer) -> None:
    async def run() -> None:
        nodes = [
            RedisPeers(redis.asyncio.Redis.from_url(redis_server.url), spec(redis_server, k).keys, k, 3)
            for k in range(3)
        ]
        inboxes = [FakeInbox() for _ in nodes]
        controls = [
            ClusterControl(redis.asyncio.Redis.from_url(redis_server.url), spec(redis_server, k), round_interval=0.3)
            for k in range(3)
        ]
        for node, inbox, control in zip(nodes, inboxes, controls, strict=True):
            await node.start(inbox)
            await control.acquire()
            control.start()
        nodes[0].idle = nodes[1].idle = True  # node 2 is busy
        await until(lambda: sum(control.rounds for control in controls) >= 5)
        assert sum(control.leading for control in controls) == 1
        assert not any(inbox.stops for inbox in inboxes)
        nodes[2].idle = True
        await until(lambda: all(inbox.stops == ["frontier-empty"] for inbox in inboxes))
        connection = redis.asyncio.Redis.from_url(redis_server.url)
        stop = wire.decode_one(await connection.get(spec(redis_server, 0).keys.stop), wire.Stop)
        assert stop.reason == "frontier-empty" and controls[stop.node].leading
        for node, control in zip(nodes, controls, strict=True):
            await node.close()
            await control.close()
        await connection.aclose()

    asyncio.run(run())


def test_in_a_shrinking_resize_the_crawl_waits_for_the_leaving_node_to_drain(redis_server: RedisServer) -> None:
    """3 nodes resized to 2: nodes 0 and 1 idle do not end the crawl while node 2, leaving, has not
    drained (killed after the barrier: no lock, no last answer; it may hold the only copies of some
    URLs); its last answer once it has drained stands in for it, and the crawl ends."""

    async def run() -> None:
        specs = [spec(redis_server, k).resized_to(2) for k in range(3)]
        nodes = [
            RedisPeers(redis.asyncio.Redis.from_url(redis_server.url), s.keys, s.node, 2, resize=s.resize)
            for s in specs[:2]
        ]
        inboxes = [FakeInbox() for _ in nodes]
        controls = [
            ClusterControl(redis.asyncio.Redis.from_url(redis_server.url), s, round_interval=0.2) for s in specs[:2]
        ]
        for node, inbox, control in zip(nodes, inboxes, controls, strict=True):
            await node.start(inbox)
            node.idle = True
            await control.acquire()
            control.start()
        await until(lambda: sum(control.rounds for control in controls) >= 6)
        assert not any(inbox.stops for inbox in inboxes)  # node 2 not drained: the crawl waits
        leaving = RedisPeers(redis.asyncio.Redis.from_url(redis_server.url), specs[2].keys, 2, 2,
                             resize=specs[2].resize)  # fmt: skip
        await leaving.start(FakeInbox())
        leaving.idle = True
        await leaving.close("drained")  # its last answer, and no stop for the others
        await until(lambda: all(inbox.stops == ["frontier-empty"] for inbox in inboxes))
        for node, control in zip(nodes, controls, strict=True):
            await node.close()
            await control.close()

    asyncio.run(run())


def test_a_node_resumed_alone_after_the_crawl_ended_ends_too_unless_it_sends_to_a_node_not_running(
    redis_server: RedisServer,
) -> None:
    """The others ended cleanly: their last answers stand in for them while they are not running. A batch
    for one of them keeps the resumed node busy (unacknowledged) until it runs; a node that left no last
    answer (killed), or that runs again, is never stood in for."""
    config = CrawlConfig()

    async def started(node: int, inbox: FakeInbox) -> tuple[RedisPeers, ClusterControl]:
        peers = RedisPeers(redis.asyncio.Redis.from_url(redis_server.url), spec(redis_server, node).keys, node, 3)
        control = ClusterControl(redis.asyncio.Redis.from_url(redis_server.url), spec(redis_server, node),
                                 round_interval=0.2)  # fmt: skip
        await peers.start(inbox)
        await control.acquire()
        control.start()
        return peers, control

    async def stopped(peers: RedisPeers, control: ClusterControl, termination: str) -> None:
        await peers.close(termination)
        await control.close()

    async def run() -> None:
        connection = redis.asyncio.Redis.from_url(redis_server.url)
        keys = spec(redis_server, 0).keys
        for node in range(3):
            await join(connection, spec(redis_server, node), config, SEEDS if node == 0 else [], resume=False)
        inboxes = [FakeInbox() for _ in range(3)]
        nodes = [await started(node, inboxes[node]) for node in range(3)]
        for peers, _ in nodes:
            peers.idle = True
        await until(lambda: all(inbox.stops == ["frontier-empty"] for inbox in inboxes))
        for peers, control in nodes:
            await stopped(peers, control, "frontier-empty")
        assert set(await connection.hgetall(keys.ended)) == {b"0", b"1", b"2"}

        # node 0 alone, idle: the others' last answers complete the rounds, and the crawl ends again
        await join(connection, spec(redis_server, 0), config, [], resume=True)
        assert await connection.hexists(keys.ended, "0") == 0  # it runs: its own answer is gone
        alone = FakeInbox()
        peers, control = await started(0, alone)
        peers.idle = True
        await until(lambda: alone.stops == ["frontier-empty"])
        await stopped(peers, control, "frontier-empty")

        # node 0 alone, with a batch for node 2, which is not running: it waits for node 2
        await join(connection, spec(redis_server, 0), config, [], resume=True)
        waiting = FakeInbox()
        peers, control = await started(0, waiting)
        peers.transmit([batch(2, 1, "http://b.test/x")])
        peers.idle = False  # an unacknowledged batch: not idle (the engine's rule)
        await until(lambda: control.rounds >= 6)
        assert waiting.stops == []
        node2_inbox = FakeInbox()
        await join(connection, spec(redis_server, 2), config, [], resume=True)
        node2 = await started(2, node2_inbox)  # node 2 runs again: it takes the batch
        await until(lambda: waiting.acknowledged == [(2, 1)])
        assert node2_inbox.batches == [(["http://b.test/x"], False)]
        peers.idle = node2[0].idle = True
        await until(lambda: waiting.stops == ["frontier-empty"] and node2_inbox.stops == ["frontier-empty"])
        await stopped(peers, control, "frontier-empty")
        await stopped(*node2, "")  # as if killed: no last answer left

        # node 2 left no answer: node 0 alone waits for it
        await join(connection, spec(redis_server, 0), config, [], resume=True)
        assert await connection.hexists(keys.ended, "2") == 0
        last = FakeInbox()
        peers, control = await started(0, last)
        peers.idle = True
        await until(lambda: control.rounds >= 6)
        assert last.stops == []
        await stopped(peers, control, "frontier-empty")
        await connection.aclose()

    asyncio.run(run())


def test_the_password_is_redacted() -> None:
    assert redact("redis://:hunter2@db.example:6380/2") == "redis://:***@db.example:6380/2"
    assert redact("rediss://crawler:hunter2@10.0.0.1/0?ssl_ca_certs=/x") == "rediss://crawler:***@10.0.0.1/0"
    assert "hunter2" not in repr(ClusterSpec("redis://:hunter2@h:1/0", 0, 1))


def test_an_unreachable_redis_is_a_one_line_error_without_the_password(tmp_path: Path) -> None:
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://a.test/\n")
    url = f"redis://:hunter2@127.0.0.1:{free_port()}/0"
    result = run_cli(
        "crawl", str(seeds), "--out", str(tmp_path / "n0"), "--cluster", url, "--node", "0", "--nodes", "2"
    )
    assert result.returncode == 2
    assert result.stderr.startswith("crawlspace: error: cannot reach Redis at redis://:***@127.0.0.1:")
    assert len(result.stderr.strip().splitlines()) == 1 and "hunter2" not in result.stderr
    result = run_cli("status", "--cluster", url)
    assert result.returncode == 2 and "hunter2" not in result.stderr and "cannot reach Redis" in result.stderr


def test_a_joining_node_takes_the_published_configuration_and_is_refused_for_what_it_changes(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    published = CrawlConfig(min_delay=0.25, allow_private_addresses=True, max_depth=2)

    async def publish() -> None:
        connection = redis.asyncio.Redis.from_url(redis_server.url)
        await join(connection, ClusterSpec(redis_server.url, 0, 2), published, SEEDS, resume=False)
        await connection.aclose()

    asyncio.run(publish())
    base = ["crawl", "--out", str(tmp_path / "n1"), "--cluster", redis_server.url, "--node", "1", "--nodes", "2"]
    refused = run_cli(*base, "--min-delay", "1", "--concurrency", "3")
    assert refused.returncode == 2
    assert "configuration differs from crawl 'crawl''s: min_delay (crawl: 0.25, this node: 1.0)" in refused.stderr
    assert "concurrency" not in refused.stderr  # a node's own
    resized = run_cli(*base[:-1], "3")
    assert resized.returncode == 2 and "has 2 nodes, this node says 3" in resized.stderr


def test_a_resume_that_cannot_resize_is_refused(redis_server: RedisServer, tmp_path: Path) -> None:
    node = tmp_path / "node1"
    node.mkdir()
    record = {"crawl_id": "crawl", "node": 1, "nodes": 2, "epoch": 1, "resizing_from": 3}
    (node / "cluster.json").write_text(json.dumps(record))  # killed in the phase of a resize from 3 to 2
    result = run_cli("crawl", "--resume", str(node), "--cluster", redis_server.url, "--nodes", "4")
    assert result.returncode == 2
    assert "being resized from 3 to 2 nodes: resume every node with --nodes 2 first" in result.stderr
    other = run_cli("crawl", "--resume", str(node), "--cluster", redis_server.url, "--node", "0")
    assert other.returncode == 2 and "is node 1 of its crawl, not node 0" in other.stderr
    (node / "cluster.json").write_text(json.dumps({**record, "node": 2, "resizing_from": None}))
    drained = run_cli("crawl", "--resume", str(node), "--cluster", redis_server.url)
    assert drained.returncode == 2 and "left the crawl when it was resized to 2 nodes" in drained.stderr


@pytest.fixture
def tls_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """redis-server on TLS only (Debian's build has it), its certificate from a trustme CA."""
    authority = trustme.CA()
    certificate = authority.issue_cert("127.0.0.1")
    files = tmp_path / "tls"
    files.mkdir()
    authority.cert_pem.write_to_path(str(files / "ca.pem"))
    certificate.cert_chain_pems[0].write_to_path(str(files / "cert.pem"))
    certificate.private_key_pem.write_to_path(str(files / "key.pem"))
    server = RedisServer(tmp_path / "redis-tls", tls=(files / "ca.pem", files / "cert.pem", files / "key.pem"))
    server.start()
    try:
        yield server
    finally:
        server.kill()


def test_rediss_urls_carry_the_cluster_over_tls(tls_redis: RedisServer) -> None:
    assert tls_redis.url.startswith("rediss://")

    async def run() -> None:
        nodes = [RedisPeers(redis.asyncio.Redis.from_url(tls_redis.url), Keys("tls"), k, 2) for k in range(2)]
        inboxes = [FakeInbox() for _ in nodes]
        for node, inbox in zip(nodes, inboxes, strict=True):
            await node.start(inbox)
        nodes[0].transmit([batch(1, 1, "http://tls.test/")])
        await until(lambda: inboxes[0].acknowledged == [(1, 1)])
        for node in nodes:
            await node.close()
        connection = redis.asyncio.Redis.from_url(tls_redis.url)
        await join(connection, ClusterSpec(tls_redis.url, 0, 2), CrawlConfig(), SEEDS, resume=False)
        await connection.aclose()

    asyncio.run(run())
    budget = RedisBudget(tls_redis.url, Keys("tls"), 0, 2, 5)
    assert sum(budget.claim() for _ in range(10)) == 5
    budget.close()
    status = run_cli("status", "--cluster", tls_redis.url, "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["nodes"] == [{"node": 0, "state": "not-seen"}, {"node": 1, "state": "not-seen"}]
    plain = tls_redis.url.replace("rediss://", "redis://").split("?")[0]
    refused = run_cli("status", "--cluster", plain)
    assert refused.returncode == 2 and "cannot reach Redis" in refused.stderr
