"""Pages for the search benchmarks, made the way the simulated web makes its pages' text: paragraphs of
the simweb corpus (Zipf-distributed vocabulary of 6,000 words) picked by a stride fixed per page, a
title of words from the page, anchor text of a few short phrases, hosts h0000..h0999."""

from __future__ import annotations

import numpy as np

from crawlspace.index.segment import IndexDocument
from crawlspace.simweb.text import PARAGRAPHS, Corpus


def pages(count: int, *, seed: int = 7, paragraphs: tuple[int, int] = (3, 12)) -> list[IndexDocument]:
    corpus = Corpus.build()
    rng = np.random.default_rng(seed)
    out: list[IndexDocument] = []
    for index in range(count):
        start = int(rng.integers(PARAGRAPHS))
        stride = int(rng.integers(1, PARAGRAPHS))
        chosen = [corpus.paragraphs[(start + i * stride) % PARAGRAPHS] for i in range(int(rng.integers(*paragraphs)))]
        text = "\n".join(chosen)
        words = chosen[0].split()
        title_start = int(rng.integers(max(1, len(words) - 8)))
        title = " ".join(words[title_start : title_start + int(rng.integers(3, 8))]).strip(".")
        anchor = " ".join(
            " ".join(corpus.words[int(w)] for w in rng.zipf(1.3, size=int(rng.integers(1, 4))) % len(corpus.words))
            for _ in range(int(rng.integers(0, 4)))
        )
        host = int(rng.integers(1000))
        out.append(IndexDocument(f"http://h{host:04d}.simweb.test/p/{index}", title, text, anchor))
    return out
