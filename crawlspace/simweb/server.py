"""The simulated web's HTTP/1.1 server: one listening socket per host address, a hand-written parser.

Each host listens on its own loopback address 127.R.x.y (never 0.0.0.0), so that a crawler
resolves, connects and is polite per host and per IP as on the real web; R, the second octet,
is picked at start among those whose addresses are free, so servers run side by side. Requests
are parsed by hand (request line, Host, Connection, Content-Length) on an asyncio Protocol:
the crawler, not the server, is what a benchmark measures. Keep-alive and pipelining are
supported; a request for a host that lives on another address gets 421, so a crawler that
connects to the wrong IP is caught.

Every request is logged as one TSV line (`LogEntry`): when it arrived, when its response was
written, the connection id (unique per TCP connection), the server address, the Host header,
the path, status, body bytes and method. Lines are buffered and flushed every second and on
stop; `read_log` reads them back for tests.

`serve_in_background` runs the server in a subprocess (`python -m crawlspace.simweb serve`),
which regenerates the web from its config and proves it by the web's fingerprint, so that the
crawler's CPU time is measured apart from the server's.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import time
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from email.utils import formatdate, parsedate_to_datetime
from pathlib import Path
from types import MappingProxyType
from typing import IO, NamedTuple

from crawlspace.simweb.generator import SimWeb, unescape_unreserved
from crawlspace.simweb.model import Response

FLUSH_INTERVAL = 1.0
MAX_HEADER_BYTES = 65536
OCTETS = range(16, 240)
"""Second octets a server may take: 127.0.x.y is left to the system's own loopback services."""

_REASONS = MappingProxyType(
    {
        200: "OK",
        301: "Moved Permanently",
        302: "Found",
        304: "Not Modified",
        307: "Temporary Redirect",
        308: "Permanent Redirect",
        400: "Bad Request",
        404: "Not Found",
        405: "Method Not Allowed",
        421: "Misdirected Request",
        431: "Request Header Fields Too Large",
        500: "Internal Server Error",
        501: "Not Implemented",
        503: "Service Unavailable",
    }
)


class LogEntry(NamedTuple):
    """One request as the server saw it. Times are wall-clock seconds (time.time())."""

    arrived: float
    finished: float
    connection: int
    server_ip: str
    host: str
    path: str
    status: int
    bytes: int
    method: str


def read_log(path: str | Path) -> list[LogEntry]:
    """Entries of a request log, in the order the responses finished."""
    entries: list[LogEntry] = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            arrived, finished, connection, ip, host, path_, status, size, method = line.rstrip("\n").split("\t")
            entries.append(
                LogEntry(
                    float(arrived), float(finished), int(connection), ip, host, path_, int(status), int(size), method
                )
            )
    return entries


def _clean(value: str) -> str:
    """Keep a logged field on its line and in its column."""
    return value.replace("\t", "%09").replace("\n", "%0A").replace("\r", "%0D")


def read_nginx_log(path: str | Path) -> list[LogEntry]:
    """Entries of an access log written with NGINX_LOG_FORMAT, in the shape of the simulated server's log."""
    entries: list[LogEntry] = []
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            fields = line.rstrip("\n").split("\t")
            if len(fields) != 9:
                continue
            finished, duration = float(fields[0]), float(fields[1])
            entries.append(
                LogEntry(
                    finished - duration,
                    finished,
                    int(fields[2]),
                    fields[3],
                    fields[4],
                    fields[5],
                    int(fields[6]),
                    int(fields[7]),
                    fields[8],
                )
            )
    return entries


def _header_value(lower: bytes, head: bytes, name: bytes) -> str | None:
    found = lower.find(b"\r\n" + name + b":")
    if found < 0:
        return None
    start = found + len(name) + 3
    end = lower.find(b"\r\n", start)
    return head[start : end if end >= 0 else len(head)].strip().decode("latin-1")


def not_modified(response: Response, lower: bytes, head: bytes) -> Response:
    """304 for a conditional GET whose copy is current (RFC 9110 13.1): If-None-Match, when sent, decides
    alone (weak comparison); else If-Modified-Since against Last-Modified, to the second."""
    if response.status != 200 or response.etag is None:
        return response
    unchanged = response.replace_body(b"", status=304)
    tags = _header_value(lower, head, b"if-none-match")
    if tags is not None:
        sent = {tag.strip().removeprefix("W/") for tag in tags.split(",")}
        return unchanged if "*" in sent or response.etag in sent else response
    since = _header_value(lower, head, b"if-modified-since")
    if since is None or response.last_modified is None:
        return response
    try:
        moment = parsedate_to_datetime(since).timestamp()
    except (TypeError, ValueError, IndexError):
        return response  # an unreadable date is ignored (RFC 9110 13.1.3)
    return unchanged if int(response.last_modified) <= moment else response


class RequestLog:
    """Buffered TSV request log: lines pile up in memory and are written at least every second."""

    def __init__(self, path: str | Path | None) -> None:
        self._handle: IO[str] | None = open(path, "a", encoding="utf-8") if path is not None else None  # noqa: SIM115
        self._lines: list[str] = []
        self.requests = 0

    def add(
        self,
        arrived: float,
        finished: float,
        connection: int,
        ip: str,
        host: str,
        path: str,
        status: int,
        size: int,
        method: str,
    ) -> None:
        self.requests += 1
        if self._handle is not None:
            self._lines.append(
                f"{arrived:.6f}\t{finished:.6f}\t{connection}\t{ip}\t{host}\t{path}\t{status}\t{size}\t{method}\n"
            )

    def flush(self) -> None:
        if self._handle is not None and self._lines:
            self._handle.write("".join(self._lines))
            self._lines.clear()
            self._handle.flush()

    def close(self) -> None:
        self.flush()
        if self._handle is not None:
            self._handle.close()
            self._handle = None


def default_port(preferred: int = 80, fallback: int = 8080) -> int:
    """`preferred` when this process may bind it (root, or a port >= 1024), else `fallback`."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        probe.bind(("127.255.255.254", preferred))
    except PermissionError:
        return fallback
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
    finally:
        probe.close()
    return preferred


def raise_file_limit(needed: int) -> None:
    """Lift the soft RLIMIT_NOFILE to the hard one: one socket per host address, plus every client connection.

    Fails loudly when even the hard limit cannot hold the listening sockets with some room to spare.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if hard != resource.RLIM_INFINITY and hard < needed:
        raise OSError(errno.EMFILE, f"RLIMIT_NOFILE hard limit {hard} is below the {needed} sockets needed")


class _Connection(asyncio.Protocol):
    """One TCP connection: parses requests in order, answers each, logs each."""

    __slots__ = (
        "_buffer",
        "_busy",
        "_closed",
        "_discard",
        "_id",
        "_ip",
        "_keep_alive",
        "_paused",
        "_server",
        "_timer",
        "_transport",
    )

    def __init__(self, server: SimServer, ip: str) -> None:
        self._server = server
        self._ip = ip
        self._buffer = b""
        self._busy = False
        self._paused = False
        self._closed = False
        self._keep_alive = True
        self._discard = 0
        self._id = 0
        self._transport: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = typing.cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        self._id = self._server.connection_opened(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
        self._server.connection_closed(self)

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self._process()

    def data_received(self, data: bytes) -> None:
        if self._discard:
            skipped = min(self._discard, len(data))
            self._discard -= skipped
            data = data[skipped:]
        self._buffer = self._buffer + data if self._buffer else data
        self._process()

    def close(self) -> None:
        if self._transport is not None and not self._closed:
            self._transport.close()

    def _process(self) -> None:
        while not (self._busy or self._paused or self._closed):
            buffer = self._buffer
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(buffer) > MAX_HEADER_BYTES:
                    self._fail(431, time.time())
                return
            self._buffer = buffer[end + 4 :]
            self._handle(buffer[:end], time.time())

    def _fail(self, status: int, arrived: float, method: str = "-", host: str = "-", path: str = "-") -> None:
        self._keep_alive = False
        self._buffer = b""
        self._respond(
            Response(status, "text/plain; charset=utf-8", _REASONS[status].encode() + b"\n"),
            arrived,
            method,
            host,
            path,
            head_only=False,
        )

    def _handle(self, head: bytes, arrived: float) -> None:
        if head.startswith(b"\r\n"):  # stray empty lines before a request line are ignored (RFC 9112 §2.2)
            head = head.lstrip(b"\r\n")
        line_end = head.find(b"\r\n")
        parts = (head if line_end < 0 else head[:line_end]).split(b" ")
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
            self._fail(400, arrived)
            return
        method_bytes, target, version = parts
        method = method_bytes.decode("latin-1")
        lower = head.lower()
        keep_alive = version == b"HTTP/1.1"
        found = lower.find(b"\r\nconnection:")
        if found >= 0:
            end = lower.find(b"\r\n", found + 2)
            value = lower[found + 13 : end if end >= 0 else len(lower)]
            if b"close" in value:
                keep_alive = False
            elif b"keep-alive" in value:
                keep_alive = True
        self._keep_alive = keep_alive
        found = lower.find(b"\r\ncontent-length:")
        if found >= 0:
            end = lower.find(b"\r\n", found + 2)
            try:
                length = int(lower[found + 17 : end if end >= 0 else len(lower)])
            except ValueError:
                self._fail(400, arrived, method)
                return
            skipped = min(length, len(self._buffer))
            self._buffer = self._buffer[skipped:]
            self._discard = length - skipped
        if b"\r\ntransfer-encoding:" in lower:
            self._fail(501, arrived, method)
            return
        found = lower.find(b"\r\nhost:")
        host_value = b""
        if found >= 0:
            end = lower.find(b"\r\n", found + 2)
            host_value = head[found + 7 : end if end >= 0 else len(head)].strip()
        if target.startswith((b"http://", b"HTTP://")):
            slash = target.find(b"/", 7)
            host_value = target[7:slash] if slash >= 0 else target[7:]
            target = target[slash:] if slash >= 0 else b"/"
        host = host_value.decode("latin-1")
        path = target.decode("latin-1")
        server = self._server
        name = host.rsplit(":", 1)[0].lower() if ":" in host else host.lower()
        index = server.host_index.get(name)
        if index is None:
            response = Response(404, "text/plain; charset=utf-8", b"Unknown host\n")
        elif server.host_address[index] != self._ip:
            response = Response(421, "text/plain; charset=utf-8", b"Host not served at this address\n")
        elif method not in ("GET", "HEAD"):
            response = Response(405, "text/plain; charset=utf-8", b"Method Not Allowed\n")
        else:
            web = server.web
            decoded = unescape_unreserved(path) if "%" in path else path
            if web.changes is None:
                response = web.response(index, decoded)
            else:  # as the page is at the logged arrival, so that the judge finds the same version
                response = not_modified(web.response(index, decoded, float(f"{arrived:.6f}")), lower, head)
            latency = server.latency[index]
            bandwidth = server.bandwidth[index]
            if latency > 0 or bandwidth > 0:
                self._respond_slowly(response, arrived, method, host, path, latency, bandwidth)
                return
        self._respond(response, arrived, method, host, path, head_only=method == "HEAD")

    def _header(self, response: Response) -> bytes:
        lines = [
            f"HTTP/1.1 {response.status} {_REASONS.get(response.status, 'Unknown')}\r\n"
            f"Server: crawlspace-simweb\r\nDate: {self._server.date}\r\nContent-Type: {response.content_type}\r\n"
        ]
        if response.status != 304:  # a 304 has no body (RFC 9110 15.4.5)
            lines.append(f"Content-Length: {len(response.body)}\r\n")
        if response.etag is not None:
            lines.append(f"ETag: {response.etag}\r\n")
        if response.last_modified is not None:
            lines.append(f"Last-Modified: {formatdate(int(response.last_modified), usegmt=True)}\r\n")
        if response.location is not None:
            lines.append(f"Location: {response.location}\r\n")
        if response.status == 405:
            lines.append("Allow: GET, HEAD\r\n")
        lines.append("\r\n" if self._keep_alive else "Connection: close\r\n\r\n")
        return "".join(lines).encode("latin-1")

    def _respond(self, response: Response, arrived: float, method: str, host: str, path: str, head_only: bool) -> None:
        transport = self._transport
        assert transport is not None
        header = self._header(response)
        finished = time.time()
        transport.write(header if head_only else header + response.body)
        self._done(response, arrived, finished, method, host, path, head_only)

    def _done(
        self, response: Response, arrived: float, finished: float, method: str, host: str, path: str, head_only: bool
    ) -> None:
        """Log the exchange. `finished` is stamped just before the last write: a client cannot have the whole
        response earlier, so a gap measured from it never accuses a polite crawler, even when this process
        is descheduled right after the write (seen on a loaded 2-core machine)."""
        self._server.log.add(
            arrived,
            finished,
            self._id,
            self._ip,
            _clean(host),
            _clean(path),
            response.status,
            0 if head_only else len(response.body),
            _clean(method),
        )
        if not self._keep_alive and self._transport is not None:
            self._closed = True
            self._transport.close()

    def _respond_slowly(
        self,
        response: Response,
        arrived: float,
        method: str,
        host: str,
        path: str,
        latency: float,
        bandwidth: float,
    ) -> None:
        """Wait `latency`, then send at `bandwidth` bytes/s in 50 ms slices; later requests wait their turn."""
        head_only = method == "HEAD"
        data = self._header(response) + (b"" if head_only else response.body)
        slice_bytes = max(1, int(bandwidth * 0.05)) if bandwidth > 0 else len(data)
        loop = asyncio.get_running_loop()
        self._busy = True

        def send(offset: int) -> None:
            self._timer = None
            if self._closed or self._transport is None:
                return
            finished = time.time()
            self._transport.write(data[offset : offset + slice_bytes])
            if offset + slice_bytes < len(data):
                self._timer = loop.call_later(0.05, send, offset + slice_bytes)
                return
            self._busy = False
            self._done(response, arrived, finished, method, host, path, head_only)
            self._process()

        self._timer = loop.call_later(latency, send, 0)


class SimServer:
    """Serves a SimWeb on loopback. `await start()`, then `await stop()` (which flushes the log)."""

    def __init__(
        self,
        web: SimWeb,
        *,
        log_path: str | Path | None = None,
        hosts_file: str | Path | None = None,
        octet: int | None = None,
    ) -> None:
        self.web = web
        self.port = web.config.port
        self.log_path = Path(log_path) if log_path is not None else None
        self.hosts_file = Path(hosts_file) if hosts_file is not None else None
        self._requested_octet = octet
        self.octet = -1
        self.host_index = {name: index for index, name in enumerate(web.hosts)}
        self.host_address: list[str] = []
        self.latency = web.data.host_latency.tolist()
        self.bandwidth = web.data.host_bandwidth.tolist()
        self.log = RequestLog(log_path)
        self.date = formatdate(usegmt=True)
        self._servers: list[asyncio.AbstractServer] = []
        self._connections: set[_Connection] = set()
        self._next_connection = 0
        self._ticker: asyncio.TimerHandle | None = None

    def __repr__(self) -> str:
        return (
            f"SimServer({self.web!r}, octet={self.octet}, port={self.port}, "
            f"connections={len(self._connections)}, requests={self.log.requests})"
        )

    @property
    def requests(self) -> int:
        return self.log.requests

    def connection_opened(self, connection: _Connection) -> int:
        self._connections.add(connection)
        self._next_connection += 1
        return self._next_connection

    def connection_closed(self, connection: _Connection) -> None:
        self._connections.discard(connection)

    def _bind(self, octet: int) -> list[tuple[str, socket.socket]]:
        """Bind every distinct host address for this octet, or none (EADDRINUSE: try another octet)."""
        suffixes = sorted({self.web.ip_suffix(name) for name in self.web.hosts})
        bound: list[tuple[str, socket.socket]] = []
        try:
            for x, y in suffixes:
                address = f"127.{octet}.{x}.{y}"
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                bound.append((address, sock))
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind((address, self.port))
                sock.listen(128)
                sock.setblocking(False)
        except OSError:
            for _, sock in bound:
                sock.close()
            raise
        return bound

    async def start(self) -> None:
        """Bind all host addresses (choosing the octet), start serving, write the hosts file."""
        addresses = len({self.web.ip_suffix(name) for name in self.web.hosts})
        raise_file_limit(addresses + 256)
        if self._requested_octet is not None:
            candidates = [self._requested_octet]
        else:
            first = (os.getpid() * 7919 + time.monotonic_ns()) % len(OCTETS)
            candidates = [OCTETS[(first + i) % len(OCTETS)] for i in range(len(OCTETS))]
        for octet in candidates:
            try:
                bound = self._bind(octet)
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE and len(candidates) > 1:
                    continue
                raise
            break
        else:
            raise OSError(errno.EADDRINUSE, f"no free 127.R.x.y octet for port {self.port}")
        self.octet = octet
        self.host_address = [self.web.host_ip(name, octet) for name in self.web.hosts]
        loop = asyncio.get_running_loop()
        for address, sock in bound:
            self._servers.append(await loop.create_server(self._factory(address), sock=sock))
        if self.hosts_file is not None:
            write_atomically(self.hosts_file, self.web.hosts_file_text(octet))
        self._tick()

    def _factory(self, address: str) -> Callable[[], _Connection]:
        return lambda: _Connection(self, address)

    def _tick(self) -> None:
        self.date = formatdate(usegmt=True)
        self.log.flush()
        self._ticker = asyncio.get_running_loop().call_later(FLUSH_INTERVAL, self._tick)

    async def stop(self) -> None:
        """Stop listening, close connections, flush and close the log. Idempotent."""
        if self._ticker is not None:
            self._ticker.cancel()
            self._ticker = None
        for server in self._servers:
            server.close()
        for connection in list(self._connections):
            connection.close()
        for server in self._servers:
            await server.wait_closed()
        self._servers.clear()
        self.log.close()


def write_atomically(path: Path, text: str) -> None:
    """Readers never see half a file: write beside it, then rename over it."""
    temporary = path.with_name(path.name + f".tmp{os.getpid()}")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop when installed (several times cheaper per request), else asyncio's default loop."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    return loop


@dataclass
class RunningServer:
    """A server subprocess started by `serve_in_background`, with the files a crawler and a test need."""

    web: SimWeb
    process: subprocess.Popen[bytes]
    directory: Path
    hosts_file: Path
    log_path: Path
    seeds_file: Path
    octet: int
    port: int
    seeds: list[str] = field(default_factory=list)

    def host_ip(self, host: str) -> str:
        return self.web.host_ip(host, self.octet)

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, so the server flushes its log; SIGKILL if it does not exit in time. Idempotent."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def read_log(self) -> list[LogEntry]:
        """The request log; complete once stopped, at most a second behind while running."""
        return read_log(self.log_path)


@contextlib.contextmanager
def serve_in_background(
    web: SimWeb, directory: str | Path, *, seeds: int = 10, octet: int | None = None, timeout: float = 60.0
) -> Iterator[RunningServer]:
    """Serve `web` from a subprocess for the duration of the block; files go to `directory`.

    The subprocess regenerates the web from `web.config` and reports its fingerprint, which must
    equal this one. On exit the server is stopped with SIGTERM and its log is complete.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    config_file = directory / "simweb-config.json"
    config_file.write_text(json.dumps(web.config.to_dict()))
    ready = directory / "simweb-ready.json"
    ready.unlink(missing_ok=True)
    files = {
        "hosts_file": directory / "simweb-hosts.txt",
        "log_path": directory / "simweb-requests.tsv",
        "seeds_file": directory / "simweb-seeds.txt",
    }
    command = [
        sys.executable,
        "-m",
        "crawlspace.simweb",
        "serve",
        "--config-file",
        str(config_file),
        "--log",
        str(files["log_path"]),
        "--hosts-file",
        str(files["hosts_file"]),
        "--seeds-file",
        str(files["seeds_file"]),
        "--seeds",
        str(seeds),
        "--ready-file",
        str(ready),
    ]
    if octet is not None:
        command += ["--octet", str(octet)]
    package_root = str(Path(__file__).resolve().parents[2])
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, environment.get("PYTHONPATH")]))
    with open(directory / "simweb-server.err", "wb") as errors:
        process = subprocess.Popen(command, env=environment, stdin=subprocess.DEVNULL, stdout=errors, stderr=errors)
    running: RunningServer | None = None
    try:
        deadline = time.monotonic() + timeout
        while not ready.exists():
            if process.poll() is not None or time.monotonic() > deadline:
                message = (directory / "simweb-server.err").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"simweb server did not start (exit {process.poll()}): {message}")
            time.sleep(0.02)
        info = json.loads(ready.read_text())
        if info["fingerprint"] != web.fingerprint():
            raise RuntimeError("the server generated a different web from the same config (non-determinism)")
        running = RunningServer(
            web=web,
            process=process,
            directory=directory,
            octet=int(info["octet"]),
            port=int(info["port"]),
            seeds=list(info["seeds"]),
            **files,
        )
        yield running
    finally:
        if running is not None:
            running.stop()
        elif process.poll() is None:
            process.kill()
            process.wait()
