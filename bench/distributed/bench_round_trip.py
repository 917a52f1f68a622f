"""What redis-py's `socket_timeout` costs a round trip: a pipeline of XADD + XLEN against a local
redis-server, N times, with `socket_timeout=10` and without, CPU time (process_time) per round trip.

With a socket timeout redis-py wraps every command's send in `asyncio.wait_for` (a task per command)
and every read in a timeout context; distributed.redislink.client has none (bench/README.md).

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


async def main(count: int, runs: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-round-trip-") as directory:
        server = RedisServer(Path(directory))
        server.start()
        try:
            for _ in range(runs):
                with_timeout = await cpu_per_round_trip(server.url, 10.0, count)
                without = await cpu_per_round_trip(server.url, None, count)
                print(f"socket_timeout=10: {with_timeout:.1f} us CPU a round trip; none: {without:.1f} us")
        finally:
            server.kill()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--round-trips", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    uvloop.install()
    asyncio.run(main(args.round_trips, args.runs))
