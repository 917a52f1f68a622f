"""Top-k retrieval over segments: each segment's top k by the compiled block-max kernel (`topk`),
then a merge of shards.

One `SegmentSearcher` per segment, all sharing one `BM25F` (the global statistics). It looks up the
query's terms (block range, idf), the documents the query's sites, exclusions and masks allow, and
hands the rest to `topk.top_k`: block-max MaxScore for a disjunctive query, a rarest-term-led
intersection with block-max skips for a conjunctive one, over the segment's blocks in place (the
memory-mapped codes), with each document's field-length norms computed once per searcher. A query
with phrases is scored exhaustively by the kernel (every document having its terms), then its
candidates are checked for the phrases by `phrases.phrase_matches` (in doc-id order, each block
decoded once) and the best k of those holding them kept.

Exactness: a document's score is the sum of its term scores in query order, whichever path found
it, and ties are broken by URL, so the pruned top k is the exhaustive top k (`prune=False`
scores every posting of the query's terms) and S shards give the top k of one index. Bounds carry a
relative slack of 1e-9 against rounding; only bounds strictly below the threshold prune.
"""

from __future__ import annotations

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
from crawlspace.index.segment import Segment, SegmentFormatError

__all__ = [
    "Explanation",
    "Hit",
    "SearchCounters",
    "SearchResult",
    "SegmentSearcher",
    "TermScore",
    "search_segments",
]

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
    blocks_total: int = 0
    """The postings blocks of the query's terms."""
    blocks_decoded: int = 0

    def add(self, other: SearchCounters) -> None:
        self.postings_total += other.postings_total
        self.postings_scored += other.postings_scored
        self.blocks_total += other.blocks_total
        self.blocks_decoded += other.blocks_decoded


@dataclass(frozen=True, slots=True)
class SearchResult:
    hits: list[Hit]
    counters: SearchCounters = field(default_factory=SearchCounters)
    tiers_searched: int = 1
    """How many tiers the search looked in (the next only when the previous gave fewer than k)."""
    tiers: int = 1


def _ranked(hits: list[Hit], k: int) -> list[Hit]:
    return sorted(hits, key=lambda hit: (-hit.score, hit.url))[:k]


@dataclass(frozen=True, slots=True)
class _Term:
    """A query term in one segment: its blocks [first, end), its postings there, its global idf."""

    first: int
    end: int
    df: int
    idf: float


class SegmentSearcher:
    """One segment searched with one collection's scoring (its block bounds read or computed on
    creation, `bounds`; `cache=False` neither reads nor writes the file beside the segment).
    `values`: the index generation's word on the segment's documents (masked ones are never
    returned; prior and group as they are now); default: the segment as written."""

    def __init__(self, segment: Segment, scorer: BM25F, *, cache: bool = True, values: DocValues | None = None) -> None:
        self.segment = segment
        self.scorer = scorer
        values = values if values is not None else DocValues.of(segment)
        self.block_max = np.ascontiguousarray(block_bounds(segment, scorer, cache=cache), dtype=np.float64)
        self.prior_scores = scorer.prior_scores(values.prior)
        self._prior_max = (
            float(self.prior_scores.max()) * _SLACK if self.prior_scores is not None and segment.docs else 0.0
        )
        self.groups = values.group
        self.live: npt.NDArray[np.bool_] | None = ~values.deleted if values.deleted.any() else None
        self.hosts = segment.hosts()
        self.norms, self.weights = scorer.field_norms(segment.field_lengths)

    def _term(self, term: str) -> _Term | None:
        segment = self.segment
        ordinal = segment.terms.ordinal(term)
        if ordinal is None:
            return None
        first, end = int(segment.term_first_block[ordinal]), int(segment.term_first_block[ordinal + 1])
        idf = self.scorer.idf(self.scorer.stats.document_frequency(term))
        return _Term(first, end, int(segment.term_df[ordinal]), idf)

    def _posting(self, term: _Term, doc: int) -> tuple[int, int, npt.NDArray[np.int64]] | None:
        """Where `doc`'s posting of `term` is (its block, its row there) and that block's frequencies."""
        segment = self.segment
        local = int(np.searchsorted(segment.block_last_doc[term.first : term.end], doc))
        if local >= term.end - term.first:
            return None
        block = term.first + local
        postings = segment.decode(term.first, block, block + 1, segment.block_postings[block : block + 1])
        row = int(np.searchsorted(postings.docs, doc))
        if row >= postings.docs.size or postings.docs[row] != doc:
            return None
        return block, row, postings.freqs

    def explain(self, doc: int, query: Query | str) -> Explanation:
        """The parts of `doc`'s score for `query` (the same arithmetic as `search`)."""
        query = parse_query(query) if isinstance(query, str) else query
        segment, scorer = self.segment, self.scorer
        lengths = segment.field_lengths[[doc]]
        parts: list[TermScore] = []
        total = 0.0
        for word in query.terms:
            term = self._term(word)
            posting = None if term is None else self._posting(term, doc)
            if term is None or posting is None:
                continue
            _, row, block_freqs = posting
            freqs = block_freqs[row : row + 1]
            tfn = float(scorer.tfn(freqs, lengths)[0])
            score = float(scorer.scores(term.idf, freqs, lengths)[0])
            shares = [
                float(scorer.tfn(np.where(np.arange(freqs.shape[1]) == field, freqs, 0), lengths)[0])
                for field in range(freqs.shape[1])
            ]
            fields = tuple(score * share / tfn if tfn else 0.0 for share in shares)
            parts.append(TermScore(word, term.idf, tuple(int(f) for f in freqs[0]), tfn, score, fields))
            total = total + score
        prior = 0.0 if self.prior_scores is None else float(self.prior_scores[doc])
        return Explanation(segment.url(doc), tuple(parts), prior, total + prior)

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
            if len(excluded) == 1 and (term := self._term(excluded[0])) is not None:
                if allowed is None:
                    allowed = np.ones(self.segment.docs, dtype=bool)
                allowed[self.segment.decode_docs(term.first, term.first, term.end, term.df)] = False
                counters.blocks_decoded += term.end - term.first
        return allowed

    def _phrase_mask(self, phrase: Sequence[str], docs: I64Array) -> npt.NDArray[np.bool_]:
        """Which of `docs` hold `phrase` (see `phrases.phrase_matches`)."""
        from crawlspace.index.phrases import phrase_matches  # numba, as in _top_k
        from crawlspace.index.topk import OK

        looked_up = [self._term(word) for word in phrase]
        terms = [term for term in looked_up if term is not None]
        if len(terms) < len(looked_up) or not docs.size:
            return np.zeros(docs.size, dtype=bool)
        order = np.argsort(docs, kind="stable")
        has, status = phrase_matches(
            *self.segment.block_codes(),
            *self.segment.position_codes(),
            np.array([t.first for t in terms], dtype=np.int64),
            np.array([t.end for t in terms], dtype=np.int64),
            np.array([t.df for t in terms], dtype=np.int64),
            self.segment.docs,
            self.norms.shape[1],
            docs[order],
        )
        if status != OK:
            raise SegmentFormatError(f"{self.segment.path}: a postings block does not decode to its table's counts")
        mask = np.empty(docs.size, dtype=bool)
        mask[order] = has
        return mask

    def _top_k(
        self,
        terms: Sequence[_Term],
        allowed: npt.NDArray[np.bool_] | None,
        conjunctive: bool,
        prune: bool,
        k: int,
        counters: SearchCounters,
    ) -> tuple[I64Array, F64Array]:
        from crawlspace.index.topk import OK, top_k  # numba: loaded by the first search, not by every command

        codes = self.segment.block_codes()
        docs, scores, scored, decoded, status = top_k(
            *codes,
            self.block_max,
            self.norms,
            self.weights,
            self.scorer.params.k1,
            np.array([t.first for t in terms], dtype=np.int64),
            np.array([t.end for t in terms], dtype=np.int64),
            np.array([t.df for t in terms], dtype=np.int64),
            np.array([t.idf for t in terms], dtype=np.float64),
            np.zeros(0, dtype=bool) if allowed is None else allowed,
            np.zeros(0, dtype=np.float64) if self.prior_scores is None else self.prior_scores,
            self._prior_max,
            conjunctive,
            prune,
            k,
            _SLACK,
        )
        if status != OK:
            raise SegmentFormatError(f"{self.segment.path}: a postings block does not decode to its table's counts")
        counters.postings_scored += int(scored)
        counters.blocks_decoded += int(decoded)
        return docs, scores

    def search(self, query: Query | str, k: int = 10, *, prune: bool = True) -> SearchResult:
        query = parse_query(query) if isinstance(query, str) else query
        counters = SearchCounters()
        segment = self.segment
        if query.empty or k <= 0 or not segment.docs:
            return SearchResult([], counters)
        looked_up = {word: self._term(word) for word in query.terms}
        terms = [term for term in looked_up.values() if term is not None]
        if query.conjunctive and len(terms) < len(looked_up):
            return SearchResult([], counters)
        if not terms or any(looked_up[word] is None for phrase in query.phrases for word in phrase):
            return SearchResult([], counters)
        counters.postings_total = sum(term.df for term in terms)
        counters.blocks_total = sum(term.end - term.first for term in terms)
        allowed = self._allowed(query, counters)
        excluded_phrases = [phrase for phrase in query.excluded if len(phrase) > 1]
        if not query.phrases and not excluded_phrases:
            docs, scores = self._top_k(terms, allowed, query.conjunctive, prune, k, counters)
        else:  # every document with the terms, then the phrases checked; the best k of those holding them
            docs, scores = self._top_k(terms, allowed, query.conjunctive, False, segment.docs, counters)
            keep = np.ones(docs.size, dtype=bool)
            for phrase in query.phrases:
                keep &= self._phrase_mask(phrase, docs)
            for phrase in excluded_phrases:
                keep &= ~self._phrase_mask(phrase, docs)
            ranked = np.argsort(-scores, kind="stable")
            ranked = ranked[keep[ranked]]
            if ranked.size > k:  # the k-th score and every one tied with it, as the flat path returns
                ranked = ranked[scores[ranked] >= scores[ranked[k - 1]]]
            docs, scores = docs[ranked], scores[ranked]
        hits = [
            Hit(segment.url(doc), score, segment.title(doc), 0, doc, int(self.groups[doc]))
            for doc, score in zip(docs.tolist(), scores.tolist(), strict=True)
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
