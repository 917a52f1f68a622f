"""Frontier benchmark: push and pop throughput, peak RSS and disk per URL, against a naive heap.

Each (implementation, size) runs in its own subprocess so that peak RSS is its own. The workload:
N URLs (~65 characters) over H hosts, hosts drawn uniformly at random (seeded), added in batches
of 100 (one page's links) with `add_many`, plus a first slice through `add` one URL at a time;
then every URL is taken with acquire and given back with release (fetch time 50 ms) on a fake
clock that jumps to `next_contact()` whenever nothing is due, so the figure is the frontier's own
cost per URL including back-queue refills and politeness bookkeeping, not politeness waits.
Rates are per CPU second of the process (user + system, `time.process_time`), not wall time: the
machines these run on are shared, and CPU time is what "on one core" means; disk writes go to the
page cache and their system time is counted (the checkpoint's fsync waits are reported apart).
With --per-ip the hosts resolve (instantly, in the on_activate callback) to H/2 addresses.

The baseline is the naive frontier IIR §20.2.3 warns against: one heap of (priority, seq, URL)
in memory, popped in order with no politeness at all. It shows what the disk and the politeness
cost, and how memory grows when URLs live in RAM.

Run:  python bench/frontier/bench_frontier.py                      (1 M and 10 M URLs)
      python bench/frontier/bench_frontier.py --sizes 200000       (a quick look)
"""

from __future__ import annotations

import argparse
import functools
import gc
import heapq
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from crawlspace.frontier import Frontier, FrontierEntry, Politeness  # noqa: E402

BATCH = 100
SINGLE_ADDS = 200_000


def url_batches(n: int, hosts: int, seed: int, workload: str) -> Any:
    """Batches of FrontierEntry; generated lazily so the benchmark itself holds no URL list.

    uniform: every URL's host drawn at random. clustered: runs of one host (geometric, mean 20),
    as a breadth-first crawl discovers them (most links stay on their site): back queues then
    absorb long runs and spill to disk."""
    rng = random.Random(seed)
    randrange = rng.randrange
    made = 0
    host = randrange(hosts)
    while made < n:
        size = min(BATCH, n - made)
        batch = []
        for i in range(made, made + size):
            if workload == "uniform" or rng.random() < 0.05:
                host = randrange(hosts)
            url = f"http://www.site{host}.example.com/section/{i}/page-{randrange(1_000_000)}.html"
            batch.append(FrontierEntry(url, 1, 0))
        yield batch
        made += size


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def directory_bytes(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            total += os.stat(os.path.join(root, name)).st_blocks * 512
    return total


class FakeClock:
    """Time that jumps; read through a C-level callable so the clock costs what time.monotonic does."""

    def __init__(self) -> None:
        self.now = 0.0
        self.read = functools.partial(getattr, self, "now")


def run_frontier(
    n: int, hosts: int, back_queues: int, per_ip: bool, workdir: Path, workload: str = "uniform"
) -> dict[str, Any]:
    clock = FakeClock()
    holder: list[Frontier] = []
    addresses = [f"10.{i // 256}.{i % 256}.1" for i in range(hosts // 2)]

    def resolve(host: str) -> None:  # a stand-in for the engine's DNS prefetch: H/2 addresses
        holder[0].set_host_address(host, addresses[hash(host) % len(addresses)])

    frontier = Frontier.open(
        workdir / "frontier",
        Politeness(min_delay=1.0, delay_factor=10.0, max_delay=60.0, per_ip=per_ip),
        fresh=True,
        clock=clock.read,
        back_queues=back_queues,
        on_activate=resolve if per_ip else None,
    )
    holder.append(frontier)
    url_bytes = 0
    add_time = single_time = 0.0
    single = 0
    perf = time.process_time  # CPU seconds: robust on a shared machine (see the README)
    for batch in url_batches(n, hosts, seed=1, workload=workload):
        url_bytes += sum(len(entry.url) for entry in batch)
        if single < SINGLE_ADDS:
            started = perf()
            for entry in batch:
                frontier.add(entry)
            single_time += perf() - started
            single += len(batch)
            continue
        started = perf()
        frontier.add_many(batch)
        add_time += perf() - started
    started = perf()
    frontier.checkpoint()
    checkpoint_time = perf() - started
    disk = directory_bytes(workdir / "frontier")
    rss_after_push = peak_rss_mb()
    gc.collect()
    handed = 0
    acquire, release, next_contact = frontier.acquire, frontier.release, frontier.next_contact
    started = perf()
    while handed < n:
        lease = acquire()
        if lease is None:
            wake = next_contact()
            if wake is None:
                raise RuntimeError(f"frontier stuck with {len(frontier)} URLs")
            clock.now = wake
            continue
        release(lease, 0.05)
        handed += 1
    pop_time = perf() - started
    assert len(frontier) == 0
    frontier.close()
    return {
        "urls": n,
        "adds_per_s": (n - single) / add_time if add_time else None,
        "single_adds_per_s": single / single_time if single_time else None,
        "acquire_release_per_s": n / pop_time,
        "checkpoint_s": checkpoint_time,
        "peak_rss_after_push_mb": rss_after_push,
        "peak_rss_mb": peak_rss_mb(),
        "disk_bytes": disk,
        "url_text_bytes": url_bytes,
        "disk_per_url": disk / n,
        "disk_beyond_url_text_per_url": (disk - url_bytes) / n,
        "fake_seconds": clock.now,
        "stats": frontier.stats.to_dict(),
    }


def run_baseline(n: int, hosts: int, workload: str = "uniform") -> dict[str, Any]:
    heap: list[tuple[int, int, FrontierEntry]] = []
    push, pop = heapq.heappush, heapq.heappop
    perf = time.process_time  # CPU seconds: robust on a shared machine (see the README)
    add_time = 0.0
    seq = 0
    url_bytes = 0
    for batch in url_batches(n, hosts, seed=1, workload=workload):
        url_bytes += sum(len(entry.url) for entry in batch)
        started = perf()
        for entry in batch:
            seq += 1
            push(heap, (1, seq, entry))
        add_time += perf() - started
    rss_after_push = peak_rss_mb()
    started = perf()
    taken = 0
    while heap:
        pop(heap)
        taken += 1
    pop_time = perf() - started
    assert taken == n
    return {
        "urls": n,
        "adds_per_s": n / add_time,
        "single_adds_per_s": n / add_time,
        "acquire_release_per_s": n / pop_time,
        "peak_rss_after_push_mb": rss_after_push,
        "peak_rss_mb": peak_rss_mb(),
        "disk_bytes": 0,
        "url_text_bytes": url_bytes,
    }


def worker(args: argparse.Namespace) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="bench-frontier-", dir=args.tmp))
    try:
        if args.worker == "frontier":
            result = run_frontier(args.urls, args.hosts, args.back_queues, args.per_ip, workdir, args.workload)
        else:
            result = run_baseline(args.urls, args.hosts, args.workload)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(json.dumps(result))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000000,10000000", help="comma-separated URL counts")
    parser.add_argument("--hosts", type=int, default=100_000)
    parser.add_argument("--back-queues", type=int, default=768, help="B (3 x 256 concurrent fetches)")
    parser.add_argument("--per-ip", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--workload", choices=["uniform", "clustered"], default="uniform")
    parser.add_argument("--tmp", default=None, help="directory for the frontier's files (default: system temp)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "frontier.json")
    parser.add_argument("--worker", choices=["frontier", "baseline"], help=argparse.SUPPRESS)
    parser.add_argument("--urls", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    results: list[dict[str, Any]] = []
    for size in (int(s) for s in args.sizes.split(",")):
        for kind in ("frontier", "baseline"):
            command = [
                sys.executable,
                __file__,
                "--worker",
                kind,
                "--urls",
                str(size),
                "--hosts",
                str(args.hosts),
                "--back-queues",
                str(args.back_queues),
                "--per-ip" if args.per_ip else "--no-per-ip",
                "--workload",
                args.workload,
            ]
            if args.tmp:
                command += ["--tmp", args.tmp]
            started = time.perf_counter()
            done = subprocess.run(command, check=True, capture_output=True, text=True)
            result = json.loads(done.stdout.strip().splitlines()[-1])
            result["kind"] = kind
            result["wall_s"] = time.perf_counter() - started
            results.append(result)
            print(f"{kind:9} {size:>11,} URLs done in {result['wall_s']:.0f} s", file=sys.stderr)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    summary = {
        "workload": args.workload,
        "hosts": args.hosts,
        "back_queues": args.back_queues,
        "per_ip": args.per_ip,
        "results": results,
    }
    args.out.write_text(json.dumps(summary, indent=2))
    print(report(results, args))


def report(results: list[dict[str, Any]], args: argparse.Namespace) -> str:
    lines = [
        f"{args.workload} workload, hosts {args.hosts:,}, B = {args.back_queues}, "
        f"per-IP {'on' if args.per_ip else 'off'}, "
        f"Python {sys.version.split()[0]}; rates per CPU second",
        "",
        "| URLs | implementation | add_many/s | add/s | acquire+release/s | peak RSS MB | disk B/URL "
        "| disk beyond URL text B/URL |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        disk = f"{r['disk_per_url']:.1f}" if r["kind"] == "frontier" else "-"
        beyond = f"{r['disk_beyond_url_text_per_url']:.1f}" if r["kind"] == "frontier" else "-"
        lines.append(
            f"| {r['urls']:,} | {r['kind']} | {r['adds_per_s']:,.0f} | {r['single_adds_per_s']:,.0f} | "
            f"{r['acquire_release_per_s']:,.0f} | {r['peak_rss_mb']:.0f} | {disk} | {beyond} |"
        )
    by_size: dict[int, dict[str, dict[str, Any]]] = {}
    for r in results:
        by_size.setdefault(r["urls"], {})[r["kind"]] = r
    lines.append("")
    for size, pair in by_size.items():
        if "frontier" in pair and "baseline" in pair:
            f, b = pair["frontier"], pair["baseline"]
            lines.append(
                f"{size:,} URLs, frontier / baseline: add_many x{f['adds_per_s'] / b['adds_per_s']:.2f}, "
                f"acquire+release x{f['acquire_release_per_s'] / b['acquire_release_per_s']:.2f}, "
                f"peak RSS x{f['peak_rss_mb'] / b['peak_rss_mb']:.2f}; checkpoint {f['checkpoint_s']:.2f} s"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
