"""Random graphs, every compression parameter and code: written, read back, the same lists, sequentially and by
random access; the codes bit by bit against dsiutils' definitions."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crawlspace.graph import BVGraph, Compression, CsrGraph, write_bvgraph
from crawlspace.graph import bitstream as bits
from crawlspace.graph.properties import COMPONENT_CODES, read_properties

CODES = {bits.GAMMA: "gamma", bits.DELTA: "delta", bits.ZETA: "zeta", bits.NIBBLE: "nibble", bits.UNARY: "unary"}


def encoded(code: int, value: int, k: int = 3) -> str:
    buffer = np.zeros(4, np.uint64)
    end = bits.emit_code(code, k, buffer, 0, value, True)
    assert end == bits.emit_code(code, k, buffer, 0, value, False)  # the price is the length written
    return "".join(f"{word:064b}" for word in buffer)[:end]


@pytest.mark.parametrize(
    ("code", "value", "k", "expected"),
    [
        (bits.UNARY, 0, 3, "1"),
        (bits.UNARY, 3, 3, "0001"),
        (bits.GAMMA, 0, 3, "1"),
        (bits.GAMMA, 1, 3, "010"),
        (bits.GAMMA, 2, 3, "011"),
        (bits.GAMMA, 3, 3, "00100"),
        (bits.DELTA, 0, 3, "1"),
        (bits.DELTA, 1, 3, "0100"),
        (bits.DELTA, 3, 3, "01100"),
        (bits.ZETA, 0, 3, "100"),  # h = 0: x + 1 in a minimal binary code of [1, 8)
        (bits.ZETA, 2, 3, "1011"),  # 1..6 take one bit more: 7 values, one of them in 2 bits
        (bits.ZETA, 3, 3, "1100"),
        (bits.ZETA, 7, 3, "0100000"),  # h = 1: x + 1 = 8 in [8, 64), 8 - 8 in 5 bits
        (bits.ZETA, 0, 1, "1"),  # ζ_1 is γ
        (bits.ZETA, 5, 1, "00110"),
        (bits.NIBBLE, 0, 3, "1000"),
        (bits.NIBBLE, 5, 3, "1101"),
        (bits.NIBBLE, 8, 3, "00011000"),
    ],
)
def test_codes_are_dsiutils_codes(code: int, value: int, k: int, expected: str) -> None:
    assert encoded(code, value, k) == expected


@settings(deadline=None)  # the first example compiles the kernels
@given(
    st.sampled_from(sorted(CODES)),
    st.integers(1, 7),
    # below 2**56: every code and k up to 7 then fits the reader's 63-bit limit (a ζ_4 code of 2**60 - 1 takes
    # 64 bits, which the writer emits and the reader refuses as too long; node ids and gaps are far smaller)
    st.lists(st.one_of(st.integers(0, 300), st.integers(0, 2**40), st.integers(0, 2**56 - 2)), min_size=1, max_size=40),
)
def test_any_sequence_of_values_reads_back(code: int, k: int, values: list[int]) -> None:
    if code == bits.UNARY:
        values = [value % 200 for value in values]
    buffer = np.zeros(64 * 50, np.uint64)
    pos = 0
    for value in values:
        pos = bits.emit_code(code, k, buffer, pos, value, True)
    words = bits.words_of(bits.bytes_of(buffer, pos))
    read = 0
    for value in values:
        got, read = bits.read_code(code, k, words, read, pos)
        assert got == value
    assert read == pos


@st.composite
def graphs(draw: st.DrawFn) -> CsrGraph:
    """Lists that look like the web's (near ids, runs of consecutive ids, lists like their neighbours') and not."""
    nodes = draw(st.integers(0, 120))
    lists: list[list[int]] = []
    for node in range(nodes):
        kind = draw(st.sampled_from(["empty", "random", "near", "run", "copy", "self"]))
        chosen: set[int] = set()
        if kind == "random":
            chosen = set(draw(st.lists(st.integers(0, nodes - 1), max_size=30)))
        elif kind == "near":
            chosen = {min(max(node + d, 0), nodes - 1) for d in draw(st.lists(st.integers(-8, 8), max_size=12))}
        elif kind == "run":
            start = draw(st.integers(0, nodes - 1))
            chosen = set(range(start, min(nodes, start + draw(st.integers(1, 60)))))
        elif kind == "copy" and lists:
            source = lists[max(0, node - draw(st.integers(1, 9)))]
            chosen = {s for s in source if draw(st.booleans())} | set(
                draw(st.lists(st.integers(0, nodes - 1), max_size=4))
            )
        elif kind == "self":
            chosen = {node} | set(draw(st.lists(st.integers(0, nodes - 1), max_size=3)))
        lists.append(sorted(chosen))
    return CsrGraph.from_lists(lists)


@st.composite
def compressions(draw: st.DrawFn) -> Compression:
    return Compression(
        window_size=draw(st.integers(0, 10)),
        max_ref_count=draw(st.integers(0, 5)),
        min_interval_length=draw(st.sampled_from([0, 1, 2, 3, 4, 6])),
        zeta_k=draw(st.integers(1, 7)),
        codes={component: draw(st.sampled_from(options)) for component, options in COMPONENT_CODES.items()},
    )


def assert_round_trip(graph: CsrGraph, compression: Compression, basename: Path) -> BVGraph:
    write_bvgraph(basename, graph, compression)
    assert read_properties(basename.with_name(basename.name + ".properties")).compression == compression
    loaded = BVGraph.load(basename)
    assert loaded.to_csr() == graph
    for node in range(graph.num_nodes):
        assert np.array_equal(loaded.successors(node), graph.successors_of(node)), node
    trusting = BVGraph.load(basename, verify=False)  # the offsets file, not a sequential pass
    assert np.array_equal(trusting.offsets.to_array(), loaded.offsets.to_array())
    return loaded


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(graph=graphs(), compression=compressions())
def test_random_graphs_round_trip(graph: CsrGraph, compression: Compression, tmp_path: Path) -> None:
    assert_round_trip(graph, compression, tmp_path / "random")


def test_reference_chains_never_exceed_maxrefcount(tmp_path: Path) -> None:
    """Identical lists would all copy from the one before; the chain must restart every maxrefcount + 1 nodes."""
    graph = CsrGraph.from_lists([[1, 5, 9, 13, 20]] * 40)
    for max_ref in (0, 1, 3):
        written = write_bvgraph(tmp_path / "same", graph, Compression(max_ref_count=max_ref))
        assert float(written["avgref"]) <= max_ref
        assert BVGraph.load(tmp_path / "same").to_csr() == graph


def test_edge_cases_round_trip(tmp_path: Path) -> None:
    cases = {
        "no nodes": CsrGraph.from_lists([]),
        "only empty lists": CsrGraph.from_lists([[]] * 50),
        "self loops": CsrGraph.from_lists([[node] for node in range(30)]),
        "complete": CsrGraph.from_lists([list(range(40))] * 40),
        "long intervals": CsrGraph.from_lists(
            [list(range(0, 5000)), [], list(range(7, 4999, 2)), list(range(1, 5000))] + [[] for _ in range(4996)]
        ),
    }
    for name, graph in cases.items():
        for compression in (Compression(), Compression(window_size=0, min_interval_length=0)):
            assert_round_trip(graph, compression, tmp_path / name.replace(" ", "-"))


def test_the_largest_ids_and_gaps_round_trip(tmp_path: Path) -> None:
    """2**22 nodes: gaps from the last node back to 0 and forward to the end, through every residual code."""
    nodes = 2**22
    lists: dict[int, list[int]] = {0: [nodes - 1], 1: [0, nodes - 1], nodes - 1: [0, 1, nodes // 2, nodes - 1]}
    pointers = np.zeros(nodes + 1, np.int64)
    for node, successors in lists.items():
        pointers[node + 1] = len(successors)
    np.cumsum(pointers, out=pointers)
    graph = CsrGraph(pointers, np.array([s for node in sorted(lists) for s in lists[node]], np.int32))
    for residual_code in COMPONENT_CODES["RESIDUALS"]:
        compression = Compression(codes={**Compression().codes, "RESIDUALS": residual_code})
        write_bvgraph(tmp_path / "large", graph, compression)
        loaded = BVGraph.load(tmp_path / "large")
        for node, successors in lists.items():
            assert loaded.successors(node).tolist() == successors
        assert loaded.to_csr() == graph


def test_the_writer_refuses_lists_bvgraph_cannot_hold(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not strictly increasing"):
        write_bvgraph(tmp_path / "bad", CsrGraph.from_lists([[1, 1], []]))
    with pytest.raises(ValueError, match="outside"):
        write_bvgraph(tmp_path / "bad", CsrGraph.from_lists([[2], []]))
    assert not list(tmp_path.iterdir())


@given(st.integers(0, 60), st.lists(st.tuples(st.integers(0, 59), st.integers(0, 59)), max_size=200))
def test_arcs_to_csr_and_the_transpose(nodes: int, arcs: list[tuple[int, int]]) -> None:
    arcs = [(a, b) for a, b in arcs if a < nodes and b < nodes]
    sources = np.array([a for a, _ in arcs], np.int64)
    targets = np.array([b for _, b in arcs], np.int64)
    graph = CsrGraph.from_arcs(nodes, sources, targets)
    assert graph == CsrGraph.from_lists([sorted({b for a, b in arcs if a == node}) for node in range(nodes)])
    assert graph.transpose() == CsrGraph.from_lists(
        [sorted({a for a, b in arcs if b == node}) for node in range(nodes)]
    )
    assert graph.transpose().transpose() == graph


def test_the_kernels_run_as_plain_python(tmp_path: Path) -> None:
    """NUMBA_DISABLE_JIT=1 runs them uncompiled (how their speed-up is measured, and how one steps through them)."""
    child = """
import sys
from pathlib import Path
from crawlspace.graph import BVGraph, CsrGraph, write_bvgraph
graph = CsrGraph.from_lists([[1, 2, 3, 4, 5, 9], [0, 2, 3, 4, 5, 9], [], [1, 7], [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]] * 2)
write_bvgraph(Path(sys.argv[1]) / "plain", graph)
loaded = BVGraph.load(Path(sys.argv[1]) / "plain")
assert loaded.to_csr() == graph and loaded.successors(6).tolist() == [0, 2, 3, 4, 5, 9]
print(loaded.bits_per_link)
"""
    environment = dict(os.environ, NUMBA_DISABLE_JIT="1")
    result = subprocess.run(
        [sys.executable, "-c", child, str(tmp_path)], capture_output=True, text=True, env=environment
    )
    assert result.returncode == 0, result.stderr
    write_bvgraph(
        tmp_path / "compiled",
        CsrGraph.from_lists([[1, 2, 3, 4, 5, 9], [0, 2, 3, 4, 5, 9], [], [1, 7], list(range(10))] * 2),
    )
    assert (tmp_path / "plain.graph").read_bytes() == (tmp_path / "compiled.graph").read_bytes()
    assert float(result.stdout) == BVGraph.load(tmp_path / "compiled").bits_per_link


def test_a_value_too_large_for_its_code_is_refused_when_written() -> None:
    buffer = np.zeros(8, np.uint64)
    with pytest.raises(ValueError, match="too large"):
        bits.emit_code(bits.ZETA, 4, buffer, 0, 2**60 - 1, True)
