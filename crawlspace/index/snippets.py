"""The snippet of a search result: the passage of a page's text where the query's terms are densest.

Pure functions over a text and the query's terms (the caller fetches the text, `CrawlReader.page`
or `CrawlReader.parse`): `make_snippet` slides a window of `words` words over the text's words
(`tokens.term_spans`) and takes the window holding the most distinct query terms (weighted, by idf
when the caller gives it), then the most occurrences; of equal windows, the middle one of the first
such passage, so the terms are centred. It gives the passage with the places of the query terms in
it, so that a terminal or a web page can highlight them, each escaping the text its own way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from crawlspace.index.tokens import term_spans

__all__ = ["Snippet", "make_snippet"]

ELLIPSIS = "…"


@dataclass(frozen=True, slots=True)
class Snippet:
    text: str
    highlights: tuple[tuple[int, int], ...]
    """(start, end) offsets into `text` of the query terms it holds, in order."""

    def marked(self, before: str = "[", after: str = "]") -> str:
        """The text with each highlighted term between `before` and `after`."""
        out, at = [], 0
        for start, end in self.highlights:
            out += [self.text[at:start], before, self.text[start:end], after]
            at = end
        out.append(self.text[at:])
        return "".join(out)


def make_snippet(
    text: str, terms: Iterable[str], *, words: int = 24, weights: Mapping[str, float] | None = None
) -> Snippet:
    """`weights`: what each term counts (its idf: a window with the rare term beats one with "the");
    1 each by default."""
    spans = term_spans(text)
    wanted = list(dict.fromkeys(terms))
    if not spans:
        return Snippet("", ())
    index_of = {term: i for i, term in enumerate(wanted)}
    which = np.array([index_of.get(term, -1) for term, _, _ in spans], dtype=np.int64)
    width = min(words, len(spans))
    best = 0
    if wanted and (which >= 0).any():
        hits = (which >= 0).astype(np.int64)
        occurrences = np.convolve(hits, np.ones(width, dtype=np.int64), mode="valid")
        distinct = np.zeros(occurrences.size, dtype=np.float64)
        for slot, term in enumerate(wanted):
            has = (which == slot).astype(np.int64)
            weight = 1.0 if weights is None else float(weights.get(term, 0.0))
            distinct += weight * (np.convolve(has, np.ones(width, dtype=np.int64), mode="valid") > 0)
        best_distinct = distinct.max()
        tied_distinct = distinct == best_distinct
        tied = np.flatnonzero(tied_distinct & (occurrences == occurrences[tied_distinct].max()))
        run = tied[: int(np.argmax(np.diff(tied, append=tied[-1] + 2) > 1)) + 1]  # the first passage
        best = int(run[run.size // 2])  # centred on its terms
    first, last = spans[best], spans[best + width - 1]
    prefix = ELLIPSIS if best > 0 else ""
    suffix = ELLIPSIS if best + width < len(spans) else ""
    body = " ".join(text[first[1] : last[2]].split())  # newlines and runs of spaces as one space
    # offsets are found again in the collapsed passage, term by term, in order
    highlights: list[tuple[int, int]] = []
    at = 0
    for term, start, end in spans[best : best + width]:
        word = " ".join(text[start:end].split())
        position = body.find(word, at)
        if position < 0:
            continue
        at = position + len(word)
        if term in index_of:
            highlights.append((len(prefix) + position, len(prefix) + at))
    return Snippet(prefix + body + suffix, tuple(highlights))
