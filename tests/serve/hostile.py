"""A tiny web on loopback whose pages carry script payloads in their titles, URLs, anchors and robots.txt:
what the dashboard must show as text and never run. Each payload would set `window.__pwned`."""

from __future__ import annotations

import asyncio
import html
import json
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from aiohttp import web

TITLE_PAYLOAD = "<script>window.__pwned = 'title'</script>Hostile title"
ANCHOR_PAYLOAD = "<img src=x onerror=\"window.__pwned = 'anchor'\">anchor text"
ATTRIBUTE_PAYLOAD = '" onerror="window.__pwned = \'attribute\'" x="'
URL_PAYLOAD_PATH = "/q'\"><svg onload=window.__pwned='url'>"
ROBOTS = "User-agent: *\nDisallow: /private<script>window.__pwned='robots'</script>\nCrawl-delay: 0.01\n"
HOSTILE_STRINGS = (TITLE_PAYLOAD, ANCHOR_PAYLOAD, ATTRIBUTE_PAYLOAD)


def _page(title: str, links: list[tuple[str, str]]) -> str:
    anchors = "".join(f'<a href="{href}">{html.escape(text)}</a> ' for href, text in links)
    head = f"<!doctype html><html><head><title>{title}</title></head>"
    return f"{head}<body><p>words about crawling {title}</p>{anchors}</body></html>"


async def _handle(request: web.Request) -> web.Response:
    path = request.path
    if path == "/robots.txt":
        return web.Response(text=ROBOTS, content_type="text/plain")
    if path == "/":
        body = _page(
            TITLE_PAYLOAD,
            [
                ("/second", ANCHOR_PAYLOAD),
                ("/third", ATTRIBUTE_PAYLOAD),
                (URL_PAYLOAD_PATH.replace('"', "%22").replace("<", "%3C").replace(">", "%3E"), "odd url"),
            ],
        )
    elif path == "/second":
        body = _page(html.escape(ATTRIBUTE_PAYLOAD), [("/", ANCHOR_PAYLOAD)])
    else:
        body = _page(f"page {path}", [("/", "home")])
    return web.Response(text=body, content_type="text/html")


@contextmanager
def hostile_site() -> Iterator[str]:
    """Serve the hostile pages on 127.0.0.1 from a thread of its own; yields the base URL."""
    with loopback_site(_handle) as port:
        yield f"http://127.0.0.1:{port}/"


@contextmanager
def loopback_site(handle: Callable[[web.Request], Awaitable[web.Response]]) -> Iterator[int]:
    """`handle` answering every GET on a free port of 127.0.0.1, from a thread of its own; yields the port."""
    ready = threading.Event()
    state: dict[str, object] = {}

    def run() -> None:
        async def main() -> None:
            app = web.Application()
            app.router.add_route("GET", "/{tail:.*}", handle)
            runner = web.AppRunner(app, access_log=None, handle_signals=False)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            state["port"] = runner.addresses[0][1]
            state["stop"] = stop = asyncio.Event()
            state["loop"] = asyncio.get_running_loop()
            ready.set()
            await stop.wait()
            await runner.cleanup()

        asyncio.run(main())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    ready.wait(10)
    try:
        port = state["port"]
        assert isinstance(port, int)
        yield port
    finally:
        loop = state["loop"]
        assert isinstance(loop, asyncio.AbstractEventLoop)
        stop = state["stop"]
        assert isinstance(stop, asyncio.Event)
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)


HOSTILE_HOST_NAMES = (
    "<script>window.__pwned='host'</script>.test",
    '"><img src=x onerror="window.__pwned=\'host-attribute\'">.test',
)
"""Host names no URL parser lets through, but a frontier report is a file: whatever it lists is shown."""


def add_hostile_hosts(directory: Path, count: int = 0) -> list[str]:
    """List HOSTILE_HOST_NAMES and `count` more hosts (`queued-N.test`) in the frontier's report of a
    crawl directory, as hosts with URLs queued and no fetch yet; gives every name it added."""
    path = directory / "hosts.json"
    report = json.loads(path.read_text())
    names = [*HOSTILE_HOST_NAMES, *(f"queued-{number:02d}.test" for number in range(count))]
    for number, name in enumerate(names):
        report["rows"].append(
            {"host": name, "status": "active", "queued": 10 + number, "in_flight": 0, "next_contact_in": 1.0,
             "delay": 1.5, "delay_cause": "min-delay", "crawl_delay": None, "failures": 0, "parks": 0,
             "last_fetch_seconds": None, "last_contact_ago": None, "address": None}
        )  # fmt: skip
    report["listed"] = len(report["rows"])
    path.write_text(json.dumps(report))
    return names
