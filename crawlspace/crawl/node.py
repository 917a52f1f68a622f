"""One node of a crawl across machines (`crawlspace crawl --cluster URL --node K --nodes N`): one engine,
one partition, its own crawl directory, the others reached through Redis (distributed.redisstreams).

The node's directory has the layout of a one-process crawl (`crawlspace table`, `export`, `warc` read
it as they read any crawl) plus DIR/cluster.json: the crawl id, the node's index and the number of
nodes, so that `--resume DIR --cluster URL` finds its place again. The Redis URL is never written
there (nor to config.json, logs or stats): it holds the password. A resize (`--resume DIR --nodes M`,
distributed.cluster) is recorded there as well until its handover phase has ended (for a node leaving
in it: until it has drained), as partitions.json records a local one: a node killed in the phase resumes
the same phase.

Order of a node's start: reach Redis (unreachable: a one-line error), join the crawl (publish it, or
check this node against it: distributed.cluster), take the node's lock, open the engine's state,
start the transport (unacknowledged batches go out again), then crawl. Hosts are partitioned by
rendezvous hashing (distributed.assignment), the rule that moves fewest hosts when a cluster resizes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import redis.asyncio

from crawlspace.config import CrawlConfig
from crawlspace.crawl.partitioning import write_record
from crawlspace.crawl.telemetry import CrawlStats, Snapshot, TelemetrySink
from crawlspace.distributed.assignment import RendezvousAssignment
from crawlspace.distributed.budget import Budget, PageBudget
from crawlspace.distributed.cluster import ClusterControl, ClusterSpec, finish_resize, join
from crawlspace.distributed.redisbudget import RedisBudget
from crawlspace.distributed.redislink import REDIS_FAILURES, ClusterError, Keys, connect
from crawlspace.distributed.redisstreams import RedisPeers

log = logging.getLogger(__name__)

CLUSTER_FILE = "cluster.json"
STATUS_TTL = 7 * 86400  # a node's last status outlives the crawl by a week, for `crawlspace status`


def saved_cluster(out: Path) -> dict[str, Any] | None:
    """DIR/cluster.json of a node's directory ({crawl_id, node, nodes, epoch, resizing_from}), None for a
    crawl of one machine. (A directory written before resizes has no epoch: 0, none under way.)"""
    path = out / CLUSTER_FILE
    try:
        values = json.loads(path.read_text())
        was = values.get("resizing_from")
        return {
            "crawl_id": str(values["crawl_id"]), "node": int(values["node"]), "nodes": int(values["nodes"]),
            "epoch": int(values.get("epoch", 0)), "resizing_from": None if was is None else int(was),
        }  # fmt: skip
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ClusterError(f"cannot read {path}: {exc}") from None


def record_cluster(out: Path, spec: ClusterSpec, *, resized: bool = False) -> None:
    """Written atomically: a node killed while it writes must find its resize recorded, or not at all.
    `resized`: the resize's phase has ended (a node beyond the new count has left the crawl then)."""
    values = {
        "crawl_id": spec.crawl_id, "node": spec.node, "nodes": spec.nodes, "epoch": spec.epoch,
        "resizing_from": None if resized else spec.resizing_from,
    }  # fmt: skip
    write_record(out / CLUSTER_FILE, values)


async def _repartition(connection: redis.asyncio.Redis, spec: ClusterSpec, engine: Any, out: Path) -> bool:
    """A resize's phase (crawl/repartition.py, the local mode's); True when the crawl may begin. A node
    that stays records the resize as over for itself then; a leaving one only once it has drained
    (`_drained`). Stopped meanwhile, the run that follows only checkpoints and ends, and a resume
    repeats it."""
    resize = spec.resize
    assert resize is not None
    log.info("node %d: resize %d from %d to %d nodes%s", spec.node, resize.epoch, resize.previous, resize.partitions,
             ": this node hands over its hosts and ends" if resize.draining(spec.node) else "")  # fmt: skip
    if not await engine.repartition():
        return False
    log.info("node %d: every node of resize %d has handed over", spec.node, resize.epoch)
    if not resize.draining(spec.node):
        with contextlib.suppress(*REDIS_FAILURES):  # the last leaving node to drain clears it as well
            await finish_resize(connection, spec)
        record_cluster(out, spec, resized=True)
    return True


async def _drained(connection: redis.asyncio.Redis, spec: ClusterSpec, out: Path) -> None:
    """A leaving node ended `drained`: every URL batch it still held when the barrier passed (the old
    assignment's unacknowledged ones, routed again to the new owners) is acknowledged, journaled there.
    Until then its directory alone held those URLs, and a node whose record says the resize is over is
    never resumed again (`crawlspace crawl --resume` refuses it): killed before, it repeats the phase,
    passes the barrier at once and sends them again. Redis first (the resize is over when every leaving
    node has drained), then the node's own record: killed between, the repeat finds nothing to send."""
    assert spec.resize is not None
    try:
        await connection.sadd(spec.keys.drained(spec.epoch), str(spec.node))
        await finish_resize(connection, spec)
    except REDIS_FAILURES:
        log.warning("node %d drained but could not say so to Redis: resume it to end the resize", spec.node)
        return
    record_cluster(out, spec, resized=True)
    log.info("node %d has drained: it left the crawl", spec.node)


class RedisStatusSink:
    """A node's Snapshots to `Keys.status(node)`, for `crawlspace status`: the latest only, written in the
    background (a sink must return at once), skipped while Redis is lost."""

    def __init__(self, connection: redis.asyncio.Redis, keys: Keys, peers: RedisPeers) -> None:
        self._redis = connection
        self._key = keys.status(peers.index)
        self._peers = peers
        self._latest: bytes | None = None
        self._writing: asyncio.Task[None] | None = None
        self.failures = 0

    def __repr__(self) -> str:
        return f"RedisStatusSink({self._key})"

    def publish(self, snapshot: Snapshot) -> None:
        status = {
            "node": self._peers.index,
            "updated": time.time(),
            "finished": snapshot.stats.finished_at is not None,
            "termination": snapshot.stats.termination,
            "connected": self._peers.connected,
            "unacknowledged_batches": self._peers.unacknowledged,
            "unacknowledged_batches_by_node": self._peers.unacknowledged_by_node,
            "progress": snapshot.progress_line(),
            "snapshot": snapshot.to_builtins(),
        }
        self._latest = json.dumps(status).encode()
        if self._peers.connected and (self._writing is None or self._writing.done()):
            self._writing = asyncio.get_running_loop().create_task(self._write())

    async def _write(self) -> None:
        while self._latest is not None:
            value, self._latest = self._latest, None
            try:
                await self._redis.set(self._key, value, ex=STATUS_TTL)
            except REDIS_FAILURES:
                self.failures += 1
                return

    def close(self) -> None:
        """The last status is written by `flush`, awaited by the node."""

    async def flush(self) -> None:
        if self._writing is not None:
            await asyncio.gather(self._writing, return_exceptions=True)
        if self._latest is not None:
            with contextlib.suppress(*REDIS_FAILURES):
                await self._write()


async def crawl_node(
    spec: ClusterSpec,
    config: CrawlConfig,
    out: Path,
    *,
    seeds: Sequence[str],
    resume: bool,
    record_start: Callable[[list[str]], list[str] | None],
    make_engine: Callable[..., Any],
    telemetry: Sequence[TelemetrySink],
    on_engine: Callable[[Any], None] = lambda engine: None,
) -> CrawlStats:
    """Run this node to the end of the crawl. `record_start(seeds)` writes config.json and seeds.json
    (returns a resumed crawl's unstarted seeds); `make_engine(**options)` builds the CrawlEngine;
    `on_engine` is told the engine once it exists (so that a stop can reach it)."""
    connection = await connect(spec.url)
    try:
        return await _crawl_with(connection, spec, config, out, list(seeds), resume, record_start, make_engine,
                                 telemetry, on_engine)  # fmt: skip
    finally:
        await connection.aclose()


async def _crawl_with(
    connection: redis.asyncio.Redis,
    spec: ClusterSpec,
    config: CrawlConfig,
    out: Path,
    seeds: list[str],
    resume: bool,
    record_start: Callable[[list[str]], list[str] | None],
    make_engine: Callable[..., Any],
    telemetry: Sequence[TelemetrySink],
    on_engine: Callable[[Any], None],
) -> CrawlStats:
    try:
        joined = await join(connection, spec, config, seeds, resume=resume)
    except REDIS_FAILURES as exc:
        raise ClusterError(f"Redis at {spec.where} failed while this node joined: {exc}") from None
    spec = joined.spec  # a node new to the crawl may join a resize
    if joined.previous_stop:
        log.info("crawl %r: its previous run stopped (%s); this run continues it", spec.crawl_id, joined.previous_stop)
    engine_holder: list[Any] = []

    def lock_lost() -> None:
        for engine in engine_holder:
            engine.stop("node-lock-lost")

    control = ClusterControl(connection, spec, on_lock_lost=lock_lost)
    await control.acquire()
    try:
        record_cluster(out, spec)
        unstarted = record_start(joined.seeds)
        peers = RedisPeers(
            connection, spec.keys, spec.node, spec.nodes, hold_until_settled=not config.store_near_duplicates,
            where=spec.where, resize=spec.resize,
        )  # fmt: skip
        budget: Budget = (
            RedisBudget(spec.url, spec.keys, spec.node, spec.nodes, config.max_pages)
            if config.max_pages is not None
            else PageBudget(None)
        )
        status = RedisStatusSink(connection, spec.keys, peers)
        try:
            engine = make_engine(
                resume=resume,
                unstarted_seeds=unstarted,
                peers=peers,
                assignment=RendezvousAssignment(spec.nodes),
                budget=budget,
                telemetry=[*telemetry, status],
                resize=spec.resize,
            )
            engine_holder.append(engine)
            on_engine(engine)
            peers.attach(engine.stats.errors)
            control.start()  # the lock is renewed through a phase of any length
            began = True
            if spec.resize is not None:
                began = await _repartition(connection, spec, engine, out)
            else:
                await engine.connect()
            engine.add_seeds(joined.seeds)  # every node knows every seed (the scope); each queues its own
            try:
                stats: CrawlStats = await engine.run()
            finally:
                await peers.close(engine.stats.termination)
                await status.flush()
            if began and peers.draining and stats.termination == "drained":
                await _drained(connection, spec, out)
            stats.sections["transport"] = {
                **peers.wire.report(), "status_writes_failed": status.failures,
                "stale_batches_dropped": peers.stale_batches,
            }  # fmt: skip
            stats.write(out / "stats.json")  # the engine wrote it before the transport had closed
        finally:
            if isinstance(budget, RedisBudget):
                budget.close()
    finally:
        await control.close()
    return stats
