"""What one HTTP request costs the crawl's client, against bare aiohttp and a bare keep-alive client on llhttp.

    .venv/bin/python bench/throughput/client_cost.py [--requests 20000 --rounds 2 --body-bytes 40000]

Issue 17 asks whether a cheaper HTTP client than aiohttp would take the crawl's CPU per page down. This
measures the ceiling of that change apart from the rest of the crawl: a uvloop server (its own process)
answers every GET on 100 loopback addresses with one page of `--body-bytes` (Content-Length, keep-alive),
and three clients, each in a fresh process on uvloop with 64 requests in flight and one connection per
address, fetch `--requests` pages after a warm-up that opens the connections:

- `fetcher`: crawlspace's `Fetcher.fetch` (its own keep-alive client on llhttp since issue 17's tenth round,
  aiohttp before; with the crawl's body buffer, headers kept for the WARC record, the address guard, outcome
  and statistics);
- `aiohttp`: a bare `ClientSession.get` and `read()`, as configured by the fetcher (no cookies, no decoding);
- `llhttp`: a keep-alive `asyncio.Protocol` feeding httptools' parser (llhttp, as uvicorn uses): the least a
  client in Python can do per request.

Printed: CPU µs per request of the client process (getrusage), requests/s, per round and as medians, and
each client's cost as a ratio to the fetcher's. The server's CPU is left out: a crawler pays the server's
share nowhere.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.distributed.redis_server import free_port  # noqa: E402

ADDRESSES = 100
IN_FLIGHT = 64
CLIENTS = ("fetcher", "aiohttp", "llhttp")


def serve(port: int, body_bytes: int) -> None:
    import uvloop

    body = (b"<html><body>" + b"<p>word word <a href=/x>link</a> " * (body_bytes // 30 + 1))[:body_bytes]
    answer = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)

    class Answering(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.transport = transport
            self.pending = b""

        def data_received(self, data: bytes) -> None:
            self.pending += data
            while b"\r\n\r\n" in self.pending:
                _, self.pending = self.pending.split(b"\r\n\r\n", 1)
                self.transport.write(answer)  # type: ignore[attr-defined]

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for number in range(1, ADDRESSES + 1):
            await loop.create_server(Answering, f"127.0.0.{number}", port)
        print("ready", flush=True)
        await asyncio.Event().wait()

    uvloop.run(main())


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _drive(one: Callable[[int], Awaitable[None]], requests: int) -> tuple[float, float]:
    slots = asyncio.Semaphore(IN_FLIGHT)

    async def task(number: int) -> None:
        async with slots:
            await one(number)

    await asyncio.gather(*(task(number) for number in range(2 * ADDRESSES)))  # every connection open
    cpu, wall = _cpu(), time.perf_counter()
    await asyncio.gather(*(task(number) for number in range(requests)))
    return (_cpu() - cpu) / requests * 1e6, requests / (time.perf_counter() - wall)


def _url(port: int, number: int) -> str:
    return f"http://127.0.0.{number % ADDRESSES + 1}:{port}/p{number}"


async def _fetcher(port: int, requests: int) -> tuple[float, float]:
    from crawlspace.dns.guard import AddressGuard
    from crawlspace.dns.resolver import Resolver
    from crawlspace.fetch.fetcher import Fetcher

    guard = AddressGuard(allow_networks=["127.0.0.0/8"])
    async with Fetcher(Resolver(), guard, user_agent="client-cost", max_connections=IN_FLIGHT) as fetcher:

        async def one(number: int) -> None:
            result = await fetcher.fetch(_url(port, number))
            assert result.status == 200, result.error

        return await _drive(one, requests)


async def _aiohttp(port: int, requests: int) -> tuple[float, float]:
    import aiohttp

    connector = aiohttp.TCPConnector(limit=IN_FLIGHT, limit_per_host=1, use_dns_cache=False)
    jar = aiohttp.DummyCookieJar()
    async with aiohttp.ClientSession(connector=connector, auto_decompress=False, cookie_jar=jar) as session:

        async def one(number: int) -> None:
            async with session.get(_url(port, number), allow_redirects=False) as response:
                await response.read()
                assert response.status == 200

        return await _drive(one, requests)


async def _llhttp(port: int, requests: int) -> tuple[float, float]:
    import httptools

    class Connection(asyncio.Protocol):
        def __init__(self) -> None:
            self.parser = httptools.HttpResponseParser(self)
            self.headers: list[tuple[bytes, bytes]] = []
            self.body: list[bytes] = []
            self.done: asyncio.Future[bytes] | None = None

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.transport = transport

        def data_received(self, data: bytes) -> None:
            self.parser.feed_data(data)

        def on_header(self, name: bytes, value: bytes) -> None:
            self.headers.append((name, value))

        def on_body(self, body: bytes) -> None:
            self.body.append(body)

        def on_message_complete(self) -> None:
            assert self.done is not None
            self.done.set_result(b"".join(self.body))

        async def get(self, host: str, path: str) -> bytes:
            self.headers, self.body = [], []
            self.done = asyncio.get_running_loop().create_future()
            request = f"GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: client-cost\r\nAccept: */*\r\n\r\n"
            self.transport.write(request.encode())  # type: ignore[attr-defined]
            return await self.done

    loop = asyncio.get_running_loop()
    connections: dict[str, Connection] = {}
    locks: dict[str, asyncio.Lock] = {}

    async def one(number: int) -> None:
        host = f"127.0.0.{number % ADDRESSES + 1}"
        async with locks.setdefault(host, asyncio.Lock()):  # one request at a time per connection
            connection = connections.get(host)
            if connection is None:
                _, connection = await loop.create_connection(Connection, host, port)
                connections[host] = connection
            assert await connection.get(host, f"/p{number}")
            assert connection.parser.get_status_code() == 200

    return await _drive(one, requests)


def client(name: str, port: int, requests: int) -> None:
    import uvloop

    run: dict[str, Callable[[int, int], Coroutine[Any, Any, tuple[float, float]]]] = {
        "fetcher": _fetcher, "aiohttp": _aiohttp, "llhttp": _llhttp,
    }  # fmt: skip
    cpu_us, rate = uvloop.run(run[name](port, requests))
    print(f"{cpu_us:.2f} {rate:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--body-bytes", type=int, default=40_000)
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--client", choices=CLIENTS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None and args.client is None:
        serve(args.serve, args.body_bytes)
        return
    if args.client is not None:
        client(args.client, args.serve, args.requests)
        return
    port = free_port()
    me = [sys.executable, str(Path(__file__).resolve())]
    server = subprocess.Popen([*me, "--serve", str(port), "--body-bytes", str(args.body_bytes)], stdout=subprocess.PIPE)
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == b"ready"
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in CLIENTS}
        for round_number in range(1, args.rounds + 1):
            for name in CLIENTS:
                command = [*me, "--client", name, "--serve", str(port), "--requests", str(args.requests)]
                output = subprocess.run(command, check=True, capture_output=True, text=True, cwd=REPO).stdout
                cpu_us, rate = (float(value) for value in output.split())
                results[name].append((cpu_us, rate))
                print(f"round {round_number}  {name:8} {cpu_us:8.1f} µs CPU a request  {rate:8.0f} requests/s")
    finally:
        server.terminate()
        server.wait(10)
    medians: dict[str, Any] = {name: statistics.median(cpu for cpu, _ in runs) for name, runs in results.items()}
    print(f"\n{args.requests} requests of {args.body_bytes} bytes, {IN_FLIGHT} in flight, medians of {args.rounds}:")
    for name in CLIENTS:
        ratio = medians["fetcher"] / medians[name]
        print(f"  {name:8} {medians[name]:8.1f} µs CPU a request   the fetcher costs {ratio:.2f}x this")


if __name__ == "__main__":
    main()
