"""Running the dashboard: in the foreground (`crawlspace serve`), or on a thread of its own beside a
crawl in the same process (`crawl --serve`, `demo --serve`).

Beside a crawl the dashboard gets its own thread and event loop, not a task on the crawl's loop:
its page renders and table scans then never sit between two turns of the crawl's dispatcher, and
it stays up when the crawl's loop ends (the demo keeps serving the finished crawl).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from crawlspace.serve.app import make_app
from crawlspace.serve.nodes import ClusterNodes
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


async def start(
    directory: Path, host: str, port: int, guard: Guard, nodes: NodeStatus | None = None
) -> tuple[web.AppRunner, Address]:
    """The dashboard of `directory` listening on host:port (0: a free port), and its address;
    `nodes`: the statuses of the cluster crawl `directory` is a node of."""
    view = CrawlView(directory, nodes=nodes)
    runner = web.AppRunner(make_app(view, guard), access_log=None, handle_signals=False)
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


def serve_forever(
    directory: Path,
    host: str,
    port: int,
    guard: Guard,
    announce: Callable[[Address], None],
    nodes: NodeStatus | None = None,
) -> None:
    async def main() -> None:
        runner, address = await start(directory, host, port, guard, nodes)
        announce(address)
        try:
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())


class BackgroundDashboard:
    """The dashboard on a thread of its own; `start` returns once it listens, `stop` ends it."""

    def __init__(self, directory: Path, host: str, port: int, guard: Guard, nodes: NodeStatus | None = None) -> None:
        self.directory, self.host, self.port, self.guard, self.nodes = directory, host, port, guard, nodes
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
                runner, self.address = await start(self.directory, self.host, self.port, self.guard, self.nodes)
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


@contextlib.contextmanager
def attached(
    directory: Path, port: int, *, host: str = "127.0.0.1", cluster_url: str | None = None
) -> Iterator[Address]:
    """The dashboard of the crawl in `directory` on its own thread for the duration of the block
    (`crawl --serve`, `demo --serve`); its URL is printed to stderr. `cluster_url`: the crawl is a
    node of that cluster (its nodes' rows on the overview)."""
    nodes = None if cluster_url is None else ClusterNodes.of_directory(cluster_url, directory)
    dashboard = BackgroundDashboard(directory, host, port, make_guard(host, None), nodes)
    address = dashboard.start()
    print(f"crawlspace: dashboard at {address.url}", file=sys.stderr, flush=True)
    try:
        yield address
    finally:
        dashboard.stop()
