"""Where a cluster node's CPU goes: a 2-node cluster crawl of one simulated web with both nodes under the
py-spy sampling profiler (`py-spy record --format raw`, collapsed stacks), then each node's samples
attributed to the stage that was running (the innermost frame that names one).

The question it answers is issue 16's: what the Redis transport costs a node beyond the crawl itself
(bench.py measures the total, +0.6 CPU-ms/page over the socketpair mesh).

Usage: python bench/distributed/profile_node.py [--hosts 300] [--pages-per-host 30] [--rate 200]
(needs py-spy: pip install py-spy; redis-server on PATH or /usr/bin)
"""

from __future__ import annotations

import argparse
import collections
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import crawl_command, wait_for_the_crawl  # noqa: E402  (bench/distributed/bench.py: the same crawl command)
from crawlspace.simweb import SimWeb, SimWebConfig, serve_in_background  # noqa: E402
from tests.distributed.redis_server import RedisServer  # noqa: E402

# (label, substring of a py-spy frame "function (package/file.py:line)"): the innermost frame that matches
# one decides, the first entry matching it names the stage
STAGES = [
    ("transport: redis-py client", "(redis/"),
    ("transport: crawlspace.distributed", "crawlspace/distributed/"),
    ("content/near-duplicate check", "crawlspace/seen/"),
    ("storage (WARC, crawl table)", "crawlspace/store/"),
    ("fetch (aiohttp, DNS)", "(aiohttp/"),
    ("fetch (aiohttp, DNS)", "crawlspace/fetch/"),
    ("fetch (aiohttp, DNS)", "crawlspace/dns/"),
    ("parse", "crawlspace/parse/"),
    ("frontier", "crawlspace/frontier/"),
    ("URL functions and filters", "crawlspace/urls/"),
    ("robots.txt", "crawlspace/robots/"),
    ("engine, links, journal", "crawlspace/crawl/"),
    ("start-up (imports)", "<frozen importlib"),
    ("asyncio / uvloop event loop", "(asyncio/"),
    ("asyncio / uvloop event loop", "uvloop"),
]


def stage_of(stack: str) -> str:
    frames = stack.split(";")
    for frame in reversed(frames):
        for label, needle in STAGES:
            if needle in frame:
                return label
    return "other"


def attribute(raw: Path) -> collections.Counter[str]:
    counts: collections.Counter[str] = collections.Counter()
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, number = line.rpartition(" ")
        if stack and number.isdigit():
            counts[stage_of(stack)] += int(number)
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=300)
    parser.add_argument("--pages-per-host", type=float, default=30.0)
    parser.add_argument("--rate", type=int, default=200, help="py-spy samples per second")
    args = parser.parse_args()
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    web = SimWeb.generate(
        SimWebConfig(hosts=args.hosts, seed=7, mean_pages_per_host=args.pages_per_host, include_trap=False)
    )
    base = Path(tempfile.mkdtemp(prefix="crawlspace-profile-"))
    with serve_in_background(web, base / "web", seeds=20) as running:
        server = RedisServer(base / "redis")
        server.start()
        try:
            processes = []
            for node in range(2):
                command = crawl_command(running, base / f"node-{node}")
                command += ["--cluster", server.url, "--node", str(node), "--nodes", "2"]
                if node == 0:
                    command += [str(running.seeds_file), "--allow-private-addresses", "--min-delay", "0"]
                profile = base / f"node-{node}.raw"
                spy = [py_spy, "record", "--format", "raw", "--rate", str(args.rate), "-o", str(profile), "--"]
                quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
                processes.append(subprocess.Popen([*spy, *command], **quiet))
                if node == 0:
                    wait_for_the_crawl(server.url)
            for process in processes:
                process.wait()
        finally:
            server.kill()
    for node in range(2):
        counts = attribute(base / f"node-{node}.raw")
        total = sum(counts.values()) or 1
        print(f"node {node}: {total} samples")
        for label, number in counts.most_common():
            print(f"  {label:40s} {100 * number / total:5.1f} %")
    print(f"profiles: {base}/node-*.raw")


if __name__ == "__main__":
    main()
