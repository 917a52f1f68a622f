"""Fetch benchmark: crawlspace's Fetcher against a bare aiohttp loop doing the same requests.

Both clients fetch the same list of URLs (20 KB pages, spread over `--hosts` loopback "hosts",
i.e. ports, with at most one connection per host as the crawler runs) with the same concurrency,
on uvloop, in this process; the server runs in another process so only client CPU is counted.
Runs alternate (bare, fetcher, fetcher, bare, ...) and medians are reported, so that the noise of
a shared machine hits both alike. The figure of merit is the ratio of CPU per fetch.

Usage: python bench/fetch/bench.py [--requests 5000] [--rounds 3] [--hosts 32] [--concurrency 32]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from crawlspace.dns import AddressGuard, Resolver  # noqa: E402
from crawlspace.fetch import Outcome  # noqa: E402
from crawlspace.fetch.fetcher import Fetcher  # noqa: E402

Client = Callable[[list[str], int, int], Awaitable[int]]


async def drive(urls: list[str], concurrency: int, fetch_one: Callable[[str], Awaitable[bool]]) -> int:
    """Fetch every URL with `concurrency` workers; returns how many succeeded."""
    queue = iter(urls)
    ok = 0

    async def worker() -> None:
        nonlocal ok
        for url in queue:
            if await fetch_one(url):
                ok += 1

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return ok


async def bare_aiohttp(urls: list[str], concurrency: int, per_host: int) -> int:
    connector = aiohttp.TCPConnector(limit=concurrency, limit_per_host=per_host)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def fetch_one(url: str) -> bool:
            async with session.get(url) as response:
                body = await response.read()
                return response.status == 200 and len(body) > 0

        return await drive(urls, concurrency, fetch_one)


async def crawlspace_fetcher(urls: list[str], concurrency: int, per_host: int) -> int:
    resolver = Resolver(use_system_hosts=False, nameservers=["127.0.0.1:9"])
    guard = AddressGuard(allow_networks=["127.0.0.0/8"])
    fetcher = Fetcher(
        resolver,
        guard,
        user_agent="crawlspace-bench/1.0 (+https://example.org/bot)",
        max_connections=concurrency,
        max_conn_per_host=per_host,
    )
    async with fetcher:

        async def fetch_one(url: str) -> bool:
            result = await fetcher.fetch(url)
            return result.outcome is Outcome.OK and len(result.content()) > 0

        ok = await drive(urls, concurrency, fetch_one)
    await resolver.close()
    return ok


def measure(client: Client, urls: list[str], concurrency: int, per_host: int) -> dict[str, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    ok = asyncio.run(client(urls, concurrency, per_host))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if ok != len(urls):
        raise SystemExit(f"{client.__name__}: only {ok} of {len(urls)} fetches succeeded")
    return {"fetches_per_s": len(urls) / wall, "cpu_ms_per_fetch": 1000 * cpu / len(urls)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--hosts", type=int, default=32)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--per-host", type=int, default=1)
    parser.add_argument("--page-bytes", type=int, default=20 * 1024)
    parser.add_argument("--json", action="store_true", help="print the result as JSON too")
    args = parser.parse_args()

    import uvloop

    uvloop.install()
    server = subprocess.Popen(
        [
            sys.executable,
            str(Path(__file__).with_name("server.py")),
            "--hosts",
            str(args.hosts),
            "--page-bytes",
            str(args.page_bytes),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        ports = json.loads(server.stdout.readline())["ports"]
        urls = [f"http://127.0.0.1:{ports[i % len(ports)]}/page/{i}" for i in range(args.requests)]
        clients: dict[str, Client] = {"bare aiohttp": bare_aiohttp, "crawlspace Fetcher": crawlspace_fetcher}
        samples: dict[str, list[dict[str, float]]] = {name: [] for name in clients}
        measure(bare_aiohttp, urls[: len(urls) // 10], args.concurrency, args.per_host)  # warm up imports, JIT-free
        for round_ in range(args.rounds):
            order = list(clients) if round_ % 2 == 0 else list(reversed(clients))
            for name in order:
                samples[name].append(measure(clients[name], urls, args.concurrency, args.per_host))
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(10)

    medians = {
        name: {key: statistics.median(s[key] for s in runs) for key in runs[0]} for name, runs in samples.items()
    }
    bare, ours = medians["bare aiohttp"], medians["crawlspace Fetcher"]
    ratio = ours["cpu_ms_per_fetch"] / bare["cpu_ms_per_fetch"]
    print(
        f"{args.requests} fetches of {args.page_bytes} B pages per run, {args.hosts} hosts, "
        f"concurrency {args.concurrency}, {args.per_host} connection(s) per host, median of {args.rounds} rounds"
    )
    print(f"{'client':<20} {'fetches/s':>10} {'CPU ms/fetch':>13}")
    for name, figures in medians.items():
        print(f"{name:<20} {figures['fetches_per_s']:>10.0f} {figures['cpu_ms_per_fetch']:>13.3f}")
    print(f"CPU per fetch, Fetcher / bare aiohttp: {ratio:.2f}x (target <= 1.30x)")
    if args.json:
        print(json.dumps({"medians": medians, "cpu_ratio": ratio, "samples": samples}))


if __name__ == "__main__":
    main()
