"""A cluster node's dashboard reads every node's status from the cluster's Redis (a redis-server this
test starts), as `crawlspace status --cluster` does; a Redis that goes away is said, not fatal."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import redis.asyncio

from crawlspace.config import CrawlConfig
from crawlspace.crawl.telemetry import CrawlStats, Gauges, Snapshot
from crawlspace.distributed.cluster import ClusterSpec, join
from crawlspace.serve.nodes import ClusterNodes
from crawlspace.serve.view import CrawlView
from tests.distributed.redis_server import RedisServer


def _publish_node_zero(url: str) -> None:
    """Node 0 joins a crawl of 2 nodes and publishes one status, as its RedisStatusSink does."""

    async def run() -> None:
        connection = redis.asyncio.Redis.from_url(url)
        spec = ClusterSpec(url, 0, 2)
        await join(connection, spec, CrawlConfig(allow_private_addresses=True), ["http://a.test/"], resume=False)
        stats = CrawlStats(pages_fetched=42)
        snapshot = Snapshot.take(stats, Gauges(frontier=17, in_flight=3))
        status = {
            "node": 0, "updated": time.time(), "finished": False, "termination": "", "connected": True,
            "unacknowledged_batches": 0, "progress": snapshot.progress_line(), "snapshot": snapshot.to_builtins(),
        }  # fmt: skip
        await connection.set(spec.keys.status(0), json.dumps(status))
        await connection.aclose()

    asyncio.run(run())


def test_the_overview_has_a_row_per_node_from_redis(redis_server: RedisServer, tmp_path: Path) -> None:
    _publish_node_zero(redis_server.url)
    clock = [0.0]
    nodes = ClusterNodes.of_directory(redis_server.url, tmp_path, monotonic=lambda: clock[0])
    view = CrawlView(tmp_path, nodes=nodes)
    rows = view.overview()["nodes"]
    assert [(row["node"], row["state"]) for row in rows] == [(0, "running"), (1, "not-seen")]
    assert (rows[0]["pages"], rows[0]["frontier"], rows[0]["in_flight"], rows[0]["redis"]) == (42, 17, 3, "ok")
    redis_server.kill()
    assert view.overview()["nodes"] == rows  # read at most every 2 s: the cached rows
    clock[0] = 5.0
    lost = view.overview()
    assert lost["nodes"] == rows and "cannot reach Redis" in lost["nodes_error"]
    assert redis_server.password not in lost["nodes_error"]
