"""crawlspace's index against tantivy on the same pages and the same tokens, same machine, same run.

Pages are generated simweb text (bench/search/corpus.py, text field only: tantivy's BM25 is per field);
both sides index crawlspace's tokens (tantivy through its whitespace tokenizer), crawlspace in one
process with `build_index` (1 shard), tantivy with one indexing thread (`--threads`). Then 1-, 2- and
4-term queries (terms of a random page), all terms required and any term, top 10 on each side:
latency p50/p95/p99 and the ratio to tantivy, and whether the top 10 agree. tantivy multiplies BM25
by (k1 + 1) = 2.2 and keeps each document's length as a one-byte code (exact below 40 terms,
approximate above), so its scores are 2.2 x crawlspace's up to that rounding, and documents whose
scores are that close may swap places: the comparison says how many top-10 lists are identical,
identical as sets, and how far the scores' ratio strays from 2.2. tantivy is installed on first use
into bench/.venv-search, never a dependency of crawlspace.

`--quantized` (this benchmark only): crawlspace scores with each document's length rounded down to
tantivy's one-byte code (`tantivy_length`, Lucene's SmallFloat.intToByte4 table) and every posting
scored (the block bounds were computed with exact lengths), which should give tantivy's top 10 and
its scores / 2.2 to tantivy's f32 precision: the check that the two BM25s differ by nothing else.

    .venv/bin/python bench/search/compare_tantivy.py [--pages 100000] [--queries 200] [--threads 1] [--quantized]
"""

from __future__ import annotations

import argparse
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_index import draw_queries, percentiles, search_venv_python
from corpus import pages

from crawlspace.index.layout import Index, build_index
from crawlspace.index.segment import IndexDocument
from crawlspace.index.tokens import tokenize

HERE = Path(__file__).resolve().parent


def tantivy_lengths() -> np.ndarray:
    """The 256 lengths tantivy's field norm byte decodes to (Lucene's SmallFloat.byte4ToInt): 0-23
    exactly, then 3 bits of mantissa."""
    table = []
    for code in range(256):
        if code < 24:
            table.append(code)
            continue
        bits, shift = (code - 24) & 7, ((code - 24) >> 3) - 1
        table.append(24 + (bits if shift < 0 else (bits | 8) << shift))
    return np.array(table, dtype=np.int64)


def tantivy_length(lengths: np.ndarray) -> np.ndarray:
    """Each length as tantivy keeps it: the largest table value not above it."""
    table = tantivy_lengths()
    return table[np.searchsorted(table, lengths, side="right") - 1].astype(np.uint32)


def agrees_up_to_ties(ours: list[tuple[int, float]], top: list[tuple[int, float]], tolerance: float) -> bool:
    """The same scores rank by rank (crawlspace's times 2.2, to `tolerance` x max(1, score): tantivy computes
    in f32, whose ln(1 + x) for the idf of a word in most pages, x ~ 1e-4, keeps only 3-4 digits of a score
    that small) and the same documents but for the order of equal scores and which of the documents tied at
    the 10th score made the list."""
    if len(ours) != len(top):
        return False
    if any(abs(2.2 * a - b) > tolerance * max(abs(b), 1.0) for (_, a), (_, b) in zip(ours, top, strict=True)):
        return False
    last = top[-1][1] if top else 0.0
    tied = {d for d, s in ours + [(d, s / 2.2) for d, s in top] if abs(2.2 * s - last) <= tolerance * max(last, 1.0)}
    return {d for d, _ in ours} - tied == {d for d, _ in top} - tied


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--threads", type=int, default=1, help="tantivy's indexing threads")
    parser.add_argument("--quantized", action="store_true", help="lengths rounded as tantivy's, all postings scored")
    args = parser.parse_args()
    documents = [IndexDocument(d.url, text=d.text) for d in pages(args.pages, seed=3)]
    queries = {
        f"{terms}-term": [list(dict.fromkeys(q)) for q in draw_queries(documents, args.queries, terms, seed=terms)]
        for terms in (1, 2, 4)
    }
    row_of = {d.url: i for i, d in enumerate(documents)}
    with tempfile.TemporaryDirectory() as temporary:
        work = Path(temporary)
        with open(work / "input.pkl", "wb") as file:
            pickle.dump(([" ".join(tokenize(d.text)) for d in documents], queries), file)
        python = search_venv_python("tantivy", "tantivy")
        subprocess.run(
            [str(python), str(HERE / "tantivy_run.py"), str(work / "input.pkl"), str(work / "out.pkl"),
             str(args.threads)],
            check=True,
        )  # fmt: skip
        with open(work / "out.pkl", "rb") as file:
            theirs = pickle.load(file)
        started = time.perf_counter()
        build_index(documents, work / "index")
        built = time.perf_counter() - started
        size = sum(p.stat().st_size for p in (work / "index").rglob("*") if p.is_file())
        print(
            f"{args.pages} pages: build crawlspace {built:.1f} s ({args.pages / built * 60:,.0f} pages/min), tantivy"
            f" {theirs['built']:.1f} s ({args.threads} thread): ratio {built / theirs['built']:.1f};"
            f" size crawlspace {size / 1e6:.1f} MB, tantivy {theirs['bytes'] / 1e6:.1f} MB:"
            f" ratio {size / theirs['bytes']:.2f}"
        )
        with Index(work / "index") as index:
            if args.quantized:
                for searcher in index.searchers:
                    searcher.norms, searcher.weights = index.scorer.field_norms(
                        tantivy_length(np.asarray(searcher.segment.field_lengths))
                    )
            for key, tops in theirs["results"].items():
                name, mode = key.split("/")
                if name == "1-term" and mode == "or":
                    continue
                joiner = " " if mode == "and" else " OR "
                latencies, identical, same_set, ratios, differing, tie_equal = [], 0, 0, [], [], 0
                for terms, top in zip(queries[name], tops, strict=True):
                    started = time.perf_counter()
                    hits = index.search(joiner.join(terms), 10, prune=not args.quantized).hits
                    latencies.append(time.perf_counter() - started)
                    ours = [(row_of[h.url], h.score) for h in hits]
                    identical += [d for d, _ in ours] == [d for d, _ in top]
                    tie_equal += agrees_up_to_ties(ours, top, 1e-6)
                    if [d for d, _ in ours] != [d for d, _ in top]:
                        differing.append((terms, ours, top))
                    same_set += {d for d, _ in ours} == {d for d, _ in top}
                    score_of = dict(ours)
                    ratios += [s / score_of[d] / 2.2 for d, s in top if d in score_of and score_of[d] > 0]
                mine, other = np.array(latencies), np.array(theirs["latencies"][key])
                spread = np.abs(np.array(ratios) - 1.0).max(initial=0.0)
                print(
                    f"  {name} {mode:>3}: crawlspace {percentiles(list(mine))}; tantivy {percentiles(list(other))};"
                    f" p95 ratio {np.percentile(mine, 95) / np.percentile(other, 95):.1f}"
                    f"\n      top 10 identical {identical}/{len(tops)}, same set {same_set}/{len(tops)},"
                    f" the same up to the order of equal scores with scores to 1e-6 {tie_equal}/{len(tops)};"
                    f" tantivy / (2.2 x crawlspace) within {spread:.2e} of 1"
                )
                for terms, ours, top in differing[:2]:  # what a difference looks like: ties, or not
                    print(f"      {terms}: crawlspace {[(d, round(2.2 * s, 6)) for d, s in ours]}")
                    print(f"      {' ' * len(str(terms))}  tantivy    {[(d, round(s, 6)) for d, s in top]}")


if __name__ == "__main__":
    main()
