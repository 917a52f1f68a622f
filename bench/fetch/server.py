"""The page server of the fetch benchmark: keep-alive HTTP/1.1 on loopback, one fixed page per
request, as little CPU as possible (a raw asyncio Protocol on uvloop). It runs in its own process,
so its CPU is not charged to the clients being measured.

Usage: python bench/fetch/server.py --hosts 32 --page-bytes 20480
Prints one JSON line {"ports": [...]} once listening, then serves until stdin closes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

try:
    import uvloop
except ImportError:  # pragma: no cover
    uvloop = None


def make_page(size: int) -> bytes:
    links = "".join(f'<a href="/page/{i}">page {i}</a>\n' for i in range(40))
    head = f"<html><head><title>bench</title></head><body>{links}<p>"
    filler = "lorem ipsum dolor sit amet " * (size // 27 + 1)
    body = (head + filler)[: size - len("</p></body></html>")] + "</p></body></html>"
    return body.encode()


class PageProtocol(asyncio.Protocol):
    def __init__(self, response: bytes) -> None:
        self.response = response
        self.buffer = b""
        self.transport: asyncio.WriteTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        count = self.buffer.count(b"\r\n\r\n")
        if count:
            self.buffer = self.buffer[self.buffer.rfind(b"\r\n\r\n") + 4 :]
            assert self.transport is not None
            self.transport.write(self.response * count)


async def main(hosts: int, page_bytes: int) -> None:
    page = make_page(page_bytes)
    response = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n"
        + f"Content-Length: {len(page)}\r\n".encode()
        + b"Connection: keep-alive\r\n\r\n"
        + page
    )
    loop = asyncio.get_running_loop()
    servers = [
        await loop.create_server(lambda: PageProtocol(response), "127.0.0.1", 0, backlog=1024) for _ in range(hosts)
    ]
    ports = [server.sockets[0].getsockname()[1] for server in servers]
    print(json.dumps({"ports": ports}), flush=True)
    await loop.run_in_executor(None, sys.stdin.read)  # serve until the parent closes our stdin


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--hosts", type=int, default=32)
    parser.add_argument("--page-bytes", type=int, default=20 * 1024)
    args = parser.parse_args()
    if uvloop is not None:
        uvloop.install()
    asyncio.run(main(args.hosts, args.page_bytes))
