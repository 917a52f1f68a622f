"""The search index of a crawl (crawlspace.index), built as a map-reduce on Dask.

map      `document_rows`: per key range, each page that has its own body (a 200 response, not an
         exact duplicate of another URL's body, which is indexed once, at its original) with its
         title and text (parsed again from the WARC when the crawl did not store text), and its
         shard: a hash of its URL (`index.layout.shard_of`)
join     the anchor texts of the links to each page (the graph job's `anchors`, IIR 21.1.1), its
         PageRank (the pagerank job's `ranks`) and its near-duplicate cluster (the near job's
         `members`: the group a search collapses), by URL, each when that job has run
shuffle  by shard, so that all of a shard's pages are in one partition
reduce   `write_shards`: per shard, its pages in URL order through `SegmentWriter` (a new segment
         every `segment_docs` pages) into shard-<s>/ of the output
then     `finish_index`: the global statistics of every segment, the block bounds, the manifest

The output directory DIR/jobs/index is an index directory (`index.Index(DIR/jobs/index)`), swapped in
whole like every job's output. The same crawl gives the same index on any scheduler and any number
of crawl partitions: a shard's pages are written in URL order whichever partition read them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from crawlspace.index.layout import finish_index, segment_name, shard_of
from crawlspace.index.segment import IndexDocument, SegmentWriter
from crawlspace.jobs import graph, neardup, pagerank
from crawlspace.jobs.context import JobContext, Piece, is_robots_txt
from crawlspace.jobs.output import JOBS_DIR, SUMMARY, PendingOutput
from crawlspace.store.reader import CrawlReader

NAME = "index"
DEFAULT_SHARDS = 4
SEGMENT_DOCS = 25_000

DOCUMENT_META = pd.DataFrame(
    {
        "url": pd.Series(dtype=object),
        "title": pd.Series(dtype=object),
        "text": pd.Series(dtype=object),
        "shard": pd.Series(dtype="int64"),
    }
)
JOINED_META = DOCUMENT_META.assign(
    anchor=pd.Series(dtype=object), prior=pd.Series(dtype="float64"), group=pd.Series(dtype=object)
)
WRITTEN_META = pd.DataFrame(
    {"shard": pd.Series(dtype="int64"), "segment": pd.Series(dtype=object), "docs": pd.Series(dtype="int64")}
)


def inputs(**options: Any) -> tuple[str, ...]:
    """The jobs this one reads: the link graph's anchors, PageRank for the prior, the near-duplicate
    clusters for the groups a search collapses."""
    return (graph.NAME, pagerank.NAME, neardup.NAME)


def document_rows(reader: CrawlReader, piece: Piece, shards: int) -> pd.DataFrame:
    urls: list[str] = []
    titles: list[str] = []
    texts: list[str] = []
    for page in reader.pages(piece.part, text=True):
        fetch = page.fetch
        if is_robots_txt(page.url) or fetch.status != 200 or (fetch.duplicate_of and fetch.duplicate_of != page.url):
            continue
        if not page.text and not page.title:
            continue
        urls.append(page.url)
        titles.append(page.title or "")
        texts.append(page.text or "")
    return pd.DataFrame(
        {
            "url": pd.Series(urls, dtype=object),
            "title": pd.Series(titles, dtype=object),
            "text": pd.Series(texts, dtype=object),
            "shard": np.array([shard_of(url, shards) for url in urls], dtype=np.int64),
        }
    )


def _anchor_text(texts: Any) -> str:
    return " ".join(texts) if isinstance(texts, list | tuple | np.ndarray) else ""


def write_shards(frame: pd.DataFrame, root: str, segment_docs: int) -> pd.DataFrame:
    """The reduce: this partition's shards (each whole here) written as segments under `root`."""
    rows: list[dict[str, Any]] = []
    for shard, group in frame.groupby("shard", sort=True):
        ordered = group.sort_values("url")
        writer, number = SegmentWriter(), 0

        def flush(shard: int = int(shard)) -> None:
            nonlocal writer, number
            name = segment_name(shard, number)
            (Path(root) / name).parent.mkdir(parents=True, exist_ok=True)
            rows.append({"shard": shard, "segment": name, "docs": len(writer)})
            writer.write(Path(root) / name)
            writer, number = SegmentWriter(), number + 1

        columns = [ordered[name] for name in ("url", "title", "text", "anchor", "prior", "group")]
        for url, title, text, anchor, prior, group in zip(*columns, strict=True):
            writer.add(IndexDocument(url, title, text, anchor, float(prior), group))
            if len(writer) >= segment_docs:
                flush()
        if len(writer):
            flush()
    return pd.DataFrame(rows, columns=list(WRITTEN_META.columns)).astype(WRITTEN_META.dtypes.to_dict())


def run(
    ctx: JobContext, pending: PendingOutput, *, shards: int = DEFAULT_SHARDS, segment_docs: int = SEGMENT_DOCS
) -> dict[str, Any]:
    if shards < 1:
        raise ValueError("the index needs at least one shard")
    documents = ctx.frame(lambda reader, piece: document_rows(reader, piece, shards), DOCUMENT_META, None)
    anchors = ctx.read_parquet(ctx.out / JOBS_DIR / graph.NAME / "anchors", columns=["target", "texts"])
    anchors = anchors.map_partitions(
        lambda part: pd.DataFrame(
            {"url": part["target"].astype(object), "anchor": part["texts"].map(_anchor_text).astype(object)}
        ),
        meta={"url": object, "anchor": object},
    )
    joined = documents.merge(anchors, on="url", how="left", shuffle_method=ctx.shuffle_method)
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
    by_shard = joined.shuffle(on="shard", npartitions=min(shards, max(1, joined.npartitions)),
                              shuffle_method=ctx.shuffle_method)  # fmt: skip
    written = by_shard.map_partitions(write_shards, str(pending.path), segment_docs, meta=WRITTEN_META)
    (table,) = ctx.compute(written)
    names: list[list[str]] = [[] for _ in range(shards)]
    for shard, segment in sorted(zip(table["shard"], table["segment"], strict=True)):
        names[int(shard)].append(str(segment))
    for shard in range(shards):  # a shard no page hashed to still gets its (empty) segment
        if not names[shard]:
            name = segment_name(shard, 0)
            (pending.path / name).parent.mkdir(parents=True, exist_ok=True)
            SegmentWriter().write(pending.path / name)
            names[shard].append(name)
    finish_index(pending.path, names)
    docs = int(table["docs"].sum())
    return {"documents": docs, "shards": shards, "segments": sum(len(n) for n in names)}
