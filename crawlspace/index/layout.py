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
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType

import xxhash

from crawlspace.durable import fsync_directory
from crawlspace.index.bounds import block_bounds
from crawlspace.index.container import IndexFormatError
from crawlspace.index.docvalues import DocValues
from crawlspace.index.query import Query, parse_query
from crawlspace.index.scoring import BM25F, Bm25fParams
from crawlspace.index.search import (
    Explanation,
    Hit,
    SearchCounters,
    SearchResult,
    SegmentSearcher,
    search_segments,
)
from crawlspace.index.segment import IndexDocument, Segment, SegmentWriter
from crawlspace.index.stats import CollectionStats

__all__ = [
    "MANIFEST",
    "STATS",
    "Index",
    "Manifest",
    "SegmentEntry",
    "build_index",
    "finish_index",
    "segment_name",
    "shard_of",
    "tier_of",
]

MANIFEST = "manifest.json"
STATS = "stats.cst"
FORMAT = 2
TIERS = (1, 2)


def shard_of(url: str, shards: int) -> int:
    """The shard a page belongs to: a hash of its URL (stable across builds and machines)."""
    return xxhash.xxh3_64_intdigest(url.encode("utf-8", "surrogatepass")) % shards


@dataclass(frozen=True, slots=True)
class SegmentEntry:
    """A segment as the manifest lists it: its file, its shard, its tier, and its document values
    file in this generation (`docvalues`; None: the segment as written, nothing masked)."""

    name: str
    shard: int
    tier: int = 1
    live: str | None = None

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "shard": self.shard, "tier": self.tier, "live": self.live}

    @classmethod
    def from_json(cls, value: dict[str, object]) -> SegmentEntry:
        live = value.get("live")
        tier = value.get("tier", 1)
        shard = value["shard"]
        if not isinstance(tier, int) or tier not in TIERS or not isinstance(shard, int) or shard < 0:
            raise ValueError(f"bad segment entry {value!r}")
        return cls(str(value["name"]), shard, tier, None if live is None else str(live))


def tier_of(prior: float, tier_prior: float | None) -> int:
    """Tier 1 holds the pages whose PageRank is at least `tier_prior` (None: every page, one tier)."""
    return 1 if tier_prior is None or prior >= tier_prior else 2


def build_index(
    documents: Iterable[IndexDocument],
    directory: str | Path,
    *,
    shards: int = 1,
    segment_docs: int = 25_000,
    tier_prior: float | None = None,
) -> Path:
    """Writes the documents as `shards` shards (a new segment every `segment_docs` documents of a
    shard and tier, to bound the writers' memory), then the statistics, then the manifest.
    `tier_prior`: pages with a prior below it go to tier 2 (IIR 7.2.1)."""
    if shards < 1:
        raise ValueError("an index needs at least one shard")
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    writers: dict[tuple[int, int], SegmentWriter] = {}
    written: list[SegmentEntry] = []

    def flush(shard: int, tier: int) -> None:
        (root / f"shard-{shard:03d}").mkdir(exist_ok=True)
        name = segment_name(shard, sum(1 for e in written if e.shard == shard), tier=tier)
        writers.pop((shard, tier)).write(root / name)
        written.append(SegmentEntry(name, shard, tier))

    for document in documents:
        place = (shard_of(document.url, shards), tier_of(document.prior, tier_prior))
        writer = writers.setdefault(place, SegmentWriter())
        writer.add(document)
        if len(writer) >= segment_docs:
            flush(*place)
    for place in sorted(writers):
        flush(*place)
    for shard in range(shards):  # a shard no page hashed to still gets its (empty) segment
        if not any(entry.shard == shard for entry in written):
            writers[(shard, 1)] = SegmentWriter()
            flush(shard, 1)
    return finish_index(root, written, shards=shards, tier_prior=tier_prior)


def segment_name(shard: int, number: int, *, generation: int = 0, tier: int = 1) -> str:
    """Where segment `number` of `shard` written by `generation` goes, relative to the index directory."""
    return f"shard-{shard:03d}/segment-g{generation:04d}-t{tier}-{number:04d}.seg"


def finish_index(
    root: Path,
    entries: Sequence[SegmentEntry],
    *,
    shards: int,
    generation: int = 0,
    tier_prior: float | None = None,
    summary: dict[str, object] | None = None,
) -> Path:
    """Completes an index whose segments (and document values files) are written: the global
    statistics of their live documents, their block bounds, and last the manifest."""
    segments = [Segment(root / entry.name) for entry in entries]
    try:
        values = [_values(root, entry, segment) for entry, segment in zip(entries, segments, strict=True)]
        stats = CollectionStats.from_segments(segments, [v.deleted if v is not None else None for v in values])
        stats.write(root / STATS)
        scorer = BM25F(stats)
        for segment in segments:
            block_bounds(segment, scorer)  # stored beside the segment: the first search need not compute them
    finally:
        for segment in segments:
            segment.close()
    manifest = {
        "format": FORMAT,
        "generation": generation,
        "shards": shards,
        "tier_prior": tier_prior,
        "stats": STATS,
        "segments": [entry.to_json() for entry in entries],
        **({"summary": summary} if summary else {}),
    }
    aside = root / (MANIFEST + ".writing")
    with open(aside, "w", encoding="utf-8") as out:
        json.dump(manifest, out, indent=1)
        out.flush()
        os.fsync(out.fileno())
    os.replace(aside, root / MANIFEST)
    fsync_directory(root)
    return root


def _values(root: Path, entry: SegmentEntry, segment: Segment) -> DocValues | None:
    return None if entry.live is None else DocValues.read(root / entry.live, segment)


@dataclass(frozen=True, slots=True)
class Manifest:
    """What an index directory's manifest says."""

    generation: int
    shards: int
    tier_prior: float | None
    stats: str
    segments: tuple[SegmentEntry, ...]
    summary: dict[str, object]
    """What the build says about itself (the index job: its tier cutoff)."""

    @classmethod
    def read(cls, directory: Path) -> Manifest:
        try:
            manifest = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
            if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
                found = manifest.get("format") if isinstance(manifest, dict) else None
                raise IndexFormatError(f"{directory}: index format {found}, expected {FORMAT}: rebuild it")
            tier_prior = manifest["tier_prior"]
            return cls(
                int(manifest["generation"]),
                int(manifest["shards"]),
                None if tier_prior is None else float(tier_prior),
                str(manifest["stats"]),
                tuple(SegmentEntry.from_json(entry) for entry in manifest["segments"]),
                dict(manifest.get("summary") or {}),
            )
        except FileNotFoundError as exc:
            raise IndexFormatError(f"{directory}: no {MANIFEST}: not an index, or its build did not finish") from exc
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            if isinstance(exc, IndexFormatError):
                raise
            raise IndexFormatError(f"{directory / MANIFEST}: unreadable manifest: {exc}") from exc


class Index:
    """An opened index directory: every segment memory-mapped with its document values, searched in
    parallel threads, tier by tier."""

    def __init__(
        self,
        directory: str | Path,
        *,
        params: Bm25fParams | None = None,
        threads: int | None = None,
    ):
        self.directory = Path(directory)
        self.manifest = Manifest.read(self.directory)
        self.shards = self.manifest.shards
        self.stats = CollectionStats.read(self.directory / self.manifest.stats)
        self.scorer = BM25F(self.stats, params or Bm25fParams())
        self.segments: list[Segment] = []
        values: list[DocValues] = []
        try:
            for entry in self.manifest.segments:
                segment = Segment(self.directory / entry.name)
                self.segments.append(segment)
                values.append(_values(self.directory, entry, segment) or DocValues.of(segment))
        except IndexFormatError:
            for segment in self.segments:
                segment.close()
            raise
        self.tiers: list[list[int]] = [
            [number for number, entry in enumerate(self.manifest.segments) if entry.tier == tier]
            for tier in sorted({entry.tier for entry in self.manifest.segments})
        ]
        """The segments of each tier, best tier first."""
        self._pool = ThreadPoolExecutor(max_workers=threads or min(len(self.segments), os.cpu_count() or 1))
        self.searchers: Sequence[SegmentSearcher] = list(
            self._pool.map(
                lambda pair: SegmentSearcher(pair[0], self.scorer, values=pair[1]),
                zip(self.segments, values, strict=True),
            )
        )

    def search(
        self, query: Query | str, k: int = 10, *, prune: bool = True, collapse: bool = False, tiers: bool = True
    ) -> SearchResult:
        """The top k. Tiers (IIR 7.2.1): tier 1 first, tier 2 only when tier 1 gives fewer than k
        results, whose results then follow tier 1's (`tiers=False`: every segment as one tier,
        ranked by score alone). `collapse`: one result per group (near-duplicates), the best of
        each, with the number of its group's other pages found (`Hit.similar`, counted among the
        results fetched to fill k groups: a search asks for 4k results, then 4 times more while it
        has fewer groups); a group shown in tier 1 is not shown again from tier 2."""
        parsed = parse_query(query) if isinstance(query, str) else query
        groups = self.tiers if tiers else [list(range(len(self.segments)))]
        hits: list[Hit] = []
        counters = SearchCounters()
        shown: dict[int, int] = {}  # group -> its place in hits
        searched = 0
        for numbers in groups:
            if len(hits) >= k:
                break
            searched += 1
            searchers = [self.searchers[number] for number in numbers]
            if not collapse:
                result = search_segments(searchers, parsed, k - len(hits), prune=prune, pool=self._pool)
                counters.add(result.counters)
                hits += [replace(hit, segment=numbers[hit.segment]) for hit in result.hits]
                continue
            found, similar = self._collapsed(searchers, parsed, k - len(hits), prune, shown, counters)
            for group, extra in similar.items():
                hit = hits[shown[group]]
                hits[shown[group]] = replace(hit, similar=hit.similar + extra)
            for hit in found:
                shown[hit.group] = len(hits)
                hits.append(replace(hit, segment=numbers[hit.segment]))
        return SearchResult(hits, counters, tiers_searched=searched, tiers=len(groups))

    def _collapsed(
        self,
        searchers: Sequence[SegmentSearcher],
        query: Query,
        k: int,
        prune: bool,
        shown: dict[int, int],
        counters: SearchCounters,
    ) -> tuple[list[Hit], dict[int, int]]:
        """The best hit of up to k groups not in `shown`, and how many hits of the groups in `shown` came up."""
        wanted = 4 * k
        while True:
            result = search_segments(searchers, query, wanted, prune=prune, pool=self._pool)
            best: dict[int, Hit] = {}
            counts: dict[int, int] = {}
            for hit in result.hits:
                if hit.group not in shown:
                    best.setdefault(hit.group, hit)
                counts[hit.group] = counts.get(hit.group, 0) + 1
            if len(best) >= k or len(result.hits) < wanted:
                break
            wanted *= 4
        counters.add(result.counters)
        found = [replace(hit, similar=counts[group] - 1) for group, hit in best.items()][:k]
        return found, {group: counts[group] for group in counts if group in shown}

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
