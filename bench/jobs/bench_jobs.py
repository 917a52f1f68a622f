"""Seconds and peak RSS of each batch job (crawlspace.jobs) on a crawl of the simulated web: Dask's
synchronous scheduler, a LocalCluster of 1 and of 2 process workers, and a plain pandas/scipy version of the
same computation in one process (bench/jobs/plain.py).

    python bench/jobs/bench_jobs.py [--pages 20000] [--modes plain,sync,1,2] [--jobs dedup,near,graph,pagerank]

The crawl (hosts = pages / 20, seed 3, no trap) is made once into bench/out/jobs/<pages>/ and reused. Each
measurement runs in a fresh interpreter: wall seconds of the job alone (cluster start excluded, reported
apart), peak RSS of the driver process, and the largest peak RSS of a worker process (the kernel's
ru_maxrss of the reaped children), and CPU seconds of the whole process tree (interpreter start and imports
included). The pagerank rows read the graph job's output of the same mode.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
OUT = ROOT / "bench" / "out" / "jobs"
JOBS = ("dedup", "near", "graph", "pagerank")


def make_crawl(pages: int) -> Path:
    from crawlspace.simweb import SimWeb, SimWebConfig, serve_in_background

    root = OUT / str(pages)
    crawl = root / "crawl"
    if (crawl / "stats.json").exists():
        return crawl
    shutil.rmtree(root, ignore_errors=True)
    config = SimWebConfig(hosts=max(pages // 20, 10), seed=3, mean_pages_per_host=20, robots_crawl_delay=0.0)
    web = SimWeb.generate(config.replace(include_trap=False, max_pages_per_host=400))
    started = time.monotonic()
    with serve_in_background(web, root / "server", seeds=20) as server:
        command = [
            sys.executable, "-m", "crawlspace", "crawl", str(server.seeds_file), "--out", str(crawl),
            "--hosts-file", str(server.hosts_file), "--allow-private-addresses", "--min-delay", "0",
            "--no-progress", "--concurrency", "128", "--max-pages", str(pages),
        ]  # fmt: skip
        subprocess.run(command, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    print(f"crawled {json.loads((crawl / 'stats.json').read_text())['pages_fetched']} pages in "
          f"{time.monotonic() - started:.0f} s into {crawl}", file=sys.stderr)  # fmt: skip
    return crawl


def peak_mb(who: int) -> float:
    return resource.getrusage(who).ru_maxrss / 1024


def measure(crawl: Path, job: str, mode: str, out: Path) -> dict[str, Any]:
    """One job in one mode, in this (fresh) process."""
    started = time.monotonic()
    cluster_seconds = 0.0
    if mode == "plain":
        sys.path.insert(0, str(Path(__file__).parent))
        import plain

        if job == "pagerank":
            built = plain.graph(crawl)
            started = time.monotonic()
            result = plain.pagerank(built["frame"], built["nodes"])
        else:
            result = getattr(plain, job)(crawl)
            result.pop("frame", None)
    else:
        from crawlspace.jobs import run

        if mode == "sync":
            result = run(crawl, only=[job], out=out)[job]
        else:
            from distributed import Client, LocalCluster

            with (
                LocalCluster(
                    n_workers=int(mode), threads_per_worker=1, processes=True, dashboard_address=None,
                    memory_limit="4GiB",
                ) as cluster,
                Client(cluster) as client,
            ):  # fmt: skip
                cluster_seconds = time.monotonic() - started
                started = time.monotonic()
                result = run(crawl, client=client, only=[job], out=out)[job]
                seconds = time.monotonic() - started
            return {"seconds": seconds, "cluster_start": cluster_seconds, **_peaks(), "result": _brief(result)}
    return {"seconds": time.monotonic() - started, "cluster_start": 0.0, **_peaks(), "result": _brief(result)}


def _peaks() -> dict[str, float]:
    """Peak RSS of this process and of the largest reaped child; CPU seconds of both (the machine may be
    shared: CPU time is the figure other load does not inflate much)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "driver_mb": peak_mb(resource.RUSAGE_SELF),
        "worker_mb": peak_mb(resource.RUSAGE_CHILDREN),
        "cpu_seconds": own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime,
    }


def _brief(result: dict[str, Any]) -> dict[str, Any]:
    keys = ("clusters", "duplicate_pages", "pairs", "verified_pairs", "nodes", "edges", "rounds")
    return {key: result[key] for key in keys if key in result}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=20_000)
    parser.add_argument("--modes", default="plain,sync,1,2")
    parser.add_argument("--jobs", default=",".join(JOBS))
    parser.add_argument("--one", nargs=3, metavar=("CRAWL", "JOB", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        crawl, job, mode = args.one
        out = OUT / f"{args.pages}" / f"out-{mode}"
        print(json.dumps(measure(Path(crawl), job, mode, out)))
        return
    crawl = make_crawl(args.pages)
    modes = args.modes.split(",")
    jobs = args.jobs.split(",")
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for job in jobs:
        for mode in modes:
            command = [sys.executable, __file__, "--pages", str(args.pages), "--one", str(crawl), job, mode]
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                print(f"{job} {mode}: failed\n{done.stderr[-2000:]}", file=sys.stderr)
                continue
            rows[job, mode] = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"{job:9} {mode:6} {json.dumps(rows[job, mode])}", file=sys.stderr)
    names = {"plain": "pandas/scipy", "sync": "dask sync", "1": "1 worker", "2": "2 workers"}
    print(f"\n{'job':9} " + " ".join(f"{names.get(mode, mode):>32}" for mode in modes))
    print(f"{'':9} " + " ".join(f"{'s / CPU s / driver / worker MB':>32}" for _ in modes))
    for job in jobs:
        cells = []
        for mode in modes:
            row = rows.get((job, mode))
            cells.append(
                f"{row['seconds']:6.1f} / {row.get('cpu_seconds', 0):6.1f} / {row['driver_mb']:5.0f} / "
                f"{row['worker_mb']:5.0f}"
                if row
                else "-"
            )
        print(f"{job:9} " + " ".join(f"{cell:>32}" for cell in cells))
    starts = [row["cluster_start"] for row in rows.values() if row["cluster_start"]]
    if starts:
        print(f"cluster start (not counted above): {min(starts):.1f}-{max(starts):.1f} s")


if __name__ == "__main__":
    main()
