"""The `user-experience` refresh policy's weights (seed 004 §4): a page matters as much as its staleness
would hurt the people searching, that is by how often it is shown to them and how high.

A page's weight is `FLOOR` plus the sum, over the queries of the query log (one query per line; a query
logged n times counts n times), of the impression weight of its place in that query's top k on the
crawl's search index (crawlspace.index): 1 / log2(1 + position), the position discount of DCG (a first
result weighs 1, a tenth 0.29; a page below the k-th weighs nothing for that query). The refresh
allocation is then Cho & Garcia-Molina's optimal one (refresh.policies.Optimal) under those weights:
a page on the first results of frequent queries is kept fresh first, a page no logged query shows
keeps only the floor's share (it is still refetched now and then: the index it would rank in is
built from those fetches).

The weights are recomputed every `interval` seconds, not per fetch, off the event loop (`compute`
runs the queries in a thread: a query log of thousands of queries takes seconds), from whatever index
is there then: the crawl's own `DIR/jobs/index`, written by `crawlspace index DIR` run beside the
crawl (the index job reads a crawl while it runs, and updates an index incrementally). Before there is
an index every page weighs the floor (plain freshness). Memory: one float per page that some logged
query shows, at most k x the distinct queries.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

FLOOR = 0.1
"""A page in no logged query's top k weighs as a tenth of one first result of one logged query."""
TOP_K = 10
MAX_QUERY_CHARS = 1000  # longer lines are not queries anyone typed: skipped


class QueryLogError(ValueError):
    """A query log that cannot be read (missing, not text)."""


def read_query_log(path: Path) -> Counter[str]:
    """The logged queries with how often each was logged; blank and overlong lines are skipped."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise QueryLogError(f"{path}: cannot read the query log ({exc})") from None
    queries: Counter[str] = Counter()
    for line in text.splitlines():
        query = " ".join(line.split())
        if query and len(query) <= MAX_QUERY_CHARS:
            queries[query] += 1
    return queries


def impression(position: int) -> float:
    """The weight of being shown at `position` (1-based) in a result list: DCG's discount."""
    return 1.0 / math.log2(1.0 + position)


@dataclass
class UserExperienceWeights:
    index_dir: Path
    query_log: Path
    interval: float = 300.0
    k: int = TOP_K
    clock: Callable[[], float] = time.monotonic
    computed_at: float | None = None
    weights: dict[str, float] = field(default_factory=dict)
    stats: dict[str, int | str] = field(default_factory=dict)

    def weight(self, url: str) -> float:
        return FLOOR + self.weights.get(url, 0.0)

    def due(self) -> bool:
        return self.computed_at is None or self.clock() - self.computed_at >= self.interval

    def compute(self) -> tuple[dict[str, float], dict[str, int | str]]:
        """The weights from the index and the query log as they are now (safe in a thread: it only reads
        files), and what went into them. No index yet, or one that fails its checks: no weights."""
        from crawlspace.index import Index, IndexFormatError

        queries = read_query_log(self.query_log)
        weights: dict[str, float] = {}
        try:
            index = Index(self.index_dir)
        except (IndexFormatError, OSError) as exc:
            return {}, {"queries": len(queries), "index": f"none ({exc})"[:200]}
        answered = 0
        with index:
            for query, count in queries.items():
                try:
                    hits = index.search(query, self.k).hits
                except ValueError:  # a line that parses to no terms
                    continue
                answered += bool(hits)
                for position, hit in enumerate(hits, 1):
                    weights[hit.url] = weights.get(hit.url, 0.0) + count * impression(position)
        stats: dict[str, int | str] = {
            "queries": len(queries), "queries_with_results": answered, "weighted_pages": len(weights),
            "index": "ok",
        }  # fmt: skip
        return weights, stats

    def install(self, weights: dict[str, float], stats: dict[str, int | str]) -> None:
        self.weights, self.stats = weights, {**stats, "computations": int(self.stats.get("computations", 0)) + 1}
        self.computed_at = self.clock()
