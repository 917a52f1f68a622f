"""What every Redis-backed part of a cluster crawl shares: the server's URL (redacted wherever it is shown),
the names of the crawl's keys, the client, and the backoff of a node that lost the server.

The URL is the only secret a node holds (`redis://:PASSWORD@host:port/db`, or `redis://USER:PASSWORD@...`
for an ACL user; `rediss://` for TLS, with `ssl_ca_certs=...` and the other TLS settings of redis-py as
query parameters). It never reaches config.json, a log line or the stats: `redact` is what is shown.

Every key of a crawl starts with `crawlspace:{crawl id}:` (the braces make it one Redis Cluster hash
slot, so the Lua scripts that touch several keys of a crawl stay legal there).
"""

from __future__ import annotations

import asyncio
import random
import re
import socket
import urllib.parse
from dataclasses import dataclass

import redis.asyncio
import redis.exceptions

REDIS_ERRORS: tuple[type[BaseException], ...] = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    OSError,
)
"""What a lost or unreachable server raises: the caller backs off and tries again."""

REDIS_FAILURES: tuple[type[BaseException], ...] = (redis.exceptions.RedisError, OSError)
"""Anything a command can raise, a server's error reply included."""

CRAWL_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")
DEFAULT_CRAWL_ID = "crawl"


class ClusterError(RuntimeError):
    """A node cannot join the crawl (Redis unreachable, another configuration, a node already running)."""


def redact(url: str) -> str:
    """The URL without its password (and query, which may carry key files' paths): for logs and errors."""
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return "<unparsable Redis URL>"
    if ":" in host:
        host = f"[{host}]"
    user = parts.username or ""
    credentials = f"{user}:***@" if parts.password is not None else (f"{user}@" if user else "")
    netloc = f"{credentials}{host}{f':{port}' if port is not None else ''}"
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def check_url(url: str) -> None:
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port out of range
    except ValueError as exc:
        raise ClusterError(f"--cluster: not a Redis URL ({exc})") from None
    if parts.scheme not in ("redis", "rediss", "unix"):
        raise ClusterError(f"--cluster: {redact(url)} is not a redis://, rediss:// or unix:// URL")


def check_crawl_id(crawl_id: str) -> str:
    if not CRAWL_ID.fullmatch(crawl_id):
        raise ClusterError(f"--crawl-id {crawl_id!r}: use 1 to 64 letters, digits, '.', '_' or '-'")
    return crawl_id


@dataclass(frozen=True)
class Keys:
    """The Redis keys of one crawl."""

    crawl_id: str

    @property
    def prefix(self) -> str:
        return f"crawlspace:{{{self.crawl_id}}}:"

    @property
    def meta(self) -> str:
        """The crawl as the first node published it: configuration, seeds, number of nodes."""
        return self.prefix + "meta"

    @property
    def joined(self) -> str:
        """Hash: node -> when it first joined (a new node of that index is refused afterwards)."""
        return self.prefix + "joined"

    def stream(self, node: int) -> str:
        """Everything sent to `node`: URL batches, acknowledgements, content questions and answers."""
        return f"{self.prefix}stream:{node}"

    def lock(self, node: int) -> str:
        """Held (with an expiry, renewed) by the running process of `node`: never two of one node."""
        return f"{self.prefix}lock:{node}"

    def status(self, node: int) -> str:
        """`node`'s latest telemetry Snapshot, for `crawlspace status`."""
        return f"{self.prefix}status:{node}"

    @property
    def budget(self) -> str:
        """Hash: node -> pages it claimed from the crawl's page budget."""
        return self.prefix + "budget"

    @property
    def leader(self) -> str:
        """The node running the termination rounds (SET NX PX, renewed)."""
        return self.prefix + "leader"

    @property
    def round(self) -> str:
        """The termination round the nodes answer."""
        return self.prefix + "round"

    def answers(self, round_number: int) -> str:
        return f"{self.prefix}answers:{round_number}"

    def handed(self, epoch: int) -> str:
        """Set: the nodes that finished the handover of resize `epoch` (its barrier: every member, then go)."""
        return f"{self.prefix}handed:{epoch}"

    def drained(self, epoch: int) -> str:
        """Set: the nodes leaving in resize `epoch` whose last URL batches their new owners acknowledged
        (`drained`): the resize is over once every leaving node is in it (distributed.cluster)."""
        return f"{self.prefix}drained:{epoch}"

    @property
    def ended(self) -> str:
        """Hash: node -> its last answer (a wire.ProbeReply of round 0) when it ended a run cleanly; gone
        once it runs again. The leader lets it stand in for a node that is not running (ClusterControl)."""
        return self.prefix + "ended"

    @property
    def stop(self) -> str:
        """Set (a wire.Stop) when the crawl stops: every node polls it."""
        return self.prefix + "stop"


GROUP = "crawlspace"
"""The consumer group of every node's stream (its one consumer is the node)."""


def consumer(node: int) -> str:
    return f"node-{node}"


LINK_TIMEOUT = 10.0  # seconds a PING, or a node's control poll, may take before the server counts as lost


def _keepalive_options() -> dict[int, int]:
    """A machine that vanished (no RST) is found by TCP keepalive within about 11 s (5 + 3 x 2)."""
    wanted = {"TCP_KEEPIDLE": 5, "TCP_KEEPINTVL": 2, "TCP_KEEPCNT": 3}
    return {getattr(socket, name): value for name, value in wanted.items() if hasattr(socket, name)}


def client(url: str) -> redis.asyncio.Redis:
    """A client for `url` (bytes in and out); it reconnects by itself on the next command after a loss.

    No `socket_timeout`: with one, redis-py wraps every command's send in `asyncio.wait_for`, a task
    of its own per command (and every read in a timeout context), about 30 us of CPU a round trip in
    ~110 (bench/README.md, the profile of a node), for a server that hangs. A vanished machine is
    found by TCP keepalive instead, a dead server by its closed connection, and a hung one by the
    node's control poll, which runs under LINK_TIMEOUT (distributed.redisstreams) as PING does."""
    return redis.asyncio.Redis.from_url(
        url, socket_connect_timeout=2.0, socket_keepalive=True, socket_keepalive_options=_keepalive_options(),
        health_check_interval=5, decode_responses=False,
    )  # fmt: skip


async def connect(url: str) -> redis.asyncio.Redis:
    """A client that has answered a PING: a server unreachable at start is a one-line ClusterError."""
    check_url(url)
    connection = client(url)
    try:
        async with asyncio.timeout(LINK_TIMEOUT):
            await connection.ping()
    except redis.exceptions.AuthenticationError:
        await connection.aclose()
        raise ClusterError(f"Redis at {redact(url)} refused the password") from None
    except REDIS_FAILURES as exc:
        await connection.aclose()
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ClusterError(f"cannot reach Redis at {redact(url)}: {reason}") from None
    return connection


@dataclass
class Backoff:
    """Exponential backoff with jitter, for a node retrying a lost server: 0.1 s doubling to `cap`."""

    initial: float = 0.1
    cap: float = 5.0
    current: float = 0.0

    def next(self) -> float:
        self.current = self.initial if self.current == 0 else min(self.cap, self.current * 2)
        return self.current * random.uniform(0.5, 1.0)

    def reset(self) -> None:
        self.current = 0.0


def raise_if_cancelled() -> None:
    """After catching a client error in a loop: a cancellation that the client turned into an error
    (a command cut short) must still end the task, or it would loop on, never cancelled."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
