"""`crawlspace.graph.open(DIR)`: out-links and in-links of every node, from the graph and its transpose on disk."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import crawlspace.graph
from crawlspace.graph import CsrGraph, GraphFormatError, write_link_graph
from crawlspace.graph.connectivity import PREDECESSORS, SUCCESSORS


def test_out_and_in_links_of_every_node(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    nodes = 500
    sources, targets = rng.integers(0, nodes, 4000), rng.integers(0, nodes, 4000)
    graph = CsrGraph.from_arcs(nodes, sources, targets)
    write_link_graph(tmp_path / "graph", graph)
    links = crawlspace.graph.open(tmp_path / "graph")
    arcs = set(zip(sources.tolist(), targets.tolist(), strict=True))
    for node in range(nodes):
        assert links.successors(node).tolist() == sorted(t for s, t in arcs if s == node)
        assert links.predecessors(node).tolist() == sorted(s for s, t in arcs if t == node)
    batches = list(links.arcs(batch=1000))
    assert len(batches) == -(-len(arcs) // 1000)
    assert {(int(s), int(t)) for b in batches for s, t in zip(*b, strict=True)} == arcs
    stats = links.stats()
    assert (stats["nodes"], stats["arcs"]) == (nodes, len(arcs))
    assert 0 < stats["bits_per_link"] < 32 and 0 < stats["bits_per_link_transpose"] < 32


def test_a_transpose_of_another_graph_is_refused(tmp_path: Path) -> None:
    write_link_graph(tmp_path / "a", CsrGraph.from_lists([[1], [0], []]))
    write_link_graph(tmp_path / "b", CsrGraph.from_lists([[1], [0, 2], [1]]))
    for extension in (".graph", ".offsets", ".properties"):
        (tmp_path / "b" / f"{SUCCESSORS}{extension}").replace(tmp_path / "a" / f"{SUCCESSORS}{extension}")
    with pytest.raises(GraphFormatError, match="the transpose has 3 nodes and 2 arcs"):
        crawlspace.graph.open(tmp_path / "a")
    assert (tmp_path / "a" / f"{PREDECESSORS}.graph").exists()
