"""crawlspace.graph against WebGraph itself: cnr-2000 and its transpose as WebGraph wrote them (shared/conformance)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from crawlspace.graph import BVGraph, CsrGraph, write_bvgraph, write_offsets
from crawlspace.graph.properties import read_properties

WEBGRAPH = Path("/work/shared/conformance/webgraph")
pytestmark = pytest.mark.skipif(not WEBGRAPH.is_dir(), reason="conformance data not present")
NODES, ARCS = 325_557, 3_216_152


@pytest.fixture(scope="module")
def graph() -> BVGraph:
    return BVGraph.load(WEBGRAPH / "cnr-2000")


@pytest.fixture(scope="module")
def successors(graph: BVGraph) -> CsrGraph:
    return graph.to_csr()


@pytest.fixture(scope="module")
def predecessors() -> CsrGraph:
    return BVGraph.load(WEBGRAPH / "cnr-2000-t").to_csr()  # no .offsets: found by the sequential pass


def test_every_list_is_read_and_the_counts_are_the_properties(graph: BVGraph, successors: CsrGraph) -> None:
    assert (graph.num_nodes, graph.num_arcs) == (NODES, ARCS)
    assert (successors.num_nodes, successors.num_arcs) == (NODES, ARCS)
    degrees = successors.outdegrees()
    assert degrees.sum() == ARCS
    assert successors.successors.min() >= 0 and successors.successors.max() < NODES
    steps = np.diff(successors.successors.astype(np.int64))
    inside = np.ones(len(steps), bool)
    inside[successors.pointers[1:-1][(successors.pointers[1:-1] > 0) & (successors.pointers[1:-1] < ARCS)] - 1] = False
    assert np.all(steps[inside] > 0)  # every list increasing (the decoder checks it too)
    assert graph.bits_per_link == pytest.approx(2.897, abs=0.0005)
    assert list(successors.successors_of(0)) == [1, 4, 8, 219, 220]  # as WebGraph's ASCIIGraph of cnr-2000 shows


def test_random_access_gives_the_lists_of_the_sequential_pass(graph: BVGraph, successors: CsrGraph) -> None:
    nodes = [*np.random.default_rng(20).integers(0, NODES, 5000).tolist(), 0, 1, NODES - 1]
    for node in nodes:
        assert np.array_equal(graph.successors(node), successors.successors_of(node)), node
        assert graph.outdegree(node) == len(successors.successors_of(node))
    with pytest.raises(IndexError):
        graph.successors(NODES)


def test_the_transpose_is_the_transpose(successors: CsrGraph, predecessors: CsrGraph) -> None:
    assert predecessors.num_arcs == ARCS
    sources = np.repeat(np.arange(NODES), successors.outdegrees())
    by_target = np.lexsort((sources, successors.successors))  # arcs (target, source) in order: the transpose's lists
    assert np.array_equal(predecessors.successors, sources[by_target])
    assert np.array_equal(np.diff(predecessors.pointers), np.bincount(successors.successors, minlength=NODES))
    assert successors.transpose() == predecessors


@pytest.mark.parametrize(("name", "bits_per_link"), [("cnr-2000", 2.897), ("cnr-2000-t", 2.343)])
def test_re_encoding_gives_webgraphs_own_stream(
    name: str, bits_per_link: float, successors: CsrGraph, predecessors: CsrGraph, tmp_path: Path
) -> None:
    webgraph = read_properties(WEBGRAPH / f"{name}.properties")
    decoded = successors if name == "cnr-2000" else predecessors
    written = write_bvgraph(tmp_path / name, decoded, webgraph.compression)
    ours = (tmp_path / f"{name}.graph").read_bytes()
    theirs = (WEBGRAPH / f"{name}.graph").read_bytes()
    # the same bits; webgraph-rs, which saved the published files, pads to 64-bit words where WebGraph pads a byte
    assert theirs[: len(ours)] == ours and not any(theirs[len(ours) :])
    assert len(ours) <= 1.03 * len(theirs)
    assert float(written["bitsperlink"]) == bits_per_link
    for key in ("copiedarcs", "intervalisedarcs", "residualarcs", "bitsforblocks", "bitsforresiduals", "avgref",
                "successorexpstats", "residualexpstats", "successoravggap", "compratio"):  # fmt: skip
        assert written[key] == webgraph.values[key], key
    if name == "cnr-2000":
        offsets = (tmp_path / f"{name}.offsets").read_bytes()
        published = (WEBGRAPH / f"{name}.offsets").read_bytes()
        assert published[: len(offsets)] == offsets and not any(published[len(offsets) :])
    assert BVGraph.load(tmp_path / name).to_csr() == decoded


def test_offsets_for_the_transpose_that_has_none(predecessors: CsrGraph, tmp_path: Path) -> None:
    for extension in (".graph", ".properties"):
        shutil.copy(WEBGRAPH / f"cnr-2000-t{extension}", tmp_path)
    written = write_offsets(tmp_path / "cnr-2000-t")
    assert written == tmp_path / "cnr-2000-t.offsets"
    graph = BVGraph.load(tmp_path / "cnr-2000-t", verify=False)  # from the new offsets, no pass
    for node in np.random.default_rng(21).integers(0, NODES, 2000).tolist():
        assert np.array_equal(graph.successors(node), predecessors.successors_of(node))
    compression = read_properties(WEBGRAPH / "cnr-2000-t.properties").compression
    write_bvgraph(tmp_path / "ours", predecessors, compression)  # the offsets a fresh encoding writes are the same
    assert (tmp_path / "ours.offsets").read_bytes() == written.read_bytes()
