"""Answers from the jobs' outputs for one page or the top pages: what `crawlspace dups` and `rank` print.

Lookups read only the rows they need (Parquet filters push the URL or cluster down to the files).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crawlspace.display import printable
from crawlspace.jobs import dedup, neardup, pagerank
from crawlspace.jobs.output import read_table
from crawlspace.store.reader import CrawlReader

__all__ = ["Duplicates", "NotFetched", "duplicates_of", "printable", "top_ranked"]


@dataclass(frozen=True)
class Duplicates:
    """The other URLs with this page's body (`exact`) and the others of its near-duplicate cluster
    that are not exact copies (`near`), each sorted."""

    url: str
    exact: list[str]
    near: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {"url": self.url, "exact": self.exact, "near": self.near}


class NotFetched(LookupError):
    """A URL the crawl never fetched: it has no duplicates to report (rather than an empty answer)."""


def duplicates_of(crawl_dir: str | Path, url: str) -> Duplicates:
    """From the dedup and near jobs' outputs (JobOutputError if either is missing, NotFetched if the crawl
    in `crawl_dir` has no page at `url`, a normalized URL)."""
    with CrawlReader(crawl_dir) as reader:
        if reader.page(url) is None:
            raise NotFetched(f"{url} was not fetched in {crawl_dir}")
    exact: list[str] = []
    member = read_table(crawl_dir, dedup.NAME, "members", columns=["md5"], filters=[("url", "==", url)])
    if not member.empty:
        cluster = read_table(
            crawl_dir, dedup.NAME, "clusters", columns=["urls"], filters=[("md5", "==", member["md5"].iloc[0])]
        )
        exact = sorted(other for other in cluster["urls"].iloc[0] if other != url)
    near: list[str] = []
    found = read_table(crawl_dir, neardup.NAME, "members", columns=["cluster"], filters=[("url", "==", url)])
    if not found.empty:
        cluster_id = int(found["cluster"].iloc[0])
        rows = read_table(
            crawl_dir, neardup.NAME, "clusters", columns=["urls"], filters=[("cluster", "==", cluster_id)]
        )
        near = sorted(set(rows["urls"].iloc[0]) - set(exact) - {url})
    return Duplicates(url, exact, near)


def top_ranked(crawl_dir: str | Path, top: int) -> list[dict[str, Any]]:
    """The `top` pages by PageRank (ties by id: row-key order), with in-degree over followed links."""
    ranks = read_table(crawl_dir, pagerank.NAME, "ranks", columns=["id", "url", "pagerank", "indegree"])
    best = ranks.sort_values(["pagerank", "id"], ascending=[False, True]).head(top)
    return [
        {"url": url, "pagerank": float(rank), "indegree": int(indegree)}
        for url, rank, indegree in zip(best["url"], best["pagerank"], best["indegree"], strict=True)
    ]
