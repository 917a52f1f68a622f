"""Top-k retrieval over segments: block-max MaxScore in windows of doc ids, then a merge of shards.

One `SegmentSearcher` per segment, all sharing one `BM25F` (the global statistics). A query's
terms each get a cursor over their postings blocks, and each block an upper bound on any score in
it (`scoring.block_max_tfn`). The doc-id space is cut into windows of `WINDOW_DOCS`; a window's
bound is the sum of its terms' block bounds. Windows are visited best bound first, and the search
stops as soon as a window's bound is below the k-th best score found so far (the threshold):
nothing in it or after it can enter the top k. Inside a window, MaxScore (Turtle and Flood): terms
are sorted by bound, the weakest ones whose bounds add up to less than the threshold are
"non-essential" (a document having only those cannot make it), candidates are the documents of the
essential terms (in a conjunctive query: the documents having every term), and after each term is
scored a candidate whose partial score plus the bounds still to come is below the threshold is
dropped before the next term is looked up. Each step works on numpy arrays of a window's postings.

Exactness: a document's score is the sum of its term scores in query order, whichever path found
it, and ties are broken by URL, so the pruned top k is the exhaustive top k (`prune=False`
scores every posting of the query's terms) and S shards give the top k of one index. Bounds carry a
relative slack of 1e-9 against rounding; only bounds strictly below the threshold prune.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Final

import numpy as np
import numpy.typing as npt

from crawlspace.index.bounds import block_bounds
from crawlspace.index.docvalues import DocValues
from crawlspace.index.query import Query, parse_query
from crawlspace.index.scoring import BM25F
from crawlspace.index.segment import BLOCK_POSTINGS, Frequencies, Segment

__all__ = [
    "WINDOW_DOCS",
    "Explanation",
    "Hit",
    "SearchCounters",
    "SearchResult",
    "SegmentSearcher",
    "TermScore",
    "search_segments",
]

WINDOW_DOCS: Final = 4096
_SLACK: Final = 1.0 + 1e-9

I64Array = npt.NDArray[np.int64]
F64Array = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Hit:
    url: str
    score: float
    title: str
    segment: int
    doc: int
    group: int = 0
    """The document's group key (`segment.group_key`): near-duplicates share it."""
    similar: int = 0
    """In a collapsed result list: how many more pages of its group the search found below it."""


@dataclass(frozen=True, slots=True)
class TermScore:
    """One query term's part of a document's score: BM25F's tfn is a sum over fields, so each field's
    share of the term's score is its share of tfn."""

    term: str
    idf: float
    freqs: tuple[int, ...]
    """Per field (`segment.FIELDS`): the term's frequency there."""
    tfn: float
    score: float
    fields: tuple[float, ...]
    """Per field: its share of `score`."""


@dataclass(frozen=True, slots=True)
class Explanation:
    """Why a document scored what it did: each query term's part and the PageRank prior's."""

    url: str
    terms: tuple[TermScore, ...]
    prior: float
    score: float


@dataclass(slots=True)
class SearchCounters:
    """What a search did: `postings_scored` against `postings_total`, the postings of its terms."""

    postings_total: int = 0
    postings_scored: int = 0
    blocks_decoded: int = 0
    windows: int = 0
    windows_skipped: int = 0

    def add(self, other: SearchCounters) -> None:
        self.postings_total += other.postings_total
        self.postings_scored += other.postings_scored
        self.blocks_decoded += other.blocks_decoded
        self.windows += other.windows
        self.windows_skipped += other.windows_skipped


@dataclass(frozen=True, slots=True)
class SearchResult:
    hits: list[Hit]
    counters: SearchCounters = field(default_factory=SearchCounters)
    tiers_searched: int = 1
    """How many tiers the search looked in (the next only when the previous gave fewer than k)."""
    tiers: int = 1


def _ranked(hits: list[Hit], k: int) -> list[Hit]:
    return sorted(hits, key=lambda hit: (-hit.score, hit.url))[:k]


class _Cursor:
    """One term's postings in one segment: its blocks, their bounds, and decoding by doc range."""

    __slots__ = ("bounds", "df", "end", "first", "idf", "last_docs", "padded_bounds", "segment")

    def __init__(
        self, segment: Segment, first: int, end: int, df: int, idf: float, block_max: F64Array, scorer: BM25F
    ) -> None:
        self.segment = segment
        self.first, self.end, self.df, self.idf = first, end, df, idf
        self.last_docs = segment.block_last_doc[first:end].astype(np.int64)
        self.bounds = scorer.saturate(idf, block_max[first:end]) * _SLACK
        self.padded_bounds = np.append(self.bounds, 0.0)
        """The bound of each block and 0 past the last: indexed by `searchsorted(last_docs, doc)`."""

    def window_blocks(self, lows: I64Array, highs: I64Array) -> tuple[I64Array, I64Array]:
        """Per window [low, high), the range [j, j_end) of this term's blocks (local numbers) that overlap it."""
        starts = np.searchsorted(self.last_docs, lows, side="left")
        ends = np.minimum(np.searchsorted(self.last_docs, highs, side="left") + 1, self.last_docs.size)
        return starts.astype(np.int64), ends.astype(np.int64)

    def counts(self, start: int, stop: int) -> int:
        """How many postings local blocks [start, stop) hold."""
        last = self.end - self.first
        return (stop - start) * BLOCK_POSTINGS - (BLOCK_POSTINGS * last - self.df if stop == last else 0)

    def window(self, start: int, stop: int, low: int, high: int, counters: SearchCounters) -> _TermWindow:
        """The postings of local blocks [start, stop) with doc ids in [low, high): doc ids now,
        frequencies when first asked for."""
        total = self.counts(start, stop)
        docs = self.segment.decode_docs(self.first, self.first + start, self.first + stop, total)
        counters.blocks_decoded += stop - start
        keep = slice(int(np.searchsorted(docs, low)), int(np.searchsorted(docs, high)))
        return _TermWindow(self, start, stop, total, keep, docs[keep])


class _TermWindow:
    """One term's postings in one window: the doc ids, and the frequencies read on demand, only for
    the rows asked for (a conjunctive window whose intersection is empty never decodes them)."""

    __slots__ = ("_frequencies", "cursor", "docs", "keep", "start", "stop", "total")

    def __init__(self, cursor: _Cursor, start: int, stop: int, total: int, keep: slice, docs: I64Array) -> None:
        self.cursor, self.start, self.stop, self.total, self.keep, self.docs = cursor, start, stop, total, keep, docs
        self._frequencies: Frequencies | None = None

    def freqs_at(self, rows: I64Array) -> npt.NDArray[np.int64]:
        """The frequencies per field of the window's postings `rows` (indexes into `docs`)."""
        if self._frequencies is None:
            cursor = self.cursor
            low, high = cursor.first + self.start, cursor.first + self.stop
            self._frequencies = cursor.segment.frequencies(low, high, self.total)
        return self._frequencies.rows(rows + (self.keep.start or 0))

    def freqs(self) -> npt.NDArray[np.int64]:
        return self.freqs_at(np.arange(self.docs.size))


class _WindowPostings:
    """The postings of each term in one window, decoded when first asked for."""

    __slots__ = ("counters", "cursors", "decoded", "high", "low", "ranges", "window")

    def __init__(
        self,
        cursors: Sequence[_Cursor],
        ranges: Sequence[tuple[I64Array, I64Array]],
        window: int,
        low: int,
        high: int,
        counters: SearchCounters,
    ) -> None:
        self.cursors, self.ranges, self.window = cursors, ranges, window
        self.low, self.high, self.counters = low, high, counters
        self.decoded: dict[int, _TermWindow] = {}

    def __getitem__(self, row: int) -> _TermWindow:
        if row not in self.decoded:
            starts, ends = self.ranges[row]
            start, end = int(starts[self.window]), int(ends[self.window])
            self.decoded[row] = self.cursors[row].window(start, end, self.low, self.high, self.counters)
        return self.decoded[row]


class SegmentSearcher:
    """One segment searched with one collection's scoring (its block bounds read or computed on
    creation, `bounds`; `cache=False` neither reads nor writes the file beside the segment).
    `values`: the index generation's word on the segment's documents (masked ones are never
    returned; prior and group as they are now); default: the segment as written."""

    def __init__(
        self,
        segment: Segment,
        scorer: BM25F,
        *,
        window: int = WINDOW_DOCS,
        cache: bool = True,
        values: DocValues | None = None,
    ) -> None:
        self.segment = segment
        self.scorer = scorer
        self.window = window
        values = values if values is not None else DocValues.of(segment)
        self.block_max = block_bounds(segment, scorer, cache=cache)
        self.prior_scores = scorer.prior_scores(values.prior)
        self.groups = values.group
        self.live: npt.NDArray[np.bool_] | None = ~values.deleted if values.deleted.any() else None
        self.hosts = segment.hosts()

    def _cursor(self, term: str) -> _Cursor | None:
        segment = self.segment
        ordinal = segment.terms.ordinal(term)
        if ordinal is None:
            return None
        first, end = int(segment.term_first_block[ordinal]), int(segment.term_first_block[ordinal + 1])
        idf = self.scorer.idf(self.scorer.stats.document_frequency(term))
        return _Cursor(segment, first, end, int(segment.term_df[ordinal]), idf, self.block_max, self.scorer)

    def explain(self, doc: int, query: Query | str) -> Explanation:
        """The parts of `doc`'s score for `query` (the same arithmetic as `search`)."""
        query = parse_query(query) if isinstance(query, str) else query
        segment, scorer = self.segment, self.scorer
        lengths = segment.field_lengths[[doc]]
        parts: list[TermScore] = []
        total = 0.0
        for term in query.terms:
            cursor = self._cursor(term)
            if cursor is None:
                continue
            local = int(np.searchsorted(cursor.last_docs, doc))
            if local >= cursor.last_docs.size:
                continue
            window = cursor.window(local, local + 1, doc, doc + 1, SearchCounters())
            if not window.docs.size:
                continue
            freqs = window.freqs()
            tfn = float(scorer.tfn(freqs, lengths)[0])
            score = float(scorer.scores(cursor.idf, freqs, lengths)[0])
            shares = [
                float(scorer.tfn(np.where(np.arange(freqs.shape[1]) == field, freqs, 0), lengths)[0])
                for field in range(freqs.shape[1])
            ]
            fields = tuple(score * share / tfn if tfn else 0.0 for share in shares)
            parts.append(TermScore(term, cursor.idf, tuple(int(f) for f in freqs[0]), tfn, score, fields))
            total = total + score
        prior = 0.0 if self.prior_scores is None else float(self.prior_scores[doc])
        return Explanation(segment.url(doc), tuple(parts), prior, total + prior)

    def _prior_of(self, docs: I64Array) -> F64Array:
        if self.prior_scores is None:
            return np.zeros(docs.size, dtype=np.float64)
        return self.prior_scores[docs].copy()

    def _site_hosts(self, sites: Sequence[str]) -> I64Array:
        def matches(host: str, site: str) -> bool:
            name = host.rsplit(":", 1)[0] if ":" in host and not host.endswith("]") else host
            return host == site or name == site or name.endswith("." + site)

        return np.array([i for i, host in enumerate(self.hosts) if any(matches(host, s) for s in sites)], np.int64)

    def _allowed(self, query: Query, counters: SearchCounters) -> npt.NDArray[np.bool_] | None:
        """Documents the query's sites and excluded terms allow (None: all)."""
        allowed: npt.NDArray[np.bool_] | None = None if self.live is None else self.live.copy()
        if query.sites:
            on_site = np.isin(self.segment.doc_host, self._site_hosts(query.sites))
            allowed = on_site if allowed is None else allowed & on_site
        if query.excluded_sites:
            banned = np.isin(self.segment.doc_host, self._site_hosts(query.excluded_sites))
            allowed = ~banned if allowed is None else allowed & ~banned
        for excluded in query.excluded:
            if len(excluded) == 1 and (cursor := self._cursor(excluded[0])) is not None:
                if allowed is None:
                    allowed = np.ones(self.segment.docs, dtype=bool)
                allowed[cursor.window(0, cursor.end - cursor.first, 0, 1 << 62, counters).docs] = False
        return allowed

    def _positions(self, cursor: _Cursor, doc: int) -> list[I64Array] | None:
        local = int(np.searchsorted(cursor.last_docs, doc))
        if local >= cursor.last_docs.size:
            return None
        counts = np.array([cursor.counts(local, local + 1)])
        postings = self.segment.decode(cursor.first, cursor.first + local, cursor.first + local + 1, counts)
        index = int(np.searchsorted(postings.docs, doc))
        if index >= postings.docs.size or postings.docs[index] != doc:
            return None
        return self.segment.positions(cursor.first + local, index, postings.freqs)

    def _has_phrase(self, cursors: Sequence[_Cursor | None], doc: int) -> bool:
        if any(cursor is None for cursor in cursors):
            return False
        per_term = [self._positions(cursor, doc) for cursor in cursors if cursor is not None]
        if any(positions is None for positions in per_term):
            return False
        for field_index in range(len(self.segment.field_lengths[0]) if self.segment.docs else 0):
            starts = None
            for offset, positions in enumerate(per_term):
                assert positions is not None
                shifted = positions[field_index] - offset
                starts = shifted if starts is None else np.intersect1d(starts, shifted, assume_unique=True)
                if not starts.size:
                    break
            if starts is not None and starts.size:
                return True
        return False

    def search(self, query: Query | str, k: int = 10, *, prune: bool = True) -> SearchResult:
        query = parse_query(query) if isinstance(query, str) else query
        counters = SearchCounters()
        segment = self.segment
        if query.empty or k <= 0 or not segment.docs:
            return SearchResult([], counters)
        term_cursors = {term: self._cursor(term) for term in query.terms}
        cursors = [cursor for cursor in term_cursors.values() if cursor is not None]
        if query.conjunctive and len(cursors) < len(term_cursors):
            return SearchResult([], counters)
        if not cursors or any(term_cursors[term] is None for phrase in query.phrases for term in phrase):
            return SearchResult([], counters)
        counters.postings_total = sum(cursor.df for cursor in cursors)
        phrases = [[term_cursors[term] for term in phrase] for phrase in query.phrases]
        excluded_phrases = [[self._cursor(term) for term in p] for p in query.excluded if len(p) > 1]
        allowed = self._allowed(query, counters)

        lows = np.arange(0, segment.docs, self.window, dtype=np.int64)
        highs = lows + self.window
        windows = lows.size
        present = np.zeros((len(cursors), windows), dtype=bool)
        bounds = np.zeros((len(cursors), windows), dtype=np.float64)
        ranges = []
        for row, cursor in enumerate(cursors):
            starts, ends = cursor.window_blocks(lows, highs)
            ranges.append((starts, ends))
            present[row] = starts < ends
            padded = cursor.padded_bounds
            pairs = np.empty(2 * windows, dtype=np.int64)
            pairs[0::2], pairs[1::2] = starts, ends
            bounds[row] = np.where(present[row], np.maximum.reduceat(padded, pairs)[0::2], 0.0)
        if self.prior_scores is not None:
            window_prior = np.maximum.reduceat(self.prior_scores, lows) * _SLACK
        else:
            window_prior = np.zeros(windows, dtype=np.float64)
        window_bound = bounds.sum(axis=0) + window_prior
        possible: npt.NDArray[np.bool_] = np.asarray(present.all(axis=0) if query.conjunctive else present.any(axis=0))
        order = [int(w) for w in np.argsort(-window_bound, kind="stable") if possible[w]]
        counters.windows = len(order)

        theta = -math.inf
        pool_scores = np.zeros(0, dtype=np.float64)
        pool_docs = np.zeros(0, dtype=np.int64)
        for visited, w in enumerate(order):
            if prune and window_bound[w] < theta:
                counters.windows_skipped = len(order) - visited
                break
            low, high = int(lows[w]), int(highs[w])
            rows = [row for row in range(len(cursors)) if present[row, w]]
            rows.sort(key=lambda row: bounds[row, w])
            essential = rows
            if prune and not query.conjunctive:
                total = float(window_prior[w])  # every document has its prior
                for cut, row in enumerate(rows):
                    total += bounds[row, w]
                    if total >= theta:
                        essential = rows[cut:]
                        break
            postings_of = _WindowPostings(cursors, ranges, w, low, high, counters)
            if query.conjunctive:
                by_size = sorted(rows, key=lambda row: postings_of[row].docs.size)
                candidates = postings_of[by_size[0]].docs
                for row in by_size[1:]:
                    candidates = np.intersect1d(candidates, postings_of[row].docs, assume_unique=True)
            else:
                candidates = np.unique(np.concatenate([postings_of[row].docs for row in essential]))
            if allowed is not None:
                candidates = candidates[allowed[candidates]]
            if prune and theta > -math.inf and candidates.size:
                # block-max: a candidate can score at most the bounds of the blocks it falls in
                ceiling = self._prior_of(candidates)
                for row in rows:
                    ceiling += cursors[row].padded_bounds[np.searchsorted(cursors[row].last_docs, candidates)]
                candidates = candidates[ceiling >= theta]
            if not candidates.size:
                continue
            contributions: dict[int, F64Array] = {}
            partial = self._prior_of(candidates)
            remaining = float(sum(bounds[row, w] for row in rows))
            for row in reversed(rows):  # strongest first: the partial score rises fastest
                postings = postings_of[row]
                at = np.searchsorted(postings.docs, candidates)
                found: npt.NDArray[np.bool_] = np.asarray(at < postings.docs.size)
                found[found] = postings.docs[at[found]] == candidates[found]
                scores = np.zeros(candidates.size, dtype=np.float64)
                if found.any():
                    scores[found] = self.scorer.scores(
                        cursors[row].idf, postings.freqs_at(at[found]), segment.field_lengths[candidates[found]]
                    )
                counters.postings_scored += int(found.sum())
                contributions[row] = scores
                partial += scores
                remaining -= bounds[row, w]
                if prune and theta > -math.inf:
                    keep = partial + max(remaining, 0.0) * _SLACK >= theta
                    if not keep.all():
                        candidates, partial = candidates[keep], partial[keep]
                        contributions = {r: c[keep] for r, c in contributions.items()}
                        if not candidates.size:
                            break
            if not candidates.size:
                continue
            score = np.zeros(candidates.size, dtype=np.float64)
            for row in sorted(contributions):  # query order: the same sum whichever path found the document
                score = score + contributions[row]
            if self.prior_scores is not None:
                score = score + self.prior_scores[candidates]
            if phrases or excluded_phrases:
                keep = np.array(
                    [
                        bool(s >= theta)
                        and all(self._has_phrase(p, int(doc)) for p in phrases)
                        and not any(self._has_phrase(p, int(doc)) for p in excluded_phrases)
                        for doc, s in zip(candidates.tolist(), score.tolist(), strict=True)
                    ],
                    dtype=bool,
                )
                candidates, score = candidates[keep], score[keep]
            pool_scores = np.concatenate([pool_scores, score])
            pool_docs = np.concatenate([pool_docs, candidates])
            if pool_scores.size >= k:
                theta = float(np.partition(pool_scores, pool_scores.size - k)[pool_scores.size - k])
                keep = pool_scores >= theta
                pool_scores, pool_docs = pool_scores[keep], pool_docs[keep]
        hits = [
            Hit(segment.url(doc), score, segment.title(doc), 0, doc, int(self.groups[doc]))
            for doc, score in zip(pool_docs.tolist(), pool_scores.tolist(), strict=True)
        ]
        return SearchResult(_ranked(hits, k), counters)


def search_segments(
    searchers: Sequence[SegmentSearcher],
    query: Query | str,
    k: int = 10,
    *,
    prune: bool = True,
    pool: ThreadPoolExecutor | None = None,
) -> SearchResult:
    """The top k over all segments (searched in parallel when given a pool), merged by score then URL."""
    parsed = parse_query(query) if isinstance(query, str) else query
    if pool is None or len(searchers) == 1:
        results = [searcher.search(parsed, k, prune=prune) for searcher in searchers]
    else:
        results = list(pool.map(lambda searcher: searcher.search(parsed, k, prune=prune), searchers))
    counters = SearchCounters()
    hits: list[Hit] = []
    for index, result in enumerate(results):
        counters.add(result.counters)
        hits.extend(Hit(hit.url, hit.score, hit.title, index, hit.doc, hit.group) for hit in result.hits)
    return SearchResult(_ranked(hits, k), counters)
