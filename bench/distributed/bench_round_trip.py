"""What a Redis round trip costs the client: a pipeline of XADD + XLEN against a local redis-server, N
times, CPU time (process_time) per round trip, three ways side by side: redis-py with `socket_timeout=10`,
redis-py without (distributed.redislink.client), and distributed.resp's link (the stream transport's).

With a socket timeout redis-py wraps every command's send in `asyncio.wait_for` (a task per command)
and every read in a timeout context; the link has none of redis-py's per-command machinery (bench/README.md).

Usage: python bench/distributed/bench_round_trip.py [--round-trips 5000] [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

import redis.asyncio
import uvloop

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from crawlspace.distributed.resp import RespLink  # noqa: E402
from tests.distributed.redis_server import RedisServer  # noqa: E402


async def cpu_per_round_trip(url: str, socket_timeout: float | None, count: int) -> float:
    """Microseconds of this process's CPU per pipelined round trip."""
    client = redis.asyncio.Redis.from_url(
        url, socket_connect_timeout=2.0, socket_timeout=socket_timeout, health_check_interval=5
    )
    await client.ping()
    started = time.process_time()
    for _ in range(count):
        pipe = client.pipeline(transaction=False)
        pipe.xadd("bench", {b"m": b"x" * 60}, maxlen=1000, approximate=True)
        pipe.xlen("bench")
        await pipe.execute()
    spent = time.process_time() - started
    await client.aclose()
    return spent / count * 1e6


async def link_cpu_per_round_trip(url: str, count: int) -> float:
    link = RespLink.from_url(url)
    await link.execute([("PING",)])
    started = time.process_time()
    for _ in range(count):
        await link.execute([("XADD", "bench", "MAXLEN", "~", 1000, "*", b"m", b"x" * 60), ("XLEN", "bench")])
    spent = time.process_time() - started
    link.close()
    return spent / count * 1e6


async def main(count: int, runs: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-round-trip-") as directory:
        server = RedisServer(Path(directory))
        server.start()
        try:
            for _ in range(runs):
                with_timeout = await cpu_per_round_trip(server.url, 10.0, count)
                without = await cpu_per_round_trip(server.url, None, count)
                link = await link_cpu_per_round_trip(server.url, count)
                print(f"us of CPU a round trip: redis-py socket_timeout=10 {with_timeout:.1f}, "
                      f"redis-py none {without:.1f}, resp link {link:.1f}")  # fmt: skip
        finally:
            server.kill()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--round-trips", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    uvloop.install()
    asyncio.run(main(args.round_trips, args.runs))
