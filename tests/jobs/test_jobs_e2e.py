"""The batch jobs on crawls of the simulated web (issue 18), judged against the web's ground truth and
against themselves: every job under Dask's synchronous scheduler and under a `distributed.LocalCluster`
of 2 process workers (started here) gives identical tables; exact clusters, edges and near-duplicates
are those of the generator's arrays; PageRank agrees with a scipy sparse reference and with the truth's
PageRank over the same pages to 1e-6 (L1); a `--processes 2` crawl and a list of directories read alike;
a job killed half-way leaves the previous output, and running it again gives the same output."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from distributed import Client, LocalCluster

from crawlspace.api import Crawler
from crawlspace.config import CrawlConfig
from crawlspace.jobs import JOB_NAMES, read_summary, read_table, run
from crawlspace.jobs.output import jobs_dir
from crawlspace.simweb import SimWeb
from crawlspace.simweb.server import serve_in_background
from crawlspace.simweb.truth import LinkTable
from tests.conftest import REPO, run_cli
from tests.store.test_duplicates_e2e import WEB  # many exact and near copies, on one host and across hosts

TABLES = {
    "dedup": ["clusters", "members"],
    "near": ["signatures", "pairs", "clusters", "members"],
    "graph": ["nodes", "edges", "anchors"],
    "pagerank": ["ranks"],
}


def crawl(web: SimWeb, root: Path, processes: int) -> tuple[Path, list[str]]:
    with serve_in_background(web, root / "server", seeds=4) as server:
        config = CrawlConfig(
            min_delay=0.0, delay_factor=0.0, concurrency=16, allow_private_addresses=True,
            hosts_file=str(server.hosts_file), processes=processes, max_seconds=120.0,
        )  # fmt: skip
        stats = Crawler(config, out=root / "crawl", seeds=server.seeds, progress=False).run()
    assert stats.termination == "frontier-empty"
    return root / "crawl", list(server.seeds)


@pytest.fixture(scope="module")
def web() -> SimWeb:
    return SimWeb.generate(WEB)


@pytest.fixture(scope="module")
def crawled(web: SimWeb, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    return crawl(web, tmp_path_factory.mktemp("jobs1"), 1)


@pytest.fixture(scope="module")
def synchronous(crawled: tuple[Path, list[str]]) -> dict[str, dict[str, Any]]:
    return run(crawled[0])


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    """Two process workers: the jobs' tasks and their inputs are pickled to other processes."""
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        Client(cluster) as opened,
    ):
        yield opened


def table(directory: Path, job: str, name: str) -> pd.DataFrame:
    """A table in a canonical order (lists as tuples), to compare runs whatever their partitioning."""
    frame = read_table(directory, job, name)
    for column in frame.columns:
        if frame[column].map(lambda value: isinstance(value, np.ndarray | list)).any():
            frame[column] = frame[column].map(tuple)
    return frame.sort_values(list(frame.columns)).reset_index(drop=True)


def fetched_urls(directory: Path) -> set[str]:
    return set(read_table(directory, "graph", "nodes")["url"])


def test_every_job_ran_and_the_crawl_agrees(crawled: tuple[Path, list[str]], synchronous: dict[str, Any]) -> None:
    directory = crawled[0]
    assert list(synchronous) == list(JOB_NAMES)
    check = synchronous["dedup"]["crawl_check"]
    stats = json.loads((directory / "stats.json").read_text())
    assert check["agrees"] and check["copy_revisits"] == stats["duplicate_content"] > 20
    assert check["marked_duplicates"] == check["copy_revisits"] and check["revisit_digest_mismatches"] == 0
    assert synchronous["pagerank"]["converged"] and synchronous["pagerank"]["last_l1_change"] < 1e-9
    for name in JOB_NAMES:
        assert read_summary(directory, name)["job"] == name


def test_exact_clusters_are_the_generators(web: SimWeb, crawled: tuple[Path, list[str]], synchronous: Any) -> None:
    directory = crawled[0]
    fetched = fetched_urls(directory)
    truth = sorted(tuple(sorted(url for url in urls if url in fetched)) for urls in web.duplicate_clusters().values())
    truth = [cluster for cluster in truth if len(cluster) > 1]
    clusters = table(directory, "dedup", "clusters")
    assert sorted(clusters["urls"]) == truth and len(truth) > 20
    for row in clusters.itertuples():
        assert row.representative == min(row.urls, key=lambda url: (len(url), url)) and row.size == len(row.urls)
        assert row.stored in row.urls


def test_representative_by_inlinks(crawled: tuple[Path, list[str]], synchronous: Any, tmp_path: Path) -> None:
    directory = crawled[0]
    summaries = run(directory, only=["dedup"], out=tmp_path, options={"dedup": {"representative": "inlinks"}})
    assert list(summaries) == ["graph", "dedup"]  # the in-links come from the graph job, run first
    edges = read_table(tmp_path, "graph", "edges")
    inlinks = edges[~edges["nofollow"]]["target"].value_counts().to_dict()
    clusters = table(tmp_path, "dedup", "clusters")
    chosen = [min(urls, key=lambda url: (-inlinks.get(url, 0), len(url), url)) for urls in clusters["urls"]]
    assert list(clusters["representative"]) == chosen
    assert chosen != list(table(directory, "dedup", "clusters")["representative"])  # not just the shortest
    assert list(clusters["urls"]) == list(table(directory, "dedup", "clusters")["urls"])


def truth_edges(web: SimWeb, fetched: set[str], follow_nofollow: bool = False) -> set[tuple[str, str]]:
    """Followed links (and redirects) between fetched URLs, from the generator's arrays (nofollow ones too if
    `follow_nofollow`)."""
    links = LinkTable(web.data, follow_nofollow=follow_nofollow)
    edges = set()
    for url in fetched:
        node = web.node_of(url)
        assert node is not None, url
        target = links.redirect(node)
        for other in [target] if target is not None else links.out(node):
            other_url = web.data.url_of(other)
            if other_url in fetched and other_url != url:
                edges.add((url, other_url))
    return edges


def test_edges_are_the_generators_links(web: SimWeb, crawled: tuple[Path, list[str]], synchronous: Any) -> None:
    directory = crawled[0]
    fetched = fetched_urls(directory)
    nodes = read_table(directory, "graph", "nodes")
    assert sorted(nodes["id"]) == list(range(len(nodes)))  # dense
    edges = read_table(directory, "graph", "edges")
    followed = edges[~edges["nofollow"]]
    assert set(zip(followed["source"], followed["target"], strict=True)) == truth_edges(web, fetched)
    assert len(edges) == len(set(zip(edges["src"], edges["dst"], strict=True)))  # distinct pairs
    url_of = dict(zip(nodes["id"], nodes["url"], strict=True))
    assert all(url_of[s] == u for s, u in zip(edges["src"], edges["source"], strict=True))
    assert all(url_of[d] == u for d, u in zip(edges["dst"], edges["target"], strict=True))
    nofollow = {(e.source, e.target) for e in edges[edges["nofollow"]].itertuples()}
    assert nofollow, "the web has nofollow links between fetched pages"
    for source, target in nofollow:  # every link from source to target in the web is rel=nofollow
        links = [link for link in web.links(source) if link.target == target]
        assert links and all(link.nofollow for link in links), (source, target)
    anchors = read_table(directory, "graph", "anchors")
    assert anchors["links"].sum() == len(edges)
    texts = dict(zip(anchors["target"], anchors["texts"], strict=True))
    some = followed[followed["text"] != ""].iloc[0]
    assert some["text"] in list(texts[some["target"]])


def test_near_duplicates_cluster_with_their_originals(
    web: SimWeb, crawled: tuple[Path, list[str]], synchronous: Any
) -> None:
    directory = crawled[0]
    fetched = fetched_urls(directory)
    members = read_table(directory, "near", "members")
    cluster_of = dict(zip(members["url"], members["cluster"], strict=True))
    near = [(url, web.near_duplicate_of(url)) for url in fetched if web.near_duplicate_of(url) in fetched]
    assert len(near) >= 5
    for url, original in near:
        assert url in cluster_of and cluster_of[url] == cluster_of.get(original), (url, original)
    exact = table(directory, "dedup", "clusters")
    for urls in exact["urls"]:  # exact copies are near-duplicates of similarity 1
        assert len({cluster_of.get(url) for url in urls}) == 1
    pairs = read_table(directory, "near", "pairs")
    assert (pairs["similarity"] >= 0.9).all() and (pairs["a"] < pairs["b"]).all()
    unrelated = {cluster_of[url] for url in members["url"]}
    for cluster in unrelated:  # no cluster joins pages the generator made independently
        urls = members[members["cluster"] == cluster]["url"]
        roots = {web.near_duplicate_of(url) or url for url in urls}
        groups = {web.duplicate_cluster(root) if web.duplicate_cluster(root) is not None else root for root in roots}
        assert len(groups) == 1, list(urls)


def reference_pagerank(
    edges: list[tuple[int, int]], nodes: int, damping: float = 0.85, teleport: np.ndarray | None = None
) -> np.ndarray:
    """A plain scipy sparse power iteration to 1e-13, the same model: dangling rank spread by the teleport."""
    src = np.array([s for s, _ in edges], np.int64)
    dst = np.array([d for _, d in edges], np.int64)
    outdegree = np.bincount(src, minlength=nodes).astype(float)
    matrix = sp.csr_matrix((1.0 / outdegree[src], (dst, src)), shape=(nodes, nodes))
    v = np.full(nodes, 1.0 / nodes) if teleport is None else teleport / teleport.sum()
    dangling = outdegree == 0
    rank = v.copy()
    for _ in range(1000):
        new = (1 - damping) * v + damping * (matrix @ rank + rank[dangling].sum() * v)
        new /= new.sum()
        if np.abs(new - rank).sum() < 1e-13:
            return new
        rank = new
    raise AssertionError("the reference did not converge")


def ranks_by_id(directory: Path) -> np.ndarray:
    ranks = read_table(directory, "pagerank", "ranks").sort_values("id")
    assert list(ranks["id"]) == list(range(len(ranks)))
    return ranks["pagerank"].to_numpy()


def test_pagerank_matches_scipy_and_the_truth_over_the_same_pages(
    web: SimWeb, crawled: tuple[Path, list[str]], synchronous: Any
) -> None:
    directory = crawled[0]
    rank = ranks_by_id(directory)
    edges = read_table(directory, "graph", "edges")
    followed = edges[~edges["nofollow"]]
    reference = reference_pagerank(list(zip(followed["src"], followed["dst"], strict=True)), len(rank))
    assert np.abs(rank - reference).sum() < 1e-6
    nodes = read_table(directory, "graph", "nodes")
    id_of = dict(zip(nodes["url"], nodes["id"], strict=True))
    truth = reference_pagerank([(id_of[s], id_of[t]) for s, t in truth_edges(web, set(id_of))], len(rank))
    assert np.abs(rank - truth).sum() < 1e-6
    ranked = read_table(directory, "pagerank", "ranks")
    assert (ranked["indegree"].to_numpy() == np.bincount(followed["dst"], minlength=len(rank))[ranked["id"]]).all()


def test_personalized_pagerank_from_seeds(crawled: tuple[Path, list[str]], synchronous: Any, tmp_path: Path) -> None:
    directory, seeds = crawled
    out = tmp_path / "personal"
    summary = run(directory, only=["pagerank"], out=out, options={"pagerank": {"seeds": seeds[:2]}})
    assert summary["pagerank"]["personalized_seeds"] == sorted(seeds[:2])
    assert list(summary) == ["graph", "pagerank"]  # its input job had no output in `out`: run first
    rank = ranks_by_id(out)
    nodes = read_table(out, "graph", "nodes")
    edges = read_table(out, "graph", "edges")
    followed = edges[~edges["nofollow"]]
    teleport = nodes.sort_values("id")["url"].isin(seeds[:2]).to_numpy().astype(float)
    reference = reference_pagerank(
        list(zip(followed["src"], followed["dst"], strict=True)), len(rank), teleport=teleport
    )
    assert np.abs(rank - reference).sum() < 1e-6
    assert np.abs(rank - ranks_by_id(directory)).sum() > 0.1  # not the plain PageRank


def test_a_cluster_gives_identical_outputs(
    crawled: tuple[Path, list[str]], synchronous: Any, client: Client, tmp_path: Path
) -> None:
    directory = crawled[0]
    summaries = run(directory, client=client, out=tmp_path)
    for job, names in TABLES.items():
        for name in names:
            pd.testing.assert_frame_equal(table(tmp_path, job, name), table(directory, job, name), check_exact=True)
        ignored = {"seconds", "dirs"}
        assert {k: v for k, v in summaries[job].items() if k not in ignored} == {
            k: v for k, v in read_summary(directory, job).items() if k not in ignored
        }


def test_cli_jobs_on_a_scheduler_address(
    crawled: tuple[Path, list[str]], synchronous: Any, client: Client, tmp_path: Path
) -> None:
    """`crawlspace jobs DIR --scheduler tcp://...`: a client of the test's cluster, opened and closed by the CLI."""
    directory = crawled[0]
    address = client.scheduler.address
    assert address.startswith("tcp://127.0.0.1:")
    done = run_cli("jobs", str(directory), "--scheduler", address, "--only", "dedup", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["dedup"]["clusters"] == read_summary(directory, "dedup")["clusters"]
    for name in TABLES["dedup"]:
        pd.testing.assert_frame_equal(table(tmp_path, "dedup", name), table(directory, "dedup", name))


def test_the_threaded_scheduler_and_other_partitions_give_identical_outputs(
    crawled: tuple[Path, list[str]], synchronous: Any, tmp_path: Path
) -> None:
    directory = crawled[0]
    run(directory, only=["graph", "dedup"], scheduler="threads", partitions=3, out=tmp_path)
    for job in ("graph", "dedup"):
        for name in TABLES[job]:
            pd.testing.assert_frame_equal(table(tmp_path, job, name), table(directory, job, name), check_exact=True)


def test_two_processes_and_a_list_of_directories_read_alike(
    web: SimWeb, crawled: tuple[Path, list[str]], synchronous: Any, tmp_path: Path
) -> None:
    """A `--processes 2` crawl (a table shard per partition) and both crawls read as one (a URL fetched by
    each is one page): the same pages, so the same clusters, edges and ranks."""
    two, _ = crawl(web, tmp_path / "two", 2)
    run(two, only=["dedup", "graph", "pagerank"], partitions=3)
    both = tmp_path / "both"
    run([crawled[0], two], only=["dedup", "graph", "pagerank"], out=both)
    for directory in (two, both):
        for job in ("dedup", "graph", "pagerank"):
            for name in TABLES[job]:
                mine, theirs = table(directory, job, name), table(crawled[0], job, name)
                if job == "pagerank":  # ids in key order: the same; ranks to the iteration's tolerance
                    assert np.abs(mine["pagerank"] - theirs["pagerank"]).sum() < 1e-8
                    mine, theirs = mine.drop(columns="pagerank"), theirs.drop(columns="pagerank")
                if name == "clusters":  # which copy the crawl stored in full depends on fetch order
                    mine, theirs = mine.drop(columns="stored"), theirs.drop(columns="stored")
                pd.testing.assert_frame_equal(mine, theirs)


def test_a_damaged_warc_file_costs_its_pages_only(
    web: SimWeb, crawled: tuple[Path, list[str]], synchronous: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    """Bad input: garbage over the middle of a WARC file. The jobs finish; the pages whose records are lost
    are counted and left out, every cluster found is still a true one. (The undamaged crawl's figures come
    from the `synchronous` fixture: under xdist this test may be the first of its module on its worker.)"""
    import shutil

    copy = tmp_path / "crawl"
    shutil.copytree(crawled[0], copy, ignore=shutil.ignore_patterns("jobs"))
    biggest = max((copy / "warc").glob("*.warc.gz"), key=lambda path: path.stat().st_size)
    data = bytearray(biggest.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 200_000] = os.urandom(min(200_000, len(data) - middle))
    biggest.write_bytes(bytes(data))
    summaries = run(copy)
    lost = summaries["dedup"]["pages_with_unreadable_body"]
    assert lost > 0 and summaries["dedup"]["pages_with_body"] + lost == synchronous["dedup"]["pages_with_body"]
    truth = [set(urls) for urls in web.duplicate_clusters().values()]
    for urls in read_table(copy, "dedup", "clusters")["urls"]:
        assert any(set(urls) <= cluster for cluster in truth), urls
    assert summaries["graph"]["nodes"] == synchronous["graph"]["nodes"]  # the table is intact


SLOW_PAGERANK = """
import sys
from crawlspace.jobs import run
run(sys.argv[1], only=["pagerank"], options={"pagerank": {"tolerance": 0.0, "max_rounds": 100000}})
"""


def test_a_killed_job_leaves_the_previous_output_and_runs_again(
    crawled: tuple[Path, list[str]], synchronous: Any
) -> None:
    directory = crawled[0]
    link = jobs_dir(directory) / "pagerank"
    before = {path.name: path.read_bytes() for path in sorted(link.rglob("*")) if path.is_file()}
    target = link.resolve()
    env = dict(os.environ, PYTHONPATH=str(REPO))
    process = subprocess.Popen([sys.executable, "-c", SLOW_PAGERANK, str(directory)], env=env)
    try:
        deadline = time.monotonic() + 60
        while not [p for p in jobs_dir(directory).glob(".pagerank.*") if p.is_dir() and p != target]:
            assert time.monotonic() < deadline and process.poll() is None
            time.sleep(0.02)
        time.sleep(1.0)  # rounds going on
        assert process.poll() is None
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
    assert link.resolve() == target
    assert {path.name: path.read_bytes() for path in sorted(link.rglob("*")) if path.is_file()} == before
    expected = table(directory, "pagerank", "ranks")
    summary = run(directory, only=["pagerank"])["pagerank"]
    assert summary["rounds"] == read_summary(directory, "pagerank")["rounds"]
    pd.testing.assert_frame_equal(table(directory, "pagerank", "ranks"), expected, check_exact=True)
    leftovers = [p.name for p in jobs_dir(directory).glob(".pagerank.*") if p.is_dir()]
    assert leftovers == [link.resolve().name]  # the killed run's directory was removed


def test_cli_dups_and_rank(crawled: tuple[Path, list[str]], synchronous: Any) -> None:
    directory = crawled[0]
    clusters = table(directory, "dedup", "clusters")
    url = clusters["urls"].iloc[0][0]
    done = run_cli("dups", str(directory), url, "--json")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["url"] == url and answer["exact"] == sorted(set(clusters["urls"].iloc[0]) - {url})
    assert not set(answer["near"]) & set(answer["exact"])
    done = run_cli("rank", str(directory), "--top", "5", "--json")
    assert done.returncode == 0, done.stderr
    ranked = json.loads(done.stdout)
    expected = read_table(directory, "pagerank", "ranks").sort_values("pagerank", ascending=False).head(5)
    assert [row["url"] for row in ranked] == list(expected["url"])
    assert [row["indegree"] for row in ranked] == list(expected["indegree"])
    never = run_cli("dups", str(directory), "http://never.test/")
    assert never.returncode == 1 and "was not fetched" in never.stderr
    missing = run_cli("rank", str(directory / "nope"))
    assert missing.returncode == 2 and "no crawl directory" in missing.stderr
    unknown = run_cli("jobs", str(directory), "--only", "dedup,bogus")
    assert unknown.returncode == 2 and "unknown job bogus" in unknown.stderr


def test_a_large_bucket_gives_linear_pairs_that_keep_it_connected() -> None:
    from crawlspace.jobs.neardup import MAX_BUCKET_PAIRS_MEMBERS, bucket_pairs, components

    small = [f"http://h.test/{index:03}" for index in range(MAX_BUCKET_PAIRS_MEMBERS)]
    assert len(list(bucket_pairs(small))) == len(small) * (len(small) - 1) // 2
    large = [f"http://h.test/{index:04}" for index in range(1000)]
    pairs = list(bucket_pairs(large))
    assert len(pairs) == 999
    clusters = components(pd.DataFrame({"a": [a for a, _ in pairs], "b": [b for _, b in pairs]}))
    assert len(clusters) == 1 and list(clusters["urls"].iloc[0]) == large
