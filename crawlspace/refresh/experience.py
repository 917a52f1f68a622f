"""The `user-experience` refresh policy's weights (seed 004 §4): a page matters as much as its staleness
would hurt the people searching, that is by how often it is shown to them and how high, and by how
much its changes move what they are shown.

Impressions: over the queries of the query log (refresh.querylog: a file, or the searches made on the
dashboard; a query logged n times counts n times), the impression weight of a page's place in that
query's top k on the crawl's search index (crawlspace.index): 1 / log2(1 + position), the position
discount of DCG (a first result weighs 1, a tenth 0.29; a page below the k-th weighs nothing).

Impact (seed 004: "retains multiple historical versions of the web page and generates an average
value based on the impact of each previous content change on the search quality"): for a page the
queries show, its stored versions (CrawlReader.versions: the crawl table keeps
`table_content_versions`, 3 by default) are each scored against every logged query that shows it,
with the index's global statistics (index.rescore), and placed among that query's current results
(the other pages' scores as the index has them). A change from one version to the next moved the
page from one place to another: by |impression(before) - impression(after)| (0: the same place; 1:
from first result to not shown, or back). A change's movement is the mean over the queries that show
the page, each as often as it was logged; the page's impact is the mean over its changes, at least
`IMPACT_FLOOR` (a page whose changes never move a result, such as edits of words no query has, is
still refreshed now and then: the index it would rank in is built from those fetches). A page with
no change kept yet has impact `IMPACT_PRIOR`, halfway between a change that moves nothing and one that
takes the page in or out of first place: until its history says, it is neither.

A page's weight is `FLOOR` + impressions x impact. The refresh allocation is then Cho &
Garcia-Molina's optimal one (refresh.policies.Optimal) under those weights: a page on the first
results of frequent queries whose changes move them is kept fresh first; a page no logged query
shows keeps only the floor's share.

Cost: the weights are recomputed every `interval` seconds, not per fetch, off the event loop
(`compute` runs in a thread). The queries are searched once each; the impact needs each shown
page's versions read back from the WARC files and parsed, so it is measured for at most
`impact_pages` pages per computation (those never measured or changed since first, most shown
first), and kept with the page's change count and the queries showing it: a page is measured again
only when it changed again or the queries showing it did. Before there is an index every page weighs
the floor (plain freshness); a crawl table that cannot be opened yet leaves impacts at the prior.
Memory: a small record (impact, change count, the queries showing it) per page some logged query shows,
at most k x the distinct queries; no page text is kept between computations.
"""

from __future__ import annotations

import itertools
import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from crawlspace.refresh.querylog import QueryLogTail

if TYPE_CHECKING:
    from crawlspace.index import BM25F, Hit, Query
    from crawlspace.store.reader import CrawlReader

__all__ = [
    "FLOOR",
    "IMPACT_FLOOR",
    "IMPACT_PRIOR",
    "UserExperienceWeights",
    "impression",
    "movement",
]

FLOOR = 0.1
"""A page in no logged query's top k weighs as a tenth of one first result of one logged query."""
IMPACT_FLOOR = 0.1
"""The impact of a page whose changes never moved a result: a tenth of one that goes in and out of first place."""
IMPACT_PRIOR = 0.5
TOP_K = 10
log = logging.getLogger("crawlspace")
IMPACT_PAGES = 200
"""Pages whose versions are read and scored per computation (a few milliseconds each, mostly parsing)."""


def impression(position: int) -> float:
    """The weight of being shown at `position` (1-based) in a result list: DCG's discount."""
    return 1.0 / math.log2(1.0 + position)


def _shown_at(score: float | None, others: Sequence[float], k: int) -> float:
    """The impression a page of `score` would have among the other results' scores (0: not shown)."""
    if score is None:
        return 0.0
    position = 1 + sum(1 for other in others if other > score)
    return impression(position) if position <= k else 0.0


@dataclass(frozen=True, slots=True)
class Showing:
    """One logged query that shows the page: the parsed query, how often it was logged, and the scores
    of the other pages of its top k."""

    query: Query
    count: int
    others: tuple[float, ...]


def movement(scores: Sequence[Sequence[float | None]], showings: Sequence[Showing], k: int) -> list[float]:
    """How far each change moved the page: `scores[v][q]` is version v's score for showing q (None:
    the query would not return it), versions oldest first; one movement per change (v-1 -> v), the
    mean over the showings weighted by their counts."""
    total = sum(showing.count for showing in showings)
    moved: list[float] = []
    for before, after in itertools.pairwise(scores):
        shift = sum(
            showing.count * abs(_shown_at(old, showing.others, k) - _shown_at(new, showing.others, k))
            for old, new, showing in zip(before, after, showings, strict=True)
        )
        moved.append(shift / total if total else 0.0)
    return moved


@dataclass
class _Measured:
    key: tuple[object, ...]  # the page's change count and the queries showing it, when measured
    impact: float
    changes: int  # changes scored


@dataclass
class UserExperienceWeights:
    index_dir: Path
    query_log: Path
    crawl_dir: Path | None = None
    """Where the pages' stored versions are read (None: impressions alone, every impact 1)."""
    interval: float = 300.0
    k: int = TOP_K
    impact_pages: int = IMPACT_PAGES
    clock: Callable[[], float] = time.monotonic
    computed_at: float | None = None
    weights: dict[str, float] = field(default_factory=dict)
    stats: dict[str, int | str] = field(default_factory=dict)
    impacts: dict[str, float] = field(default_factory=dict)
    """The impact of each page shown at the last computation (module docstring)."""

    def __post_init__(self) -> None:
        self._log = QueryLogTail(self.query_log)
        self._measured: dict[str, _Measured] = {}

    def weight(self, url: str) -> float:
        return FLOOR + self.weights.get(url, 0.0)

    def due(self) -> bool:
        return self.computed_at is None or self.clock() - self.computed_at >= self.interval

    def compute(self) -> tuple[dict[str, float], dict[str, int | str]]:
        """The weights from the index, the query log and the stored versions as they are now (safe in a
        thread: it only reads files; one computation at a time), and what went into them. No index
        yet, or one that fails its checks: no weights."""
        from crawlspace.index import Index, IndexFormatError, parse_query

        queries = self._log.read()
        logged: dict[str, int | str] = {"queries": len(queries), **self._log.stats()}
        try:
            index = Index(self.index_dir)
        except (IndexFormatError, OSError) as exc:
            return {}, {**logged, "index": f"none ({exc})"[:200]}
        impressions: dict[str, float] = {}
        shown: dict[str, list[Showing]] = {}
        answered = 0
        with index:
            for text, count in queries.items():
                query = parse_query(text)
                if query.empty:  # a line that parses to no terms
                    continue
                try:  # one more than shown: a version that falls below it is not shown
                    hits = index.search(query, self.k + 1).hits
                except ValueError:
                    continue
                answered += bool(hits)
                for position, hit in enumerate(hits[: self.k], 1):
                    impressions[hit.url] = impressions.get(hit.url, 0.0) + count * impression(position)
                    shown.setdefault(hit.url, []).append(Showing(query, count, _others(hits, hit)))
            measured, pending, history = self._measure(index.scorer, shown, impressions)
        impacts = {url: self._impact(url) if self.crawl_dir is not None else 1.0 for url in impressions}
        weights = {url: impressions[url] * impacts[url] for url in impressions}
        stats: dict[str, int | str] = {
            **logged, "queries_with_results": answered, "weighted_pages": len(weights), "index": "ok",
            "history": history, "impact_measured": measured, "impact_pending": pending,
            "impact_moved": sum(1 for url in impacts if self._moved(url)),
        }  # fmt: skip
        self.impacts = impacts
        return weights, stats

    def _impact(self, url: str) -> float:
        found = self._measured.get(url)
        if found is None or not found.changes:
            return IMPACT_PRIOR
        return max(IMPACT_FLOOR, found.impact)

    def _moved(self, url: str) -> bool:
        """Some change of the page was seen to move it (more than the floor)."""
        found = self._measured.get(url)
        return found is not None and found.changes > 0 and found.impact > IMPACT_FLOOR

    def _measure(
        self, scorer: BM25F, shown: dict[str, list[Showing]], impressions: dict[str, float]
    ) -> tuple[int, int, str]:
        """Measure the impact of the shown pages that need it, most shown first, at most `impact_pages`;
        (measured, left for later, how the crawl's table was)."""
        if self.crawl_dir is None:
            return 0, 0, "none"
        from crawlspace.store.crawltable import CrawlTableError
        from crawlspace.store.reader import CrawlReader

        try:
            reader = CrawlReader(self.crawl_dir)
        except (CrawlTableError, OSError) as exc:
            return 0, 0, f"none ({exc})"[:200]
        measured = pending = 0
        try:
            with reader:
                for url in sorted(shown, key=lambda url: -impressions[url]):
                    done = self._measure_page(reader, scorer, url, shown[url], measured < self.impact_pages)
                    measured += done == "measured"
                    pending += done == "pending"
        except Exception as exc:  # advisory: a table or file that fails to read must not end the crawl
            log.warning("refresh: the user-experience impacts stay as they were: %s", exc)
            return measured, pending, f"failed ({exc})"[:200]
        for url in set(self._measured) - set(shown):  # no longer shown: measured again if it comes back
            del self._measured[url]
        return measured, pending, "ok"

    def _measure_page(
        self, reader: CrawlReader, scorer: BM25F, url: str, showings: list[Showing], allowed: bool
    ) -> str:
        """Measure the page's impact if it needs it and `allowed`: "measured" (its versions were scored),
        "current" (nothing to do) or "pending" (it needs it, and must wait for a later computation)."""
        fetches = reader.fetch_history(url)
        changes = fetches[0].changes if fetches else 0
        key = (changes, tuple(sorted((repr(showing.query), showing.count) for showing in showings)))
        known = self._measured.get(url)
        if known is not None and known.key == key:
            return "current"
        if not changes:  # nothing to measure until it changes
            self._measured[url] = _Measured(key, IMPACT_PRIOR, 0)
            return "current"
        if not allowed:
            return "pending"
        self._measured[url] = self._page_impact(reader, scorer, url, showings, key)
        return "measured"

    def _page_impact(
        self, reader: CrawlReader, scorer: BM25F, url: str, showings: list[Showing], key: tuple[object, ...]
    ) -> _Measured:
        from crawlspace.index import IndexDocument
        from crawlspace.index.rescore import score_document

        versions = reader.versions(url)[::-1]  # oldest first
        anchor = " ".join(found.text for found in reader.anchors(url) if found.text)
        scores = [
            [
                score_document(scorer, showing.query, IndexDocument(url, version.title, version.text, anchor))
                for showing in showings
            ]
            for version in versions
        ]
        moved = movement(scores, showings, self.k)
        return _Measured(key, sum(moved) / len(moved) if moved else IMPACT_PRIOR, len(moved))

    def install(self, weights: dict[str, float], stats: dict[str, int | str]) -> None:
        """Use a computation's weights; its stats are the last computation's, but for the counts over the
        crawl: computations, and pages measured in all of them (`impact_measured` is the last one's, 0
        whenever nothing shown changed since the one before)."""
        before = self.stats
        self.weights, self.stats = (
            weights,
            {
                **stats,
                "computations": int(before.get("computations", 0)) + 1,
                "impact_measured_total": int(before.get("impact_measured_total", 0))
                + int(stats.get("impact_measured", 0)),
            },
        )
        self.computed_at = self.clock()


def _others(hits: Sequence[Hit], hit: Hit) -> tuple[float, ...]:
    return tuple(other.score for other in hits if other is not hit)
