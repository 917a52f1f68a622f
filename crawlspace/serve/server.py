"""Running the dashboard: in the foreground (`crawlspace serve`), as a process of its own beside a crawl
(`crawl --serve`, `demo --serve`: `attached`), or on a thread of its own (`BackgroundDashboard`, for an
application or a test that wants it in its process).

Beside a crawl the dashboard is a child process running `crawlspace serve DIR`: it reads only the
files the crawl writes anyway, so it needs nothing of the crawl's memory, and its page renders,
JSON and table scans then take neither the crawl's GIL nor a turn of its event loop (on a thread of
the crawl's process they did: bench/README.md, serve). It is started in a session of its own, so
that the terminal's Ctrl-C stops the crawl gracefully while the dashboard still shows it, and it
ends when told (`stop`, by its PID) or when the crawl's process is gone (`--stop-with-parent`, for a
crawl killed with SIGKILL). It stays up when the crawl ends: the demo keeps serving the finished crawl.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from crawlspace.refresh.querylog import QueryLogError, QueryLogWriter
from crawlspace.serve.app import make_app
from crawlspace.serve.security import Guard, is_loopback, new_token
from crawlspace.serve.view import CrawlView, NodeStatus


class ServeError(Exception):
    """The dashboard cannot start: a bad token file, a port in use."""


def read_token_file(path: Path) -> str:
    try:
        token = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ServeError(f"cannot read the token file {path}: {exc.strerror or exc}") from None
    if len(token) < 16:
        raise ServeError(f"the token in {path} is too short ({len(token)} characters; at least 16)")
    return token


def make_guard(host: str, token: str | None) -> Guard:
    """No token on a loopback address unless one is given; anywhere else one is always needed."""
    if token is None and not is_loopback(host):
        token = new_token()
    return Guard(token=token)


@dataclass(frozen=True, slots=True)
class Address:
    host: str
    port: int
    token: str | None

    @property
    def url(self) -> str:
        name = f"[{self.host}]" if ":" in self.host else self.host
        base = f"http://{name}:{self.port}/"
        return base if self.token is None else f"{base}?token={self.token}"


def open_search_log(directory: Path, query_log: Path) -> QueryLogWriter:
    """The query log the dashboard appends its searches to: never inside the crawl directory, which
    serving only reads (the crawl's `refresh_query_log` is a file of its own, outside it)."""
    inside = query_log.resolve()
    if inside == directory.resolve() or directory.resolve() in inside.parents:
        raise ServeError(
            f"the query log {query_log} is inside the crawl directory {directory}, which serving never "
            "modifies: give a file outside it"
        )
    try:
        return QueryLogWriter(query_log)
    except QueryLogError as exc:
        raise ServeError(str(exc)) from None


async def start(
    directory: Path, host: str, port: int, guard: Guard, nodes: NodeStatus | None = None, query_log: Path | None = None
) -> tuple[web.AppRunner, Address]:
    """The dashboard of `directory` listening on host:port (0: a free port), and its address;
    `nodes`: the statuses of the cluster crawl `directory` is a node of; `query_log`: where the
    searches made on it are appended (refresh.querylog)."""
    search_log = None if query_log is None else open_search_log(directory, query_log)
    view = CrawlView(directory, nodes=nodes)
    runner = web.AppRunner(make_app(view, guard, search_log), access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        raise ServeError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    bound = port
    for address in runner.addresses:
        bound = int(address[1])
        break
    return runner, Address(host, bound, guard.token)


PARENT_CHECK_INTERVAL = 1.0


def serve_forever(
    directory: Path,
    host: str,
    port: int,
    guard: Guard,
    announce: Callable[[Address], None],
    nodes: NodeStatus | None = None,
    *,
    stop_with_parent: bool = False,
    query_log: Path | None = None,
) -> None:
    """Serve until Ctrl-C (SIGINT); with `stop_with_parent`, also until the process that started
    this one is gone (reparented: the crawl it watched was killed)."""
    parent = os.getppid()

    async def main() -> None:
        runner, address = await start(directory, host, port, guard, nodes, query_log)
        announce(address)
        try:
            while not stop_with_parent or os.getppid() == parent:
                await asyncio.sleep(PARENT_CHECK_INTERVAL)
        finally:
            await runner.cleanup()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())


class BackgroundDashboard:
    """The dashboard on a thread of its own; `start` returns once it listens, `stop` ends it."""

    def __init__(
        self, directory: Path, host: str, port: int, guard: Guard, nodes: NodeStatus | None = None,
        query_log: Path | None = None,
    ) -> None:  # fmt: skip
        self.directory, self.host, self.port, self.guard, self.nodes = directory, host, port, guard, nodes
        self.query_log = query_log
        self.address: Address | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="crawlspace-dashboard", daemon=True)

    def start(self) -> Address:
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise self._error
        assert self.address is not None
        return self.address

    def _run(self) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            try:
                runner, self.address = await start(
                    self.directory, self.host, self.port, self.guard, self.nodes, self.query_log
                )
            except BaseException as exc:
                self._error = exc
                self._ready.set()
                return
            self._ready.set()
            try:
                await self._stop.wait()
            finally:
                await runner.cleanup()

        asyncio.run(main())

    def wait(self) -> None:
        """Block until the dashboard stops (Ctrl-C ends the wait)."""
        with contextlib.suppress(KeyboardInterrupt):
            while self._thread.is_alive():
                self._thread.join(0.5)

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)


ATTACHED_PROGRESS_INTERVAL = 0.5
"""The progress cadence of a crawl with its dashboard attached: the overview (which polls as often)
is then at most about a second behind the crawl."""


ANNOUNCED = re.compile(r"crawlspace: dashboard at (http://\S+)")
START_TIMEOUT = 60.0


class DashboardProcess:
    """`crawlspace serve DIR` in a child process (module docstring); `start` returns its address once
    it listens, `stop` ends it by its PID. Its stderr is passed on to this process's."""

    def __init__(
        self, directory: Path, host: str, port: int, *, cluster_url: str | None = None, query_log: Path | None = None
    ) -> None:
        self.directory, self.host, self.port, self.cluster_url = directory, host, port, cluster_url
        self.query_log = query_log
        self.process: subprocess.Popen[str] | None = None

    def start(self) -> Address:
        command = [
            sys.executable, "-m", "crawlspace", "serve", str(self.directory), "--host", self.host,
            "--port", str(self.port), "--stop-with-parent",
        ]  # fmt: skip
        if self.query_log is not None:
            command += ["--query-log", str(self.query_log)]
        env = dict(os.environ)
        if self.cluster_url is not None:  # by the environment: a command line is visible to every user
            env["CRAWLSPACE_CLUSTER"] = self.cluster_url
        self.directory.mkdir(parents=True, exist_ok=True)
        self.process = process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            env=env, start_new_session=True,
        )  # fmt: skip
        assert process.stderr is not None
        found: list[str] = []
        said: list[str] = []
        ready = threading.Event()

        def relay() -> None:
            assert process.stderr is not None
            for line in process.stderr:
                match = ANNOUNCED.search(line)
                if match and not found:
                    sys.stderr.write("".join(said))  # what it said before (a warning about the token)
                    found.append(match[1])
                    ready.set()
                    continue  # announced by `attached`, with the crawl's own output
                said.append(line)
                if ready.is_set():
                    sys.stderr.write(line)
            ready.set()  # it ended without listening

        threading.Thread(target=relay, name="crawlspace-dashboard-stderr", daemon=True).start()
        if not ready.wait(START_TIMEOUT) or not found:
            self.stop()
            reason = "".join(said).strip().removeprefix("crawlspace: error: ") or "it did not start in time"
            raise ServeError(reason)
        url = urllib.parse.urlsplit(found[0])
        token = urllib.parse.parse_qs(url.query).get("token", [None])[0]
        return Address(self.host, url.port or self.port, token)

    def stop(self) -> None:
        process = self.process
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGINT)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextlib.contextmanager
def attached(
    directory: Path, port: int, *, host: str = "127.0.0.1", cluster_url: str | None = None,
    query_log: Path | None = None,
) -> Iterator[Address]:  # fmt: skip
    """The dashboard of the crawl in `directory` in a process of its own for the duration of the block
    (`crawl --serve`, `demo --serve`); its URL is printed to stderr. `cluster_url`: the crawl is a
    node of that cluster (its nodes' rows on the overview). `query_log`: the searches made on it are
    appended there (`crawl --serve` gives the crawl's `refresh_query_log`, which its refresher reads)."""
    dashboard = DashboardProcess(directory, host, port, cluster_url=cluster_url, query_log=query_log)
    address = dashboard.start()
    print(f"crawlspace: dashboard at {address.url}", file=sys.stderr, flush=True)
    try:
        yield address
    finally:
        dashboard.stop()
