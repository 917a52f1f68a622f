"""BM25F over the fields title, text and anchor, with the collection's global statistics.

For a term t and document d (Robertson and Zaragoza's "simple BM25F"): each field's frequency is
normalized by that field's length, weighted and summed, then saturated once:

    tfn(t, d) = sum_f  w_f * tf_f(t, d) / ((1 - b_f) + b_f * len_f(d) / avglen_f)
    score(t, d) = idf(t) * tfn / (tfn + k1)
    idf(t) = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))        (Lucene's, never negative)

and a document's score is the sum over the query's terms, plus its PageRank prior when
`Bm25fParams.prior_weight` is not 0. With one field of weight 1 this is
Lucene's BM25 (`BM25Similarity` since Lucene 8, without the constant (k1 + 1) factor), which is what
`bm25s`'s "lucene" method computes, so the two can be compared on the same tokens. N, df and
avglen come from `CollectionStats` (all shards), never from the segment being searched.

Upper bounds for dynamic pruning: score(t, d) grows with tfn, so the largest score of t in a block
of postings is idf(t) * m / (m + k1) with m the block's largest tfn (`block_max_tfn`). That needs
a pass over the segment's postings per set of statistics; it is vectorized and done once per
opened segment (its cost is a few nanoseconds per posting).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from crawlspace.index.segment import FIELDS, Segment
from crawlspace.index.stats import CollectionStats

__all__ = ["BM25F", "Bm25fParams", "block_max_tfn"]

F64Array = npt.NDArray[np.float64]
_CHUNK_BLOCKS = 8192


@dataclass(frozen=True, slots=True)
class Bm25fParams:
    k1: float = 1.2
    b: tuple[float, float, float] = (0.75, 0.75, 0.75)
    weights: tuple[float, float, float] = (2.0, 1.0, 1.0)
    """Per field (title, text, anchor): a title word counts twice a body word."""
    prior_weight: float = 0.0
    """Weight of the PageRank prior, `prior_weight * ln(1 + N * pagerank)` added to a matching
    document's score (N * pagerank is 1 for a page of average rank). 0 until the known-item quality
    benchmark (issue 19) chooses it: with 0 the score is BM25F alone, comparable with bm25s."""

    def __post_init__(self) -> None:
        if len(self.b) != len(FIELDS) or len(self.weights) != len(FIELDS):
            raise ValueError(f"b and weights need one value per field {FIELDS}")
        if (
            self.k1 <= 0
            or not all(0 <= b <= 1 for b in self.b)
            or any(w < 0 for w in self.weights)
            or self.prior_weight < 0
        ):
            raise ValueError(f"BM25F parameters out of range: {self}")


@dataclass(frozen=True, slots=True)
class BM25F:
    """The scoring function of one collection: its statistics and parameters (shared by every shard)."""

    stats: CollectionStats
    params: Bm25fParams = field(default_factory=Bm25fParams)

    def idf(self, df: int) -> float:
        n = self.stats.doc_count
        return math.log(1.0 + (n - df + 0.5) / (df + 0.5))

    @property
    def key(self) -> tuple[object, ...]:
        """What the block bounds depend on (not the document frequencies)."""
        return (self.params, self.stats.doc_count, self.stats.field_totals)

    def field_norms(self, lengths: npt.NDArray[np.uint32]) -> tuple[F64Array, F64Array]:
        """What tfn divides and multiplies by: per row and field the length normalization
        (1 - b) + b * len / avglen, and per field its weight (0 for a field no document has)."""
        norms = np.ones(lengths.shape, dtype=np.float64)
        weights = np.zeros(len(self.params.weights), dtype=np.float64)
        for column, (weight, b, average) in enumerate(
            zip(self.params.weights, self.params.b, self.stats.average_lengths, strict=True)
        ):
            if weight == 0 or average == 0:
                continue  # a field no document has contributes nothing
            norms[:, column] = (1.0 - b) + b * (lengths[:, column].astype(np.float64) / average)
            weights[column] = weight
        return norms, weights

    def tfn(self, freqs: npt.NDArray[np.int64], lengths: npt.NDArray[np.uint32]) -> F64Array:
        """The normalized, weighted frequency of each row: freqs and lengths have a column per field
        (the kernel of `topk` does the same operations in the same order)."""
        norms, weights = self.field_norms(lengths)
        total = np.zeros(freqs.shape[0], dtype=np.float64)
        for column, weight in enumerate(weights.tolist()):
            if weight != 0:
                total += weight * (freqs[:, column].astype(np.float64) / norms[:, column])
        return total

    def saturate(self, idf: float, tfn: F64Array) -> F64Array:
        return idf * (tfn / (tfn + self.params.k1))

    def scores(self, idf: float, freqs: npt.NDArray[np.int64], lengths: npt.NDArray[np.uint32]) -> F64Array:
        return self.saturate(idf, self.tfn(freqs, lengths))

    def prior_scores(self, priors: npt.NDArray[np.float32]) -> F64Array | None:
        """What each document's PageRank adds to its score (None: the prior is off)."""
        if self.params.prior_weight == 0:
            return None
        ranks = np.maximum(priors.astype(np.float64), 0.0)
        added: F64Array = self.params.prior_weight * np.log1p(ranks * self.stats.doc_count)
        return added


def block_max_tfn(segment: Segment, scorer: BM25F) -> F64Array:
    """The largest tfn in each postings block of the segment, under the scorer's statistics."""
    out = np.zeros(segment.block_count, dtype=np.float64)
    for low in range(0, segment.block_count, _CHUNK_BLOCKS):
        high = min(low + _CHUNK_BLOCKS, segment.block_count)
        docs, freqs, block_of = segment.all_postings(low, high)
        tfn = scorer.tfn(freqs, segment.field_lengths[docs])
        starts = np.flatnonzero(np.diff(block_of, prepend=low - 1))  # every block holds a posting
        out[low:high] = np.maximum.reduceat(tfn, starts)
    return out
