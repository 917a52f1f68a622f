"""The search index of a crawl (crawlspace.index), built as a map-reduce on Dask, and kept up to date
by adding segments (IIR 4.5) as a continuing crawl fetches new and changed pages.

map      `page_rows`: per key range, each page that has its own body (a 200 response, not an exact
         duplicate of another URL's body, which is indexed once, at its original), read from the
         fetch cells only: its URL, its body's fingerprint and its shard (a hash of its URL,
         `index.layout.shard_of`)
join     the anchor texts of the links to each page (the graph job's `anchors`, IIR 21.1.1), its
         PageRank (the pagerank job's `ranks`) and its near-duplicate cluster (the near job's
         `members`: the group a search collapses), by URL, each when that job has run
diff     against the previous index, if any: a page's version key is a hash of its body's
         fingerprint and its anchor text, its tier comes from its PageRank. A page whose key and
         tier are those of its indexed copy stays where it is; every other page (new, refetched
         with another body, with other anchor text, moved to the other tier) is written again,
         and its old copy, like that of a page that failed or is gone, is masked (`docvalues`)
reduce   `write_segments`: per shard and tier, the pages to write in URL order, their title and
         text read through the crawl reader (parsed again from the WARC when not stored), through
         `SegmentWriter` (a new segment every `segment_docs` pages) into shard-<s>/ of the output
then     the old segments are linked into the new output with this generation's document values
         (masks, current PageRank and groups), and `finish_index` computes the global statistics
         of the live documents, the block bounds and the manifest

The output directory DIR/jobs/index is an index directory (`index.Index(DIR/jobs/index)`), swapped in
whole like every job's output. The same crawl gives the same ranking on any scheduler, with any
number of crawl partitions, built at once or incrementally: the statistics count live documents
only and every live document is the page's current version, so an incremental index scores each
query's results exactly as a rebuild does. After an update (or with `merge=True`) segments are merged
by `index.merge`'s policy into this generation's directory, masked documents dropped; a run killed
during a merge leaves the previous output as it was (the new one is swapped in only when complete).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import dask
import numpy as np
import pandas as pd
import xxhash

from crawlspace.index.container import IndexFormatError
from crawlspace.index.docvalues import DocValues, live_name
from crawlspace.index.layout import Manifest, SegmentEntry, finish_index, segment_name, shard_of, tier_of
from crawlspace.index.merge import MergePolicy, MergeReport, merge_index
from crawlspace.index.segment import IndexDocument, Segment, SegmentWriter, group_key
from crawlspace.jobs import graph, neardup, pagerank
from crawlspace.jobs.context import JobContext, Piece, is_robots_txt
from crawlspace.jobs.output import JOBS_DIR, SUMMARY, PendingOutput
from crawlspace.parse import parse_html
from crawlspace.store.reader import CrawlReader, StoredPage

NAME = "index"
DEFAULT_SHARDS = 4
SEGMENT_DOCS = 25_000
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml", ""})
"""The media types a page's text is parsed from (what `CrawlReader.parse` parses)."""

PAGE_META = pd.DataFrame(
    {"url": pd.Series(dtype=object), "body": pd.Series(dtype="uint64"), "shard": pd.Series(dtype="int64")}
)
JOINED_META = PAGE_META.assign(
    anchor=pd.Series(dtype=object), prior=pd.Series(dtype="float64"), group=pd.Series(dtype=object)
)


def inputs(**options: Any) -> tuple[str, ...]:
    """The jobs this one reads: the link graph's anchors, PageRank for the prior, the near-duplicate
    clusters for the groups a search collapses."""
    return (graph.NAME, pagerank.NAME, neardup.NAME)


def page_rows(reader: CrawlReader, piece: Piece, shards: int) -> pd.DataFrame:
    """The pages of a key range that have their own body, from their fetch cells only (cheap: no text)."""
    urls: list[str] = []
    bodies: list[int] = []
    for url, fetch in reader.fetches(piece.part):
        if is_robots_txt(url) or fetch.status != 200 or (fetch.duplicate_of and fetch.duplicate_of != url):
            continue
        urls.append(url)
        # without a fingerprint (crawls before it was kept) the fetch time stands for the version
        known = fetch.fingerprint
        bodies.append(known if known is not None else xxhash.xxh3_64_intdigest(repr(fetch.fetched).encode()))
    return pd.DataFrame(
        {
            "url": pd.Series(urls, dtype=object),
            "body": np.array(bodies, dtype=np.uint64),
            "shard": np.array([shard_of(url, shards) for url in urls], dtype=np.int64),
        }
    )


def version_key(body: int, anchor: str) -> int:
    """What a page's indexed copy depends on besides its PageRank and group: its body and the anchor
    text pointing to it."""
    return xxhash.xxh3_64_intdigest(f"{body}\0{anchor}".encode("utf-8", "surrogatepass"))


def _anchor_text(texts: Any) -> str:
    return " ".join(texts) if isinstance(texts, list | tuple | np.ndarray) else ""


def page_text(reader: CrawlReader, page: StoredPage) -> tuple[str, str]:
    """A page's title and text: as stored, else parsed again from its WARC response (following a
    revisit record, which an unchanged refetch is stored as, to the response it repeats)."""
    if page.text is not None:
        return page.title or "", page.text
    parsed = reader.parse(page)
    if parsed is None:
        body = reader.body(page)
        if body is None or not body.revisit or body.content_type not in HTML_TYPES:
            return page.title or "", ""
        parsed = parse_html(body.content, page.url, body.content_type or None)
    return parsed.title or "", parsed.text or ""


def write_segments(
    rows: pd.DataFrame, dirs: tuple[str, ...], root: str, shard: int, tier: int, generation: int, segment_docs: int
) -> list[dict[str, Any]]:
    """The reduce: one shard's pages of one tier (rows in URL order) written as segments under `root`,
    each with its document values file; returns the entries written."""
    written: list[dict[str, Any]] = []
    writer = SegmentWriter()
    values: dict[str, list[Any]] = {"prior": [], "group": [], "key": []}

    def flush() -> None:
        nonlocal writer, values
        name = segment_name(shard, len(written), generation=generation, tier=tier)
        path = Path(root) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        writer.write(path)
        live = live_name(name, generation)
        with Segment(path) as segment:
            DocValues(
                np.zeros(segment.docs, dtype=bool),
                np.array(values["prior"], dtype=np.float32),
                np.array(values["group"], dtype=np.uint64),
                np.array(values["key"], dtype=np.uint64),
            ).write(Path(root) / live, segment)
        written.append({"name": name, "shard": shard, "tier": tier, "live": live, "docs": len(writer)})
        writer, values = SegmentWriter(), {"prior": [], "group": [], "key": []}

    with CrawlReader(list(dirs)) as reader:
        columns = [rows[name] for name in ("url", "anchor", "prior", "group", "key")]
        for url, anchor, prior, group, key in zip(*columns, strict=True):
            page = reader.page(url)
            if page is None:
                continue
            title, text = page_text(reader, page)
            if not title and not text:
                continue
            writer.add(IndexDocument(url, title, text, anchor, float(prior), group))
            values["prior"].append(float(prior))
            values["group"].append(group_key(url, group))
            values["key"].append(int(key))
            if len(writer) >= segment_docs:
                flush()
    if len(writer):
        flush()
    return written


def _current_pages(ctx: JobContext, shards: int) -> pd.DataFrame:
    """Every page to be in the index, with its anchor text, PageRank and group: small columns, no text."""
    pages = ctx.frame(lambda reader, piece: page_rows(reader, piece, shards), PAGE_META, None)
    anchors = ctx.read_parquet(ctx.out / JOBS_DIR / graph.NAME / "anchors", columns=["target", "texts"])
    anchors = anchors.map_partitions(
        lambda part: pd.DataFrame(
            {"url": part["target"].astype(object), "anchor": part["texts"].map(_anchor_text).astype(object)}
        ),
        meta={"url": object, "anchor": object},
    )
    joined = pages.merge(anchors, on="url", how="left", shuffle_method=ctx.shuffle_method)
    if (ctx.out / JOBS_DIR / pagerank.NAME / SUMMARY).is_file():
        ranks = ctx.read_parquet(ctx.out / JOBS_DIR / pagerank.NAME / "ranks", columns=["url", "pagerank"])
        ranks = ranks.map_partitions(
            lambda part: pd.DataFrame({"url": part["url"].astype(object), "prior": part["pagerank"]}),
            meta={"url": object, "prior": "float64"},
        )
        joined = joined.merge(ranks, on="url", how="left", shuffle_method=ctx.shuffle_method)
    else:
        joined = joined.assign(prior=0.0)
    if (ctx.out / JOBS_DIR / neardup.NAME / SUMMARY).is_file():
        members = ctx.read_parquet(ctx.out / JOBS_DIR / neardup.NAME / "members", columns=["url", "cluster"])
        members = members.map_partitions(
            lambda part: pd.DataFrame(
                {"url": part["url"].astype(object), "group": part["cluster"].map(lambda c: f"near:{c}").astype(object)}
            ),
            meta={"url": object, "group": object},
        )
        joined = joined.merge(members, on="url", how="left", shuffle_method=ctx.shuffle_method)
    else:
        joined = joined.assign(group="")
    joined = joined.map_partitions(
        lambda part: part.assign(
            anchor=part["anchor"].fillna("").astype(object),
            prior=part["prior"].fillna(0.0),
            group=part["group"].fillna("").astype(object),
        )[list(JOINED_META.columns)],
        meta=JOINED_META,
    )
    (frame,) = ctx.compute(joined)
    current: pd.DataFrame = frame.sort_values("url", kind="stable").reset_index(drop=True)
    current["key"] = np.array(
        [version_key(int(b), a) for b, a in zip(current["body"], current["anchor"], strict=True)], dtype=np.uint64
    )
    return current


class _Previous:
    """The index a run updates: its manifest, and per segment its document values (read once)."""

    def __init__(self, directory: Path, manifest: Manifest, tier_cutoff: float | None) -> None:
        self.directory = directory
        self.manifest = manifest
        self.tier_cutoff = tier_cutoff
        self.values: list[DocValues] = []
        rows: dict[str, list[Any]] = {"url": [], "entry": [], "doc": [], "old_key": [], "old_tier": []}
        for number, entry in enumerate(manifest.segments):
            with Segment(directory / entry.name) as segment:
                values = DocValues.read(directory / entry.live, segment) if entry.live else DocValues.of(segment)
                self.values.append(values)
                for doc in np.flatnonzero(~values.deleted).tolist():
                    rows["url"].append(segment.url(doc))
                    rows["entry"].append(number)
                    rows["doc"].append(doc)
                    rows["old_key"].append(int(values.key[doc]))
                    rows["old_tier"].append(entry.tier)
        self.documents = pd.DataFrame(
            {
                "url": pd.Series(rows["url"], dtype=object),
                "entry": np.array(rows["entry"], dtype=np.int64),
                "doc": np.array(rows["doc"], dtype=np.int64),
                "old_key": np.array(rows["old_key"], dtype=np.uint64),
                "old_tier": np.array(rows["old_tier"], dtype=np.int64),
            }
        )

    @classmethod
    def open(cls, out: Path, shards: int, tier_cutoff: float | None) -> tuple[_Previous | None, str]:
        """The previous index if it can be updated, and why not otherwise."""
        directory = out / JOBS_DIR / NAME
        if not (directory / SUMMARY).is_file():
            return None, "no previous index"
        try:
            manifest = Manifest.read(directory.resolve())
            summary = manifest.summary or {}
            if manifest.shards != shards:
                return None, f"the previous index has {manifest.shards} shards, not {shards}"
            if summary.get("tier_cutoff") != tier_cutoff:
                return None, f"the previous index has tier cutoff {summary.get('tier_cutoff')}, not {tier_cutoff}"
            return cls(directory.resolve(), manifest, tier_cutoff), "incremental"
        except (IndexFormatError, OSError) as exc:
            return None, f"previous index unreadable ({exc})"


def run(
    ctx: JobContext,
    pending: PendingOutput,
    *,
    shards: int = DEFAULT_SHARDS,
    segment_docs: int = SEGMENT_DOCS,
    tier_cutoff: float | None = None,
    rebuild: bool = False,
    merge: bool = False,
) -> dict[str, Any]:
    """`tier_cutoff`: pages whose PageRank is at least this many times the average (1 / pages) go
    to tier 1, the others to tier 2 (None: one tier). `rebuild`: ignore the previous index. After an
    incremental update the merge policy (`index.merge`) runs on each shard and tier; `merge`: every
    segment that can be is merged (each shard and tier into as few segments of `segment_docs` as
    hold its live pages), whether or not pages changed."""
    if shards < 1:
        raise ValueError("the index needs at least one shard")
    if tier_cutoff is not None and not tier_cutoff > 0:
        raise ValueError(f"the tier cutoff must be a positive multiple of the average PageRank, got {tier_cutoff}")
    previous, mode = (None, "rebuild asked for") if rebuild else _Previous.open(ctx.out, shards, tier_cutoff)
    generation = previous.manifest.generation + 1 if previous is not None else 0
    current = _current_pages(ctx, shards)
    tier_prior = None if tier_cutoff is None or not len(current) else tier_cutoff / len(current)
    current["tier"] = np.array([tier_of(p, tier_prior) for p in current["prior"].tolist()], dtype=np.int64)
    current["group_key"] = np.array(
        [group_key(u, g) for u, g in zip(current["url"], current["group"], strict=True)], dtype=np.uint64
    )

    if previous is not None:
        old = previous.documents
        both = current.merge(old, on="url", how="inner")
        unchanged = (both["key"] == both["old_key"]) & (both["tier"] == both["old_tier"])
        kept, changed = both[unchanged], both[~unchanged]
        gone = old[~old["url"].isin(current["url"])]
        to_write = pd.concat([current[~current["url"].isin(old["url"])], changed[list(current.columns)]])
        to_write = to_write.sort_values("url", kind="stable")
        masked = pd.concat([changed[["entry", "doc"]], gone[["entry", "doc"]]])
    else:
        to_write, masked, kept = current, pd.DataFrame(), pd.DataFrame()

    tasks = [
        dask.delayed(write_segments)(
            rows, ctx.pieces[0].dirs, str(pending.path), int(shard), int(tier), generation, segment_docs,
            dask_key_name=f"index-write-{pending.path.name}-{shard}-{tier}",  # not a hash of the rows
        )
        for (shard, tier), rows in to_write.groupby(["shard", "tier"], sort=True)
    ] if ctx.pieces else []  # fmt: skip
    written = [entry for task in ctx.compute(*tasks) for entry in task] if tasks else []

    entries: list[SegmentEntry] = []
    dropped_whole = 0
    if previous is not None:
        entries, dropped_whole = _carry_over(previous, pending.path, generation, kept, masked)
    entries += [SegmentEntry(e["name"], e["shard"], e["tier"], e["live"]) for e in written]
    merged: MergeReport | None = None
    if previous is not None or merge:
        policy = MergePolicy(floor_docs=max(1, segment_docs // 25), max_docs=segment_docs)
        merged = merge_index(pending.path, entries, generation, policy, force=merge)
        for entry in merged.dropped:  # this generation's links and values of what was merged away
            (pending.path / entry.name).unlink()
            if entry.live is not None and entry.live.endswith(f"-{generation:04d}"):
                (pending.path / entry.live).unlink(missing_ok=True)
        entries = merged.entries
    for shard in range(shards):  # a shard no page hashed to still gets its (empty) segment
        if not any(entry.shard == shard for entry in entries):
            name = segment_name(shard, 0, generation=generation)
            (pending.path / name).parent.mkdir(parents=True, exist_ok=True)
            SegmentWriter().write(pending.path / name)
            entries.append(SegmentEntry(name, shard, 1))
    finish_index(
        pending.path, entries, shards=shards, generation=generation, tier_prior=tier_prior,
        summary={"tier_cutoff": tier_cutoff},
    )  # fmt: skip
    live, masked_on_disk = _document_counts(pending.path, entries)
    return {
        "documents": sum(live.values()),
        "shards": shards,
        "segments": len(entries),
        "generation": generation,
        "mode": mode,
        "written": int(sum(e["docs"] for e in written)),
        "kept": len(kept),
        "masked": len(masked),
        "masked_on_disk": masked_on_disk,
        "merged_segments": len(merged.dropped) if merged else 0,
        "reclaimed": dropped_whole + (merged.reclaimed if merged else 0),
        "tier_cutoff": tier_cutoff,
        "tier_prior": tier_prior,
        "tiers": {str(tier): count for tier, count in sorted(live.items())},
    }


def _carry_over(
    previous: _Previous, root: Path, generation: int, kept: pd.DataFrame, masked: pd.DataFrame
) -> tuple[list[SegmentEntry], int]:
    """The previous segments that still hold a live document, linked into the new output (never
    copied: segments are immutable), each with this generation's document values; and how many
    documents the segments left out (all masked) held."""
    entries: list[SegmentEntry] = []
    dropped = 0
    kept_by_entry = {int(n): g for n, g in kept.groupby("entry")} if len(kept) else {}
    masked_by_entry = {int(n): g for n, g in masked.groupby("entry")} if len(masked) else {}
    for number, entry in enumerate(previous.manifest.segments):
        old = previous.values[number]
        deleted = old.deleted.copy()
        prior, group = old.prior.copy(), old.group.copy()
        if number in masked_by_entry:
            deleted[masked_by_entry[number]["doc"].to_numpy(dtype=np.int64)] = True
        if number in kept_by_entry:
            rows = kept_by_entry[number]
            docs = rows["doc"].to_numpy(dtype=np.int64)
            prior[docs] = rows["prior"].to_numpy(dtype=np.float32)
            group[docs] = rows["group_key"].to_numpy(dtype=np.uint64)
        if deleted.all() and deleted.size:
            dropped += int(deleted.size)
            continue  # nothing of it is live: left out
        target = root / entry.name
        target.parent.mkdir(parents=True, exist_ok=True)
        _link(previous.directory / entry.name, target)
        live = live_name(entry.name, generation)
        with Segment(target) as segment:
            DocValues(deleted, prior, group, old.key).write(root / live, segment)
        entries.append(SegmentEntry(entry.name, entry.shard, entry.tier, live))
    return entries, dropped


def _link(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:  # another file system, or links not allowed: a copy is as good
        shutil.copy2(source, target)


def _document_counts(root: Path, entries: list[SegmentEntry]) -> tuple[dict[int, int], int]:
    """Live documents per tier, and masked documents still on disk."""
    live: dict[int, int] = {}
    masked = 0
    for entry in entries:
        with Segment(root / entry.name) as segment:
            values = DocValues.read(root / entry.live, segment) if entry.live else DocValues.of(segment)
            live[entry.tier] = live.get(entry.tier, 0) + values.live
            masked += segment.docs - values.live
    return live, masked
