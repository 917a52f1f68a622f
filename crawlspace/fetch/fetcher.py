"""HTTP(S) fetcher: pooled keep-alive connections (`crawlspace.fetch.http1`), bounded everything, no inline redirects.

One `fetch` is one attempt, and it ends in exactly one Outcome; the fetcher never raises for
anything the network or the server does, and never retries or sleeps (retries go back through
the frontier, see `crawlspace.fetch.retry`).

What a hostile server can make it spend is bounded:
- time: connect, read (between two bytes) and total timeouts; a slowloris server trickling one
  byte a second is cut by the total timeout;
- memory: the body is read up to `max_body_bytes` and then truncated and marked
  (`FetchResult.truncated`, the WARC-Truncated reason); Content-Encoding is undone as the body
  arrives with caps on decoded size and ratio (`crawlspace.fetch.decode`), so a gzip, br or zstd
  bomb stops the read; the response head, its header count and each header's size are capped. With
  a spill directory, a body or decoded content beyond `spill_bytes` goes to an unnamed temporary
  file as it arrives (`crawlspace.fetch.body`), so a fetch in flight holds at most that much of
  each (a spilled result's files go with `release()`).

The body is kept as sent (for the WARC record) and the decoded content beside it. A new connection
goes to the address our resolver produced and the guard accepted (an IP literal is checked as it
is), one lookup per connection. Cookies are not kept: a jar shared by millions of hosts is a memory
leak and a privacy leak.
"""

from __future__ import annotations

import asyncio
import email.utils
import errno
import logging
import resource
import ssl
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from crawlspace.dns import AddressGuard, DNSFailure, GuardRefused, Resolver
from crawlspace.dns.resolver import is_ip_literal
from crawlspace.fetch.body import BodyBuffer, Payload, SpilledBytes
from crawlspace.fetch.decode import SUPPORTED_ENCODINGS, BoundedDecoder, DecodeError, DecodeLimitExceeded
from crawlspace.fetch.http1 import (
    Connection,
    ConnectionPool,
    Disconnected,
    HeadLimits,
    Origin,
    ProtocolError,
    open_connection,
    split_url,
    tls_context,
)
from crawlspace.fetch.outcomes import Outcome
from crawlspace.urls.fingerprint import content_fingerprint, content_fingerprint_of_parts

if TYPE_CHECKING:
    from pathlib import Path


log = logging.getLogger(__name__)

ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
RETRY_AFTER_CAP = 86400.0


@dataclass(frozen=True, slots=True)
class Validators:
    """What an earlier response said about its version, for a conditional GET (RFC 9110 §13)."""

    etag: str | None = None
    last_modified: str | None = None

    def request_headers(self) -> list[tuple[str, str]]:
        headers = []
        if self.etag:
            headers.append(("If-None-Match", self.etag))
        if self.last_modified:
            headers.append(("If-Modified-Since", self.last_modified))
        return headers

    def __bool__(self) -> bool:
        return bool(self.etag or self.last_modified)


@dataclass(slots=True)
class FetchResult:
    url: str
    outcome: Outcome
    status: int = 0
    reason: str = ""
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: Payload = b""  # as received (Content-Encoding not undone), possibly truncated; maybe spilled to a file
    truncated: str = ""  # why the body is incomplete: "" or a WARC-Truncated value (length, time, disconnect)
    address: str | None = None
    started: float = 0.0  # wall-clock time of the request (for WARC-Date)
    duration: float = 0.0
    error: str = ""
    request_headers: list[tuple[str, str]] = field(default_factory=list)
    decoded: Payload | None = None  # body with Content-Encoding undone (maybe spilled); None if that failed
    decode_error: str = ""

    def header(self, name: str) -> str | None:
        lowered = name.lower()
        for key, value in self.headers:
            if key.lower() == lowered:
                return value
        return None

    @property
    def content_type(self) -> str:
        """The media type, lower-cased, without parameters ("" when the server sent none)."""
        return (self.header("content-type") or "").split(";")[0].strip().lower()

    @property
    def charset(self) -> str | None:
        """The charset parameter of Content-Type, as the server claimed it (it may lie)."""
        for param in (self.header("content-type") or "").split(";")[1:]:
            key, _, value = param.partition("=")
            if key.strip().lower() == "charset":
                return value.strip().strip("\"'").lower() or None
        return None

    @property
    def not_modified(self) -> bool:
        return self.status == 304

    @property
    def validators(self) -> Validators:
        """Validators of this response, to be stored for the next conditional GET."""
        return Validators(self.header("etag"), self.header("last-modified"))

    def content(self, max_bytes: int | None = None) -> bytes:
        """The body with Content-Encoding undone (b"" when it could not be), at most `max_bytes` of it.

        A spilled content is read from its file on every call: take it once per stage and let it go."""
        data = self.decoded if self.decoded is not None else b""
        if isinstance(data, SpilledBytes):
            return data.read(max_bytes)
        return data if max_bytes is None else data[:max_bytes]

    def payload_fingerprint(self) -> int:
        """xxh3_64 of the body as received, the bytes a WARC record's payload digest covers (a spilled
        one read in parts): what the exact-duplicate test compares."""
        body = self.body
        if isinstance(body, SpilledBytes):
            return content_fingerprint_of_parts(body.parts())
        return content_fingerprint(body)

    def release(self) -> None:
        """Free the files of a spilled body and content (the result keeps its headers and sizes)."""
        for payload in (self.body, self.decoded):
            if isinstance(payload, SpilledBytes):
                payload.close()

    def retry_after(self, now: float | None = None) -> float | None:
        """Seconds the server asked us to wait (Retry-After: seconds or HTTP-date), capped at a day."""
        value = (self.header("retry-after") or "").strip()
        if not value:
            return None
        if value.isdigit():
            return min(float(value), RETRY_AFTER_CAP)
        try:
            when = email.utils.parsedate_to_datetime(value).timestamp()
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        return min(max(when - (time.time() if now is None else now), 0.0), RETRY_AFTER_CAP)


@dataclass(frozen=True, slots=True)
class FetchLimits:
    max_body_bytes: int = 10 * 1024 * 1024
    max_decoded_bytes: int = 10 * 1024 * 1024
    max_compression_ratio: float = 100.0
    max_response_headers: int = 256
    max_header_bytes: int = 16 * 1024


class Fetcher:
    def __init__(
        self,
        resolver: Resolver,
        guard: AddressGuard,
        *,
        user_agent: str,
        from_header: str | None = None,
        max_connections: int = 100,
        max_conn_per_host: int = 1,
        connect_timeout: float = 10.0,
        read_timeout: float = 30.0,
        total_timeout: float = 60.0,
        keepalive_timeout: float = 15.0,
        max_body_bytes: int = 10 * 1024 * 1024,
        limits: FetchLimits | None = None,
        verify_tls: bool = True,
        spill_bytes: int | None = None,
        spill_dir: str | Path | None = None,
        max_idle_connections: int | None = None,
    ) -> None:
        """`spill_bytes`: a body (or decoded content) beyond this size goes to an unnamed temporary file
        in `spill_dir` (default: the system's temporary directory) as it arrives; None keeps all in memory.
        `max_idle_connections`: keep-alive connections kept while idle (the oldest are closed beyond it);
        None: half the process's file descriptor limit, at least `max_connections`."""
        self._resolver = resolver
        self._guard = guard
        headers = [("User-Agent", user_agent), ("Accept", ACCEPT), ("Accept-Encoding", ", ".join(SUPPORTED_ENCODINGS))]
        if from_header:
            headers.append(("From", from_header))
        _check_header_lines(headers)
        self._headers = headers
        self._pool_limits = (max_connections, max_conn_per_host, keepalive_timeout)
        self.max_idle_connections = max_idle_connections
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.total_timeout = total_timeout
        self.limits = limits or FetchLimits(max_body_bytes=max_body_bytes, max_decoded_bytes=max_body_bytes)
        self._head_limits = HeadLimits(self.limits.max_response_headers, self.limits.max_header_bytes)
        self._verify_tls = verify_tls
        self._tls: ssl.SSLContext | None = None  # made at the first https connection (loading the trust store takes ms)
        self._spill = (spill_bytes, spill_dir)
        self._pool: ConnectionPool | None = None
        # statistics (stats.json "fetch"): every attempt, robots.txt included
        self.attempts = 0
        self.outcomes: Counter[str] = Counter()
        self.truncated: Counter[str] = Counter()
        self.bytes_received = 0
        self.not_modified = 0

    async def __aenter__(self) -> Fetcher:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def open(self) -> None:
        max_connections, per_host, keepalive = self._pool_limits
        self._pool = ConnectionPool(
            limit=max_connections, per_origin=per_host, keepalive=keepalive, max_idle=self._max_idle(max_connections)
        )

    def _max_idle(self, max_connections: int) -> int:
        """Idle connections kept: `max_idle_connections`, else up to half the process's file descriptors
        (never fewer than `max_connections`), leaving the rest to connections in use and the crawl's files."""
        if self.max_idle_connections is not None:
            return self.max_idle_connections
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft == resource.RLIM_INFINITY:
            soft = 1 << 20
        return max(max_connections, soft // 2)

    async def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    async def fetch(
        self, url: str, *, validators: Validators | None = None, extra_headers: Sequence[tuple[str, str]] = ()
    ) -> FetchResult:
        """One GET of `url`; with `validators` it is conditional (a 304 means the stored copy holds)."""
        pool = self._pool
        assert pool is not None, "Fetcher used before open()"
        result = FetchResult(url=url, outcome=Outcome.NETWORK_ERROR, started=time.time())
        clock = time.monotonic()
        body = BodyBuffer(*self._spill)
        connection: Connection | None = None
        coded = False  # Content-Encoding other than identity (known once the head is in)
        try:
            async with asyncio.timeout(self.total_timeout if self.total_timeout > 0 else None):
                origin, target = split_url(url)
                headers = [("Host", origin.host_header), *self._headers]
                if extra_headers or validators:
                    extra = [*extra_headers, *(validators.request_headers() if validators else ())]
                    _check_header_lines(extra)
                    headers += extra
                result.request_headers = headers
                head = f"GET {target} HTTP/1.1\r\n" + "".join(f"{name}: {value}\r\n" for name, value in headers)
                connection = await pool.acquire(origin, lambda: self._connect(origin))
                response = await connection.request((head + "\r\n").encode("latin-1"), self.read_timeout)
                result.status = response.status
                result.reason = response.reason
                result.headers = response.headers
                result.address = connection.peer
                result.outcome = Outcome.for_status(response.status)
                coded = _has_coding(result)
                await self._read_body(connection, result, body, coded)
        except DNSFailure as exc:
            result.outcome, result.error = Outcome.DNS_ERROR, str(exc)
        except GuardRefused as exc:
            result.outcome, result.error = Outcome.GUARD_REFUSED, str(exc)
        except Exception as exc:  # everything a server can cause ends in an outcome
            result.outcome, result.error = _classify(exc)
            if type(exc) is TimeoutError:  # the total timeout (the socket timeouts are subclasses with their own text)
                result.error = f"total timeout of {self.total_timeout} s exceeded"
            if body.size and not result.truncated:
                result.truncated = "time" if result.outcome is Outcome.TIMEOUT else "disconnect"
            expected = ProtocolError | OSError | ValueError
            if not isinstance(exc, expected):
                log.warning("fetch %s: unexpected %s", url, type(exc).__name__, exc_info=exc)
        finally:
            if connection is not None:
                pool.release(connection)
        if body.size:
            result.body = body.finish()
            if result.decoded is None and not result.decode_error and not coded:
                result.decoded = result.body  # identity: the content is the body
        result.duration = time.monotonic() - clock
        self._count(result)
        return result

    async def _connect(self, origin: Origin) -> Connection:
        """A new connection to `origin`, at the address the resolver gives and the guard accepts."""
        host = origin.host
        if (host[:1].isdigit() or host[:1] == "[") and is_ip_literal(host):
            address = host.strip("[]")
        else:
            address = await self._resolver.resolve(host)
        self._guard.check(host, address)
        return await open_connection(
            origin,
            address,
            limits=self._head_limits,
            tls=self._tls_context() if origin.scheme == "https" else None,
            timeout=self.connect_timeout,
        )

    def _tls_context(self) -> ssl.SSLContext:
        if self._tls is None:
            self._tls = tls_context(self._verify_tls)
        return self._tls

    async def _read_body(self, connection: Connection, result: FetchResult, body: BodyBuffer, coded: bool) -> None:
        limits = self.limits
        decoder: BoundedDecoder | None = None
        decoded = BodyBuffer(*self._spill)
        if coded:
            try:
                decoder = BoundedDecoder(
                    result.header("content-encoding"),
                    max_output=limits.max_decoded_bytes,
                    max_ratio=limits.max_compression_ratio,
                    sink=decoded,
                )
            except DecodeError as exc:
                result.decode_error = str(exc)
        limit = limits.max_body_bytes
        while not result.truncated and (chunks := await connection.read()):
            for chunk in chunks:
                if body.size + len(chunk) > limit:
                    chunk = chunk[: limit - body.size]
                    result.truncated = "length"
                    result.outcome = Outcome.TOO_LARGE
                    result.error = f"body exceeds {limit} bytes"
                body.append(chunk)
                if decoder is not None:
                    try:
                        decoder.feed(chunk)
                    except DecodeLimitExceeded as exc:
                        result.truncated = "length"
                        result.outcome = Outcome.TOO_LARGE
                        result.error = exc.reason
                        break
                    except DecodeError as exc:
                        result.decode_error = str(exc)
                        result.outcome, result.error = Outcome.BAD_RESPONSE, str(exc)
                        decoder = None
                if result.truncated:
                    break
        if decoder is not None:
            if not result.truncated:
                try:
                    decoder.finish()
                except DecodeError as exc:  # kept as decoded so far, as browsers render it
                    result.decode_error = str(exc)
            result.decoded = decoded.finish()

    def _count(self, result: FetchResult) -> None:
        self.attempts += 1
        self.outcomes[result.outcome] += 1
        self.bytes_received += len(result.body)
        if result.truncated:
            self.truncated[result.truncated] += 1
        if result.status == 304:
            self.not_modified += 1

    def stats(self) -> dict[str, Any]:
        """The "fetch" section of stats.json: every attempt (robots.txt included) by outcome."""
        return {
            "attempts": self.attempts,
            "outcomes": dict(sorted(self.outcomes.items())),
            "truncated": dict(sorted(self.truncated.items())),
            "not_modified": self.not_modified,
            "bytes_received": self.bytes_received,
        }

    def __repr__(self) -> str:
        state = "open" if self._pool is not None else "closed"
        return f"<Fetcher {state} attempts={self.attempts} outcomes={dict(self.outcomes)}>"


def _has_coding(result: FetchResult) -> bool:
    coding = (result.header("content-encoding") or "").strip().lower()
    return coding not in ("", "identity")


def _check_header_lines(headers: Sequence[tuple[str, str]]) -> None:
    """Request headers must each be one line of latin-1 (a value from a config or an earlier response
    must not be able to add headers or a second request)."""
    for name, value in headers:
        for text in (name, value):
            if not text.isprintable() or not _is_latin1(text):  # CR, LF and other controls are not printable
                raise ValueError(f"request header {name!r}: {value!r} is not one line of latin-1 text")


def _is_latin1(text: str) -> bool:
    return text.isascii() or all(ord(character) < 256 for character in text)


def _classify(exc: BaseException) -> tuple[Outcome, str]:
    """The outcome of an exception raised by the HTTP client (or the OS) during one attempt."""
    text = f"{type(exc).__name__}: {exc}".rstrip(": ")
    if isinstance(exc, ssl.SSLError):  # before ValueError: certificate errors are both
        return Outcome.TLS_ERROR, text
    if isinstance(exc, TimeoutError):
        return Outcome.TIMEOUT, text or "timeout"
    if isinstance(exc, ProtocolError):
        return Outcome.BAD_RESPONSE, str(exc)  # garbage status line, too many or too long headers, bad framing
    if isinstance(exc, Disconnected):
        if exc.reset or not exc.in_body:
            return Outcome.CONNECTION_RESET, str(exc)
        return Outcome.BAD_RESPONSE, str(exc)  # closed before its Content-Length or last chunk
    if isinstance(exc, ConnectionRefusedError):
        return Outcome.CONNECTION_REFUSED, text
    if isinstance(exc, ConnectionResetError | BrokenPipeError) or (
        isinstance(exc, OSError) and exc.errno in (errno.ECONNRESET, errno.EPIPE)
    ):
        return Outcome.CONNECTION_RESET, text
    if isinstance(exc, ValueError):
        return Outcome.NETWORK_ERROR, str(exc)
    return Outcome.NETWORK_ERROR, text
