"""`crawlspace.graph.open(DIR)`: out-links and in-links of every URL, from the graph, its transpose and the URL map."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import crawlspace.graph
from crawlspace.graph import GraphFormatError, UnknownURL, write_link_graph
from crawlspace.graph.connectivity import PREDECESSORS, SUCCESSORS
from crawlspace.store.rowkey import row_key


def test_out_and_in_links_of_every_node(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    nodes = 500
    urls = [f"http://h{i % 7}.test/p{i}" for i in range(nodes)]  # ids will be the row-key order, not this one
    sources, targets = rng.integers(0, nodes, 4000), rng.integers(0, nodes, 4000)
    written = write_link_graph(tmp_path / "graph", urls, sources, targets)
    links = crawlspace.graph.open(tmp_path / "graph")
    arcs = {(urls[s], urls[t]) for s, t in zip(sources.tolist(), targets.tolist(), strict=True)}
    assert written["arcs"] == len(arcs) and written["nodes"] == nodes
    assert [links.url_of(node) for node in range(nodes)] == sorted(urls, key=row_key)
    for url in urls:
        node = links.id_of(url)
        assert links.url_of(node) == url
        assert links.successor_urls(url) == sorted((t for s, t in arcs if s == url), key=links.id_of)
        assert links.predecessor_urls(node) == sorted((s for s, t in arcs if t == url), key=links.id_of)
        assert links.successors(url).tolist() == sorted(links.id_of(t) for s, t in arcs if s == url)
    batches = list(links.arcs(batch=1000))
    assert len(batches) == -(-len(arcs) // 1000)
    decoded = {(links.url_of(int(s)), links.url_of(int(t))) for b in batches for s, t in zip(*b, strict=True)}
    assert decoded == arcs
    stats = links.stats()
    assert (stats["nodes"], stats["arcs"]) == (nodes, len(arcs))
    assert 0 < stats["bits_per_link"] < 32 and 0 < stats["bits_per_link_transpose"] < 32 and stats["bits_per_url"] > 0
    assert sum(count for _, count in stats["outdegree_distribution"]) == nodes
    assert sum(degree * count for degree, count in stats["indegree_distribution"]) == len(arcs)
    with pytest.raises(UnknownURL, match=r"http://h1\.test/nowhere is not a page") as raised:
        links.id_of("http://h1.test/nowhere")
    assert raised.value.url == "http://h1.test/nowhere"
    with pytest.raises(UnknownURL):
        links.successors("not a url")
    links.close()


def test_ids_follow_the_row_keys(tmp_path: Path) -> None:
    urls = ["http://www.b.test/", "http://a.test/x", "https://a.test/", "http://www.a.test/", "http://c.a.test/"]
    write_link_graph(tmp_path, urls, np.array([0, 1]), np.array([1, 0]))
    with crawlspace.graph.open(tmp_path) as links:
        # test.a.c/http/, test.a.www/http/, test.a/http/x, test.a/https/, test.b.www/http/ ("." sorts before "/")
        assert list(links.urls) == [
            "http://c.a.test/", "http://www.a.test/", "http://a.test/x", "https://a.test/", "http://www.b.test/"
        ]  # fmt: skip
        assert links.successor_urls("http://www.b.test/") == ["http://a.test/x"]


def test_neighbourhood_by_hops(tmp_path: Path) -> None:
    urls = [f"http://a.test/{i}" for i in range(6)]  # a chain 0 -> 1 -> 2 -> 3 -> 4, and 5 -> 0
    write_link_graph(tmp_path, urls, np.array([0, 1, 2, 3, 5]), np.array([1, 2, 3, 4, 0]))
    with crawlspace.graph.open(tmp_path) as links:
        around = links.neighbourhood("http://a.test/1", 2)
        assert {links.url_of(node): hops for node, hops in around.items()} == {
            "http://a.test/1": 0, "http://a.test/2": 1, "http://a.test/3": 2
        }  # fmt: skip
        assert len(links.neighbourhood("http://a.test/0", 10, limit=3)) == 3


def test_a_transpose_of_another_graph_is_refused(tmp_path: Path) -> None:
    urls = ["http://a.test/0", "http://a.test/1", "http://a.test/2"]
    write_link_graph(tmp_path / "a", urls, np.array([0, 1]), np.array([1, 0]))
    write_link_graph(tmp_path / "b", urls, np.array([0, 1, 1, 2]), np.array([1, 0, 2, 1]))
    for extension in (".graph", ".offsets", ".properties"):
        (tmp_path / "b" / f"{SUCCESSORS}{extension}").replace(tmp_path / "a" / f"{SUCCESSORS}{extension}")
    with pytest.raises(GraphFormatError, match="the transpose has 3 nodes and 2 arcs"):
        crawlspace.graph.open(tmp_path / "a")
    assert (tmp_path / "a" / f"{PREDECESSORS}.graph").exists()


def test_a_url_map_of_another_graph_is_refused(tmp_path: Path) -> None:
    write_link_graph(tmp_path / "a", ["http://a.test/0", "http://a.test/1"], np.array([0]), np.array([1]))
    write_link_graph(tmp_path / "b", ["http://a.test/0"], np.array([0]), np.array([0]))
    (tmp_path / "b" / "urls.fcmap").replace(tmp_path / "a" / "urls.fcmap")
    with pytest.raises(GraphFormatError, match="1 URLs for a graph of 2 nodes"):
        crawlspace.graph.open(tmp_path / "a")


def test_a_directory_without_a_graph(tmp_path: Path) -> None:
    with pytest.raises(GraphFormatError, match="no link graph here"):
        crawlspace.graph.open(tmp_path)
