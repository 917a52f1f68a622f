"""The connectivity server's files for a crawl: the link graph job's output compressed for queries (IIR 20.4).

Input: the `graph` job's `nodes` (every fetched URL) and `edges` (each page's links to fetched URLs, nofollow
links and redirects included, repeats already merged). Output, in DIR/jobs/connectivity: the URL map, the
graph and its transpose (`crawlspace.graph.write_link_graph`), which `crawlspace.graph.open(DIR)` and
`crawlspace graph DIR` read.

Only fetched pages are nodes: IIR's connectivity server covers the crawled pages, and a URL the crawl never
fetched has no out-links to tell, so a link to one is left out (the graph job counts them,
`links_to_unfetched_urls`, repeated here). Every link between fetched pages is an arc: a nofollow link is
still a link on the page (only PageRank leaves it out), and a redirect is an arc from the redirecting URL to
its target. Ids are the URLs' ranks by row key, whatever order the graph job's ids came in.

The driver holds the URLs and two int64 per arc while it builds (the compressed graph needs every list in
order anyway); each edge partition is read in turn.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from crawlspace.jobs import graph
from crawlspace.jobs.context import JobContext
from crawlspace.jobs.output import PendingOutput, parquet_files, read_summary, read_table

NAME = "connectivity"


def run(ctx: JobContext, pending: PendingOutput) -> dict[str, Any]:
    from crawlspace.graph import write_link_graph  # numba's kernels: loaded by this job only

    started = time.perf_counter()
    nodes = read_table(ctx.out, graph.NAME, "nodes", columns=["id", "url"]).sort_values("id")
    if not np.array_equal(nodes["id"].to_numpy(), np.arange(len(nodes))):
        raise ValueError(f"the graph job's node ids in {ctx.out} are not 0..{len(nodes) - 1}")
    sources, targets = [], []
    for path in parquet_files(ctx.out, graph.NAME, "edges"):
        table = pq.read_table(path, columns=["src", "dst"])
        sources.append(table.column("src").to_numpy())
        targets.append(table.column("dst").to_numpy())
    empty = np.zeros(0, np.int64)
    src = np.concatenate(sources) if sources else empty
    dst = np.concatenate(targets) if targets else empty
    read_seconds = time.perf_counter() - started
    written = write_link_graph(pending.path, nodes["url"].tolist(), src, dst)
    build_seconds = time.perf_counter() - started - read_seconds
    from crawlspace.graph import open as open_graph

    with open_graph(pending.path, verify=False) as links:
        bits_per_url = round(links.urls.bits_per_url, 3)
    return {
        "nodes": written["nodes"],
        "arcs": written["arcs"],
        "bits_per_link": float(written["graph"]["bitsperlink"]),
        "bits_per_link_transpose": float(written["transpose"]["bitsperlink"]),
        "bits_per_url": bits_per_url,
        "links_to_unfetched_urls": int(read_summary(ctx.out, graph.NAME)["links_to_unfetched_urls"]),
        "read_seconds": round(read_seconds, 3),
        "build_seconds": round(build_seconds, 3),
    }
