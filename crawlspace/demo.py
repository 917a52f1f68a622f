"""`crawlspace demo`: crawl the bundled simulated web end to end and judge the result.

The demo is the shortest path from a fresh install to a crawl that shows what crawlspace does:
it starts the simulated web in a separate process (so the crawler's CPU is its own), crawls it
politely with live progress, then prints the crawl's figures next to the server's view of it
(coverage of the ground truth, robots violations, politeness gaps), and runs the batch jobs
(crawlspace.jobs) over the crawl: duplicate clusters against the truth, the top pages by PageRank, and the
connectivity server's graph: the most-linked pages and one page's in-links.
"""

from __future__ import annotations

import contextlib
import json
import resource
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import click

from crawlspace.config import CrawlConfig
from crawlspace.simweb import SimWeb, SimWebConfig, judge_crawl, serve_in_background

DEMO_WEB = SimWebConfig(
    hosts=150,
    seed=2026,
    mean_pages_per_host=12.0,
    max_pages_per_host=200,
    robots_crawl_delay=0.2,
    include_trap=False,
)
DEMO_MIN_DELAY = 0.05
DEMO_TIME_LIMIT = 110.0


def _cpu_seconds() -> float:
    """CPU of this process and of its finished children: the crawl's worker processes (the simulated
    web's server is still running when this is read, so it is not counted)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def run_demo(out: Path, *, hosts: int, seed: int, live: bool | None, progress_interval: float = 1.0) -> dict[str, Any]:
    from crawlspace.api import Crawler

    web = SimWeb.generate(DEMO_WEB.replace(hosts=hosts, seed=seed))
    click.echo(f"simulated web: {len(web.hosts)} hosts, {len(web.all_urls())} URLs (seed {seed})", err=True)
    server_dir = out / "simweb"
    with serve_in_background(web, server_dir, seeds=10) as running:
        config = CrawlConfig(
            min_delay=DEMO_MIN_DELAY,
            allow_private_addresses=True,
            hosts_file=str(running.hosts_file),
            max_seconds=DEMO_TIME_LIMIT,
            concurrency=128,
            progress_interval=progress_interval,
        )
        click.echo(f"serving on 127.{running.octet}.x.y:{running.port}; crawling into {out}", err=True)
        cpu_before = _cpu_seconds()
        stats = Crawler(config, out=out, seeds=running.seeds, progress=live).run().to_dict()
        cpu = _cpu_seconds() - cpu_before
    verdict = judge_crawl(web, running.read_log(), running.seeds, min_delay=DEMO_MIN_DELAY)
    summary = {
        "pages": stats["pages_fetched"],
        "seconds": round(stats["finished_at"] - stats["started_at"], 1),
        "pages_per_second": stats["pages_per_second"],
        "crawler_cpu_seconds": round(cpu, 2),
        "cpu_ms_per_page": round(1000 * cpu / max(stats["pages_fetched"], 1), 2),
        "robots_exclusions": stats["robots_excluded"],
        "duplicate_urls": stats["duplicate_urls"],
        "duplicate_content": stats["duplicate_content"],
        "responses_by_status": stats["responses_by_status"],
        "errors": stats["errors"],
        "termination": stats["termination"],
        "server_view": {
            "expected_urls": len(verdict.expected),
            "fetched_expected": len(verdict.expected) - len(verdict.missing),
            "missing": len(verdict.missing),
            "unexpected": len(verdict.unexpected),
            "robots_violations": len(verdict.disallowed),
            "fetched_twice": len(verdict.refetched),
            "overlapping_requests": len(verdict.host_overlaps),
            "delay_violations": len(verdict.delay_violations),
        },
        "warc_files": str(out / "warc"),
        "stats": str(out / "stats.json"),
    }
    summary["jobs"] = jobs_report(web, out)
    summary["search"] = search_report(out, [row["url"] for row in summary["jobs"]["top_pages"]])
    summary["graph"] = graph_report(out)
    (out / "demo-summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    if not verdict.ok:
        click.echo("server-side judgement:\n" + verdict.summary(), err=True)
    return summary


def jobs_report(web: SimWeb, out: Path) -> dict[str, Any]:
    """The batch jobs over the demo's crawl, judged against the web's truth: exact clusters found (of the
    generator's clusters with two or more URLs fetched), near-copies clustered with their original, and
    the top pages by PageRank."""
    from crawlspace.jobs import read_table, run
    from crawlspace.jobs.lookup import top_ranked

    summaries = run(out)
    fetched = set(read_table(out, "graph", "nodes")["url"])
    truth = {tuple(sorted(url for url in urls if url in fetched)) for urls in web.duplicate_clusters().values()}
    truth = {cluster for cluster in truth if len(cluster) > 1}
    found = {tuple(sorted(urls)) for urls in read_table(out, "dedup", "clusters")["urls"]}
    members = read_table(out, "near", "members")
    cluster_of = dict(zip(members["url"], members["cluster"], strict=True))
    near = [(url, web.near_duplicate_of(url)) for url in sorted(fetched)]
    near = [(url, original) for url, original in near if original in fetched]
    return {
        "exact_clusters_true": len(truth),
        "exact_clusters_found": len(found),
        "exact_clusters_matching_truth": len(truth & found),
        "revisits_agree_with_bodies": summaries["dedup"]["crawl_check"]["agrees"],
        "near_copies_fetched": len(near),
        "near_copies_clustered_with_original": sum(
            1 for url, original in near if url in cluster_of and cluster_of[url] == cluster_of.get(original)
        ),
        "near_clusters": summaries["near"]["clusters"],
        "graph_nodes": summaries["graph"]["nodes"],
        "graph_edges": summaries["graph"]["edges"],
        "pagerank_rounds": summaries["pagerank"]["rounds"],
        "top_pages": top_ranked(out, 5),
        "outputs": str(out / "jobs"),
    }


def graph_report(out: Path, top: int = 5, shown: int = 5) -> dict[str, Any]:
    """The connectivity server built by the jobs: its size, the `top` most-linked pages (in-degree, ties by id)
    and the first `shown` in-links of the most-linked one."""
    import numpy as np

    import crawlspace.graph

    with crawlspace.graph.open(out) as links:
        stats = links.stats()
        indegrees = links.in_links.to_csr().outdegrees()
        best = np.lexsort((np.arange(len(indegrees)), -indegrees))[:top].tolist()
        most_linked = [{"url": links.url_of(node), "in_links": int(indegrees[node])} for node in best]
        in_links = links.predecessor_urls(best[0]) if best else []
    figures = ("nodes", "arcs", "bits_per_link", "bits_per_link_transpose", "bits_per_url")
    return {
        **{key: stats[key] for key in figures},
        "most_linked": most_linked,
        "in_links_of_most_linked": in_links[:shown],
        "in_links_not_shown": max(0, len(in_links) - shown),
    }


def search_report(out: Path, top_urls: list[str]) -> list[dict[str, Any]]:
    """Three queries on the index the jobs built, made from the best-ranked page with a title of two words
    or more: its title's words, its title as a phrase, its title's first word on its own site; each with
    its top 3 and the rank of that page (every query matches it)."""
    from crawlspace.index import Index, tokenize
    from crawlspace.store.reader import CrawlReader
    from crawlspace.urls.normalize import host_of

    with CrawlReader([out]) as reader:
        titled = [(url, page.title) for url in top_urls if (page := reader.page(url)) is not None and page.title]
    chosen = [(url, title) for url, title in titled if len(tokenize(title)) >= 2]
    if not chosen:
        return []
    url, title = chosen[0]
    words = tokenize(title)
    queries = [" ".join(words), f'"{" ".join(words)}"', f"{words[0]} site:{host_of(url).split(':')[0]}"]
    report = []
    with Index(out / "jobs" / "index") as index:
        for query in queries:
            hits = index.search(query, 1000).hits
            ranks = [rank for rank, hit in enumerate(hits, 1) if hit.url == url]
            report.append(
                {
                    "query": query,
                    "page": url,
                    "page_rank": ranks[0] if ranks else None,
                    "results": [{"url": hit.url, "score": hit.score, "title": hit.title} for hit in hits[:3]],
                }
            )
    return report


@click.command()
@click.option(
    "--out", type=click.Path(path_type=Path), default=None, help="Crawl directory (default: a temporary one)."
)
@click.option("--hosts", type=click.IntRange(1, 20_000), default=DEMO_WEB.hosts, show_default=True)
@click.option("--seed", type=int, default=DEMO_WEB.seed, show_default=True)
@click.option("--progress/--no-progress", "live", default=None, help="Force the live display on or off.")
@click.option(
    "--serve", is_flag=True, help="Serve the crawl's dashboard while it runs, and keep it up after (Ctrl-C ends)."
)
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True, help="The dashboard's port.")
def demo(out: Path | None, hosts: int, seed: int, live: bool | None, serve: bool, port: int) -> None:
    """Crawl the bundled simulated web with live progress, run the batch jobs, and report what was found."""
    keep = out is not None
    directory = out if out is not None else Path(tempfile.mkdtemp(prefix="crawlspace-demo-"))
    if keep and (directory / "stats.json").exists():
        shutil.rmtree(directory)
    if not serve:
        _report(run_demo(directory, hosts=hosts, seed=seed, live=live))
        return
    from crawlspace.serve.server import ATTACHED_PROGRESS_INTERVAL, ServeError, attached

    directory.mkdir(parents=True, exist_ok=True)
    try:
        with attached(directory, port) as address:
            _report(
                run_demo(directory, hosts=hosts, seed=seed, live=live, progress_interval=ATTACHED_PROGRESS_INTERVAL)
            )
            click.echo(f"\ndashboard of this crawl, with its search page: {address.url} (Ctrl-C to stop)")
            with contextlib.suppress(KeyboardInterrupt):
                while True:
                    time.sleep(3600)
    except ServeError as exc:
        raise click.ClickException(str(exc)) from None


def _report(summary: dict[str, Any]) -> None:
    view = summary["server_view"]
    click.echo(
        f"\ncrawled {summary['pages']} pages in {summary['seconds']} s ({summary['pages_per_second']} pages/s), "
        f"{summary['crawler_cpu_seconds']} CPU s ({summary['cpu_ms_per_page']} ms/page)\n"
        f"robots.txt exclusions {summary['robots_exclusions']}, duplicate URLs {summary['duplicate_urls']}, "
        f"duplicate content {summary['duplicate_content']}, errors {sum(summary['errors'].values())}\n"
        f"responses by status {summary['responses_by_status']}\n"
        f"server's view: {view['fetched_expected']} of {view['expected_urls']} reachable allowed URLs fetched, "
        f"{view['robots_violations']} robots violations, {view['fetched_twice']} fetched twice, "
        f"{view['overlapping_requests']} overlapping requests, {view['delay_violations']} delay violations\n"
        f"WARC files: {summary['warc_files']}\nstats: {summary['stats']}"
    )
    from crawlspace.jobs.lookup import printable

    jobs = summary["jobs"]
    click.echo(
        f"\nbatch jobs ({jobs['outputs']}): exact-duplicate clusters {jobs['exact_clusters_found']} found, "
        f"{jobs['exact_clusters_matching_truth']} of {jobs['exact_clusters_true']} true clusters exactly; revisit "
        f"records agree with the bodies: {jobs['revisits_agree_with_bodies']}\n"
        f"near-copies clustered with their original: {jobs['near_copies_clustered_with_original']} of "
        f"{jobs['near_copies_fetched']} ({jobs['near_clusters']} near-duplicate clusters)\n"
        f"link graph {jobs['graph_nodes']} pages, {jobs['graph_edges']} edges; PageRank in "
        f"{jobs['pagerank_rounds']} rounds, top pages:"
    )
    for row in jobs["top_pages"]:
        click.echo(f"  {row['pagerank']:.5f}  in {row['indegree']:>4}  {printable(row['url'])}")
    graph = summary["graph"]
    click.echo(
        f"connectivity server: {graph['nodes']} pages, {graph['arcs']} links, {graph['bits_per_link']} bits per "
        f"link ({graph['bits_per_link_transpose']} for in-links), {graph['bits_per_url']} bits per URL; most linked:"
    )
    for row in graph["most_linked"]:
        click.echo(f"  in {row['in_links']:>4}  {printable(row['url'])}")
    if graph["most_linked"]:
        more = f" (and {graph['in_links_not_shown']} more)" if graph["in_links_not_shown"] else ""
        click.echo(f"links to {printable(graph['most_linked'][0]['url'])}{more}:")
        for url in graph["in_links_of_most_linked"]:
            click.echo(f"  {printable(url)}")
    for search in summary["search"]:
        click.echo(f"search {printable(search['query'])}:")
        for rank, hit in enumerate(search["results"], 1):
            click.echo(f"  {rank}. {hit['score']:.4f}  {printable(hit['url'])}  {printable(hit['title'])}")
