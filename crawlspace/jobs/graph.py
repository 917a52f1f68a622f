"""The link graph: every link of every fetched page, joined to the fetched URLs, with dense ids.

map     `node_rows`: each fetched URL in row-key order gets id = its position in that order (each
        key range counts its pages first, so a task knows where its ids start); `link_rows`: the
        links of each page's newest parse (nofollow marked) and a redirect's Location, by source id.
        An exact duplicate was not parsed by the crawl (its body is another URL's): its body is
        read through the reader and parsed at its own URL, so it has the links it was served with.
join    links to nodes by target URL (a shuffle join): a link to a URL never fetched is counted,
        not kept
reduce  `anchor_rows`: per target, the anchor texts of the links to it (IIR 21.1.1, for the index)

Outputs: `nodes` (id, url, status), `edges` (src, dst, source, target, text, nofollow, redirect),
`anchors` (dst, target, links, texts). Invariant: (src, dst) pairs are distinct (a page's links
are distinct by target, and a redirect has no body), and no link is a self-link.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pyarrow as pa

from crawlspace.jobs.context import JobContext, Piece, crawl_pages, is_robots_txt
from crawlspace.jobs.output import PendingOutput
from crawlspace.parse import parse_html
from crawlspace.store.pagestore import page_outlinks
from crawlspace.store.reader import CrawlReader, Edge, FetchInfo, StoredPage
from crawlspace.urls import InvalidURL, join, normalize

NAME = "graph"
_HTML = frozenset({"text/html", "application/xhtml+xml"})

NODE_META = pd.DataFrame(
    {"id": pd.Series(dtype="int64"), "url": pd.Series(dtype=object), "status": pd.Series(dtype="int64")}
)
LINK_META = pd.DataFrame(
    {
        "src": pd.Series(dtype="int64"),
        "source": pd.Series(dtype=object),
        "target": pd.Series(dtype=object),
        "text": pd.Series(dtype=object),
        "nofollow": pd.Series(dtype=bool),
        "redirect": pd.Series(dtype=bool),
    }
)
EDGE_COLUMNS = ["src", "dst", "source", "target", "text", "nofollow", "redirect"]
EDGE_META = LINK_META.assign(dst=pd.Series(dtype="int64"))[EDGE_COLUMNS]
ANCHOR_META = pd.DataFrame(
    {
        "dst": pd.Series(dtype="int64"),
        "target": pd.Series(dtype=object),
        "links": pd.Series(dtype="int64"),
        "texts": pd.Series(dtype=object),
    }
)


NODE_SCHEMA = pa.schema([("id", pa.int64()), ("url", pa.string()), ("status", pa.int64())])
EDGE_SCHEMA = pa.schema(
    [("src", pa.int64()), ("dst", pa.int64()), ("source", pa.string()), ("target", pa.string()),
     ("text", pa.string()), ("nofollow", pa.bool_()), ("redirect", pa.bool_())]
)  # fmt: skip
ANCHOR_SCHEMA = pa.schema(
    [("dst", pa.int64()), ("target", pa.string()), ("links", pa.int64()), ("texts", pa.list_(pa.string()))]
)


def page_fetches(reader: CrawlReader, piece: Piece) -> Iterator[tuple[str, FetchInfo]]:
    """The piece's pages as `crawl_pages` gives them, from their fetch cells alone."""
    return ((url, fetch) for url, fetch in reader.fetches(piece.part) if not is_robots_txt(url))


def page_count(reader: CrawlReader, piece: Piece) -> pd.DataFrame:
    return pd.DataFrame({"pages": [sum(1 for _ in page_fetches(reader, piece))]})


def node_rows(reader: CrawlReader, piece: Piece) -> pd.DataFrame:
    urls, statuses = [], []
    for url, fetch in page_fetches(reader, piece):
        urls.append(url)
        statuses.append(fetch.status)
    ids = np.arange(piece.offset, piece.offset + len(urls), dtype=np.int64)
    return pd.DataFrame({"id": ids, "url": pd.Series(urls, dtype=object), "status": np.array(statuses, np.int64)})


def links_of(reader: CrawlReader, page: StoredPage) -> list[Edge]:
    """A page's links: the crawl's parse, an exact duplicate's body parsed at its URL, a redirect's target."""
    fetch = page.fetch
    if 300 <= fetch.status < 400 and fetch.location:
        try:
            target = normalize(join(page.url, fetch.location))
        except InvalidURL:
            return []
        return [] if target == page.url else [Edge(page.url, target, "", False)]
    if page.outlinks or not fetch.duplicate_of or fetch.duplicate_of == page.url:
        return page.outlinks
    body = reader.body(page)
    if body is None or body.content_type not in _HTML:
        return []
    parsed = parse_html(body.content, page.url, body.content_type)
    return [Edge(page.url, target, text, nofollow) for target, text, nofollow in page_outlinks(parsed, page.url)]


def link_rows(reader: CrawlReader, piece: Piece) -> pd.DataFrame:
    columns: dict[str, list[Any]] = {name: [] for name in LINK_META.columns}
    for position, page in enumerate(crawl_pages(reader, piece)):
        redirect = 300 <= page.fetch.status < 400
        for edge in links_of(reader, page):
            columns["src"].append(piece.offset + position)
            columns["source"].append(edge.source)
            columns["target"].append(edge.target)
            columns["text"].append(edge.text)
            columns["nofollow"].append(edge.nofollow)
            columns["redirect"].append(redirect)
    return pd.DataFrame(columns).astype(LINK_META.dtypes.to_dict())


def anchor_rows(edges: pd.DataFrame) -> pd.DataFrame:
    """The reduce over edges shuffled by target: the anchor texts of each target, by source URL order."""
    rows: list[dict[str, Any]] = []
    for (dst, target), group in edges.groupby(["dst", "target"], sort=True):
        ordered = group.sort_values("source")
        rows.append(
            {"dst": dst, "target": target, "links": len(group), "texts": [text for text in ordered["text"] if text]}
        )
    return pd.DataFrame(rows, columns=list(ANCHOR_META.columns)).astype(ANCHOR_META.dtypes.to_dict())


def _sorted_edges(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[EDGE_COLUMNS].sort_values(["dst", "src"]).reset_index(drop=True)


def link_graph(ctx: JobContext) -> tuple[dd.DataFrame, dd.DataFrame, dd.DataFrame]:
    """The job as Dask collections: (nodes, links before the join, edges joined to fetched URLs)."""
    (counts,) = ctx.compute(ctx.frame(page_count, pd.DataFrame({"pages": pd.Series(dtype="int64")}), None))
    pieces = ctx.with_offsets(counts["pages"].tolist())
    nodes = ctx.frame(node_rows, NODE_META, pieces)
    links = ctx.frame(link_rows, LINK_META, pieces)
    edges = links.merge(
        nodes[["id", "url"]].rename(columns={"id": "dst", "url": "target"}),
        on="target",
        how="inner",
        shuffle_method=ctx.shuffle_method,
    )
    return nodes, links, edges.map_partitions(_sorted_edges, meta=EDGE_META)


def run(ctx: JobContext, pending: PendingOutput) -> dict[str, Any]:
    nodes, links, edges = link_graph(ctx)
    anchors = edges.shuffle(on="dst", shuffle_method=ctx.shuffle_method).map_partitions(anchor_rows, meta=ANCHOR_META)
    writes = [
        nodes.to_parquet(pending.table("nodes"), write_index=False, compute=False, schema=NODE_SCHEMA),
        edges.to_parquet(pending.table("edges"), write_index=False, compute=False, schema=EDGE_SCHEMA),
        anchors.to_parquet(pending.table("anchors"), write_index=False, compute=False, schema=ANCHOR_SCHEMA),
    ]
    node_count, link_count, edge_count, followed, redirects, *_ = ctx.compute(
        nodes.shape[0],
        links.shape[0],
        edges.shape[0],
        (~edges["nofollow"]).sum(),
        edges["redirect"].sum(),
        *writes,
    )
    return {
        "nodes": int(node_count),
        "links": int(link_count),
        "edges": int(edge_count),
        "followed_edges": int(followed),
        "redirect_edges": int(redirects),
        "links_to_unfetched_urls": int(link_count) - int(edge_count),
    }
