"""crawlspace's BM25 against bm25s (method "lucene": k1 = 1.2, b = 0.75, Lucene's idf) on the same tokens.

Pages are generated simweb text (bench/search/corpus.py); both sides get the tokens of crawlspace's
tokenizer for the text field only (bm25s indexes one field), and crawlspace scores with its default
BM25F, whose title and anchor fields are empty here, so it is plain BM25. For each query (terms of a
random page, disjunctive, as bm25s sums over the query's terms) the benchmark compares crawlspace's
pruned top 10 with bm25s's scores of every document: the largest score difference, and whether the
top 10 is the same (ties, equal scores within 1e-9, may be ordered differently: crawlspace breaks them
by URL). bm25s is installed on first use into bench/.venv-search, never a dependency of crawlspace.

    .venv/bin/python bench/search/compare_bm25s.py [--pages 20000] [--queries 200]
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
from bench_index import draw_queries, search_venv_python
from corpus import pages

from crawlspace.index.layout import Index, build_index
from crawlspace.index.segment import IndexDocument
from crawlspace.index.tokens import tokenize

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", type=int, default=20_000)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    documents = [IndexDocument(d.url, text=d.text) for d in pages(args.pages, seed=3)]
    drawn = [q for terms in (1, 2, 3, 4) for q in draw_queries(documents, args.queries // 4, terms, seed=terms)]
    queries = [list(dict.fromkeys(query)) for query in drawn]  # crawlspace scores a repeated term once
    with tempfile.TemporaryDirectory() as temporary:
        work = Path(temporary)
        corpus = [tokenize(d.text) for d in documents]
        with open(work / "input.pkl", "wb") as file:
            pickle.dump((corpus, queries, 1.2, 0.75), file)
        python = search_venv_python("bm25s", "bm25s", "numpy", "scipy")
        started = time.perf_counter()
        subprocess.run(
            [str(python), str(HERE / "bm25s_scores.py"), str(work / "input.pkl"), str(work / "out.npy")],
            check=True,
        )
        print(f"bm25s: indexed and scored in {time.perf_counter() - started:.1f} s")
        reference = np.load(work / "out.npy")
        build_index(documents, work / "index")
        row_of = {d.url: i for i, d in enumerate(documents)}
        largest, same, tie_only = 0.0, 0, 0
        with Index(work / "index") as index:
            for number, query in enumerate(queries):
                hits = index.search(" OR ".join(query), 10).hits
                expected = reference[number]
                ours = np.array([hit.score for hit in hits])
                theirs = expected[[row_of[hit.url] for hit in hits]]
                largest = max(largest, float(np.abs(ours - theirs).max(initial=0.0)))
                positive = np.flatnonzero(expected > 0)
                best = positive[np.lexsort((positive, -expected[positive]))][:10]
                if [row_of[hit.url] for hit in hits] == best.tolist():
                    same += 1
                elif len(hits) == len(best) and np.allclose(np.sort(ours), np.sort(expected[best]), atol=1e-9, rtol=0):
                    tie_only += 1
    print(f"{len(queries)} queries on {args.pages} pages: largest score difference {largest:.2e} (target 1e-6)")
    print(
        f"  top 10 identical for {same}, identical up to the order of equal scores for {tie_only},"
        f" different for {len(queries) - same - tie_only}"
    )


if __name__ == "__main__":
    main()
