"""A scripted HTTP server on 127.0.0.1 and a crawl against it, judged from the server's request log."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from crawlspace.config import CrawlConfig
from crawlspace.crawl.engine import CrawlEngine
from tests.dns.fake_dns import FakeDNS

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
HOST = "site.test"


@dataclass
class ScriptedSite:
    """Answers from a path -> handler table (404 otherwise) and logs every request path in order."""

    routes: dict[str, Handler]
    requests: list[str] = field(default_factory=list)
    times: list[float] = field(default_factory=list)  # monotonic arrival time of each request
    hosts: list[str] = field(default_factory=list)  # Host header of each request, without port

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(request.path_qs)
        self.times.append(time.monotonic())
        self.hosts.append(request.host.rsplit(":", 1)[0])
        handler = self.routes.get(request.path)
        if handler is None:
            return web.Response(status=404, text="not found")
        return await handler(request)

    def fetched(self, path: str, host: str = HOST) -> int:
        return sum(1 for got, on in zip(self.requests, self.hosts, strict=True) if got == path and on == host)


def page(html: str, status: int = 200, headers: dict[str, str] | None = None) -> Handler:
    async def handler(_: web.Request) -> web.StreamResponse:
        return web.Response(status=status, body=html.encode(), content_type="text/html", headers=headers)

    return handler


def raw(body: bytes, content_type: str = "text/plain", status: int = 200) -> Handler:
    async def handler(_: web.Request) -> web.StreamResponse:
        return web.Response(status=status, body=body, content_type=content_type)

    return handler


def redirect(location: str, status: int = 301) -> Handler:
    async def handler(_: web.Request) -> web.StreamResponse:
        return web.Response(status=status, headers={"Location": location})

    return handler


def sequence(*handlers: Handler) -> Handler:
    """The i-th request gets the i-th handler (the last one repeats)."""
    calls = 0

    async def handler(request: web.Request) -> web.StreamResponse:
        nonlocal calls
        chosen = handlers[min(calls, len(handlers) - 1)]
        calls += 1
        return await chosen(request)

    return handler


def by_host(handlers: dict[str, Handler]) -> Handler:
    """Dispatch on the Host header (without port): several sites on one server."""

    async def handler(request: web.Request) -> web.StreamResponse:
        return await handlers[request.host.rsplit(":", 1)[0]](request)

    return handler


BUSY_HOST = "busy.test"


def keep_busy(site: ScriptedSite, robots: Handler, pages: int = 12) -> str:
    """Add a chain of `pages` pages on BUSY_HOST (which the crawl must resolve too), so that the
    crawl has work while URLs of HOST wait; returns the seed path of the chain."""
    site.routes["/robots.txt"] = by_host({HOST: robots, BUSY_HOST: raw(b"")})
    for number in range(pages):
        site.routes[f"/busy/{number}"] = page(f'<a href="/busy/{number + 1}">next</a>')
    return "http://" + BUSY_HOST + ":{port}/busy/0"


def crawl(site: ScriptedSite, seeds: list[str], out: Path, **options: Any) -> tuple[dict[str, Any], str]:
    """Serve `site` on 127.0.0.1 (any port), crawl `seeds` (paths, or URLs with {origin}); stats and origin."""

    async def main() -> tuple[dict[str, Any], str]:
        app = web.Application()
        app.router.add_route("GET", "/{tail:.*}", site.handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        tcp = web.TCPSite(runner, "127.0.0.1", 0)
        await tcp.start()
        port = tcp._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        origin = f"http://{HOST}:{port}"
        settings: dict[str, Any] = {
            "min_delay": 0.0,
            "delay_factor": 0.0,
            "allow_private_addresses": True,
            "resolve": {HOST: "127.0.0.1", BUSY_HOST: "127.0.0.1"},
            "progress_interval": 30.0,
            "max_seconds": 30.0,
            "robots_retry_delay": 0.05,
        }
        settings.update(options)
        try:
            engine = CrawlEngine(CrawlConfig(**settings), out, live_progress=False)
            engine.add_seeds(
                [seed.format(origin=origin, port=port) if "{" in seed else origin + seed for seed in seeds]
            )
            stats = await engine.run()
        finally:
            await runner.cleanup()
        return stats.to_dict(), origin

    with FakeDNS() as dns:  # names not in `resolve` get NXDOMAIN from loopback, not from the machine's DNS server
        options = {"dns_servers": [dns.address], **options}
        return asyncio.run(main())
