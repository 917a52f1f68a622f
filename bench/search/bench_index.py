"""The search index on generated simweb pages: tokenizing, building, size, query latency pruned and
exhaustive (issue 19's targets: index 20,000 pages a minute on 2 cores; p95 under 20 ms for 2-term
queries on 100,000 pages).

    .venv/bin/python bench/search/bench_index.py [--pages 100000] [--shards 1,8] [--queries 200]
"""

from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus import pages

from crawlspace.index.layout import Index, build_index
from crawlspace.index.segment import analyze
from crawlspace.index.tokens import tokenize

SEARCH_VENV = Path(__file__).resolve().parents[1] / ".venv-search"
"""The other search libraries the benchmarks compare with (bm25s, tantivy) live here, never in the project."""


def search_venv_python(module: str, *packages: str) -> Path:
    """The python of bench/.venv-search, made on first use, with `packages` installed unless `module` imports."""
    python = SEARCH_VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(SEARCH_VENV)], check=True)
    if subprocess.run([str(python), "-c", f"import {module}"], capture_output=True).returncode:
        subprocess.run([str(python), "-m", "pip", "install", "-q", *packages], check=True)
    return python


def draw_queries(documents: list, count: int, terms: int, seed: int) -> list[list[str]]:
    """Terms of one random page each (so a conjunctive query has at least that page)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        words = tokenize(documents[int(rng.integers(len(documents)))].text)
        out.append([words[int(i)] for i in rng.choice(len(words), size=terms, replace=False)])
    return out


def percentiles(values: list[float]) -> str:
    p50, p95, p99 = np.percentile(np.array(values) * 1000, [50, 95, 99])
    return f"p50 {p50:6.2f}  p95 {p95:6.2f}  p99 {p99:6.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", type=int, default=100_000)
    parser.add_argument("--shards", default="1,8")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--k", type=int, default=10)
    args = parser.parse_args()

    started = time.perf_counter()
    documents = pages(args.pages)
    text_bytes = sum(len(d.text.encode()) + len(d.title.encode()) + len(d.anchor.encode()) for d in documents)
    print(f"{args.pages} pages generated in {time.perf_counter() - started:.1f} s, {text_bytes / 1e6:.1f} MB of text")

    sample = documents[: min(5000, len(documents))]
    started = time.process_time()
    tokens = sum(sum(len(f) for f in analyze(d).fields) for d in sample)
    elapsed = time.process_time() - started
    print(
        f"tokenize: {len(sample) / elapsed:,.0f} pages/s, {tokens / elapsed / 1e6:.2f} M tokens/s (one core, CPU time)"
    )

    for shards in [int(s) for s in args.shards.split(",")]:
        directory = Path(tempfile.mkdtemp(prefix=f"bench-index-{shards}-"))
        try:
            started, cpu = time.perf_counter(), time.process_time()
            build_index(documents, directory, shards=shards)
            wall, cpu = time.perf_counter() - started, time.process_time() - cpu
            size = sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())
            started = time.perf_counter()
            with Index(directory) as index:
                opened = time.perf_counter() - started
                postings = sum(s.posting_count for s in index.segments)
                occurrences = sum(int(s.field_lengths.sum()) for s in index.segments)
                parts = {"doc_gaps": 0, "frequencies": 0, "positions": 0}
                for segment in index.segments:
                    for key, value in segment.size_bytes().items():
                        if key in parts:
                            parts[key] += value
                print(
                    f"\nshards {shards} ({len(index.segments)} segments): build {args.pages / wall:,.0f} pages/s wall"
                    f" ({args.pages / wall * 60:,.0f}/min; one process), {cpu:.1f} CPU s;"
                    f" peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB"
                )
                print(
                    f"  size {size / 1e6:.1f} MB = {size / text_bytes:.2f} x the text; {size / postings:.2f} B/posting"
                    f" ({postings:,} postings), {size / occurrences:.2f} B per term occurrence;"
                    f" per posting: gaps {parts['doc_gaps'] / postings:.2f},"
                    f" freqs {parts['frequencies'] / postings:.2f},"
                    f" positions {parts['positions'] / postings:.2f}"
                )
                print(f"  open (map, check, block bounds): {opened:.2f} s")
                for terms in (1, 2, 4):
                    queries = draw_queries(documents, args.queries, terms, seed=terms)
                    for mode, joiner in (("and", " "), ("or", " OR ")):
                        if terms == 1 and mode == "or":
                            continue
                        line = []
                        pruned_hits: list[list[object]] = []
                        for prune in (True, False):
                            latencies, scored, total = [], 0, 0
                            for number, query in enumerate(queries):
                                started = time.perf_counter()
                                result = index.search(joiner.join(query), args.k, prune=prune)
                                latencies.append(time.perf_counter() - started)
                                if prune:
                                    pruned_hits.append(list(result.hits))
                                elif result.hits != pruned_hits[number]:  # pruning must never change a result
                                    raise SystemExit(f"pruned and exhaustive top {args.k} differ for {query}")
                                scored += result.counters.postings_scored
                                total += result.counters.postings_total
                            name = "pruned" if prune else "exhaustive"
                            line.append(
                                f"{name:>12}: {percentiles(latencies)},"
                                f" scored {scored / max(total, 1):5.1%} of postings"
                            )
                        print(f"  {terms}-term {mode:>3} " + "\n             ".join(line))
        finally:
            shutil.rmtree(directory)


if __name__ == "__main__":
    main()
