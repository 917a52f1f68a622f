"""Exact duplicates, the seed's MapReduce: map each fetched page to (MD5 of its decoded body, URL),
reduce by MD5, one row per cluster of two or more URLs.

map     `body_rows`: every page whose newest fetch was a 200, its body read from the WARC (a revisit
        followed to the response it refers to), MD5 of the decoded body
shuffle by MD5 (Dask's shuffle: on disk in one process, peer-to-peer on a cluster)
reduce  `cluster_rows`: each MD5 with two or more URLs is a cluster: its URLs sorted, the
        representative (the shortest URL, ties by order; or the URL with most in-links from the
        link graph job's edges), the URL whose response holds the body
check   against the crawl's own revisit records: a revisit's payload digest must be that of the
        response it names, and the crawl's duplicate-of must name a URL of the page's cluster

Outputs: `clusters` (md5, size, representative, stored, urls) and `members` (url, md5, representative)
for every URL of a cluster; the summary counts clusters, duplicate pages and the cross-check.
"""

from __future__ import annotations

import hashlib
from typing import Any

import dask.dataframe as dd
import pandas as pd
import pyarrow as pa

from crawlspace.jobs import graph
from crawlspace.jobs.context import JobContext, Piece, crawl_pages
from crawlspace.jobs.output import PendingOutput, output_path
from crawlspace.store.reader import CrawlReader

NAME = "dedup"

BODY_META = pd.DataFrame(
    {
        "url": pd.Series(dtype=object),
        "md5": pd.Series(dtype=object),
        "length": pd.Series(dtype="int64"),
        "revisit": pd.Series(dtype=bool),
        "stored_as": pd.Series(dtype=object),
        "duplicate_of": pd.Series(dtype=object),
        "digest_matches": pd.Series(dtype=bool),
        "inlinks": pd.Series(dtype="int64"),
    }
)
CLUSTER_META = pd.DataFrame(
    {
        "md5": pd.Series(dtype=object),
        "size": pd.Series(dtype="int64"),
        "representative": pd.Series(dtype=object),
        "stored": pd.Series(dtype=object),
        "urls": pd.Series(dtype=object),
    }
)
CLUSTER_SCHEMA = pa.schema(
    [("md5", pa.string()), ("size", pa.int64()), ("representative", pa.string()), ("stored", pa.string()),
     ("urls", pa.list_(pa.string()))]
)  # fmt: skip
MEMBER_SCHEMA = pa.schema([("url", pa.string()), ("md5", pa.string()), ("representative", pa.string())])
MEMBER_META = pd.DataFrame(
    {"url": pd.Series(dtype=object), "md5": pd.Series(dtype=object), "representative": pd.Series(dtype=object)}
)


UNREADABLE = {"md5": "", "length": -1, "revisit": False, "stored_as": "", "digest_matches": True, "inlinks": 0}
"""The map's row for a 200 page whose body cannot be read: counted in the summary, in no cluster."""


def body_rows(reader: CrawlReader, piece: Piece) -> pd.DataFrame:
    """The map: (MD5 of the decoded body, URL) of each page of one key range with a 200 body."""
    rows: list[dict[str, Any]] = []
    for page in crawl_pages(reader, piece):
        body = reader.body(page)
        if body is None:
            if page.fetch.status == 200 and page.capture is not None:  # a record missing, damaged, undecodable
                rows.append({**UNREADABLE, "url": page.url, "duplicate_of": page.fetch.duplicate_of or ""})
            continue
        rows.append(
            {
                "url": page.url,
                "md5": hashlib.md5(body.content, usedforsecurity=False).hexdigest(),
                "length": len(body.content),
                "revisit": body.revisit,
                "stored_as": body.stored_as,
                "duplicate_of": page.fetch.duplicate_of or "",
                "digest_matches": body.payload_digest == body.stored_digest,
                "inlinks": 0,
            }
        )
    return pd.DataFrame(rows, columns=list(BODY_META.columns)).astype(BODY_META.dtypes.to_dict())


REPRESENTATIVES = ("shortest", "inlinks")


def inputs(*, representative: str = "shortest") -> tuple[str, ...]:
    """The jobs whose output this one reads: the link graph's, for in-link counts."""
    return (graph.NAME,) if representative == "inlinks" else ()


def representative_of(urls: list[str]) -> str:
    """The shortest URL, ties broken by code point order (deterministic on any partitioning)."""
    return min(urls, key=lambda url: (len(url), url))


def most_linked(urls: list[str], inlinks: list[int]) -> str:
    """The URL with the most in-links (followed links from other pages), ties by `representative_of`."""
    return min(zip(urls, inlinks, strict=True), key=lambda pair: (-pair[1], len(pair[0]), pair[0]))[0]


def cluster_rows(bodies: pd.DataFrame, by_inlinks: bool = False) -> pd.DataFrame:
    """The reduce over one shuffled partition: every MD5 shared by two or more URLs is a cluster."""
    rows: list[dict[str, Any]] = []
    for md5, group in bodies.groupby("md5", sort=True):
        if len(group) < 2 or not md5:
            continue
        urls = sorted(group["url"])
        own = sorted(group.loc[~group["revisit"].astype(bool), "url"])
        chosen = (
            most_linked(list(group["url"]), [int(n) for n in group["inlinks"]])
            if by_inlinks
            else representative_of(urls)
        )
        rows.append(
            {
                "md5": md5,
                "size": len(urls),
                "representative": chosen,
                "stored": own[0] if own else sorted(group["stored_as"])[0],
                "urls": urls,
            }
        )
    return pd.DataFrame(rows, columns=list(CLUSTER_META.columns)).astype(CLUSTER_META.dtypes.to_dict())


def member_rows(clusters: pd.DataFrame) -> pd.DataFrame:
    if clusters.empty:
        return MEMBER_META.copy()
    exploded = clusters[["md5", "representative", "urls"]].explode("urls").rename(columns={"urls": "url"})
    return exploded[["url", "md5", "representative"]].sort_values("url").reset_index(drop=True)


def crawl_agreement(bodies: pd.DataFrame) -> pd.DataFrame:
    """Per partition of the map output: how the crawl's own duplicate records compare with the bodies."""
    unreadable = bodies["md5"] == ""
    bodies = bodies[~unreadable]
    copies = bodies["revisit"].astype(bool) & (bodies["stored_as"] != bodies["url"])
    marked = bodies["duplicate_of"] != ""
    return pd.DataFrame(
        {
            "pages": [len(bodies)],
            "unreadable": [int(unreadable.sum())],
            "revisits": [int(bodies["revisit"].sum())],
            "copy_revisits": [int(copies.sum())],
            "digest_mismatches": [int((bodies["revisit"].astype(bool) & ~bodies["digest_matches"].astype(bool)).sum())],
            "marked_duplicates": [int((marked & (bodies["duplicate_of"] != bodies["url"])).sum())],
            "marked_not_revisit": [int((marked & ~bodies["revisit"].astype(bool)).sum())],
        }
    )


def with_inlinks(ctx: JobContext, bodies: dd.DataFrame) -> dd.DataFrame:
    """The map output with each URL's in-links counted from the link graph job's edges (a shuffle join)."""
    edges = ctx.read_parquet(output_path(ctx.out, graph.NAME) / "edges", columns=["target", "nofollow"])
    counts = edges[~edges["nofollow"]].groupby("target").size().rename("counted").reset_index()
    counts = counts.astype({"target": object})
    joined = bodies.merge(counts, left_on="url", right_on="target", how="left", shuffle_method=ctx.shuffle_method)
    return joined.map_partitions(_counted_inlinks, meta=BODY_META)


def _counted_inlinks(joined: pd.DataFrame) -> pd.DataFrame:
    inlinks = joined["counted"].fillna(0).astype("int64")
    return joined[list(BODY_META.columns)].assign(inlinks=inlinks).astype(BODY_META.dtypes.to_dict())


def duplicate_clusters(ctx: JobContext, representative: str = "shortest") -> tuple[dd.DataFrame, dd.DataFrame]:
    """The job as Dask collections: (map output shuffled by MD5, clusters); compose your own steps on them.
    `representative`: a cluster's shortest URL, or (`inlinks`) the one most linked to (needs the graph job)."""
    if representative not in REPRESENTATIVES:
        raise ValueError(f"representative must be one of {', '.join(REPRESENTATIVES)}, got {representative!r}")
    bodies = ctx.frame(body_rows, BODY_META, None)
    if representative == "inlinks":
        bodies = with_inlinks(ctx, bodies)
    shuffled = bodies.shuffle(on="md5", shuffle_method=ctx.shuffle_method)
    clusters = shuffled.map_partitions(cluster_rows, representative == "inlinks", meta=CLUSTER_META)
    return shuffled, clusters


def run(ctx: JobContext, pending: PendingOutput, *, representative: str = "shortest") -> dict[str, Any]:
    bodies, clusters = duplicate_clusters(ctx, representative)
    members = clusters.map_partitions(member_rows, meta=MEMBER_META)
    agreement = bodies.map_partitions(crawl_agreement).sum()
    disagreeing = bodies.map_partitions(marked_outside_cluster, meta=pd.Series(dtype="int64")).sum()
    write_clusters = clusters.to_parquet(
        pending.table("clusters"), write_index=False, compute=False, schema=CLUSTER_SCHEMA
    )
    write_members = members.to_parquet(pending.table("members"), write_index=False, compute=False, schema=MEMBER_SCHEMA)
    totals, outside, size_values, _, _ = ctx.compute(
        agreement, disagreeing, clusters["size"], write_clusters, write_members
    )
    counts = {name: int(value) for name, value in totals.items()}
    marked = counts["marked_duplicates"]
    return {
        "representative": representative,
        "pages_with_body": counts["pages"],
        "pages_with_unreadable_body": counts["unreadable"],
        "clusters": len(size_values),
        "duplicate_pages": int((size_values - 1).sum()),
        "largest_cluster": int(size_values.max()) if len(size_values) else 0,
        "crawl_check": {
            "revisits": counts["revisits"],
            "copy_revisits": counts["copy_revisits"],
            "revisit_digest_mismatches": counts["digest_mismatches"],
            "marked_duplicates": marked,
            "marked_duplicates_outside_their_cluster": int(outside),
            "marked_duplicates_stored_in_full": counts["marked_not_revisit"],
            "agrees": counts["digest_mismatches"] == 0 and int(outside) == 0,
        },
    }


def marked_outside_cluster(bodies: pd.DataFrame) -> pd.Series:
    """Per shuffled partition (all URLs of an MD5 together): pages whose crawl-recorded duplicate-of
    is a URL without their body (a revisit claiming a body it did not have)."""
    wrong = 0
    bodies = bodies[bodies["md5"] != ""]
    marked = bodies[(bodies["duplicate_of"] != "") & (bodies["duplicate_of"] != bodies["url"])]
    if not marked.empty:
        urls_of = bodies.groupby("md5")["url"].agg(set).to_dict()
        wrong = sum(1 for md5, of in zip(marked["md5"], marked["duplicate_of"], strict=True) if of not in urls_of[md5])
    return pd.Series([wrong], dtype="int64")
