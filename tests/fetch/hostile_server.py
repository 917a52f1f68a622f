"""A deliberately misbehaving HTTP server on loopback, one path per misbehaviour.

It speaks raw bytes over asyncio streams (a real HTTP framework would refuse to misbehave),
runs in its own process (so a bomb or a 100 MB page it pumps out cannot starve the client), and
logs every request it receives, so tests can assert from the server's side.

Paths (the keys of ROUTES): slowloris, endless body, gzip/deflate/br/zstd bombs, wrong
Content-Length (short, long), garbage status line, reset mid-body, redirect loop, 50-hop
redirect chain, 100 MB page, invalid UTF-8, lying charset, 10,000 headers, one huge header,
accept-and-never-answer, close without answering, 503/429 with Retry-After, a path that fails
N times then works, conditional GET, and `/site/N`, a small well-behaved site of linked pages.

`/big/KIND/N` are pages larger than any limit, made of ordinary HTML (paragraphs of random words,
a link in each) that differs from N to N, so that each is new content through every stage of a
crawl: `plain` (Content-Length of BIG_PAGE bytes), `chunked` (a chunked body that never ends) and
`gzip` (BIG_PAGE bytes of it gzip-compressed as they are sent, chunked: about 60% of that size).
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import itertools
import multiprocessing
import socket
import ssl
import struct
import tempfile
import threading
import time
import zlib
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import brotli
import numpy as np
import zstandard

BOMB_SIZE = 1 << 30  # decoded bytes a bomb would expand to
PAGE_100MB = 100 * 1024 * 1024
BIG_PAGE = 16 * 1024 * 1024  # bytes of a /big/ page: more than the crawler's default limits (10 MiB)
BIG_BLOCK = 1 << 20
ETAG = '"v1"'
LAST_MODIFIED = "Tue, 01 Dec 2026 10:00:00 GMT"

Writer = asyncio.StreamWriter


@dataclass(frozen=True)
class Request:
    path: str
    headers: dict[str, str]
    at: float  # time.monotonic() when the request head was read


def _head(status: str, headers: list[tuple[str, str]]) -> bytes:
    lines = [f"HTTP/1.1 {status}"] + [f"{k}: {v}" for k, v in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def html_response(body: bytes, content_type: str = "text/html; charset=utf-8", status: str = "200 OK") -> bytes:
    return _head(status, [("Content-Type", content_type), ("Content-Length", str(len(body)))]) + body


def _bomb(encoding: str) -> bytes:
    """A valid body that decodes to BOMB_SIZE zero bytes (about 1 MB for gzip, 2 KB for br)."""
    block = bytes(1 << 20)
    blocks = BOMB_SIZE >> 20
    if encoding in ("gzip", "deflate"):
        # After a full flush the compressor starts afresh, so every 1 MiB block compresses to the same
        # bytes: compress two, repeat the second, add the header and the checksum trailer by hand.
        raw = zlib.compressobj(9, zlib.DEFLATED, -15)
        first = raw.compress(block) + raw.flush(zlib.Z_FULL_FLUSH)
        again = raw.compress(block) + raw.flush(zlib.Z_FULL_FLUSH)
        stream = first + again * (blocks - 1) + raw.flush()
        crc, adler = 0, 1
        for _ in range(blocks):
            crc, adler = zlib.crc32(block, crc), zlib.adler32(block, adler)
        if encoding == "gzip":
            header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
            return header + stream + struct.pack("<II", crc, BOMB_SIZE & 0xFFFFFFFF)
        return b"\x78\xda" + stream + struct.pack(">I", adler)
    if encoding == "br":
        compressor = brotli.Compressor(quality=5)
        parts = [compressor.process(block) for _ in range(blocks)]
        return b"".join(parts) + compressor.finish()
    if encoding == "zstd":
        compressor = zstandard.ZstdCompressor(level=3).compressobj()
        parts = [compressor.compress(block) for _ in range(blocks)]
        return b"".join(parts) + compressor.flush()
    raise ValueError(encoding)


_WORD_BYTES = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz    ", np.uint8)  # spaces make ~5-letter words
_HEX = np.frombuffer(b"0123456789abcdef", np.uint8)
_ROW_TEXT = 200


def big_page_block(page: int, block: int, size: int = BIG_BLOCK) -> bytes:
    """Block `block` of big page `page`: `size` bytes of HTML rows `<p>words<a href="/l/HEX">w</a></p>`
    (the first block starts the document), random but the same on every call."""
    rng = np.random.default_rng([page, block])
    head = b"<html><head><title>big page %d</title></head><body>\n" % page if block == 0 else b""
    prefix, middle, suffix = (np.frombuffer(part, np.uint8) for part in (b"<p>", b'<a href="/l/', b'">w</a></p>\n'))
    width = len(prefix) + _ROW_TEXT + len(middle) + 8 + len(suffix)
    rows = (size - len(head)) // width + 1
    table = np.concatenate(
        [
            np.broadcast_to(prefix, (rows, len(prefix))),
            _WORD_BYTES[rng.integers(0, len(_WORD_BYTES), (rows, _ROW_TEXT), dtype=np.uint8)],
            np.broadcast_to(middle, (rows, len(middle))),
            _HEX[rng.integers(0, len(_HEX), (rows, 8), dtype=np.uint8)],
            np.broadcast_to(suffix, (rows, len(suffix))),
        ],
        axis=1,
    )
    return (head + table.tobytes())[:size]


class HostileServer:
    """The server, run in a child process (so that pumping a 100 MB page or a bomb does not compete
    with the client for the GIL); its request log is fetched from the child on each access."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        *,
        port: int = 0,
        tls: tuple[bytes, bytes] | None = None,  # (certificate chain PEM, private key PEM)
        site_pages: int = 20,
        fail_times: int = 2,
        prebuild_bombs: bool = False,
    ) -> None:
        self.host = host
        self.port = port
        self.tls = tls
        self.site_pages = site_pages
        self._options = {"fail_times": fail_times, "prebuild_bombs": prebuild_bombs}
        self._bombs: dict[str, bytes] = {}
        context = multiprocessing.get_context("spawn")
        self._control, child_end = context.Pipe()
        self._process = context.Process(
            target=_serve_in_child,
            args=(child_end, host, port, tls, site_pages, self._options),
            name=f"hostile-{host}",
            daemon=True,
        )
        self._lock = threading.Lock()

    def __enter__(self) -> HostileServer:
        self._process.start()
        if not self._control.poll(30):
            self._process.kill()
            raise RuntimeError("hostile server did not start")
        self.port = self._control.recv()
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(OSError):
            self._control.send("stop")
        self._process.join(10)
        if self._process.is_alive():
            self._process.kill()
            self._process.join(5)

    def _snapshot(self) -> dict[str, Any]:
        with self._lock:
            self._control.send("snapshot")
            snapshot: dict[str, Any] = self._control.recv()
            return snapshot

    @property
    def requests(self) -> list[Request]:
        return list(self._snapshot()["requests"])

    @property
    def hits(self) -> Counter[str]:
        return Counter(r.path for r in self.requests)

    @property
    def connections(self) -> int:
        return int(self._snapshot()["connections"])

    @property
    def max_active(self) -> int:
        return int(self._snapshot()["max_active"])

    def url(self, path: str, host: str | None = None) -> str:
        return f"{self.origin if host is None else self.origin.replace(self.host, host)}{path}"

    @property
    def origin(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.port}"

    def requests_for(self, prefix: str) -> list[Request]:
        return [r for r in self.requests if r.path.startswith(prefix)]

    def bomb(self, encoding: str) -> bytes:
        """The bomb body the server sends for `encoding` (built here too, for comparisons)."""
        if encoding not in self._bombs:
            self._bombs[encoding] = _bomb(encoding)
        return self._bombs[encoding]


def _serve_in_child(
    control: Connection,
    host: str,
    port: int,
    tls: tuple[bytes, bytes] | None,
    site_pages: int,
    options: dict[str, Any],
) -> None:
    ssl_context = None
    if tls is not None:
        folder = Path(tempfile.mkdtemp(prefix="hostile-tls-"))
        (folder / "chain.pem").write_bytes(tls[0])
        (folder / "key.pem").write_bytes(tls[1])
        ssl_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ssl_context.load_cert_chain(folder / "chain.pem", folder / "key.pem")
    app = _App(host, port, ssl_context, site_pages, options["fail_times"])
    if options["prebuild_bombs"]:
        for encoding in ("gzip", "deflate", "br", "zstd"):
            app.bomb(encoding)
    asyncio.run(app.main(control))


class _App:
    def __init__(
        self, host: str, port: int, ssl_context: ssl.SSLContext | None, site_pages: int, fail_times: int
    ) -> None:
        self.host = host
        self.port = port
        self.ssl_context = ssl_context
        self.site_pages = site_pages
        self.fail_times = fail_times
        self.requests: list[Request] = []
        self.hits: Counter[str] = Counter()
        self.connections = 0
        self.active = 0  # requests being answered right now
        self.max_active = 0
        self._bombs: dict[str, bytes] = {}

    async def main(self, control: Connection) -> None:
        loop = asyncio.get_running_loop()
        stopped = asyncio.Event()
        server = await asyncio.start_server(self._connection, self.host, self.port, backlog=128, ssl=self.ssl_context)
        control.send(server.sockets[0].getsockname()[1])

        def answer_control() -> None:
            while True:
                try:
                    message = control.recv()
                except (EOFError, OSError):
                    message = "stop"
                if message == "stop":
                    loop.call_soon_threadsafe(stopped.set)
                    return
                snapshot = {
                    "requests": list(self.requests),
                    "connections": self.connections,
                    "max_active": self.max_active,
                }
                control.send(snapshot)

        threading.Thread(target=answer_control, daemon=True).start()
        await stopped.wait()
        server.close()
        for task in [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]:
            task.cancel()
        await asyncio.sleep(0)

    def bomb(self, encoding: str) -> bytes:
        if encoding not in self._bombs:
            self._bombs[encoding] = _bomb(encoding)
        return self._bombs[encoding]

    # -- HTTP ----------------------------------------------------------------------------------

    async def _connection(self, reader: asyncio.StreamReader, writer: Writer) -> None:
        self.connections += 1
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                parts = lines[0].split(" ")
                path = parts[1] if len(parts) > 1 else "/"
                headers = {}
                for line in lines[1:]:
                    key, sep, value = line.partition(":")
                    if sep:
                        headers[key.strip().lower()] = value.strip()
                self.requests.append(Request(path, headers, time.monotonic()))
                self.hits[path] += 1
                handler = self._route(path)
                self.active += 1
                self.max_active = max(self.max_active, self.active)
                try:
                    keep_open = await handler(self, path, headers, writer)
                    await writer.drain()
                finally:
                    self.active -= 1
                if not keep_open:
                    return
        except (ConnectionError, asyncio.CancelledError):
            return
        finally:
            if not writer.is_closing():
                writer.close()

    def _route(self, path: str) -> Callable[..., Awaitable[bool]]:
        name = path.split("?")[0].strip("/").split("/")[0]
        return ROUTES.get(name, _not_found)


# Each handler writes a response (or misbehaves) and returns whether the connection stays open.


async def _not_found(server: _App, path: str, headers: dict[str, str], writer: Writer) -> bool:
    writer.write(html_response(b"<p>no such page</p>", status="404 Not Found"))
    return True


async def _robots(server: _App, path: str, headers: dict[str, str], writer: Writer) -> bool:
    writer.write(html_response(b"User-agent: *\nAllow: /\n", "text/plain"))
    return True


async def _ok(server: _App, path: str, headers: dict[str, str], writer: Writer) -> bool:
    writer.write(html_response(b"<html><body><p>fine</p></body></html>"))
    return True


async def _slow_ok(server: _App, path: str, headers: dict[str, str], writer: Writer) -> bool:
    await asyncio.sleep(0.2)
    writer.write(html_response(b"<p>slow but fine</p>"))
    return True


async def _echo(server: _App, path: str, headers: dict[str, str], writer: Writer) -> bool:
    """The request headers, one per line, as text/plain."""
    body = "".join(f"{k}: {v}\n" for k, v in headers.items()).encode("latin-1")
    writer.write(html_response(body, "text/plain"))
    return True


async def _redirect_to(server: _App, path: str, headers: dict[str, str], writer: Writer) -> bool:
    """/redirect-to?URL: a 302 to any URL (an open redirector, as attackers use them)."""
    target = path.partition("?")[2]
    writer.write(_head("302 Found", [("Location", target), ("Content-Length", "0")]))
    return True


async def _site(server: _App, path: str, headers: dict[str, str], writer: Writer) -> bool:
    """/site/N links to /site/N+1 and /site/2N+1: a small connected site of `site_pages` pages."""
    n = int(path.rsplit("/", 1)[-1] or 0)
    links = [m for m in (n + 1, 2 * n + 1) if m < server.site_pages]
    body = "".join(f'<a href="/site/{m}">page {m}</a>\n' for m in links)
    host = headers.get("host", "")  # distinct content per host: content-seen must not merge two sites
    writer.write(html_response(f"<html><body><h1>page {n} of {host}</h1>{body}</body></html>".encode()))
    return True


async def _slowloris(server: _App, path: str, headers: dict[str, str], writer: Writer) -> bool:
    """The whole response, status line included, one byte per second."""
    response = html_response(b"<html>" + b"x" * 10_000 + b"</html>")
    for i in range(len(response)):
        writer.write(response[i : i + 1])
        await writer.drain()
        await asyncio.sleep(1.0)
    return False


async def _endless(server: _App, path: str, headers: dict[str, str], writer: Writer) -> bool:
    """A chunked body that never ends."""
    writer.write(_head("200 OK", [("Content-Type", "text/html"), ("Transfer-Encoding", "chunked")]))
    chunk = b"<p>" + b"more " * 3000 + b"</p>\n"
    frame = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
    while True:
        writer.write(frame)
        await writer.drain()


async def _bomb_handler(server: _App, path: str, headers: dict[str, str], writer: Writer) -> bool:
    encoding = path.strip("/").split("/")[0].removesuffix("-bomb")
    body = server.bomb(encoding)
    writer.write(
        _head(
            "200 OK",
            [("Content-Type", "text/html"), ("Content-Encoding", encoding), ("Content-Length", str(len(body)))],
        )
    )
    for start in range(0, len(body), 1 << 16):
        writer.write(body[start : start + (1 << 16)])
        await writer.drain()
    return True


async def _short_length(server: _App, path: str, headers: dict[str, str], writer: Writer) -> bool:
    """Content-Length says 20, 200 bytes follow (the rest is garbage in front of the next response)."""
    body = b"<html>" + b"y" * 188 + b"</html>"
    writer.write(_head("200 OK", [("Content-Type", "text/html"), ("Content-Length", "20")]) + body)
    return True


async def _late_junk(server: _App, path: str, headers: dict[str, str], writer: Writer) -> bool:
    """A correct response, then (once the client thinks the connection idle) junk bytes on it."""
    body = b"<p>fine so far</p>"
    writer.write(_head("200 OK", [("Content-Type", "text/html"), ("Content-Length", str(len(body)))]) + body)
    await writer.drain()
    await asyncio.sleep(0.1)
    writer.write(b"junk that belongs to no response\r\n\r\n")
    return True


async def _long_length(server: _App, path: str, headers: dict[str, str], writer: Writer) -> bool:
    """Content-Length says 100,000, 100 bytes follow, then the server closes."""
    writer.write(_head("200 OK", [("Content-Type", "text/html"), ("Content-Length", "100000")]) + b"z" * 100)
    return False


async def _garbage_status(server: _App, path: str, headers: dict[str, str], writer: Writer) -> bool:
    writer.write(b"HTTP/1.1 OK-ISH \x00\x01garbage\r\nContent-Length: 2\r\n\r\nhi")
    return False


async def _reset(server: _App, path: str, headers: dict[str, str], writer: Writer) -> bool:
    """Half a body, then a TCP reset (SO_LINGER 0 makes close() send RST)."""
    writer.write(_head("200 OK", [("Content-Type", "text/html"), ("Content-Length", "1000000")]))
    writer.write(b"<html>" + b"r" * 20_000)
    await writer.drain()
    await asyncio.sleep(0.05)
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()
    return False


async def _redirect(server: _App, path: str, headers: dict[str, str], writer: Writer) -> bool:
    """/loop/a <-> /loop/b; /chain/N -> /chain/N+1 up to 50."""
    kind, _, rest = path.strip("/").partition("/")
    if kind == "loop":
        target = "/loop/b" if rest == "a" else "/loop/a"
    else:
        n = int(rest)
        if n >= 50:
            writer.write(html_response(b"<p>end of the chain</p>"))
            return True
        target = f"/chain/{n + 1}"
    writer.write(_head("302 Found", [("Location", target), ("Content-Length", "0")]))
    return True


async def _huge(server: _App, path: str, headers: dict[str, str], writer: Writer) -> bool:
    """A 100 MB page, sent as fast as the client reads."""
    writer.write(_head("200 OK", [("Content-Type", "text/html"), ("Content-Length", str(PAGE_100MB))]))
    block = b"<p>" + b"h" * (1 << 16) + b"</p>"
    sent = 0
    while sent < PAGE_100MB:
        piece = block[: PAGE_100MB - sent]
        writer.write(piece)
        sent += len(piece)
        await writer.drain()
    return True


async def _big(server: _App, path: str, headers: dict[str, str], writer: Writer) -> bool:
    """/big/plain/N, /big/chunked/N, /big/gzip/N: see the module docstring."""
    _, kind, number = path.strip("/").split("/")
    page = int(number)
    blocks = BIG_PAGE // BIG_BLOCK
    if kind == "chunked":
        writer.write(_head("200 OK", [("Content-Type", "text/html"), ("Transfer-Encoding", "chunked")]))
        for block in itertools.count():
            await _write_chunk(writer, big_page_block(page, block))
    if kind == "gzip":  # compressed as it is sent, so a client that stops early costs little
        fields = [("Content-Type", "text/html"), ("Content-Encoding", "gzip"), ("Transfer-Encoding", "chunked")]
        writer.write(_head("200 OK", fields))
        compressor = zlib.compressobj(1, zlib.DEFLATED, 31)
        for block in range(blocks):
            await _write_chunk(writer, compressor.compress(big_page_block(page, block)))
        await _write_chunk(writer, compressor.flush())
        writer.write(b"0\r\n\r\n")
        return True
    writer.write(_head("200 OK", [("Content-Type", "text/html"), ("Content-Length", str(BIG_PAGE))]))
    for block in range(blocks):
        writer.write(big_page_block(page, block))
        await writer.drain()
    return True


async def _write_chunk(writer: Writer, data: bytes) -> None:
    if data:  # an empty chunk would end the body
        writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        await writer.drain()


async def _bad_utf8(server: _App, path: str, headers: dict[str, str], writer: Writer) -> bool:
    body = b'<html><body>\xff\xfe\xc3\x28 broken \xe2\x82 <a href="/site/1">next</a>\xed\xa0\x80</body></html>'
    writer.write(html_response(body, "text/html; charset=utf-8"))
    return True


async def _lying_charset(server: _App, path: str, headers: dict[str, str], writer: Writer) -> bool:
    """Says UTF-8, is Shift_JIS (and says so in a meta tag)."""
    text = '<html><head><meta charset="shift_jis"></head><body>日本語のページ <a href="/site/2">次へ</a></body></html>'
    writer.write(html_response(text.encode("shift_jis"), "text/html; charset=utf-8"))
    return True


async def _many_headers(server: _App, path: str, headers: dict[str, str], writer: Writer) -> bool:
    fields = [(f"X-Header-{i}", "v" * 20) for i in range(10_000)]
    writer.write(_head("200 OK", [*fields, ("Content-Length", "2")]) + b"hi")
    return True


async def _huge_header(server: _App, path: str, headers: dict[str, str], writer: Writer) -> bool:
    writer.write(_head("200 OK", [("X-Big", "b" * 200_000), ("Content-Length", "2")]) + b"hi")
    return True


async def _silent(server: _App, path: str, headers: dict[str, str], writer: Writer) -> bool:
    """Accepts, reads the request, never answers."""
    await asyncio.sleep(3600)
    return False


async def _hang_up(server: _App, path: str, headers: dict[str, str], writer: Writer) -> bool:
    return False


async def _slow_down(server: _App, path: str, headers: dict[str, str], writer: Writer) -> bool:
    """/unavailable: 503 with Retry-After: 2; /rate-limited: 429 with Retry-After: 2."""
    status = "503 Service Unavailable" if path.startswith("/unavailable") else "429 Too Many Requests"
    writer.write(_head(status, [("Retry-After", "2"), ("Content-Length", "0")]))
    return True


async def _flaky(server: _App, path: str, headers: dict[str, str], writer: Writer) -> bool:
    """Resets the connection the first `fail_times` times, then answers."""
    if server.hits[path] <= server.fail_times:
        writer.transport.abort()
        return False
    writer.write(html_response(b"<p>worked at last</p>"))
    return True


async def _conditional(server: _App, path: str, headers: dict[str, str], writer: Writer) -> bool:
    if headers.get("if-none-match") == ETAG or headers.get("if-modified-since") == LAST_MODIFIED:
        writer.write(_head("304 Not Modified", [("ETag", ETAG), ("Content-Length", "0")]))
        return True
    body = b"<p>version 1</p>"
    writer.write(
        _head(
            "200 OK",
            [
                ("Content-Type", "text/html"),
                ("ETag", ETAG),
                ("Last-Modified", LAST_MODIFIED),
                ("Content-Length", str(len(body))),
            ],
        )
        + body
    )
    return True


async def _gzip_page(server: _App, path: str, headers: dict[str, str], writer: Writer) -> bool:
    body = gzip.compress(b"<html><body>" + b"<p>compressed text</p>" * 200 + b"</body></html>")
    writer.write(
        _head(
            "200 OK",
            [("Content-Type", "text/html"), ("Content-Encoding", "gzip"), ("Content-Length", str(len(body)))],
        )
        + body
    )
    return True


ROUTES: dict[str, Callable[..., Awaitable[bool]]] = {
    "robots.txt": _robots,
    "ok": _ok,
    "slow-ok": _slow_ok,
    "echo": _echo,
    "redirect-to": _redirect_to,
    "site": _site,
    "slowloris": _slowloris,
    "endless": _endless,
    "gzip-bomb": _bomb_handler,
    "deflate-bomb": _bomb_handler,
    "br-bomb": _bomb_handler,
    "zstd-bomb": _bomb_handler,
    "short-length": _short_length,
    "late-junk": _late_junk,
    "long-length": _long_length,
    "garbage-status": _garbage_status,
    "reset": _reset,
    "loop": _redirect,
    "chain": _redirect,
    "huge": _huge,
    "big": _big,
    "bad-utf8": _bad_utf8,
    "lying-charset": _lying_charset,
    "many-headers": _many_headers,
    "huge-header": _huge_header,
    "silent": _silent,
    "hang-up": _hang_up,
    "unavailable": _slow_down,
    "rate-limited": _slow_down,
    "flaky": _flaky,
    "conditional": _conditional,
    "gzip-page": _gzip_page,
}
