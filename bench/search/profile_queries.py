"""Where a query's time goes: 2-term queries on the generated pages, timed, then under cProfile.

    .venv/bin/python bench/search/profile_queries.py [--pages 100000] [--index DIR] [--mode and|or]

`--index DIR` keeps the built index there (built when DIR has no manifest), so that repeated runs
profile the same index without building it again.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_index import draw_queries, percentiles
from corpus import pages

from crawlspace.index.layout import MANIFEST, Index, build_index
from crawlspace.index.search import search_segments


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", type=int, default=100_000)
    parser.add_argument("--index", type=Path, default=None)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--terms", type=int, default=2)
    parser.add_argument("--mode", choices=["and", "or"], default="and")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    directory = args.index or Path(tempfile.mkdtemp(prefix="profile-index-"))
    documents = pages(args.pages)
    if not (directory / MANIFEST).is_file():
        started = time.perf_counter()
        build_index(documents, directory, shards=1)
        print(f"built in {time.perf_counter() - started:.1f} s")
    joiner = " " if args.mode == "and" else " OR "
    queries = [joiner.join(q) for q in draw_queries(documents, args.queries, args.terms, 2)]
    with Index(directory, threads=args.threads) as index:
        for query in queries[:20]:
            index.search(query, 10)  # warm the page cache
        latencies = []
        for query in queries:
            started = time.perf_counter()
            index.search(query, 10)
            latencies.append(time.perf_counter() - started)
        print(f"{args.terms}-term {args.mode}: {percentiles(latencies)} ({len(index.segments)} segments)")
        slowest = np.argsort(latencies)[-5:]
        for i in slowest:
            print(f"  {latencies[i] * 1000:6.1f} ms  {queries[i]}")
        profile = cProfile.Profile()  # it sees one thread: the segments searched in this one, one after another
        profile.enable()
        for query in queries:
            search_segments(index.searchers, query, 10)
        profile.disable()
    out = io.StringIO()
    pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(25)
    print(out.getvalue())


if __name__ == "__main__":
    main()
