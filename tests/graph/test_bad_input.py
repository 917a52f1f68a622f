"""Damaged graphs: truncated, corrupted or contradicting their properties. Each is a GraphFormatError that names the
file and where it went wrong, never a hang, a read out of range or a different graph given as the right one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crawlspace.graph import BVGraph, CsrGraph, GraphFormatError, write_bvgraph
from crawlspace.graph import bitstream as bits
from crawlspace.graph.bvformat import CHECKSUM_KEYS, _parameters
from crawlspace.graph.eliasfano import EliasFano
from crawlspace.graph.properties import format_properties, read_properties


def web_like(nodes: int, seed: int) -> CsrGraph:
    """Lists of near ids with runs, so that references, blocks, intervals and residuals all occur."""
    rng = np.random.default_rng(seed)
    lists = []
    for node in range(nodes):
        near = node + rng.integers(-20, 20, rng.integers(0, 12))
        run = np.arange(node, node + rng.integers(0, 8))
        far = rng.integers(0, nodes, rng.integers(0, 3))
        chosen = np.concatenate((near, run, far))
        lists.append(sorted({int(s) for s in chosen if 0 <= s < nodes}))
    return CsrGraph.from_lists(lists)


GRAPH = web_like(600, seed=3)


@pytest.fixture
def written(tmp_path: Path) -> Path:
    basename = tmp_path / "web"
    write_bvgraph(basename, GRAPH)
    return basename


def file_of(basename: Path, extension: str) -> Path:
    return basename.with_name(basename.name + extension)


def rewrite_properties(basename: Path, drop: tuple[str, ...] = (), **values: str) -> None:
    path = file_of(basename, ".properties")
    text = dict(line.split("=", 1) for line in path.read_text().splitlines() if not line.startswith("#"))
    text.update(values)
    for key in drop:
        text.pop(key, None)
    path.write_text(format_properties(text))


def without_checksums(basename: Path) -> None:
    rewrite_properties(basename, drop=tuple(CHECKSUM_KEYS.values()))


def assert_sound_or_refused(basename: Path) -> None:
    """Loading either fails with a GraphFormatError or gives lists that obey the format's rules."""
    try:
        graph = BVGraph.load(basename, verify=False)
    except GraphFormatError:
        return
    for node in range(graph.num_nodes):
        try:
            successors = graph.successors(node)
        except GraphFormatError:
            continue
        assert np.all(np.diff(successors) > 0) and (
            len(successors) == 0 or 0 <= successors[0] <= successors[-1] < graph.num_nodes
        )


def stream(*codes: tuple[int, int]) -> bytes:
    buffer = np.zeros(64, np.uint64)
    pos = 0
    for code, value in codes:
        pos = bits.emit_code(code, 3, buffer, pos, value, True)
    return bits.bytes_of(buffer, pos)


def handmade(tmp_path: Path, data: bytes, nodes: int, arcs: int, **properties: str) -> Path:
    basename = tmp_path / "handmade"
    file_of(basename, ".graph").write_bytes(data)
    values = {
        "graphclass": "it.unimi.dsi.webgraph.BVGraph", "version": "0", "nodes": str(nodes), "arcs": str(arcs),
        "windowsize": "7", "maxrefcount": "3", "minintervallength": "4", "zetak": "3", "compressionflags": "",
    }  # fmt: skip
    values.update(properties)
    file_of(basename, ".properties").write_text(format_properties(values))
    return basename


def refusal(basename: Path) -> GraphFormatError:
    with pytest.raises(GraphFormatError) as caught:
        BVGraph.load(basename)
    return caught.value


def test_a_truncated_graph_is_reported_with_the_file_and_the_bit(written: Path) -> None:
    path = file_of(written, ".graph")
    data = path.read_bytes()
    for length in (len(data) - 1, len(data) // 2, 3):
        path.write_bytes(data[:length])
        file_of(written, ".offsets").unlink(missing_ok=True)  # the sequential pass must find the end by itself
        error = refusal(written)
        assert error.path == path and error.bit is not None and error.bit <= 8 * length
        assert str(path) in str(error) and "bit" in str(error)


def test_a_truncated_or_wrong_offsets_file_is_reported(written: Path) -> None:
    path = file_of(written, ".offsets")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    error = refusal(written)
    assert error.path == path and error.bit is not None
    without_checksums(written)
    damaged = bytearray(data)
    damaged[len(data) // 3] ^= 0x10
    path.write_bytes(bytes(damaged))
    error = refusal(written)
    assert error.path == path and error.bit is not None and error.bit <= 8 * len(data)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"nodes": "many"}, "not an integer"),
        ({"nodes": "-1"}, "outside"),
        ({"windowsize": "7.5"}, "not an integer"),
        ({"compressionflags": "RESIDUALS_GOLOMB"}, "not supported"),
        ({"compressionflags": "OUTDEGREES_ZETA"}, "not supported"),
        ({"graphclass": "it.unimi.dsi.webgraph.EFGraph"}, "not a BVGraph"),
        ({"version": "1"}, "version 0"),
        ({"zetak": "0"}, "outside"),
        ({"nodes": "100000"}, "cannot fit"),
    ],
)
def test_bad_properties_are_reported_with_the_line(written: Path, change: dict[str, str], message: str) -> None:
    rewrite_properties(written, **change)
    error = refusal(written)
    assert message in str(error)
    if "cannot fit" not in message:
        path = file_of(written, ".properties")
        assert error.path == path and error.byte is not None
        key = next(iter(change))
        assert path.read_bytes()[error.byte :].startswith(key.encode())


def test_missing_files_and_keys(written: Path) -> None:
    rewrite_properties(written, drop=("arcs",))
    assert "'arcs' is missing" in str(refusal(written))
    file_of(written, ".properties").unlink()
    assert "missing" in str(refusal(written))


def test_arcs_that_disagree_with_the_properties(written: Path) -> None:
    rewrite_properties(written, arcs=str(GRAPH.num_arcs - 1))
    assert "more arcs than the properties say" in str(refusal(written))
    rewrite_properties(written, arcs=str(GRAPH.num_arcs + 1))
    assert "fewer arcs than the properties say" in str(refusal(written))
    rewrite_properties(written, arcs=str(600 * 600))  # must not allocate for what cannot be there
    assert "fewer arcs" in str(refusal(written))


def test_a_chain_longer_than_maxrefcount(written: Path) -> None:
    rewrite_properties(written, maxrefcount="1")
    assert "chain of references longer than maxrefcount" in str(refusal(written))


@pytest.mark.parametrize(
    ("codes", "nodes", "arcs", "message", "node", "bit"),
    [
        (((bits.GAMMA, 5),), 2, 4, "outdegree larger than the number of nodes", 0, 0),
        (((bits.GAMMA, 1), (bits.UNARY, 1)), 2, 1, "before node 0", 0, 3),
        (((bits.GAMMA, 0), (bits.GAMMA, 1), (bits.UNARY, 5)), 9, 1, "beyond the window size", 1, 4),  # window 4
        (((bits.GAMMA, 2), (bits.UNARY, 0), (bits.GAMMA, 0), (bits.ZETA, 4)), 2, 2, "outside 0..nodes-1", 0, 5),
        (((bits.GAMMA, 1), (bits.UNARY, 0), (bits.GAMMA, 1)), 3, 1, "more copied and interval successors", 0, 4),
        (((bits.GAMMA, 4),), 8, 4, "truncated", 0, 5),
    ],
)
def test_handmade_violations(
    tmp_path: Path, codes: tuple[tuple[int, int], ...], nodes: int, arcs: int, message: str, node: int, bit: int
) -> None:
    basename = handmade(tmp_path, stream(*codes), nodes, arcs, windowsize="4")
    error = refusal(basename)
    assert message in str(error)
    assert (error.path, error.node, error.bit) == (file_of(basename, ".graph"), node, bit)


def test_blocks_past_the_referenced_list(tmp_path: Path) -> None:
    # node 0: [1]; node 1 copies from node 0 with one block of 3 successors, but node 0 has only 1
    data = stream((bits.GAMMA, 1), (bits.UNARY, 0), (bits.GAMMA, 0), (bits.ZETA, 2),
                  (bits.GAMMA, 3), (bits.UNARY, 1), (bits.GAMMA, 1), (bits.GAMMA, 3))  # fmt: skip
    error = refusal(handmade(tmp_path, data, 4, 4))
    assert "copy blocks longer than the referenced list" in str(error) and error.node == 1


def test_a_repeated_successor(tmp_path: Path) -> None:
    # node 1 copies [1] from node 0 and has the residual 1 as well
    data = stream((bits.GAMMA, 1), (bits.UNARY, 0), (bits.GAMMA, 0), (bits.ZETA, 2),
                  (bits.GAMMA, 2), (bits.UNARY, 1), (bits.GAMMA, 0), (bits.GAMMA, 0), (bits.ZETA, 0))  # fmt: skip
    assert "the same successor twice" in str(refusal(handmade(tmp_path, data, 2, 3)))


def test_garbage_after_the_last_list(written: Path) -> None:
    path = file_of(written, ".graph")
    path.write_bytes(path.read_bytes() + b"\x01" + bytes(40))
    file_of(written, ".offsets").unlink()
    assert "data after the last code" in str(refusal(written))


def test_every_flipped_bit_of_our_files_is_caught(written: Path) -> None:
    """Our properties carry a checksum of each file, so even a flip that leaves a well-formed list is refused."""
    for extension in (".graph", ".offsets"):
        path = file_of(written, extension)
        data = path.read_bytes()
        for bit in range(0, 8 * len(data), 8 * len(data) // 40 + 1):
            damaged = bytearray(data)
            damaged[bit // 8] ^= 0x80 >> (bit % 8)
            path.write_bytes(bytes(damaged))
            # a flip in the graph that moves where later lists begin is found as the offsets disagreeing
            assert refusal(written).path in (path, file_of(written, ".offsets"))
        path.write_bytes(data)
    assert BVGraph.load(written).to_csr() == GRAPH


def test_flipped_bits_without_checksums_give_an_error_or_a_sound_graph(written: Path) -> None:
    """WebGraph's files have no checksum: every structural rule still holds for whatever a flip leaves."""
    without_checksums(written)
    path = file_of(written, ".graph")
    data = path.read_bytes()
    refused = 0
    for bit in range(3, 8 * len(data), 8 * len(data) // 60 + 1):
        damaged = bytearray(data)
        damaged[bit // 8] ^= 0x80 >> (bit % 8)
        path.write_bytes(bytes(damaged))
        try:
            BVGraph.load(written)
        except GraphFormatError as error:
            assert error.path in (path, file_of(written, ".offsets"))
            refused += 1
        assert_sound_or_refused(written)  # random access straight from the offsets, no verifying pass
    # most flips move where later lists begin or break a rule; a flip inside the fixed-width part of a gap changes
    # one successor and nothing else (a third of them here, 22 of 60), which only our checksum can see
    assert refused >= 30


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=st.binary(min_size=1, max_size=300),
    nodes=st.integers(0, 400),
    arcs=st.integers(0, 3000),
    window=st.integers(0, 8),
    min_interval=st.integers(0, 5),
    flags=st.sampled_from(["", "OUTDEGREES_DELTA|RESIDUALS_NIBBLE", "REFERENCES_GAMMA|BLOCKS_UNARY|RESIDUALS_DELTA"]),
)
def test_random_bytes_never_crash_or_hang(
    tmp_path: Path, data: bytes, nodes: int, arcs: int, window: int, min_interval: int, flags: str
) -> None:
    basename = handmade(tmp_path, data, nodes, arcs, windowsize=str(window), minintervallength=str(min_interval),
                        compressionflags=flags)  # fmt: skip
    try:
        BVGraph.load(basename)
    except GraphFormatError as error:
        assert error.path.name.startswith("handmade")
    try:
        properties = read_properties(file_of(basename, ".properties"))
    except GraphFormatError:
        return
    # random access at arbitrary offsets into the garbage, as a wrong .offsets file would send it
    nbits = 8 * len(data)
    starts = np.sort(np.random.default_rng(len(data)).integers(0, nbits + 1, properties.nodes + 1))
    parameters = _parameters(properties.nodes, properties.compression)
    graph = BVGraph(basename, properties, bits.words_of(data), nbits, EliasFano.of(starts), parameters)
    for node in range(properties.nodes):
        try:
            successors = graph.successors(node)
        except GraphFormatError:
            continue
        assert np.all(np.diff(successors) > 0) and np.all((successors >= 0) & (successors < properties.nodes))
