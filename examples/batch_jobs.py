"""Batch jobs after a crawl: duplicate clusters, the link graph and PageRank on Dask, plus a job of your own.

    python examples/batch_jobs.py [OUT]          # default OUT: ./batch-jobs

Crawls a small simulated web, runs every job (`crawlspace.jobs.run`, Dask's synchronous scheduler: no
cluster needed), then composes its own job from the link graph's Dask collections: for each host, the
other hosts that link to it, counted over followed links (a host-level graph, as a site-ranking or
spam-detection job would start). Pass a `distributed.Client` as `client=` to run the same on a cluster.
"""

import json
import sys
from pathlib import Path

import pandas as pd

from crawlspace import CrawlConfig, Crawler
from crawlspace.jobs import JobContext, read_table, run
from crawlspace.jobs.graph import link_graph
from crawlspace.jobs.lookup import duplicates_of, top_ranked
from crawlspace.simweb import SimWeb, SimWebConfig, serve_in_background

WEB = SimWebConfig(
    hosts=20, seed=5, mean_pages_per_host=10, duplicate_fraction=0.1, robots_crawl_delay=0.0, include_trap=False
)


def host_of(url: str) -> str:
    return url.split("/", 3)[2]


def linking_hosts(edges: pd.DataFrame) -> pd.DataFrame:
    """One partition of the edges -> (host, linking host) pairs of followed links between two hosts."""
    followed = edges[~edges["nofollow"]]
    pairs = pd.DataFrame({"host": followed["target"].map(host_of), "from_host": followed["source"].map(host_of)})
    return pairs[pairs["host"] != pairs["from_host"]]


def host_graph(crawl: Path) -> pd.DataFrame:
    """A job of your own over the link graph's Dask collections: hosts by the number of other hosts linking in."""
    ctx = JobContext.open([crawl])
    _, _, edges = link_graph(ctx)
    pairs = edges.map_partitions(linking_hosts, meta={"host": object, "from_host": object}).drop_duplicates()
    counts = pairs.groupby("host")["from_host"].count().rename("linking_hosts")
    (result,) = ctx.compute(counts)
    return result.sort_values(ascending=False).reset_index()


def main(out: Path) -> dict[str, object]:
    web = SimWeb.generate(WEB)
    with serve_in_background(web, out / "simweb", seeds=3) as server:
        config = CrawlConfig(hosts_file=str(server.hosts_file), allow_private_addresses=True, min_delay=0.0)
        Crawler(config, out=out / "crawl", seeds=server.seeds, progress=False).run()
    crawl = out / "crawl"
    summaries = run(crawl)  # every job; outputs in crawl/jobs/<name>/ (Parquet + summary.json)
    clusters = read_table(crawl, "dedup", "clusters")
    example = clusters["urls"].iloc[0][0] if len(clusters) else ""
    hosts = host_graph(crawl)
    hosts.to_csv(out / "linking-hosts.csv", index=False)
    return {
        "exact_clusters": summaries["dedup"]["clusters"],
        "duplicates_of_first": duplicates_of(crawl, example).to_dict() if example else None,
        "top_pages": top_ranked(crawl, 3),
        "most_linked_host": hosts.iloc[0].to_dict() if len(hosts) else None,
    }


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "batch-jobs")
    print(json.dumps(main(out), indent=2))
