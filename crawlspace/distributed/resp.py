"""A pipelined Redis connection for the stream transport's two hot loops (the writer's XADDs and the
reader's XREADGROUP with what rides along), written here because redis-py's per-command machinery was
the transport's largest cost: a pipeline of XADD + XLEN costs 93-100 us of client CPU a round trip
through `redis.asyncio` (its pipeline object, command packing, the pool, a parser call and a response
callback per command, a health check), 37-41 us through this on a quiet machine
(bench/distributed/bench_round_trip.py).
Everything else a node asks of Redis (joining, locks, the termination rounds, the budget, status) is
not per page and stays on redis-py.

One `RespLink` is one connection, which several tasks may share: `execute(commands)` writes them in
one send and returns their replies in order, decoded by hiredis's C reader (RESP2: an XREADGROUP's entries
come as [id, [field, value, ...]] lists, nil as None). An error reply is raised as redis-py's
`ResponseError` once the pipeline's other replies are read (the connection stays in step); a lost
connection fails every pending pipeline with redis-py's `ConnectionError`, so callers handle both as
they handle redis-py's. A link reconnects on the next `execute` after a loss, as redis-py's clients do.

The server is the one of a redis-py client's pool (`RespLink(client.connection_pool)`): the same
redis://, rediss:// (its ssl_* query parameters build the TLS context, by redis-py) and unix:// URLs,
the same user, password, database and TCP keepalive.
"""

from __future__ import annotations

import asyncio
import socket
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any, cast

import hiredis
import redis.asyncio
import redis.exceptions

Argument = bytes | str | int
CONNECT_TIMEOUT = 2.0


def pack(command: Sequence[Argument]) -> bytes:
    """One command in RESP's multi-bulk form."""
    parts = [b"*%d\r\n" % len(command)]
    for argument in command:
        if isinstance(argument, str):
            data = argument.encode()
        elif isinstance(argument, int):
            data = b"%d" % argument
        else:
            data = argument
        parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(parts)


class _Pending:
    __slots__ = ("count", "future", "replies")

    def __init__(self, future: asyncio.Future[list[Any]], count: int) -> None:
        self.future = future
        self.count = count
        self.replies: list[Any] = []


class _Protocol(asyncio.Protocol):
    """Replies matched to pipelines in order: each pipeline's future is resolved with its `count` replies."""

    def __init__(self) -> None:
        self.reader = hiredis.Reader()
        self.pending: deque[_Pending] = deque()
        self.transport: asyncio.Transport | None = None
        self.lost: BaseException | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # (uvloop's transports are not subclasses of asyncio.Transport)
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        pending = self.pending
        while pending:
            head = pending[0]
            replies = head.replies
            while len(replies) < head.count:
                try:
                    reply = self.reader.gets()
                except hiredis.ProtocolError as exc:
                    self.fail(redis.exceptions.ConnectionError(f"Redis sent a malformed reply: {exc}"))
                    return
                if reply is False:
                    return
                replies.append(reply)
            pending.popleft()
            if not head.future.done():
                head.future.set_result(replies)

    def connection_lost(self, exc: Exception | None) -> None:
        self.fail(redis.exceptions.ConnectionError(f"Redis closed the connection{f': {exc}' if exc else ''}"))

    def fail(self, error: BaseException) -> None:
        self.lost = error
        while self.pending:
            future = self.pending.popleft().future
            if not future.done():
                future.set_exception(error)
        if self.transport is not None:
            self.transport.abort()


class RespLink:
    """A connection to the server of `url`, opened on first use and again after a loss."""

    def __init__(self, pool: redis.asyncio.ConnectionPool, *, name: str = "") -> None:
        """`pool`: a redis-py client's (`client.connection_pool`), whose URL and socket options it takes."""
        self._options = dict(pool.connection_kwargs)
        connection = pool.make_connection()  # type: ignore[no-untyped-call]
        self._ssl = connection.ssl_context.get() if isinstance(connection, redis.asyncio.SSLConnection) else None
        self._keepalive: dict[int, int] = (
            dict(self._options.get("socket_keepalive_options") or {}) if self._options.get("socket_keepalive") else {}
        )
        self._name = name
        self._protocol: _Protocol | None = None
        self._connecting = asyncio.Lock()

    @classmethod
    def from_url(cls, url: str, *, name: str = "") -> RespLink:
        return cls(redis.asyncio.ConnectionPool.from_url(url), name=name)

    def __repr__(self) -> str:
        protocol = self._protocol
        state = "closed" if protocol is None or protocol.lost is not None else f"{len(protocol.pending)} waiting"
        return f"RespLink({self._name or 'redis'}, {state})"

    async def execute(self, commands: Iterable[Sequence[Argument]]) -> list[Any]:
        """The commands' replies, in order; raises ResponseError (the first error reply) or ConnectionError.
        Pipelines of several tasks may be in flight at once: each is written whole, and replies come in order."""
        protocol = self._protocol
        if protocol is None or protocol.lost is not None:
            async with self._connecting:  # one connection for everybody waiting
                protocol = self._protocol
                if protocol is None or protocol.lost is not None:
                    protocol = await self._connect()
                    self._protocol = protocol
        return await _send(protocol, commands)

    async def _connect(self) -> _Protocol:
        options = self._options
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT):
                if "path" in options:
                    transport, protocol = await loop.create_unix_connection(_Protocol, options["path"])
                else:
                    transport, protocol = await loop.create_connection(
                        _Protocol, options.get("host", "localhost"), options.get("port", 6379), ssl=self._ssl
                    )
        except TimeoutError:
            raise redis.exceptions.TimeoutError(f"Redis did not accept a connection in {CONNECT_TIMEOUT} s") from None
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._keepalive:  # a machine that vanished is found as redis-py's connections find it
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
                for option, value in self._keepalive.items():
                    sock.setsockopt(socket.IPPROTO_TCP, option, value)
        handshake: list[Sequence[Argument]] = []
        password, username = options.get("password"), options.get("username")
        if password is not None:
            handshake.append(("AUTH", username, password) if username else ("AUTH", password))
        if options.get("db"):
            handshake.append(("SELECT", int(options["db"])))
        if handshake:
            try:
                await _send(protocol, handshake)
            except redis.exceptions.ResponseError as exc:
                protocol.fail(redis.exceptions.ConnectionError("the handshake failed"))
                if "WRONGPASS" in str(exc) or "invalid password" in str(exc) or "NOAUTH" in str(exc):
                    raise redis.exceptions.AuthenticationError(str(exc)) from None
                raise
        return protocol

    def close(self) -> None:
        """Drop the connection: pending pipelines fail with ConnectionError; the next `execute` reconnects."""
        protocol, self._protocol = self._protocol, None
        if protocol is not None and protocol.lost is None:
            protocol.fail(redis.exceptions.ConnectionError("the link was closed"))


async def _send(protocol: _Protocol, commands: Iterable[Sequence[Argument]]) -> list[Any]:
    packed = [pack(command) for command in commands]
    if protocol.lost is not None:
        raise protocol.lost
    assert protocol.transport is not None
    future: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
    protocol.pending.append(_Pending(future, len(packed)))
    protocol.transport.write(b"".join(packed))
    replies = await future
    for reply in replies:
        if isinstance(reply, hiredis.ReplyError):
            raise redis.exceptions.ResponseError(str(reply))
    return replies
