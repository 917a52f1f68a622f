"""Run by compare_bm25s.py in the benchmark's own environment (bench/.venv-search, with bm25s): scores every
document for each query with bm25s's "lucene" method on the tokens it is given, in float64.

    python bm25s_scores.py INPUT.pkl OUTPUT.npy
"""

from __future__ import annotations

import pickle
import sys

import bm25s
import numpy as np


def main() -> None:
    with open(sys.argv[1], "rb") as file:
        corpus, queries, k1, b = pickle.load(file)
    retriever = bm25s.BM25(method="lucene", idf_method="lucene", k1=k1, b=b, dtype="float64")
    retriever.index(corpus, show_progress=False)
    vocabulary = retriever.vocab_dict
    scores = np.stack(
        [retriever.get_scores([t for t in query if t in vocabulary]).astype(np.float64) for query in queries]
    )
    np.save(sys.argv[2], scores)


if __name__ == "__main__":
    main()
