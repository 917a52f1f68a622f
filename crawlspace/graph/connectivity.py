"""The connectivity server's two graphs over one set of ids: `open(DIR)` answers out-links and in-links of any node.

A graph directory holds `links.*` (each node's successors) and `links-t.*` (its predecessors: the transpose),
both BVGraph files (`bvformat`), written together by `write_link_graph`. Node ids are what the caller gave
(the build job will number URLs in the order of the crawl table's row keys, IIR 20.4, and add the URL map).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from crawlspace.graph.bvformat import BVGraph, write_bvgraph
from crawlspace.graph.csr import CsrGraph
from crawlspace.graph.errors import GraphFormatError
from crawlspace.graph.properties import Compression

SUCCESSORS = "links"
PREDECESSORS = "links-t"


def write_link_graph(directory: Path | str, graph: CsrGraph, compression: Compression | None = None) -> None:
    """The graph and its transpose, into `directory` (made if missing)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    write_bvgraph(directory / SUCCESSORS, graph, compression)
    write_bvgraph(directory / PREDECESSORS, graph.transpose(), compression)


@dataclass(frozen=True, eq=False)
class LinkGraph:
    out_links: BVGraph
    in_links: BVGraph

    @property
    def num_nodes(self) -> int:
        return self.out_links.num_nodes

    @property
    def num_arcs(self) -> int:
        return self.out_links.num_arcs

    def successors(self, node: int) -> NDArray[np.int32]:
        return self.out_links.successors(node)

    def predecessors(self, node: int) -> NDArray[np.int32]:
        return self.in_links.successors(node)

    def arcs(self, batch: int = 1 << 20) -> Iterator[tuple[NDArray[np.int32], NDArray[np.int32]]]:
        """Every arc as (sources, targets) arrays of up to `batch` arcs, in order (for jobs such as PageRank).

        One sequential pass decodes the whole graph (4 bytes per arc while it runs): at 50-70 ns per arc that is
        40 times faster than a random access per node."""
        csr = self.out_links.to_csr()
        sources = np.repeat(np.arange(csr.num_nodes, dtype=np.int32), csr.outdegrees())
        for first in range(0, csr.num_arcs, batch):
            yield sources[first : first + batch], csr.successors[first : first + batch]

    def stats(self) -> dict[str, float | int]:
        return {
            "nodes": self.num_nodes,
            "arcs": self.num_arcs,
            "bits_per_link": round(self.out_links.bits_per_link, 3),
            "bits_per_link_transpose": round(self.in_links.bits_per_link, 3),
        }


def open(directory: Path | str, *, verify: bool = True) -> LinkGraph:
    """The graph directory's two graphs, each checked (`BVGraph.load`) and checked to be over the same nodes."""
    directory = Path(directory)
    out_links = BVGraph.load(directory / SUCCESSORS, verify=verify)
    in_links = BVGraph.load(directory / PREDECESSORS, verify=verify)
    if (in_links.num_nodes, in_links.num_arcs) != (out_links.num_nodes, out_links.num_arcs):
        raise GraphFormatError(
            in_links.basename.with_name(PREDECESSORS + ".properties"),
            f"the transpose has {in_links.num_nodes} nodes and {in_links.num_arcs} arcs, the graph "
            f"{out_links.num_nodes} and {out_links.num_arcs}",
        )
    return LinkGraph(out_links, in_links)
