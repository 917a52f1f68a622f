"""The connectivity server's storage (IIR 20.4): the crawl's link graph in WebGraph's BVGraph format.

Format. A graph is `NAME.graph` + `NAME.offsets` + `NAME.properties`, byte for byte what WebGraph's `BVGraph`
writes (Boldi & Vigna, WWW 2004), so WebGraph's Java and Rust tools read ours and we read theirs: each
node's successor list is an outdegree, a reference to a similar list at most `windowsize` nodes back whose
copied part is told by copy blocks, then intervals of consecutive ids and residual gaps; γ, δ, ζ_k, nibble
and unary codes in one big-endian bit stream (`bitstream`). The successors and the predecessors (the
transpose) are two such graphs over the same ids.

Ids (`urlmap`). A URL's id is the rank of its crawl-table row key (host reversed), IIR 20.4's lexicographic
numbering, so a host's pages are neighbours; the sorted keys are front-coded in blocks of 16 (each block a
zstd frame with a dictionary trained on them) with a sparse index, memory-mapped, and give `id_of` and
`url_of` in a few microseconds.

Who writes: `write_link_graph(DIR, urls, sources, targets)` the URL map, the graph and its transpose, each
graph by `write_bvgraph` (`encode`) from a `CsrGraph`, choosing for each list the reference that costs fewest
bits as WebGraph does; on cnr-2000 with WebGraph's parameters its stream is WebGraph's own, bit for bit; for a
crawl, the `connectivity` batch job (`crawlspace graph build DIR`) calls it on the link-graph job's output.
Who reads: `open(DIR)` (`connectivity`), a `LinkGraph` of successors and predecessors over two `BVGraph.load`s
(`decode`) and a `UrlMap`: random access to any node's list (its first bit from the offsets, its reference
chain decoded bottom-up) and `to_csr`, one sequential pass over all of them.

Invariants. Ids are 0..nodes-1 (int32, as BVGraph's); every list is strictly increasing; a reference chain
is at most `maxrefcount` long (which bounds a random access); the offsets are the first bit of each list and
the stream's length. Files are checked, not trusted: whatever is truncated, corrupt or contradicts its
properties raises `GraphFormatError` with the file and the bit (or byte) where it went wrong, and `load`
decodes the whole graph once by default so that no later query meets a damaged list. The properties we
write also carry an xxh3 checksum of each file (WebGraph ignores keys it does not know), since a flipped bit
inside a gap can leave a well-formed, wrong list.

The names below load their modules when first used: importing `crawlspace.graph.cli` (which every `crawlspace`
command does) must not import numba.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from crawlspace.graph.bvformat import BVGraph, write_bvgraph, write_offsets
    from crawlspace.graph.connectivity import LinkGraph, open, write_link_graph
    from crawlspace.graph.csr import CsrGraph
    from crawlspace.graph.errors import GraphFormatError
    from crawlspace.graph.properties import Compression
    from crawlspace.graph.urlmap import UnknownURL, UrlMap, write_url_map

_MODULE_OF = {
    "BVGraph": "bvformat",
    "write_bvgraph": "bvformat",
    "write_offsets": "bvformat",
    "LinkGraph": "connectivity",
    "open": "connectivity",
    "write_link_graph": "connectivity",
    "CsrGraph": "csr",
    "GraphFormatError": "errors",
    "Compression": "properties",
    "UnknownURL": "urlmap",
    "UrlMap": "urlmap",
    "write_url_map": "urlmap",
}
__all__ = [
    "BVGraph",
    "Compression",
    "CsrGraph",
    "GraphFormatError",
    "LinkGraph",
    "UnknownURL",
    "UrlMap",
    "open",
    "write_bvgraph",
    "write_link_graph",
    "write_offsets",
    "write_url_map",
]


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
