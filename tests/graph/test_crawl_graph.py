"""The connectivity server over a crawl of the simulated web: its graph, decoded, is the crawl's own link records
between fetched pages and the simulated web's ground-truth links between them, out-links and in-links alike;
the CLI answers the same, in text, JSON and DOT."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import crawlspace.graph
from crawlspace.api import Crawler
from crawlspace.cli import main
from crawlspace.config import CrawlConfig
from crawlspace.graph.connectivity import JOB_OUTPUT, LinkGraph
from crawlspace.jobs import read_summary, read_table, run
from crawlspace.jobs.output import output_path
from crawlspace.simweb import SimWeb
from crawlspace.simweb.server import serve_in_background
from crawlspace.store.reader import CrawlReader
from crawlspace.store.rowkey import row_key
from tests.conftest import run_cli
from tests.jobs.test_jobs_e2e import truth_edges
from tests.store.test_duplicates_e2e import WEB  # exact and near copies, redirects and nofollow links

Arcs = set[tuple[str, str]]


@pytest.fixture(scope="module")
def web() -> SimWeb:
    return SimWeb.generate(WEB)


@pytest.fixture(scope="module")
def crawl_dir(web: SimWeb, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("graph-crawl")
    with serve_in_background(web, root / "server", seeds=4) as server:
        config = CrawlConfig(
            min_delay=0.0, delay_factor=0.0, concurrency=16, allow_private_addresses=True,
            hosts_file=str(server.hosts_file), max_seconds=120.0,
        )  # fmt: skip
        stats = Crawler(config, out=root / "crawl", seeds=server.seeds, progress=False).run()
    assert stats.termination == "frontier-empty"
    summaries = run(root / "crawl", only=["connectivity"])
    assert list(summaries) == ["graph", "connectivity"]  # the link graph job first: its output is the input
    return root / "crawl"


@pytest.fixture(scope="module")
def links(crawl_dir: Path) -> LinkGraph:
    return crawlspace.graph.open(crawl_dir)


def decoded_arcs(links: LinkGraph) -> Arcs:
    return {
        (links.url_of(int(s)), links.url_of(int(t)))
        for sources, targets in links.arcs(batch=500)
        for s, t in zip(sources, targets, strict=True)
    }


def truth_arcs(web: SimWeb, fetched: set[str]) -> Arcs:
    """Every link between fetched URLs in the generator's arrays, nofollow ones too, and redirects."""
    return truth_edges(web, fetched, follow_nofollow=True)


def test_nodes_are_the_fetched_pages_in_row_key_order(crawl_dir: Path, links: LinkGraph) -> None:
    fetched = list(read_table(crawl_dir, "graph", "nodes")["url"])
    assert len(fetched) > 300
    assert list(links.urls) == sorted(fetched, key=row_key)
    assert all(links.id_of(url) == node for node, url in enumerate(links.urls))
    assert output_path(crawl_dir, "connectivity") == crawl_dir / JOB_OUTPUT  # where `open` looks


def test_the_graph_is_the_crawls_links_and_the_truth(web: SimWeb, crawl_dir: Path, links: LinkGraph) -> None:
    fetched = set(links.urls)
    arcs = decoded_arcs(links)
    edges = read_table(crawl_dir, "graph", "edges")
    assert arcs == set(zip(edges["source"], edges["target"], strict=True))
    assert arcs == truth_arcs(web, fetched)
    assert edges["nofollow"].any() and edges["redirect"].any()  # both kinds are arcs
    # the crawl's own link records (each page's parse) between fetched pages: all in the graph; what the graph
    # has beyond them is a redirect's target or the links of an exact copy (whose body the crawl did not parse)
    with CrawlReader(crawl_dir) as reader:
        recorded = {(e.source, e.target) for e in reader.edges() if e.source in fetched and e.target in fetched}
        assert recorded <= arcs and len(recorded) > 1000
        for source in {source for source, _ in arcs - recorded}:
            fetch = reader.page(source).fetch  # type: ignore[union-attr]
            assert 300 <= fetch.status < 400 or fetch.duplicate_of, source
    summary = read_summary(crawl_dir, "connectivity")
    assert (summary["nodes"], summary["arcs"]) == (len(fetched), len(arcs))
    assert summary["links_to_unfetched_urls"] == read_summary(crawl_dir, "graph")["links_to_unfetched_urls"] > 0


def test_successors_and_predecessors_of_every_page(web: SimWeb, links: LinkGraph) -> None:
    arcs = truth_arcs(web, set(links.urls))
    out: dict[str, set[str]] = {url: set() for url in links.urls}
    into: dict[str, set[str]] = {url: set() for url in links.urls}
    for source, target in arcs:
        out[source].add(target)
        into[target].add(source)
    for url in links.urls:
        assert links.successor_urls(url) == sorted(out[url], key=row_key)
        assert links.predecessor_urls(url) == sorted(into[url], key=row_key)
        node = links.id_of(url)
        assert links.successors(node).tolist() == sorted(links.id_of(other) for other in out[url])


def test_cli_answers_as_the_library(crawl_dir: Path, links: LinkGraph) -> None:
    runner = CliRunner()
    hub = max(links.urls, key=lambda url: len(links.predecessors(url)))
    result = runner.invoke(main, ["graph", str(crawl_dir), "--in", hub, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == links.predecessor_urls(hub) and len(json.loads(result.output)) > 5
    result = runner.invoke(main, ["graph", str(crawl_dir), "--out", hub])
    assert result.exit_code == 0 and result.output.splitlines() == links.successor_urls(hub)
    result = runner.invoke(main, ["graph", "query", str(crawl_dir), "--hops", "1", hub, "--json"])
    assert json.loads(result.output) == [{"url": hub, "hops": 0}] + [
        {"url": url, "hops": 1} for url in links.successor_urls(hub)
    ]
    result = runner.invoke(main, ["graph", str(crawl_dir), "--stats", "--json"])
    stats = json.loads(result.output)
    assert stats == links.stats() and stats["arcs"] == links.num_arcs
    assert 0 < stats["bits_per_link"] < 32 and 0 < stats["bits_per_link_transpose"] < 32 and stats["bits_per_url"] > 0
    text = runner.invoke(main, ["graph", str(crawl_dir), "--stats"]).output
    assert f"nodes: {links.num_nodes}" in text and "indegree (degree: nodes):" in text


def test_cli_errors(crawl_dir: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(main, ["graph", str(crawl_dir), "--out", "http://nowhere.test/never"])
    assert result.exit_code == 1 and "http://nowhere.test/never is not a page of the crawl" in result.output
    result = runner.invoke(main, ["graph", str(crawl_dir), "--out", "::not a url"])
    assert result.exit_code == 2 and "::not a url" in result.output
    result = runner.invoke(main, ["graph", str(crawl_dir), "--out", "http://a.test/", "--stats"])
    assert result.exit_code == 2 and "give one of" in result.output
    result = runner.invoke(main, ["graph", str(tmp_path), "--stats"])
    assert result.exit_code == 2 and "no link graph here" in result.output


def test_the_command_line_entry_point(crawl_dir: Path, links: LinkGraph) -> None:
    """Through `python -m crawlspace` (and a rebuild over the same crawl, which replaces the output)."""
    built = run_cli("graph", "build", str(crawl_dir))
    assert built.returncode == 0, built.stderr
    assert json.loads(built.stdout)["arcs"] == links.num_arcs
    assert "graph: done" in built.stderr and "connectivity: done" in built.stderr  # the link graph job again
    built = run_cli("graph", "build", str(crawl_dir), "--reuse-links")
    assert built.returncode == 0 and "graph: done" not in built.stderr and "connectivity: done" in built.stderr
    url = links.url_of(0)
    answer = run_cli("graph", str(crawl_dir), "--out", url, "--json")
    assert answer.returncode == 0, answer.stderr
    assert json.loads(answer.stdout) == links.successor_urls(url)


def test_a_truncated_url_map_is_reported_by_the_cli(crawl_dir: Path, tmp_path: Path) -> None:
    copy = tmp_path / "graph"
    shutil.copytree((crawl_dir / JOB_OUTPUT).resolve(), copy)
    url_map = copy / "urls.fcmap"
    url_map.write_bytes(url_map.read_bytes()[:-100])
    result = CliRunner().invoke(main, ["graph", str(copy), "--stats"])
    assert result.exit_code == 2
    assert f"{url_map}: " in result.output and "where the header says" in result.output and "at byte" in result.output
