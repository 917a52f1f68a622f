"""An index directory: shards of segments, the global statistics beside them, and a manifest.

    INDEX/manifest.json                 written last: an index without it is incomplete
    INDEX/stats.cst                     `CollectionStats` of all shards
    INDEX/shard-<s>/segment-<n>.seg     the segments of shard s
    INDEX/shard-<s>/segment-<n>.seg.bounds-<digest>   its block bounds under some statistics (`bounds`)

A page's shard is xxh3-64 of its URL modulo the number of shards (document partitioning, IIR 20.3),
so every build of the same crawl puts a page in the same shard. `build_index` is the in-process
build (one writer per shard, statistics from the written segments); the Dask job does the same steps
per partition with the same writer and `CollectionStats.from_segments`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from types import TracebackType

import xxhash

from crawlspace.durable import fsync_directory
from crawlspace.index.bounds import block_bounds
from crawlspace.index.container import IndexFormatError
from crawlspace.index.query import Query
from crawlspace.index.scoring import BM25F, Bm25fParams
from crawlspace.index.search import WINDOW_DOCS, Explanation, Hit, SearchResult, SegmentSearcher, search_segments
from crawlspace.index.segment import IndexDocument, Segment, SegmentWriter
from crawlspace.index.stats import CollectionStats

__all__ = ["MANIFEST", "STATS", "Index", "build_index", "finish_index", "segment_name", "shard_of"]

MANIFEST = "manifest.json"
STATS = "stats.cst"
FORMAT = 1


def shard_of(url: str, shards: int) -> int:
    """The shard a page belongs to: a hash of its URL (stable across builds and machines)."""
    return xxhash.xxh3_64_intdigest(url.encode("utf-8", "surrogatepass")) % shards


def build_index(
    documents: Iterable[IndexDocument], directory: str | Path, *, shards: int = 1, segment_docs: int = 25_000
) -> Path:
    """Writes the documents as `shards` shards (a new segment every `segment_docs` documents of a
    shard, to bound the writers' memory), then the statistics, then the manifest."""
    if shards < 1:
        raise ValueError("an index needs at least one shard")
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    writers = [SegmentWriter() for _ in range(shards)]
    written: list[list[str]] = [[] for _ in range(shards)]

    def flush(shard: int) -> None:
        folder = root / f"shard-{shard:03d}"
        folder.mkdir(exist_ok=True)
        name = segment_name(shard, len(written[shard]))
        writers[shard].write(root / name)
        written[shard].append(name)
        writers[shard] = SegmentWriter()

    for document in documents:
        shard = shard_of(document.url, shards)
        writers[shard].add(document)
        if len(writers[shard]) >= segment_docs:
            flush(shard)
    for shard in range(shards):
        if len(writers[shard]) or not written[shard]:
            flush(shard)
    return finish_index(root, written)


def segment_name(shard: int, number: int) -> str:
    """Where segment `number` of `shard` goes, relative to the index directory."""
    return f"shard-{shard:03d}/segment-{number:04d}.seg"


def finish_index(root: Path, shards: Sequence[Sequence[str]]) -> Path:
    """Completes an index whose segments are written (`shards[s]`: shard s's segment names):
    the global statistics of all of them, their block bounds, and last the manifest."""
    segments = [Segment(root / name) for names in shards for name in names]
    try:
        stats = CollectionStats.from_segments(segments)
        stats.write(root / STATS)
        scorer = BM25F(stats)
        for segment in segments:
            block_bounds(segment, scorer)  # stored beside the segment: the first search need not compute them
    finally:
        for segment in segments:
            segment.close()
    manifest = {"format": FORMAT, "shards": [list(names) for names in shards], "stats": STATS}
    aside = root / (MANIFEST + ".writing")
    with open(aside, "w", encoding="utf-8") as out:
        json.dump(manifest, out, indent=1)
        out.flush()
        os.fsync(out.fileno())
    os.replace(aside, root / MANIFEST)
    fsync_directory(root)
    return root


class Index:
    """An opened index directory: every segment memory-mapped, searched in parallel threads."""

    def __init__(
        self,
        directory: str | Path,
        *,
        params: Bm25fParams | None = None,
        threads: int | None = None,
        window: int = WINDOW_DOCS,
    ):
        self.directory = Path(directory)
        try:
            manifest = json.loads((self.directory / MANIFEST).read_text(encoding="utf-8"))
            names = [str(name) for shard in manifest["shards"] for name in shard]
            stats_name = str(manifest["stats"])
            if manifest.get("format") != FORMAT:
                raise IndexFormatError(f"{self.directory}: index format {manifest.get('format')}, expected {FORMAT}")
        except FileNotFoundError as exc:
            raise IndexFormatError(
                f"{self.directory}: no {MANIFEST}: not an index, or its build did not finish"
            ) from exc
        except (OSError, ValueError, KeyError, TypeError) as exc:
            if isinstance(exc, IndexFormatError):
                raise
            raise IndexFormatError(f"{self.directory / MANIFEST}: unreadable manifest: {exc}") from exc
        self.shards = len(manifest["shards"])
        self.stats = CollectionStats.read(self.directory / stats_name)
        self.scorer = BM25F(self.stats, params or Bm25fParams())
        self.segments: list[Segment] = []
        try:
            for name in names:
                self.segments.append(Segment(self.directory / name))
        except IndexFormatError:
            for segment in self.segments:
                segment.close()
            raise
        self._pool = ThreadPoolExecutor(max_workers=threads or min(len(self.segments), os.cpu_count() or 1))
        self.searchers: Sequence[SegmentSearcher] = list(
            self._pool.map(lambda segment: SegmentSearcher(segment, self.scorer, window=window), self.segments)
        )

    def search(self, query: Query | str, k: int = 10, *, prune: bool = True, collapse: bool = False) -> SearchResult:
        """The top k; `collapse`: one result per group (near-duplicates), the best of each, with the
        number of its group's other pages found (`Hit.similar`, counted among the results fetched to
        fill k groups: a search asks for 4k results, then 4 times more while it has fewer groups)."""
        if not collapse:
            return search_segments(self.searchers, query, k, prune=prune, pool=self._pool)
        wanted = 4 * k
        while True:
            result = search_segments(self.searchers, query, wanted, prune=prune, pool=self._pool)
            best: dict[int, Hit] = {}
            counts: dict[int, int] = {}
            for hit in result.hits:
                best.setdefault(hit.group, hit)
                counts[hit.group] = counts.get(hit.group, 0) + 1
            if len(best) >= k or len(result.hits) < wanted:
                break
            wanted *= 4
        hits = [replace(hit, similar=counts[group] - 1) for group, hit in best.items()][:k]
        return SearchResult(hits, result.counters)

    def explain(self, hit: Hit, query: Query | str) -> Explanation:
        """The parts of a result's score (`hit` from this index's `search`)."""
        return self.searchers[hit.segment].explain(hit.doc, query)

    def close(self) -> None:
        self._pool.shutdown()
        for segment in self.segments:
            segment.close()

    def __enter__(self) -> Index:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()
