"""A cluster crawl without a coordinator process: what the nodes agree on through Redis.

- **Joining.** The first node (the one given the seeds) publishes the crawl under its id: the
  configuration, the seeds and the number of nodes (`Keys.meta`); the others read it and are refused,
  with the differing keys named, if theirs differs (`NODE_LOCAL` keys may differ: they size one
  machine). A node index joins once (`Keys.joined`); later it only resumes.
- **One process per node.** A node holds `Keys.lock(node)` (SET NX PX, renewed) while it runs: a
  second process started for the same node waits for the lock to expire (a node killed with SIGKILL
  lets it go within `LOCK_TTL`), then is refused.
- **Termination.** The four-counter test (distributed.termination) in rounds: a leader, elected with
  SET NX PX and renewed (any node; another takes over within `LEADER_TTL` when it dies), increments
  `Keys.round`; every node answers each round (distributed.redisstreams) with (idle, sent, received);
  two consecutive complete settled rounds with the same answers end the crawl: the leader sets
  `Keys.stop`, which every node polls. A node that ended its run cleanly leaves its last answer
  (`Keys.ended`), which stands in for it while it is not running: a node resumed alone after the
  others ended the crawl ends too, unless it sends them URLs (then it waits for them).
- **Resizing.** A crawl resumed with `--nodes M` on every node of a crawl of N re-partitions as a
  local crawl does (distributed.resize, crawl/repartition.py): the first node to join says so in
  `Keys.meta` (`nodes` M, the resize's `epoch`, `resizing_from` N), so that the others, and a node
  new to the crawl, join the same phase; every node records it in its DIR/cluster.json too, and a
  node killed in the phase resumes the same phase. The nodes hand their parts over through their
  streams, wait at the barrier `Keys.handed(epoch)` (distributed.redisstreams); nodes k >= M hand
  over everything and end (`drained`, `Keys.drained(epoch)`) once the URL batches they still held are
  acknowledged, and `finish_resize` clears `resizing_from` only then. The termination rounds of the
  resize's run count every member: a drained node's last answer stands in for it.
- **Status.** Each node's latest telemetry Snapshot under `Keys.status(node)`, read by
  `crawlspace status` (`read_status`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import secrets
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import redis.asyncio
import redis.exceptions

from crawlspace.config import ConfigError, CrawlConfig
from crawlspace.distributed import wire
from crawlspace.distributed.redislink import (
    DEFAULT_CRAWL_ID,
    REDIS_ERRORS,
    REDIS_FAILURES,
    ClusterError,
    Keys,
    check_crawl_id,
    check_url,
    raise_if_cancelled,
    redact,
)
from crawlspace.distributed.resize import Resize
from crawlspace.distributed.termination import ProbeAnswer, crawl_over, settled

log = logging.getLogger(__name__)

META_VERSION = 1
LOCK_TTL = 6.0  # seconds a node's lock outlives its last renewal
LEADER_TTL = 3.0
TICK = 0.25  # how often a round may end
RENEW_EVERY = 1.0  # how often the lock and the leadership are renewed (or the leadership sought)
ROUND_INTERVAL = 0.5  # a leader's round: answers are read this long after the round began
ABSENT_REPORTED_AFTER = 10.0  # seconds the crawl waits for a node that is not running before the leader says so

NODE_LOCAL = frozenset(
    {
        "concurrency", "processes", "seen_cache_bytes", "seen_buffer_urls", "spill_bytes", "dns_servers",
        "hosts_file", "progress_interval", "checkpoint_interval", "max_seconds",
    }
)  # fmt: skip
"""Configuration keys one node may set for itself: they size or time one machine, not the crawl."""

_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


@dataclass(frozen=True)
class ClusterSpec:
    """Where a node is: the Redis URL (a secret: never shown whole), its index, the crawl's size and id."""

    url: str = field(repr=False)
    node: int
    nodes: int
    crawl_id: str = DEFAULT_CRAWL_ID
    epoch: int = 0  # resizes of the crawl so far
    resizing_from: int | None = None  # the nodes before a resize whose handover phase has not ended

    def __post_init__(self) -> None:
        check_url(self.url)
        check_crawl_id(self.crawl_id)
        if self.nodes < 1:
            raise ClusterError(f"--nodes {self.nodes}: a cluster has at least one node")
        if self.resizing_from is not None and not 1 <= self.resizing_from != self.nodes:
            raise ClusterError(f"a resize from {self.resizing_from} to {self.nodes} nodes is not one")
        if not 0 <= self.node < self.members:
            raise ClusterError(f"--node {self.node}: the nodes of a crawl of {self.nodes} are 0 to {self.nodes - 1}")

    @property
    def resize(self) -> Resize | None:
        return None if self.resizing_from is None else Resize(self.resizing_from, self.nodes, self.epoch)

    @property
    def members(self) -> int:
        """Nodes in this run: during a resize's phase the old ones leaving take part too."""
        return max(self.nodes, self.resizing_from or 0)

    def resized_to(self, nodes: int) -> ClusterSpec:
        """This node in the crawl resumed with `nodes` nodes: the same (an unfinished resize goes on),
        or a new resize (ClusterError if the last one has not ended with its own number)."""
        if self.resizing_from is not None:
            if nodes != self.nodes:
                raise ClusterError(
                    f"this crawl is being resized from {self.resizing_from} to {self.nodes} nodes: resume every "
                    f"node with --nodes {self.nodes} first (then it can change again)"
                )
            return self
        if nodes == self.nodes:
            return self
        return replace(self, nodes=nodes, epoch=self.epoch + 1, resizing_from=self.nodes)

    @property
    def keys(self) -> Keys:
        return Keys(self.crawl_id)

    @property
    def where(self) -> str:
        return redact(self.url)

    def __repr__(self) -> str:
        return f"ClusterSpec({self.where}, node {self.node} of {self.nodes}, crawl {self.crawl_id!r})"


@dataclass(frozen=True)
class Joined:
    publisher: bool  # this node published the crawl: its seeds start it
    seeds: list[str]
    previous_stop: str | None  # the reason the cluster's last run stopped, if it did
    spec: ClusterSpec  # the node, with the crawl's resize if a node new to it joins one


def shared_config(config: CrawlConfig) -> dict[str, Any]:
    """The configuration every node must share, as JSON has it (lists, not tuples: compared with the published)."""
    shared = {key: value for key, value in config.to_dict().items() if key not in NODE_LOCAL}
    return dict(json.loads(json.dumps(shared)))


def config_differences(published: dict[str, Any], config: CrawlConfig) -> dict[str, tuple[Any, Any]]:
    mine = shared_config(config)
    return {
        key: (published.get(key), mine.get(key))
        for key in sorted(set(published) | set(mine))
        if published.get(key) != mine.get(key)
    }


async def join(
    connection: redis.asyncio.Redis, spec: ClusterSpec, config: CrawlConfig, seeds: list[str], *, resume: bool
) -> Joined:
    """Publish the crawl (the first node, with seeds) or check this node against it; ClusterError if refused."""
    keys = spec.keys
    meta = {
        "version": META_VERSION,
        "nodes": spec.nodes,
        "epoch": spec.epoch,
        "resizing_from": spec.resizing_from,
        "config": shared_config(config),
        "seeds": list(seeds),
        "created": time.time(),
    }
    publisher = False
    if seeds and not resume:
        publisher = bool(await connection.set(keys.meta, json.dumps(meta), nx=True))
    raw = await connection.get(keys.meta)
    if raw is None:
        if not resume:
            raise ClusterError(
                f"no crawl {spec.crawl_id!r} at {spec.where}: start its first node with a seeds file "
                "(the others take the configuration and seeds from Redis)"
            )
        # a resumed node finds a Redis that lost the crawl's keys: it publishes what it knows again
        await connection.set(keys.meta, json.dumps({**meta, "seeds": []}), nx=True)
        raw = await connection.get(keys.meta)
    try:
        if raw is None:
            raise ValueError("deleted while this node joined")
        published = json.loads(raw)
        published_nodes = int(published["nodes"])
        published_config = dict(published["config"])
        published_seeds = [str(url) for url in published["seeds"]]
        published_epoch = int(published.get("epoch", 0))
        published_from = None if published.get("resizing_from") is None else int(published["resizing_from"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ClusterError(f"crawl {spec.crawl_id!r} at {spec.where} has unreadable metadata ({exc})") from None
    if not resume and published_nodes == spec.nodes:  # a node new to the crawl: it joins the crawl's resize
        spec = replace(spec, epoch=published_epoch, resizing_from=published_from)
    elif (published_nodes, published_epoch) != (spec.nodes, spec.epoch):
        resize = spec.resize
        if resize is None or (published_nodes, published_epoch) != (resize.previous, resize.epoch - 1):
            was = f" (resize {published_epoch})" if published_epoch else ""
            raise ClusterError(
                f"crawl {spec.crawl_id!r} has {published_nodes} nodes{was}, this node says {spec.nodes}"
                f"{f' (resize {spec.epoch})' if spec.epoch else ''}: resume every node with the same --nodes"
            )
        if published_from is not None:
            raise ClusterError(
                f"crawl {spec.crawl_id!r} is still being resized from {published_from} to {published_nodes} nodes "
                f"(resize {published_epoch}): resume every node with --nodes {published_nodes} until the nodes "
                "leaving it have drained, then resize again"
            )
        # the first node resumed with the new number: the resize is the crawl's from now on
        published.update(nodes=spec.nodes, epoch=spec.epoch, resizing_from=resize.previous)
        await connection.set(keys.meta, json.dumps(published))
        log.info("crawl %r resizes from %d to %d nodes (resize %d)", spec.crawl_id, resize.previous, spec.nodes,
                 spec.epoch)  # fmt: skip
    differences = config_differences(published_config, config)
    if differences:
        named = ", ".join(
            f"{key} (crawl: {json.dumps(a)}, this node: {json.dumps(b)})" for key, (a, b) in differences.items()
        )
        raise ClusterError(f"this node's configuration differs from crawl {spec.crawl_id!r}'s: {named}")
    if seeds and not publisher and not resume and sorted(seeds) != sorted(published_seeds):
        raise ClusterError(
            f"crawl {spec.crawl_id!r} was started with other seeds; start this node without a seeds file "
            "(it takes them from Redis), or use another --crawl-id"
        )
    first_time = bool(await connection.hsetnx(keys.joined, str(spec.node), json.dumps(_whoami())))
    if not first_time and not resume:
        raise ClusterError(
            f"node {spec.node} of crawl {spec.crawl_id!r} has run before: continue it with --resume DIR "
            "(its crawl directory), or start a new crawl with another --crawl-id"
        )
    await connection.hdel(keys.ended, str(spec.node))  # it runs: its last answer no longer stands in for it
    previous = await connection.getdel(keys.stop)  # a new run of the cluster begins
    stop_reason = None
    if previous is not None:
        try:
            stop_reason = wire.decode_one(previous, wire.Stop).reason
        except wire.WireError:
            stop_reason = "unreadable"
    return Joined(publisher, published_seeds, stop_reason, spec)


async def finish_resize(connection: redis.asyncio.Redis, spec: ClusterSpec) -> None:
    """The published crawl says the resize is over once every node has passed its barrier and every
    leaving node has drained (`Keys.drained`): until then a leaving node's directory may hold URLs no
    other has, and the crawl must not be resized again. Each node that passes the barrier or drains
    tries; the same value every time."""
    resize = spec.resize
    assert resize is not None
    meta = await read_meta(connection, spec.keys)
    if meta is None or meta.get("epoch") != spec.epoch or meta.get("resizing_from") is None:
        return
    leaving = {str(node) for node in range(resize.partitions, resize.previous)}
    if leaving and not leaving <= {_text(node) for node in await connection.smembers(spec.keys.drained(spec.epoch))}:
        return
    meta["resizing_from"] = None
    await connection.set(spec.keys.meta, json.dumps(meta))


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _whoami() -> dict[str, Any]:
    return {"host": socket.gethostname(), "pid": os.getpid(), "time": time.time()}


def published_config(meta: dict[str, Any], base: CrawlConfig | None = None) -> CrawlConfig:
    """The crawl's configuration as published, with this node's own `NODE_LOCAL` keys from `base`."""
    values = dict(meta["config"])
    if base is not None:
        values.update({key: value for key, value in base.to_dict().items() if key in NODE_LOCAL})
    try:
        return CrawlConfig.from_mapping(values, source="the cluster's published configuration")
    except ConfigError as exc:
        raise ClusterError(str(exc)) from None


async def read_meta(connection: redis.asyncio.Redis, keys: Keys) -> dict[str, Any] | None:
    raw = await connection.get(keys.meta)
    if raw is None:
        return None
    try:
        meta = json.loads(raw)
    except ValueError as exc:
        raise ClusterError(f"crawl {keys.crawl_id!r} has unreadable metadata ({exc})") from None
    return meta if isinstance(meta, dict) else None


class ClusterControl:
    """One node's part in the cluster's control: its lock, and the termination rounds when it leads."""

    def __init__(
        self,
        connection: redis.asyncio.Redis,
        spec: ClusterSpec,
        *,
        on_lock_lost: Callable[[], None] = lambda: None,
        round_interval: float = ROUND_INTERVAL,
    ) -> None:
        self._redis = connection
        self._keys = spec.keys
        self._node = spec.node
        self._nodes = spec.members  # in a resize's run, the leaving nodes too: the crawl waits until they drain
        self._token = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}".encode()
        self._renew = connection.register_script(_RENEW)
        self._release = connection.register_script(_RELEASE)
        self._on_lock_lost = on_lock_lost
        self._round_interval = round_interval
        self._task: asyncio.Task[None] | None = None
        self.leading = False
        self.rounds = 0
        self._absent: tuple[tuple[int, ...], float, bool] = ((), 0.0, False)  # not running: since when, said

    async def acquire(self, wait: float = LOCK_TTL + 2.0) -> None:
        """This node's lock, waiting up to `wait` seconds for a dead process's lock to expire."""
        deadline = time.monotonic() + wait
        key = self._keys.lock(self._node)
        while not await self._redis.set(key, self._token, nx=True, px=int(LOCK_TTL * 1000)):
            if time.monotonic() >= deadline:
                holder = await self._redis.get(key)
                shown = holder.decode(errors="replace") if isinstance(holder, bytes) else "?"
                raise ClusterError(
                    f"node {self._node} of crawl {self._keys.crawl_id!r} is running already ({shown}): "
                    "one process per node"
                )
            await asyncio.sleep(0.5)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"cluster-control-{self._node}")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait([self._task], timeout=5.0)
        with contextlib.suppress(*REDIS_FAILURES):
            await self._release(keys=[self._keys.lock(self._node)], args=[self._token])
            if self.leading:
                await self._release(keys=[self._keys.leader], args=[self._token])

    async def _run(self) -> None:
        previous: dict[int, ProbeAnswer] | None = None
        round_number = 0
        round_started = 0.0
        lock_lost = False
        renewed_at = 0.0
        while True:
            await asyncio.sleep(TICK)
            try:
                if time.monotonic() - renewed_at >= RENEW_EVERY:
                    renewed_at = time.monotonic()
                    if not await self._hold_lock():
                        if not lock_lost:
                            lock_lost = True
                            log.error("node %d: another process holds this node's lock: stopping", self._node)
                            self._on_lock_lost()
                        continue
                    leading = await self._lead()
                    if leading != self.leading:
                        self.leading = leading
                        previous, round_number = None, 0
                        if leading:
                            log.info("node %d leads the termination rounds", self._node)
                leading = self.leading
                if not leading or time.monotonic() - round_started < self._round_interval:
                    continue
                if round_number:
                    answers = await self._answers(round_number)
                    if len(answers) < self._nodes:
                        answers.update(await self._stand_ins(set(range(self._nodes)) - set(answers)))
                    if len(answers) == self._nodes:
                        if crawl_over(previous, answers, self._nodes):
                            log.info("node %d: every node idle, nothing in flight: the crawl is over", self._node)
                            stop = wire.encode([wire.Stop("frontier-empty", self._node)])
                            await self._redis.set(self._keys.stop, stop, nx=True)
                        previous = answers if settled(answers) else None
                round_number = int(await self._redis.incr(self._keys.round))
                round_started = time.monotonic()
                self.rounds += 1
            except REDIS_ERRORS:
                raise_if_cancelled()
                previous, round_number = None, 0  # the transport says so, and reconnects
            except redis.exceptions.ResponseError as exc:
                raise_if_cancelled()
                log.debug("cluster control: %s", exc)

    async def _stand_ins(self, missing: set[int]) -> dict[int, ProbeAnswer]:
        """The last answers of the silent nodes that are not running (no lock) and ended their last run
        cleanly (`Keys.ended`): frozen until they run again, and a batch sent to one keeps its sender
        busy (unacknowledged), so they count as answers. A node resumed alone after the others ended
        the crawl ends too; a node that is not running and left no answer (killed) keeps the crawl
        waiting, and the leader says so once."""
        nodes = sorted(missing)
        pipe = self._redis.pipeline(transaction=False)
        pipe.hmget(self._keys.ended, [str(node) for node in nodes])
        pipe.mget([self._keys.lock(node) for node in nodes])
        ended, locks = await pipe.execute()
        stand_ins: dict[int, ProbeAnswer] = {}
        for node, value, lock in zip(nodes, ended, locks, strict=True):
            if value is None or lock is not None:
                continue
            try:
                reply = wire.decode_one(value, wire.ProbeReply)
            except wire.WireError as exc:
                log.warning("node %d's last answer is unreadable (%s): the crawl waits for it", node, exc)
                continue
            if reply.node == node:
                stand_ins[node] = ProbeAnswer(reply.idle, reply.sent, reply.received)
        absent = tuple(node for node, lock in zip(nodes, locks, strict=True) if node not in stand_ins and lock is None)
        if absent != self._absent[0]:
            self._absent = (absent, time.monotonic(), False)
        elif absent and not self._absent[2] and time.monotonic() - self._absent[1] >= ABSENT_REPORTED_AFTER:
            self._absent = (absent, self._absent[1], True)
            log.warning(
                "node %d: the crawl waits for node%s %s, not running (start or resume %s: crawlspace crawl "
                "--resume DIR --cluster URL)", self._node, "s" if len(absent) > 1 else "", ", ".join(map(str, absent)),
                "them" if len(absent) > 1 else "it",
            )  # fmt: skip
        return stand_ins

    async def _hold_lock(self) -> bool:
        """Renew this node's lock; one that expired while Redis was away is taken again, unless another
        process has it (False)."""
        key, ttl = self._keys.lock(self._node), int(LOCK_TTL * 1000)
        if await self._renew(keys=[key], args=[self._token, ttl]):
            return True
        return bool(await self._redis.set(key, self._token, nx=True, px=ttl))

    async def _lead(self) -> bool:
        """Keep the leadership, or take it if nobody has it."""
        ttl = int(LEADER_TTL * 1000)
        if self.leading and await self._renew(keys=[self._keys.leader], args=[self._token, ttl]):
            return True
        return bool(await self._redis.set(self._keys.leader, self._token, nx=True, px=ttl))

    async def _answers(self, round_number: int) -> dict[int, ProbeAnswer]:
        raw = await self._redis.hgetall(self._keys.answers(round_number))
        answers: dict[int, ProbeAnswer] = {}
        for value in raw.values():
            try:
                reply = wire.decode_one(value, wire.ProbeReply)
            except wire.WireError as exc:
                log.warning("round %d: an unreadable answer skipped (%s)", round_number, exc)
                continue
            if 0 <= reply.node < self._nodes and reply.round == round_number:
                answers[reply.node] = ProbeAnswer(reply.idle, reply.sent, reply.received)
        return answers


async def read_status(connection: redis.asyncio.Redis, keys: Keys) -> tuple[dict[str, Any], dict[int, dict[str, Any]]]:
    """The crawl's metadata and every node's last published status (nodes that never published: absent)."""
    meta = await read_meta(connection, keys)
    if meta is None:
        raise ClusterError(f"no crawl {keys.crawl_id!r} in this Redis")
    nodes = int(meta.get("nodes", 0))
    values = await connection.mget([keys.status(node) for node in range(nodes)]) if nodes else []
    statuses: dict[int, dict[str, Any]] = {}
    for node, value in enumerate(values):
        if value is None:
            continue
        with contextlib.suppress(ValueError):
            status = json.loads(value)
            if isinstance(status, dict):
                statuses[node] = status
    stop = await connection.get(keys.stop)
    if stop is not None:
        with contextlib.suppress(wire.WireError):
            decoded = wire.decode_one(stop, wire.Stop)
            meta["stopped"] = {"reason": decoded.reason, "by": decoded.node}
    return meta, statuses
