"""The connectivity server (IIR 20.4): `open(DIR)` answers out-links and in-links of any URL of the crawl.

A graph directory holds `links.*` (each node's successors), `links-t.*` (its predecessors: the transpose), both
BVGraph files (`bvformat`), and `urls.fcmap`, the URL map (`urlmap`): ids are the ranks of the URLs' row keys.
`write_link_graph` writes all three from URLs and arcs between them; the `connectivity` batch job
(`crawlspace.jobs.connectivity`, `crawlspace graph build DIR`) does so for a crawl, into DIR/jobs/connectivity,
which `open(DIR)` also finds from the crawl directory itself.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from crawlspace.graph.bvformat import BVGraph, write_bvgraph
from crawlspace.graph.csr import CsrGraph
from crawlspace.graph.errors import GraphFormatError
from crawlspace.graph.properties import Compression
from crawlspace.graph.urlmap import URL_MAP, UrlMap, sort_by_row_key, write_url_map

SUCCESSORS = "links"
PREDECESSORS = "links-t"
JOB_OUTPUT = Path("jobs") / "connectivity"
"""Where the connectivity job's output sits in a crawl directory (`crawlspace.jobs.output.output_path` of the job
named `connectivity`; a test keeps the two in step: importing the jobs here would load Dask for every query)."""


def write_link_graph(
    directory: Path | str,
    urls: Sequence[str],
    sources: NDArray[np.integer],
    targets: NDArray[np.integer],
    compression: Compression | None = None,
) -> dict[str, Any]:
    """The graph of arcs `sources[i] -> targets[i]` (positions in `urls`, any order, repeats dropped), its
    transpose and the URL map, into `directory` (made if missing); ids are renumbered by row key. Returns
    the nodes, arcs and the properties of both graphs."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    order, keys = sort_by_row_key(urls)
    id_of_position = np.empty(len(urls), np.int64)
    id_of_position[np.asarray(order, np.int64)] = np.arange(len(urls), dtype=np.int64)
    sources, targets = np.asarray(sources, np.int64), np.asarray(targets, np.int64)
    if len(sources) and (min(sources.min(), targets.min()) < 0 or max(sources.max(), targets.max()) >= len(urls)):
        raise ValueError(f"an arc has an end outside the {len(urls)} URLs")
    graph = CsrGraph.from_arcs(len(urls), id_of_position[sources], id_of_position[targets])
    write_url_map(directory / URL_MAP, keys)
    successors = write_bvgraph(directory / SUCCESSORS, graph, compression)
    predecessors = write_bvgraph(directory / PREDECESSORS, graph.transpose(), compression)
    return {"nodes": graph.num_nodes, "arcs": graph.num_arcs, "graph": successors, "transpose": predecessors}


NodeOrURL = int | np.integer | str


@dataclass(frozen=True, eq=False)
class LinkGraph:
    """Out- and in-links over one set of ids, and the URL of each id; every query takes a URL or an id."""

    out_links: BVGraph
    in_links: BVGraph
    urls: UrlMap

    @property
    def num_nodes(self) -> int:
        return self.out_links.num_nodes

    @property
    def num_arcs(self) -> int:
        return self.out_links.num_arcs

    def id_of(self, url: str) -> int:
        """`UnknownURL` if the crawl did not fetch `url` (give it normalized, as the crawl stored it)."""
        return self.urls.id_of(url)

    def url_of(self, node: int) -> str:
        return self.urls.url_of(node)

    def _node(self, node: NodeOrURL) -> int:
        return self.urls.id_of(node) if isinstance(node, str) else int(node)

    def successors(self, node: NodeOrURL) -> NDArray[np.int32]:
        """The ids a page links to, increasing."""
        return self.out_links.successors(self._node(node))

    def predecessors(self, node: NodeOrURL) -> NDArray[np.int32]:
        """The ids of the pages that link to this one, increasing."""
        return self.in_links.successors(self._node(node))

    def successor_urls(self, node: NodeOrURL) -> list[str]:
        return [self.urls.url_of(int(other)) for other in self.successors(node)]

    def predecessor_urls(self, node: NodeOrURL) -> list[str]:
        return [self.urls.url_of(int(other)) for other in self.predecessors(node)]

    def neighbourhood(self, node: NodeOrURL, hops: int, limit: int = 10_000) -> dict[int, int]:
        """The nodes at most `hops` out-links away, with their distance, breadth first (at most `limit` of them:
        a few hops from a hub reach most of a crawl)."""
        start = self._node(node)
        distance = {start: 0}
        frontier = [start]
        for hop in range(1, hops + 1):
            reached = []
            for source in frontier:
                for target in self.out_links.successors(source).tolist():
                    if target not in distance and len(distance) < limit:
                        distance[target] = hop
                        reached.append(target)
            frontier = reached
        return distance

    def arcs(self, batch: int = 1 << 20) -> Iterator[tuple[NDArray[np.int32], NDArray[np.int32]]]:
        """Every arc as (sources, targets) arrays of up to `batch` arcs, in order (for jobs such as PageRank).

        One sequential pass decodes the whole graph (4 bytes per arc while it runs): at 50-70 ns per arc that is
        40 times faster than a random access per node."""
        csr = self.out_links.to_csr()
        sources = np.repeat(np.arange(csr.num_nodes, dtype=np.int32), csr.outdegrees())
        for first in range(0, csr.num_arcs, batch):
            yield sources[first : first + batch], csr.successors[first : first + batch]

    def stats(self) -> dict[str, Any]:
        """Sizes, bits per link of both graphs and per URL of the map, and the degree distributions as
        [degree, nodes] pairs (one sequential pass over each graph)."""
        stats: dict[str, Any] = {
            "nodes": self.num_nodes,
            "arcs": self.num_arcs,
            "bits_per_link": round(self.out_links.bits_per_link, 3),
            "bits_per_link_transpose": round(self.in_links.bits_per_link, 3),
            "bits_per_url": round(self.urls.bits_per_url, 3),
        }
        for name, graph in (("outdegree", self.out_links), ("indegree", self.in_links)):
            degrees = graph.to_csr().outdegrees()
            counts = np.bincount(degrees) if len(degrees) else np.zeros(0, np.int64)
            stats[f"{name}_max"] = int(degrees.max()) if len(degrees) else 0
            stats[f"{name}_distribution"] = [[int(d), int(counts[d])] for d in np.flatnonzero(counts)]
        return stats

    def close(self) -> None:
        self.urls.close()

    def __enter__(self) -> LinkGraph:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def graph_directory(directory: Path | str) -> Path:
    """A graph directory as given, or the connectivity job's output in a crawl directory."""
    directory = Path(directory)
    if not (directory / f"{SUCCESSORS}.properties").exists() and (directory / JOB_OUTPUT).is_dir():
        return directory / JOB_OUTPUT
    return directory


def open(directory: Path | str, *, verify: bool = True) -> LinkGraph:
    """A graph directory's (or a crawl's, built by `crawlspace graph build`) two graphs and URL map, each checked
    (`BVGraph.load`, `UrlMap`) and checked to be over the same nodes."""
    directory = graph_directory(directory)
    if not (directory / f"{SUCCESSORS}.properties").exists():
        raise GraphFormatError(directory, "no link graph here (build one with `crawlspace graph build CRAWL_DIR`)")
    out_links = BVGraph.load(directory / SUCCESSORS, verify=verify)
    in_links = BVGraph.load(directory / PREDECESSORS, verify=verify)
    if (in_links.num_nodes, in_links.num_arcs) != (out_links.num_nodes, out_links.num_arcs):
        raise GraphFormatError(
            in_links.basename.with_name(PREDECESSORS + ".properties"),
            f"the transpose has {in_links.num_nodes} nodes and {in_links.num_arcs} arcs, the graph "
            f"{out_links.num_nodes} and {out_links.num_arcs}",
        )
    urls = UrlMap(directory / URL_MAP)
    if len(urls) != out_links.num_nodes:
        urls.close()
        raise GraphFormatError(urls.path, f"{len(urls)} URLs for a graph of {out_links.num_nodes} nodes", byte=8)
    return LinkGraph(out_links, in_links, urls)
