"""The same computations as crawlspace.jobs in one process with plain pandas and scipy: the baseline that
shows what Dask costs on one machine. Each reads the crawl through `CrawlReader` like the jobs and holds
everything in memory (which is what the jobs must not do at scale)."""

from __future__ import annotations

import hashlib
import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from crawlspace.jobs.context import is_robots_txt
from crawlspace.jobs.graph import links_of
from crawlspace.jobs.neardup import NUM_PERM, SHINGLE_WORDS, THRESHOLD
from crawlspace.parse import parse_html
from crawlspace.seen.shingles import Shingler, band_keys, choose_bands, similarity
from crawlspace.store.reader import CrawlReader


def pages(reader: CrawlReader) -> Any:
    return (page for page in reader.pages() if not is_robots_txt(page.url))


def dedup(crawl: Path) -> dict[str, int]:
    rows = []
    with CrawlReader(crawl) as reader:
        for page in pages(reader):
            body = reader.body(page)
            if body is not None:
                rows.append((page.url, hashlib.md5(body.content, usedforsecurity=False).hexdigest()))
    frame = pd.DataFrame(rows, columns=["url", "md5"])
    sizes = frame.groupby("md5")["url"].agg(list)
    clusters = sizes[sizes.map(len) > 1]
    return {"clusters": len(clusters), "duplicate_pages": int(clusters.map(len).sum() - len(clusters))}


def graph(crawl: Path) -> dict[str, Any]:
    urls, links = [], []
    with CrawlReader(crawl) as reader:
        for page in pages(reader):
            source = len(urls)
            urls.append(page.url)
            links.extend((source, edge.target, edge.nofollow) for edge in links_of(reader, page))
    nodes = pd.DataFrame({"dst": np.arange(len(urls)), "target": urls})
    edges = pd.DataFrame(links, columns=["src", "target", "nofollow"]).merge(nodes, on="target")
    return {"nodes": len(nodes), "edges": len(edges), "frame": edges}


def pagerank(edges: pd.DataFrame, nodes: int, damping: float = 0.85) -> dict[str, Any]:
    followed = edges[~edges["nofollow"]]
    src, dst = followed["src"].to_numpy(), followed["dst"].to_numpy()
    outdegree = np.bincount(src, minlength=nodes).astype(float)
    matrix = sp.csr_matrix((1.0 / outdegree[src], (dst, src)), shape=(nodes, nodes))
    dangling = outdegree == 0
    rank = np.full(nodes, 1.0 / nodes)
    rounds, delta = 0, 1.0
    while rounds < 200 and delta >= 1e-9:
        new = (1 - damping) / nodes + damping * (matrix @ rank + rank[dangling].sum() / nodes)
        new /= new.sum()
        delta = np.abs(new - rank).sum()
        rank = new
        rounds += 1
    return {"rounds": rounds, "top": float(rank.max())}


def near(crawl: Path) -> dict[str, int]:
    shingler = Shingler(shingle_words=SHINGLE_WORDS, num_perm=NUM_PERM)
    _, rows = choose_bands(NUM_PERM, THRESHOLD)
    urls, signatures, buckets = [], [], []
    with CrawlReader(crawl) as reader:
        for page in pages(reader):
            body = reader.body(page)
            if body is None or body.content_type not in ("text/html", "application/xhtml+xml"):
                continue
            signature = shingler.signature(parse_html(body.content, page.url, body.content_type).raw_text)
            if signature is None:
                continue
            index = len(urls)
            urls.append(page.url)
            signatures.append(signature)
            buckets.extend((band, int(key), index) for band, key in enumerate(band_keys(signature, rows)))
    frame = pd.DataFrame(buckets, columns=["band", "key", "page"])
    pairs = set()
    for _, group in frame.groupby(["band", "key"]):
        pairs.update(itertools.combinations(sorted(group["page"]), 2))
    kept = [(a, b) for a, b in pairs if similarity(signatures[a], signatures[b]) >= THRESHOLD]
    if not kept:
        return {"pairs": 0, "clusters": 0}
    a, b = np.array(kept).T
    _, labels = connected_components(sp.coo_matrix((np.ones(len(a)), (a, b)), shape=(len(urls),) * 2))
    return {"pairs": len(kept), "clusters": len(set(labels[np.union1d(a, b)].tolist()))}
