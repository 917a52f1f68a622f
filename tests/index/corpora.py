"""Generated corpora for the index tests: a Zipf-like vocabulary, so that some terms have postings
over many blocks and most have few, and hosts so that `site:` has something to select."""

from __future__ import annotations

import numpy as np

from crawlspace.index.segment import IndexDocument

WORDS = [f"w{i}" for i in range(400)] + ["straße", "café", "東京", "can't", "3.14"]


def corpus(seed: int, documents: int, *, hosts: int = 7, words: int = 60) -> list[IndexDocument]:
    rng = np.random.default_rng(seed)
    weights = 1 / np.arange(1, len(WORDS) + 1) ** 1.1
    weights /= weights.sum()

    def text(mean: int) -> str:
        count = int(rng.poisson(mean))
        return " ".join(WORDS[i] for i in rng.choice(len(WORDS), size=count, p=weights))

    return [
        IndexDocument(
            url=f"http://h{int(rng.integers(hosts)):02d}.test/p{seed}-{index}",
            title=text(4),
            text=text(words),
            anchor=text(3) if rng.random() < 0.5 else "",
            prior=float(rng.random()),
        )
        for index in range(documents)
    ]
