"""HTTP(S) fetcher on aiohttp: pooled keep-alive connections, bounded bodies, no inline redirects.

Bodies are read raw (no automatic decompression) so that the WARC record holds the bytes as
sent; `FetchResult.content` decompresses with caps on size, which defuses compression bombs.
The connection goes to the address our resolver produced and the guard accepted.
"""

from __future__ import annotations

import socket
import ssl
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult

from crawlspace.dns import AddressGuard, DNSFailure, GuardRefused, Resolver
from crawlspace.fetch.outcomes import Outcome

try:
    import brotli
except ImportError:  # pragma: no cover - brotli is a declared dependency
    brotli = None

import zstandard

READ_CHUNK = 64 * 1024


@dataclass(slots=True)
class FetchResult:
    url: str
    outcome: Outcome
    status: int = 0
    reason: str = ""
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    truncated: bool = False
    address: str | None = None
    started: float = 0.0  # wall-clock time of the request (for WARC-Date)
    duration: float = 0.0
    error: str = ""
    request_headers: list[tuple[str, str]] = field(default_factory=list)

    def header(self, name: str) -> str | None:
        lowered = name.lower()
        for key, value in self.headers:
            if key.lower() == lowered:
                return value
        return None

    @property
    def content_type(self) -> str:
        return (self.header("content-type") or "").split(";")[0].strip().lower()

    def content(self, max_bytes: int) -> bytes:
        """The body with Content-Encoding undone, at most `max_bytes` of it."""
        encoding = (self.header("content-encoding") or "identity").strip().lower()
        try:
            return _decode(self.body, encoding, max_bytes)
        except (zlib.error, zstandard.ZstdError, OSError, ValueError):
            return self.body[:max_bytes] if encoding == "identity" else b""


def _decode(body: bytes, encoding: str, max_bytes: int) -> bytes:
    if encoding in ("identity", ""):
        return body[:max_bytes]
    if encoding in ("gzip", "x-gzip", "deflate"):
        wbits = 47 if encoding != "deflate" else (15 if body[:1] == b"\x78" else -15)
        return zlib.decompressobj(wbits).decompress(body, max_bytes)
    if encoding == "br" and brotli is not None:
        return bytes(brotli.Decompressor().process(body))[:max_bytes]
    if encoding == "zstd":
        reader = zstandard.ZstdDecompressor().decompressobj()
        return bytes(reader.decompress(body)[:max_bytes])
    raise ValueError(f"unknown content-encoding {encoding}")


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


def _accept_encoding() -> str:
    return "gzip, deflate, br, zstd" if brotli is not None else "gzip, deflate, zstd"


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
        max_body_bytes: int = 10 * 1024 * 1024,
        verify_tls: bool = True,
    ) -> None:
        self._resolver = resolver
        self._guard = guard
        self._headers = {"User-Agent": user_agent, "Accept-Encoding": _accept_encoding(), "Accept": "*/*"}
        if from_header:
            self._headers["From"] = from_header
        self._limits = (max_connections, max_conn_per_host)
        self._timeout = aiohttp.ClientTimeout(total=total_timeout, sock_connect=connect_timeout, sock_read=read_timeout)
        self.max_body_bytes = max_body_bytes
        self._verify_tls = verify_tls
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Fetcher:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def open(self) -> None:
        ssl_context: ssl.SSLContext | bool = ssl.create_default_context() if self._verify_tls else False
        connector = aiohttp.TCPConnector(
            limit=self._limits[0],
            limit_per_host=self._limits[1],
            resolver=_PinnedResolver(self._resolver, self._guard),
            use_dns_cache=False,
            ssl=ssl_context,
            enable_cleanup_closed=True,
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            timeout=self._timeout,
            auto_decompress=False,
            headers=self._headers,
            skip_auto_headers=("Accept-Encoding",),
        )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def fetch(self, url: str, extra_headers: Sequence[tuple[str, str]] = ()) -> FetchResult:
        assert self._session is not None, "Fetcher used before open()"
        started = time.time()
        clock = time.monotonic()
        result = FetchResult(url=url, outcome=Outcome.NETWORK_ERROR, started=started)
        try:
            async with self._session.get(
                url, allow_redirects=False, headers=dict(extra_headers) if extra_headers else None
            ) as response:
                result.status = response.status
                result.reason = response.reason or ""
                result.headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in response.raw_headers]
                result.request_headers = list(response.request_info.headers.items())
                transport = response.connection.transport if response.connection else None
                peer = transport.get_extra_info("peername") if transport else None
                if peer:
                    result.address = peer[0]
                result.body, result.truncated = await self._read_body(response)
                result.outcome = Outcome.for_status(response.status)
        except DNSFailure as exc:
            result.outcome, result.error = Outcome.DNS_ERROR, str(exc)
        except GuardRefused as exc:
            result.outcome, result.error = Outcome.GUARD_REFUSED, str(exc)
        except aiohttp.ClientConnectorError as exc:
            cause = exc.__cause__ or exc.os_error
            if isinstance(cause, DNSFailure):
                result.outcome = Outcome.DNS_ERROR
            elif isinstance(cause, GuardRefused):
                result.outcome = Outcome.GUARD_REFUSED
            elif isinstance(exc, aiohttp.ClientConnectorCertificateError | aiohttp.ClientConnectorSSLError):
                result.outcome = Outcome.TLS_ERROR
            elif isinstance(exc.os_error, ConnectionRefusedError):
                result.outcome = Outcome.CONNECTION_REFUSED
            else:
                result.outcome = Outcome.NETWORK_ERROR
            result.error = str(cause or exc)
        except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
            result.outcome, result.error = Outcome.TIMEOUT, str(exc) or "timeout"
        except aiohttp.ServerDisconnectedError as exc:
            result.outcome, result.error = Outcome.CONNECTION_RESET, str(exc) or "server disconnected"
        except (aiohttp.ClientPayloadError, ConnectionResetError) as exc:
            result.outcome, result.error = Outcome.CONNECTION_RESET, str(exc)
        except (aiohttp.ClientResponseError, aiohttp.http_exceptions.HttpProcessingError) as exc:
            result.outcome, result.error = Outcome.BAD_RESPONSE, str(exc)
        except (aiohttp.ClientError, OSError, ValueError) as exc:
            result.outcome, result.error = Outcome.NETWORK_ERROR, f"{type(exc).__name__}: {exc}"
        result.duration = time.monotonic() - clock
        return result

    async def _read_body(self, response: aiohttp.ClientResponse) -> tuple[bytes, bool]:
        chunks: list[bytes] = []
        size = 0
        limit = self.max_body_bytes
        async for chunk in response.content.iter_chunked(READ_CHUNK):
            chunks.append(chunk)
            size += len(chunk)
            if size >= limit:
                return b"".join(chunks)[:limit], True
        return b"".join(chunks), False
