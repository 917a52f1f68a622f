"""The search index over a crawl (issue 19): document-partitioned shards, global statistics, BM25F.

Who writes it: the index job (`crawlspace index`, crawlspace.jobs.index: a map-reduce on Dask that on
a crawl that went on writes only new and changed pages, as new segments, and masks the old copies in
each segment's document values, `docvalues`, then merges segments by `merge`'s policy) or
`layout.build_index` in one process (tests,
benchmarks). Pages come from `CrawlReader` as `IndexDocument`s
(URL, title, text, the anchor text of the links to the page, a PageRank prior); `segment.analyze`
cuts each field into terms with `tokens.tokenize` (the map side), a `SegmentWriter` per shard turns
a shard's documents into a segment file (the reduce side: postings sorted by doc id, compressed in
blocks), and `stats.CollectionStats.from_segments` adds up every segment's counts into the global
statistics written beside the shards. A page's shard is a hash of its URL (`layout.shard_of`).

Who reads it: `layout.Index` maps every segment, scores with `scoring.BM25F` over the global
statistics (plus a PageRank prior when its weight is set), and runs a query (`query.parse_query`)
tier by tier (tier 2, the pages below the PageRank cutoff, only when tier 1 gives fewer than k) on
the tier's segments in threads, each with a compiled block-max MaxScore kernel (`search.SegmentSearcher`
and `topk`, its block bounds from `bounds`), then merges their top k; `Index.explain` breaks a result's score into its
parts, `snippets.make_snippet` finds the passage to show. `crawlspace search` is the command line.

Invariants:
- the same tokenizer at index and query time; a file made with another tokenizer version is refused;
- a live (unmasked) document lives in exactly one segment, so the segments' live document frequencies
  add up to the collection's, and S shards, or an index updated over generations, rank exactly as one
  index built at once (same documents, same scores, ties by URL);
- a segment, the statistics and the manifest are each written aside, fsynced and renamed; an index
  directory without a manifest is incomplete; a file that fails its checks (size, structure,
  checksums) raises `container.IndexFormatError` naming the file;
- pruning never changes a result: the pruned top k equals the exhaustive top k.
"""

from crawlspace.index.container import IndexFormatError
from crawlspace.index.layout import Index, build_index, shard_of
from crawlspace.index.query import Query, parse_query
from crawlspace.index.scoring import BM25F, Bm25fParams
from crawlspace.index.search import Hit, SearchResult
from crawlspace.index.segment import IndexDocument, Segment, SegmentFormatError, SegmentWriter
from crawlspace.index.stats import CollectionStats, StatsFormatError
from crawlspace.index.tokens import tokenize

__all__ = [
    "BM25F",
    "Bm25fParams",
    "CollectionStats",
    "Hit",
    "Index",
    "IndexDocument",
    "IndexFormatError",
    "Query",
    "SearchResult",
    "Segment",
    "SegmentFormatError",
    "SegmentWriter",
    "StatsFormatError",
    "build_index",
    "parse_query",
    "shard_of",
    "tokenize",
]
