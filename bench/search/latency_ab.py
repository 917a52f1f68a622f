"""Query latency of this tree against another checkout's on the same index, in one run, rounds interleaved
(the machine is shared: what matters is the two figures taken under the same load, and their ratio).

    .venv/bin/python bench/search/latency_ab.py --index DIR --baseline /work/main [--rounds 3] [--queries 200]

DIR is an index of the generated pages (`profile_queries.py --index DIR` builds it: 100,000 pages, 1 shard,
4 segments). Each round runs each side in its own process (`--baseline` first on its sys.path for the
baseline), both over the same queries (bench_index.draw_queries, seeds 1, 2 and 4, and phrases of 2 and 3
words in a row of a random page), warming the page cache
with 20 queries first; a side prints p50/p95/p99 per kind of query, and the summary gives the median over
rounds of each side's p95 and the ratio.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
TREE = HERE.parents[1]
KINDS = (("1-term", 1, " "), ("2 terms, all", 2, " "), ("2 terms, any", 2, " OR "), ("4 terms, all", 4, " "),
         ("4 terms, any", 4, " OR "))  # fmt: skip

CHILD = r"""
import json, sys, time
import numpy as np
from crawlspace.index.layout import Index
queries = json.load(open(sys.argv[1]))
out = {}
with Index(sys.argv[2]) as index:
    for kind, texts in queries.items():
        for text in texts[:20]:
            index.search(text, 10)
        latencies = []
        for text in texts:
            started = time.perf_counter()
            index.search(text, 10)
            latencies.append(time.perf_counter() - started)
        out[kind] = [float(x) for x in np.percentile(np.array(latencies) * 1000, [50, 95, 99])]
print(json.dumps(out))
"""


def draw_phrases(documents: list, count: int, words: int) -> list[str]:
    from crawlspace.index import tokenize

    rng = np.random.default_rng(100 + words)
    out = []
    for _ in range(count):
        tokens = tokenize(documents[int(rng.integers(len(documents)))].text)
        start = int(rng.integers(len(tokens) - words))
        out.append(" ".join(tokens[start : start + words]))
    return out


def run_side(source: Path, queries: Path, index: Path) -> dict[str, list[float]]:
    code = f"import sys; sys.path.insert(0, {str(source)!r}); " + CHILD
    done = subprocess.run([sys.executable, "-c", code, str(queries), str(index)], capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(done.stderr)
    result: dict[str, list[float]] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--index", type=Path, required=True)
    parser.add_argument("--baseline", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--pages", type=int, default=100_000)
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    from bench_index import draw_queries
    from corpus import pages

    documents = pages(args.pages)
    queries = {
        kind: [joiner.join(q) for q in draw_queries(documents, args.queries, terms, seed=terms)]
        for kind, terms, joiner in KINDS
    }
    for words in (2, 3):  # phrases: words in a row of a random page, so at least that page has each
        queries[f"{words}-word phrase"] = [f'"{phrase}"' for phrase in draw_phrases(documents, args.queries, words)]
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as out:
        json.dump(queries, out)
    sides = {"baseline": args.baseline.resolve(), "this tree": TREE}
    p95: dict[str, dict[str, list[float]]] = {side: {kind: [] for kind in queries} for side in sides}
    for round_number in range(1, args.rounds + 1):
        for side, source in sides.items():
            figures = run_side(source, Path(out.name), args.index)
            for kind, (p50, p95_ms, p99) in figures.items():
                p95[side][kind].append(p95_ms)
                print(
                    f"round {round_number} {side:>9} {kind:>15}: p50 {p50:6.2f}  p95 {p95_ms:6.2f}  p99 {p99:6.2f} ms"
                )
            sys.stdout.flush()
    print("\nmedian p95 over rounds (ms): baseline / this tree / ratio")
    for kind in queries:
        base, new = float(np.median(p95["baseline"][kind])), float(np.median(p95["this tree"][kind]))
        print(f"  {kind:>15}: {base:7.2f} / {new:6.2f} / {base / new:5.1f} x")
    Path(out.name).unlink()


if __name__ == "__main__":
    main()
