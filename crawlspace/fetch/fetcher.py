"""HTTP(S) fetcher on aiohttp: pooled keep-alive connections, bounded everything, no inline redirects.

One `fetch` is one attempt, and it ends in exactly one Outcome; the fetcher never raises for
anything the network or the server does, and never retries or sleeps (retries go back through
the frontier, see `crawlspace.fetch.retry`).

What a hostile server can make it spend is bounded:
- time: connect, read (between two bytes) and total timeouts; a slowloris server trickling one
  byte a second is cut by the total timeout;
- memory: the body is read up to `max_body_bytes` and then truncated and marked
  (`FetchResult.truncated`, the WARC-Truncated reason); Content-Encoding is undone as the body
  arrives with caps on decoded size and ratio (`crawlspace.fetch.decode`), so a gzip, br or zstd
  bomb stops the read; status line, header size and header count are capped by the parser. With
  a spill directory, a body or decoded content beyond `spill_bytes` goes to an unnamed temporary
  file as it arrives (`crawlspace.fetch.body`), so a fetch in flight holds at most that much of
  each (a spilled result's files go with `release()`).

The body is kept as sent (for the WARC record) and the decoded content beside it. Connections go
to the address our resolver produced and the guard accepted (`_PinnedResolver`); URLs with an IP
literal, which aiohttp connects to without asking any resolver, are checked here first. Cookies
are not kept: a jar shared by millions of hosts is a memory leak and a privacy leak.
"""

from __future__ import annotations

import email.utils
import errno
import logging
import socket
import ssl
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

from crawlspace.dns import AddressGuard, DNSFailure, GuardRefused, Resolver
from crawlspace.dns.resolver import is_ip_literal
from crawlspace.fetch.body import BodyBuffer, Payload, SpilledBytes
from crawlspace.fetch.decode import SUPPORTED_ENCODINGS, BoundedDecoder, DecodeError, DecodeLimitExceeded
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


class _PinnedResolver(AbstractResolver):
    """aiohttp resolver that connects only to addresses our resolver produced and the guard accepted."""

    def __init__(self, resolver: Resolver, guard: AddressGuard) -> None:
        self._resolver = resolver
        self._guard = guard

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        address = await self._resolver.resolve(host)
        self._guard.check(host, address)
        ip_family = socket.AF_INET6 if ":" in address else socket.AF_INET
        return [
            ResolveResult(
                hostname=host, host=address, port=port, family=ip_family, proto=0, flags=socket.AI_NUMERICHOST
            )
        ]

    async def close(self) -> None:
        return None


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
    ) -> None:
        """`spill_bytes`: a body (or decoded content) beyond this size goes to an unnamed temporary file
        in `spill_dir` (default: the system's temporary directory) as it arrives; None keeps all in memory."""
        self._resolver = resolver
        self._guard = guard
        self._headers = {
            "User-Agent": user_agent,
            "Accept": ACCEPT,
            "Accept-Encoding": ", ".join(SUPPORTED_ENCODINGS),
        }
        if from_header:
            self._headers["From"] = from_header
        self._pool = (max_connections, max_conn_per_host, keepalive_timeout)
        self._timeout = aiohttp.ClientTimeout(total=total_timeout, sock_connect=connect_timeout, sock_read=read_timeout)
        self.limits = limits or FetchLimits(max_body_bytes=max_body_bytes, max_decoded_bytes=max_body_bytes)
        self._verify_tls = verify_tls
        self._spill = (spill_bytes, spill_dir)
        self._session: aiohttp.ClientSession | None = None
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
        max_connections, per_host, keepalive = self._pool
        connector = aiohttp.TCPConnector(
            limit=max_connections,
            limit_per_host=per_host,
            resolver=_PinnedResolver(self._resolver, self._guard),
            use_dns_cache=False,
            ssl=self._verify_tls,  # True: aiohttp's verifying default context, built once at import
            keepalive_timeout=keepalive,
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            timeout=self._timeout,
            auto_decompress=False,
            headers=self._headers,
            skip_auto_headers=("Accept-Encoding",),
            cookie_jar=aiohttp.DummyCookieJar(),
            max_line_size=self.limits.max_header_bytes,
            max_field_size=self.limits.max_header_bytes,
            max_headers=self.limits.max_response_headers,
        )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def fetch(
        self, url: str, *, validators: Validators | None = None, extra_headers: Sequence[tuple[str, str]] = ()
    ) -> FetchResult:
        """One GET of `url`; with `validators` it is conditional (a 304 means the stored copy holds)."""
        session = self._session
        assert session is not None, "Fetcher used before open()"
        result = FetchResult(url=url, outcome=Outcome.NETWORK_ERROR, started=time.time())
        clock = time.monotonic()
        body = BodyBuffer(*self._spill)
        headers = None
        if extra_headers or validators:
            headers = dict(extra_headers)
            headers.update(validators.request_headers() if validators else ())
        try:
            target = URL(url)
            host = target.raw_host or ""
            # aiohttp connects to IP literals without asking a resolver: check them here
            if (host[:1].isdigit() or ":" in host) and is_ip_literal(host):
                self._guard.check(host, host.strip("[]"))
            async with session.get(target, allow_redirects=False, headers=headers) as resp:
                result.status = resp.status
                result.reason = resp.reason or ""
                result.headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in resp.raw_headers]
                result.request_headers = list(resp.request_info.headers.items())
                result.address = _peer_address(resp)
                result.outcome = Outcome.for_status(resp.status)
                coding = (resp.headers.get("Content-Encoding") or "").strip().lower()
                await self._read_body(resp, result, body, coding not in ("", "identity"))
        except DNSFailure as exc:
            result.outcome, result.error = Outcome.DNS_ERROR, str(exc)
        except GuardRefused as exc:
            result.outcome, result.error = Outcome.GUARD_REFUSED, str(exc)
        except Exception as exc:  # everything a server can cause ends in an outcome
            result.outcome, result.error = _classify(exc)
            if type(exc) is TimeoutError:  # aiohttp's socket timeouts are subclasses with their own text
                result.error = f"total timeout of {self._timeout.total} s exceeded"
            if body.size and not result.truncated:
                result.truncated = "time" if result.outcome is Outcome.TIMEOUT else "disconnect"
            expected = aiohttp.ClientError | aiohttp.http_exceptions.HttpProcessingError | OSError | ValueError
            if not isinstance(exc, expected):
                log.warning("fetch %s: unexpected %s", url, type(exc).__name__, exc_info=exc)
        if body.size:
            result.body = body.finish()
            if result.decoded is None and not result.decode_error and not _has_coding(result):
                result.decoded = result.body  # identity: the content is the body
        result.duration = time.monotonic() - clock
        self._count(result)
        return result

    async def _read_body(
        self, response: aiohttp.ClientResponse, result: FetchResult, body: BodyBuffer, coded: bool
    ) -> None:
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
        stream = response.content
        while True:
            chunk = await stream.readany()
            if not chunk:
                break
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
        state = "open" if self._session is not None else "closed"
        return f"<Fetcher {state} attempts={self.attempts} outcomes={dict(self.outcomes)}>"


def _peer_address(response: aiohttp.ClientResponse) -> str | None:
    """The IP address the response came from (WARC-IP-Address). A response whose body arrived with
    its head has already given its connection back to the pool, so ask the protocol as well."""
    protocol = response.connection.protocol if response.connection else getattr(response, "_protocol", None)
    transport = getattr(protocol, "transport", None)
    peer = transport.get_extra_info("peername") if transport is not None else None
    return str(peer[0]) if peer else None


def _has_coding(result: FetchResult) -> bool:
    coding = (result.header("content-encoding") or "").strip().lower()
    return coding not in ("", "identity")


def _classify(exc: BaseException) -> tuple[Outcome, str]:
    """The outcome of an exception raised by aiohttp (or the OS) during one attempt."""
    text = f"{type(exc).__name__}: {exc}".rstrip(": ")
    cause = getattr(exc, "os_error", None) or exc.__cause__
    if isinstance(cause, DNSFailure):
        return Outcome.DNS_ERROR, str(cause)
    if isinstance(cause, GuardRefused):
        return Outcome.GUARD_REFUSED, str(cause)
    if isinstance(exc, aiohttp.ClientSSLError | ssl.SSLError) or isinstance(cause, ssl.SSLError):
        return Outcome.TLS_ERROR, text
    if isinstance(exc, TimeoutError | aiohttp.ServerTimeoutError) or isinstance(cause, TimeoutError):
        return Outcome.TIMEOUT, text or "timeout"
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return Outcome.DNS_ERROR, text
    if isinstance(exc, aiohttp.ClientConnectorError):
        if isinstance(exc.os_error, ConnectionRefusedError):
            return Outcome.CONNECTION_REFUSED, text
        return Outcome.NETWORK_ERROR, text
    if isinstance(exc, aiohttp.ClientPayloadError):
        if any(isinstance(e, ConnectionResetError) for e in _chain(exc)) or "connection reset" in text.lower():
            return Outcome.CONNECTION_RESET, text
        return Outcome.BAD_RESPONSE, text  # wrong Content-Length, broken chunked encoding
    if isinstance(exc, aiohttp.ServerDisconnectedError | ConnectionResetError | BrokenPipeError):
        return Outcome.CONNECTION_RESET, text
    if isinstance(exc, aiohttp.ClientOSError) and exc.errno in (errno.ECONNRESET, errno.EPIPE):
        return Outcome.CONNECTION_RESET, text
    if isinstance(exc, aiohttp.ClientResponseError | aiohttp.http_exceptions.HttpProcessingError):
        return Outcome.BAD_RESPONSE, text  # garbage status line, too many or too long headers
    if isinstance(exc, aiohttp.InvalidURL | ValueError):
        return Outcome.NETWORK_ERROR, f"invalid URL: {exc}"
    return Outcome.NETWORK_ERROR, text


def _chain(exc: BaseException) -> list[BaseException]:
    """The exception and what caused it, a few levels deep (aiohttp wraps OS errors)."""
    chain = [exc]
    while len(chain) < 6:
        nxt = chain[-1].__cause__ or chain[-1].__context__
        if nxt is None:
            break
        chain.append(nxt)
    return chain
