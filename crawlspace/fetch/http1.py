"""The fetcher's HTTP/1.1 client: keep-alive connections on asyncio, responses parsed by llhttp (httptools).

Why our own and not aiohttp's client: a crawl makes one GET per page and wants nothing of a general
client but the connection pool, so aiohttp's per-request machinery (request and response objects,
header multidicts, the payload stream, a timer rescheduled on every read, the cookie and redirect
logic it then skips) was most of what a request cost. `bench/throughput/client_cost.py` measured, on
the same loopback pages: crawlspace's fetcher on aiohttp 157.8 µs of CPU a request, bare aiohttp
119.1, a bare keep-alive protocol feeding llhttp 34.7. llhttp is the parser aiohttp itself uses
(and Node.js); httptools is its binding that uvicorn uses. DESIGN.md names pycurl as the fallback
for this; llhttp keeps the event loop's sockets and TLS, and pycurl would bring a second event
loop's callbacks (libcurl's socket and timer functions) into ours.

What it does: one request at a time per connection, connections pooled by (scheme, host, port) with
a total and a per-host limit of connections in use, idle ones closed after the keep-alive time or
as soon as the server sends anything while they wait (a server that writes on an idle connection
owes us nothing on it). The caller resolves and checks the address; this module connects only to
the address it is given. Bounded: the response head (status line and headers, their count and
size), the time between two reads (`ReadTimeout`), the connect (`ConnectTimeout`); the body is read
in chunks the caller takes as they come (reading pauses while more than `_HIGH_WATER` bytes wait).
Not done, as a crawler needs none of them: request bodies, pipelining, HTTP/2, proxies, cookies,
redirects (the crawl follows them through its frontier), credentials in URLs (never sent).
"""

from __future__ import annotations

import asyncio
import math
import ssl
import time
import typing
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import httptools

_HIGH_WATER = 1 << 20  # bytes of body waiting for the reader before reading pauses (it resumes when they are taken)
_MAX_HEAD_BYTES = 1 << 18  # a status line and headers longer than this are refused, whatever each line is


class ProtocolError(Exception):
    """The server broke HTTP/1.1: a bad status line or header, too many or too long headers, a body
    that does not match its framing, bytes after the response."""


class Disconnected(ConnectionError):
    """The connection ended before the response did. `reset` when the server reset it (RST), else it
    closed it; `in_body` when the head had arrived."""

    def __init__(self, message: str, *, reset: bool, in_body: bool) -> None:
        super().__init__(message)
        self.reset = reset
        self.in_body = in_body


class ReadTimeout(TimeoutError):
    """Nothing arrived for the read timeout while a response was awaited."""


class ConnectTimeout(TimeoutError):
    """The connection was not established within the connect timeout."""


class Origin(typing.NamedTuple):
    """Where a request goes: the pool's key (and the Host header's parts). A tuple: it is hashed on
    every request, and a dataclass's generated hash and equality are Python code."""

    scheme: str
    host: str  # as in the URL: a name, an IPv4 address or a bracketed IPv6 address
    port: int

    @property
    def host_header(self) -> str:
        default = 443 if self.scheme == "https" else 80
        return self.host if self.port == default else f"{self.host}:{self.port}"


def split_url(url: str) -> tuple[Origin, str]:
    """The origin and request target (path and query) of an absolute http(s) URL; ValueError otherwise.

    The crawl's URLs are WHATWG serializations (ASCII, hosts in punycode), so this only cuts them;
    a URL that is not ASCII was never normalized and is refused. User info is dropped: a crawler
    sends no credentials it found in a link."""
    if not url.isascii():
        raise ValueError(f"invalid URL: not ASCII: {url!r}")
    scheme, separator, rest = url.partition("://")
    scheme = scheme.lower()
    if not separator or scheme not in ("http", "https"):
        raise ValueError(f"invalid URL: not http(s): {url!r}")
    end = len(rest)
    for delimiter in "/?#":
        found = rest.find(delimiter)
        if 0 <= found < end:
            end = found
    authority, target = rest[:end], rest[end:]
    authority = authority.rpartition("@")[2]
    hash_at = target.find("#")
    if hash_at >= 0:
        target = target[:hash_at]
    if not target.startswith("/"):
        target = "/" + target
    if authority.startswith("["):
        close = authority.find("]")
        if close < 0:
            raise ValueError(f"invalid URL: bad IPv6 host in {url!r}")
        host, port_text = authority[: close + 1], authority[close + 1 :]
        if port_text and not port_text.startswith(":"):
            raise ValueError(f"invalid URL: bad port in {url!r}")
        port_text = port_text[1:]
    else:
        host, _, port_text = authority.partition(":")
    if not host or any(character in host for character in " \t\r\n\\"):
        raise ValueError(f"invalid URL: bad host in {url!r}")
    if port_text:
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise ValueError(f"invalid URL: bad port in {url!r}")
        port = int(port_text)
    else:
        port = 443 if scheme == "https" else 80
    if " " in target or not target.isprintable():  # ASCII already: not printable is a control character
        raise ValueError(f"invalid URL: control character or space in the path of {url!r}")
    return Origin(scheme, host.lower(), port), target


class Response:
    """A response head; its body is read with `Connection.read` until it returns an empty list."""

    __slots__ = ("headers", "reason", "status")

    def __init__(self, status: int, reason: str, headers: list[tuple[str, str]]) -> None:
        self.status = status
        self.reason = reason
        self.headers = headers


class Connection(asyncio.Protocol):
    """One keep-alive connection: a request written, its response parsed as it arrives."""

    def __init__(self, loop: asyncio.AbstractEventLoop, origin: Origin, limits: HeadLimits) -> None:
        self.origin = origin
        self.peer: str | None = None
        self._loop = loop
        self._limits = limits
        self._transport: asyncio.Transport | None = None
        self._parser = httptools.HttpResponseParser(self)
        # what aiohttp's client tolerates of real servers (it sets these on the same parser): odd bytes in
        # header values, bare LF line ends, spaces after a chunk size; framing stays strict
        self._parser.set_dangerous_leniencies(
            lenient_headers=True, lenient_optional_cr_before_lf=True, lenient_spaces_after_chunk_size=True
        )
        self._waiter: asyncio.Future[None] | None = None
        self._error: BaseException | None = None
        self._closed = False
        self._in_use = False
        self._paused = False
        self._new_response()
        self._last_read = 0.0
        self._read_timeout = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self.idle_since = 0.0

    def _new_response(self) -> None:
        """The state of the response being read, as before its first byte."""
        self._head_bytes = 0
        self._headers: list[tuple[str, str]] = []
        self._reason = ""
        self._head_done = self._interim = self._complete = self._keep_alive = self._close_delimited = False
        self._chunks: list[bytes] = []
        self._buffered = 0

    # -- asyncio.Protocol --------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = typing.cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        peer = transport.get_extra_info("peername")
        self.peer = str(peer[0]) if peer else None

    def data_received(self, data: bytes) -> None:
        if not self._in_use or self._complete:
            # nothing is awaited on this connection: what comes is junk, and the connection is done
            self._fail(ProtocolError("data after the end of the response"))
            return
        self._last_read = self._loop.time()
        if not self._head_done:
            self._head_bytes += len(data)
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserCallbackError as exc:
            self._fail(exc.__context__ if isinstance(exc.__context__, ProtocolError) else ProtocolError(str(exc)))
            return
        except httptools.HttpParserError as exc:
            if self._complete:
                self._fail(ProtocolError("data after the end of the response"))
            else:
                self._fail(ProtocolError(_parser_error_text(exc)))
            return
        if not self._head_done and self._head_bytes > _MAX_HEAD_BYTES:
            self._fail(ProtocolError(f"response head longer than {_MAX_HEAD_BYTES} bytes"))
            return
        if self._buffered > _HIGH_WATER and not self._paused and self._transport is not None:
            self._transport.pause_reading()
            self._paused = True
        self._wake()

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._stop_timer()
        if not self._in_use or self._complete:
            return
        if self._head_done and self._close_delimited and exc is None:
            self._complete = True  # the body of a response without length ends with the connection
            self._wake()
            return
        if isinstance(exc, ssl.SSLError):
            self._fail(exc, close=False)
            return
        reset = isinstance(exc, ConnectionResetError | BrokenPipeError)
        if self._head_done:
            text = "connection reset in the body" if reset else "connection closed before the end of the body"
        else:
            text = "connection reset before a response" if reset else "server closed the connection without a response"
        self._fail(Disconnected(text, reset=reset, in_body=self._head_done), close=False)

    # -- llhttp callbacks --------------------------------------------------------------------

    def on_message_begin(self) -> None:
        if self._complete:
            raise ProtocolError("data after the end of the response")

    def on_status(self, status: bytes) -> None:
        self._reason += status.decode("latin-1")

    def on_header(self, name: bytes, value: bytes) -> None:
        limits = self._limits
        if len(self._headers) >= limits.max_headers:
            raise ProtocolError(f"too many headers (more than {limits.max_headers})")
        if len(name) + len(value) > limits.max_header_bytes:
            raise ProtocolError(f"header {name[:40]!r} longer than {limits.max_header_bytes} bytes")
        self._headers.append((name.decode("latin-1"), value.decode("latin-1")))

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if 100 <= status < 200:
            self._interim = True  # 100 Continue and the like: the real response follows
            return
        self._head_done = True
        framed = False
        for name, value in self._headers:
            lowered = name.lower()
            if lowered == "content-length" or (lowered == "transfer-encoding" and "chunked" in value.lower()):
                framed = True
                break
        self._close_delimited = not framed and status not in (204, 304)

    def on_body(self, body: bytes) -> None:
        self._chunks.append(body)
        self._buffered += len(body)

    def on_message_complete(self) -> None:
        if self._interim:
            self._interim = False
            self._headers = []
            self._reason = ""
            return
        self._keep_alive = self._parser.should_keep_alive()  # llhttp forgets it once the message is done
        self._complete = True

    # -- the caller's side -------------------------------------------------------------------

    @property
    def reusable(self) -> bool:
        return not self._closed and self._error is None and self._complete and self._keep_alive

    @property
    def closed(self) -> bool:
        return self._closed

    async def request(self, head: bytes, read_timeout: float) -> Response:
        """Send a request head and wait for the response's head."""
        transport = self._transport
        if transport is None or self._closed:
            raise Disconnected("connection closed before the request", reset=False, in_body=False)
        self._start(read_timeout)
        transport.write(head)
        while not self._head_done:
            await self._wait()
        return Response(self._parser.get_status_code(), self._reason.strip(), self._headers)

    async def read(self) -> list[bytes]:
        """The body's next chunks, as they arrived; an empty list at its end."""
        while not self._chunks:
            if self._error is not None:
                raise self._error
            if self._complete:
                self._stop_timer()
                return []
            await self._wait()
        chunks, self._chunks, self._buffered = self._chunks, [], 0
        if self._paused and self._transport is not None:
            self._transport.resume_reading()
            self._paused = False
        return chunks

    def close(self) -> None:
        self._closed = True
        self._stop_timer()
        if self._transport is not None:
            self._transport.abort()

    def _start(self, read_timeout: float) -> None:
        self._in_use = True
        self._error = None
        self._new_response()
        self._read_timeout = read_timeout
        self._last_read = self._loop.time()
        if read_timeout > 0:
            self._timer = self._loop.call_at(self._last_read + read_timeout, self._check_read_timeout)

    def finish(self) -> None:
        """The response is read (or given up): the connection waits for its next request, if reusable."""
        self._in_use = False
        self._stop_timer()
        self.idle_since = self._loop.time()

    async def _wait(self) -> None:
        if self._error is not None:
            raise self._error
        waiter = self._waiter = self._loop.create_future()
        try:
            await waiter
        finally:
            self._waiter = None
        if self._error is not None:
            raise self._error

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _fail(self, error: BaseException, *, close: bool = True) -> None:
        if self._error is None:
            self._error = error
        if close:
            self.close()
        self._stop_timer()
        self._wake()

    def _check_read_timeout(self) -> None:
        """One timer a response, moved only when it fires (not on every read, as aiohttp does)."""
        self._timer = None
        if not self._in_use or self._complete or self._error is not None:
            return
        due = self._last_read + self._read_timeout
        if self._paused:  # the reader is behind, not the server
            due = self._loop.time() + self._read_timeout
        if self._loop.time() >= due:
            self._fail(ReadTimeout(f"Timeout on reading data from socket (nothing for {self._read_timeout} s)"))
        else:
            self._timer = self._loop.call_at(due, self._check_read_timeout)

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def _parser_error_text(exc: Exception) -> str:
    text = str(exc) or type(exc).__name__
    if isinstance(exc, httptools.HttpParserInvalidStatusError):
        return f"invalid status line: {text}"
    return f"invalid response: {text}"


@dataclass(frozen=True, slots=True)
class HeadLimits:
    max_headers: int = 256
    max_header_bytes: int = 16 * 1024


class ConnectionPool:
    """Keep-alive connections by origin, with a total and a per-origin limit on those in use.

    `acquire`'s `connect()` makes a new connection when no idle one is there (the caller resolves,
    checks and connects: see `Fetcher`). Idle connections older than `keepalive` are closed by a sweep
    that runs only while some wait, and at most `max_idle` are kept (the oldest go first): a crawl
    visits thousands of hosts within a keep-alive time, and each idle connection holds a file
    descriptor."""

    def __init__(self, *, limit: int, per_origin: int, keepalive: float, max_idle: int | None = None) -> None:
        self.limit = limit
        self.per_origin = per_origin
        self.keepalive = keepalive
        self.max_idle = limit if max_idle is None else max_idle
        self._in_use: dict[Origin, int] = {}
        self._total_in_use = 0
        self._idle: dict[Origin, list[Connection]] = {}
        self._idle_count = 0
        self._idle_order: deque[tuple[float, Connection]] = deque()
        self._waiters: deque[tuple[Origin, asyncio.Future[None]]] = deque()
        self._sweep: asyncio.TimerHandle | None = None
        self._closed = False

    async def acquire(self, origin: Origin, connect: Callable[[], Awaitable[Connection]]) -> Connection:
        """A connection to `origin` for one request: an idle one, or `connect()`'s; give it back with `release`."""
        while self._total_in_use >= self.limit or self._in_use.get(origin, 0) >= self.per_origin:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append((origin, waiter))
            try:
                await waiter
            except BaseException:
                if not waiter.cancelled() and waiter.done():
                    self._wake_next()  # woken and cancelled at once: pass the turn on
                with_waiter = (origin, waiter)
                if with_waiter in self._waiters:
                    self._waiters.remove(with_waiter)
                raise
        self._total_in_use += 1
        self._in_use[origin] = self._in_use.get(origin, 0) + 1
        try:
            idle = self._idle.get(origin)
            while idle:
                connection = idle.pop()
                self._idle_count -= 1
                if not connection.closed:
                    return connection
            if idle is not None:
                del self._idle[origin]
            return await connect()
        except BaseException:
            self._give_back(origin)
            raise

    def release(self, connection: Connection) -> None:
        """Back from a request: kept for the next one if the response left it clean, else closed."""
        connection.finish()
        origin = connection.origin
        self._give_back(origin)
        if connection.reusable and self.keepalive > 0 and not self._closed:
            self._idle.setdefault(origin, []).append(connection)
            self._idle_count += 1
            self._idle_order.append((connection.idle_since, connection))
            while self._idle_count > self.max_idle and self._close_oldest_idle():
                pass
            if self._sweep is None:
                self._sweep = asyncio.get_running_loop().call_later(self.keepalive, self._close_expired)
        else:
            connection.close()

    def _give_back(self, origin: Origin) -> None:
        self._total_in_use -= 1
        left = self._in_use[origin] - 1
        if left:
            self._in_use[origin] = left
        else:
            del self._in_use[origin]
        self._wake_next()

    def _wake_next(self) -> None:
        if not self._waiters or self._total_in_use >= self.limit:
            return
        for index, (origin, waiter) in enumerate(self._waiters):
            if waiter.done():
                continue
            if self._in_use.get(origin, 0) < self.per_origin:
                del self._waiters[index]
                waiter.set_result(None)
                return

    def _close_expired(self) -> None:
        self._sweep = None
        loop = asyncio.get_running_loop()
        deadline = loop.time() - self.keepalive
        while self._close_oldest_idle(idle_since_before=deadline):
            pass
        order = self._idle_order
        if order:
            self._sweep = loop.call_at(order[0][0] + self.keepalive, self._close_expired)

    def _close_oldest_idle(self, idle_since_before: float = math.inf) -> bool:
        """Close the connection idle the longest (if idle since before `idle_since_before`); False if there
        is none. `_idle_order` has an entry per release: an entry is stale when its connection was taken
        again since (a later one stands for it)."""
        order = self._idle_order
        while order and order[0][0] <= idle_since_before:
            since, connection = order.popleft()
            if connection.idle_since != since or connection._in_use:
                continue
            idle = self._idle.get(connection.origin)
            if idle is None or connection not in idle:
                continue  # taken by `acquire` and found closed
            idle.remove(connection)
            if not idle:
                del self._idle[connection.origin]
            self._idle_count -= 1
            connection.close()
            return True
        return False

    def close(self) -> None:
        """Close every idle connection; those in use are closed as they come back."""
        self._closed = True
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        for connections in self._idle.values():
            for connection in connections:
                connection.close()
        self._idle.clear()
        self._idle_count = 0
        self._idle_order.clear()


def tls_context(verify: bool) -> ssl.SSLContext:
    """The system's trust store and hostname check; `verify=False` accepts any certificate."""
    context = ssl.create_default_context()
    if not verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


async def open_connection(
    origin: Origin,
    address: str,
    *,
    limits: HeadLimits,
    tls: ssl.SSLContext | None,
    timeout: float,
) -> Connection:
    """A connection to `address` (already resolved and checked) for `origin`, TLS for https."""
    loop = asyncio.get_running_loop()
    server_hostname = origin.host.strip("[]") if tls is not None else None
    started = time.monotonic()
    try:
        async with asyncio.timeout(timeout if timeout > 0 else None):
            _, protocol = await loop.create_connection(
                lambda: Connection(loop, origin, limits),
                host=address,
                port=origin.port,
                ssl=tls,
                server_hostname=server_hostname,
            )
    except TimeoutError:
        elapsed = time.monotonic() - started
        raise ConnectTimeout(f"Connection timeout to {origin.host}:{origin.port} after {elapsed:.1f} s") from None
    return protocol
