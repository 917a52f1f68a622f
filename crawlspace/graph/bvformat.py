"""WebGraph's BVGraph files, read and written: `BVGraph.load(basename)` and `write_bvgraph(basename, graph)`.

A graph is three files: `basename.graph` (the successor lists as one big-endian bit stream), `basename.offsets`
(the γ-coded gaps between the first bits of consecutive lists, n + 1 of them, the first 0) and
`basename.properties`. The reader needs no `.offsets`: a sequential pass finds where each list begins. In
memory the offsets are an Elias-Fano list (`eliasfano`), 7 bits per node on cnr-2000 instead of 64.
By default `load` also decodes every list once, which checks every structural rule of `decode` on every list
and the offsets against where the lists really begin, so that a later random access cannot meet a list
that breaks them; `verify=False` trusts a file the caller wrote. Files we wrote carry checksums, checked on
every load, which also catch a change that leaves the lists well formed.

Why compiled kernels (numba): the decoding is bit-level and sequential (each list may copy from one decoded
just before it, each code's length depends on its first bits), which numpy cannot vectorise. The same
kernels run as plain Python under NUMBA_DISABLE_JIT=1; `bench/graph/bench_graph.py --pure-python-nodes 20000`
measured, on cnr-2000's first 20,000 nodes (92,142 arcs), one core of the 2-core VM of bench/README.md:
sequential decoding 11,400 ns per arc in plain Python against 230 compiled, encoding 31,100 against 440,
a random access 86 µs against 2.1. Plain Python would take about 37 s to decode cnr-2000 and 100 s to encode
it (the targets: 300 ns per arc, graph and transpose built in 60 s); compiled, the whole graph decodes at
45-70 ns per arc and encodes at 120-190 (`bench/graph`). numba is the compiler that needs no C toolchain at
install (wheels) and keeps the kernels plain Python that a reader can step through with the JIT disabled.
The price is compilation: the first use after an install compiles for 15-25 s on this VM; later processes
load numba's cache in about 0.5 s (`_jit`).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path

import numpy as np
import xxhash
from numpy.typing import NDArray

from crawlspace.graph import bitstream, decode, encode
from crawlspace.graph.csr import CsrGraph
from crawlspace.graph.eliasfano import EliasFano
from crawlspace.graph.errors import GraphFormatError
from crawlspace.graph.properties import MAX_NODES, Compression, GraphProperties, format_properties, read_properties

GRAPH, OFFSETS, PROPERTIES = ".graph", ".offsets", ".properties"
CHECKSUM_KEYS = {GRAPH: "crawlspace.graph.xxh3_64", OFFSETS: "crawlspace.offsets.xxh3_64"}
"""Our own properties (WebGraph ignores keys it does not know): a checksum of each file, because a flipped bit
inside a gap can leave a list that is well formed and wrong, which no structural check can see."""


def _path(basename: Path | str, extension: str) -> Path:
    return Path(str(basename) + extension)


def _parameters(nodes: int, compression: Compression) -> NDArray[np.int64]:
    parameters = np.zeros(decode.PARAMETERS, np.int64)
    parameters[decode.P_NODES] = nodes
    parameters[decode.P_WINDOW] = compression.window_size
    parameters[decode.P_MAX_REF] = compression.max_ref_count
    parameters[decode.P_MIN_INTERVAL] = compression.min_interval_length
    parameters[decode.P_ZETA_K] = compression.zeta_k
    parameters[decode.P_OUTDEGREE_CODE] = compression.codes["OUTDEGREES"]
    parameters[decode.P_REFERENCE_CODE] = compression.codes["REFERENCES"]
    parameters[decode.P_BLOCK_COUNT_CODE] = compression.codes["BLOCK_COUNT"]
    parameters[decode.P_BLOCK_CODE] = compression.codes["BLOCKS"]
    parameters[decode.P_RESIDUAL_CODE] = compression.codes["RESIDUALS"]
    return parameters


def _raise_for(status: NDArray[np.int64], path: Path) -> None:
    if status[0] != decode.OK:
        raise GraphFormatError(path, decode.MESSAGES[int(status[0])], bit=int(status[2]), node=int(status[1]))


@dataclass(frozen=True, eq=False)
class BVGraph:
    """A BVGraph in memory, for random access to any node's successors."""

    basename: Path
    properties: GraphProperties
    words: NDArray[np.uint64]
    nbits: int
    offsets: EliasFano
    """The first bit of each list, and the length of the stream (n + 1 entries)."""
    parameters: NDArray[np.int64]

    @classmethod
    def load(cls, basename: Path | str, *, verify: bool = True) -> BVGraph:
        basename = Path(basename)
        properties = read_properties(_path(basename, PROPERTIES))
        graph_path = _path(basename, GRAPH)
        try:
            data = graph_path.read_bytes()
        except FileNotFoundError:
            raise GraphFormatError(graph_path, "the graph file is missing") from None
        nbits = 8 * len(data)
        nodes = properties.nodes
        if nodes > nbits:  # every list takes at least one bit
            raise GraphFormatError(graph_path, f"{nodes} nodes cannot fit in {nbits} bits (truncated)", bit=nbits)
        words = bitstream.words_of(data)
        parameters = _parameters(nodes, properties.compression)
        offsets_path = _path(basename, OFFSETS)
        offsets = _read_offsets(offsets_path, nodes, properties.compression, nbits) if offsets_path.exists() else None
        if offsets is None or verify:
            starts = _decode_all(words, nbits, parameters, properties.arcs, graph_path)[2]
            if offsets is not None and not np.array_equal(starts, offsets):
                _raise_wrong_offset(offsets_path, offsets, starts, properties.compression)
        else:
            starts = offsets
        _check_sum(graph_path, data, properties.values.get(CHECKSUM_KEYS[GRAPH]))
        if offsets is not None:
            _check_sum(offsets_path, offsets_path.read_bytes(), properties.values.get(CHECKSUM_KEYS[OFFSETS]))
        return cls(basename, properties, words, nbits, EliasFano.of(starts), parameters)

    @property
    def num_nodes(self) -> int:
        return self.properties.nodes

    @property
    def num_arcs(self) -> int:
        return self.properties.arcs

    @property
    def bits_per_link(self) -> float:
        """The stream's length in bits (to the end of the last list) per arc, as WebGraph's `bitsperlink`."""
        return self.offsets[-1] / max(self.num_arcs, 1)

    def successors(self, node: int) -> NDArray[np.int32]:
        if not 0 <= node < self.num_nodes:
            raise IndexError(f"node {node} is not in 0..{self.num_nodes - 1}")
        status = np.zeros(4, np.int64)
        offsets = self.offsets
        result: NDArray[np.int32] = decode.successors_of(
            self.words, self.nbits, offsets.upper, offsets.lower, offsets.samples, offsets.low_bits, self.parameters,
            node, status,
        )  # fmt: skip
        if status[0]:
            _raise_for(status, _path(self.basename, GRAPH))
        return result

    def outdegree(self, node: int) -> int:
        """From the list's first code alone (no copy from its reference)."""
        if not 0 <= node < self.num_nodes:
            raise IndexError(f"node {node} is not in 0..{self.num_nodes - 1}")
        status = np.zeros(4, np.int64)
        offsets = self.offsets
        degree = decode.outdegree_of(
            self.words, self.nbits, offsets.upper, offsets.lower, offsets.samples, offsets.low_bits, self.parameters,
            node, status,
        )  # fmt: skip
        if status[0]:
            _raise_for(status, _path(self.basename, GRAPH))
        return int(degree)

    def to_csr(self) -> CsrGraph:
        """Every list, decoded in one sequential pass."""
        pointers, successors, _ = _decode_all(
            self.words, self.nbits, self.parameters, self.num_arcs, _path(self.basename, GRAPH)
        )
        return CsrGraph(pointers, successors)


def _decode_all(
    words: NDArray[np.uint64], nbits: int, parameters: NDArray[np.int64], arcs: int, path: Path
) -> tuple[NDArray[np.int64], NDArray[np.int32], NDArray[np.int64]]:
    nodes = int(parameters[decode.P_NODES])
    status = np.zeros(4, np.int64)
    pointers = np.empty(nodes + 1, np.int64)
    starts = np.empty(nodes + 1, np.int64)
    # room for what the properties promise, unless that is far beyond what the stream could plausibly hold
    # (a hostile file must not make us allocate terabytes); the kernel grows the array if it must
    capacity = min(arcs, 64 * nbits + 1024)
    successors = decode.decode_all(
        words, nbits, parameters, arcs, pointers, np.empty(capacity, np.int32), starts, status
    )
    _raise_for(status, path)
    return pointers, successors, starts


def _check_sum(path: Path, data: bytes, expected: str | None) -> None:
    if expected is not None and xxhash.xxh3_64_hexdigest(data) != expected.strip():
        raise GraphFormatError(path, "the file's checksum is not the one in the properties (corrupt or replaced)")


def _read_offsets(path: Path, nodes: int, compression: Compression, graph_bits: int) -> NDArray[np.int64]:
    data = path.read_bytes()
    nbits = 8 * len(data)
    if nodes + 1 > nbits:
        raise GraphFormatError(path, f"{nodes + 1} offsets cannot fit in {nbits} bits (truncated)", bit=nbits)
    words = bitstream.words_of(data)
    offsets = np.empty(nodes + 1, np.int64)
    status = np.zeros(4, np.int64)
    code = compression.codes["OFFSETS"]
    end = decode.decode_offsets(words, nbits, nodes + 1, code, graph_bits, offsets, status)
    _raise_for(status, path)
    if not bitstream.is_padding(words, end, nbits):
        raise GraphFormatError(path, decode.MESSAGES[decode.DATA_AFTER_LAST_LIST], bit=int(end))
    if offsets[0] != 0:
        raise GraphFormatError(path, "the first offset is not 0", bit=0, node=0)
    if offsets[-1] > graph_bits or graph_bits - offsets[-1] >= bitstream.MAX_PADDING_BITS:
        at = decode.offset_entry_position(words, nbits, nodes, code)
        raise GraphFormatError(
            path, f"the offsets end at bit {offsets[-1]}, the graph file has {graph_bits} bits", bit=int(at), node=nodes
        )
    return offsets


def _raise_wrong_offset(
    path: Path, offsets: NDArray[np.int64], starts: NDArray[np.int64], compression: Compression
) -> None:
    node = int(np.flatnonzero(offsets != starts)[0])
    data = path.read_bytes()
    at = decode.offset_entry_position(bitstream.words_of(data), 8 * len(data), node, compression.codes["OFFSETS"])
    raise GraphFormatError(
        path,
        f"the offsets and the graph disagree: node {node}'s offset is {offsets[node]}, its list begins at bit "
        f"{starts[node]} of the graph file",
        bit=int(at),
        node=node,
    )


def write_bvgraph(basename: Path | str, graph: CsrGraph, compression: Compression | None = None) -> dict[str, str]:
    """Writes `basename.graph`, `.offsets` and `.properties`; returns the properties (WebGraph's statistics).

    Each file is written beside its final name and renamed into place, the properties last, so that a crash
    leaves either the old graph or files a reader rejects, never a silently different graph.
    """
    compression = compression or Compression()
    nodes = graph.num_nodes
    if nodes > MAX_NODES:
        raise ValueError(f"BVGraph holds at most {MAX_NODES} nodes, not {nodes}")
    pointers = np.ascontiguousarray(graph.pointers, dtype=np.int64)
    successors = np.ascontiguousarray(graph.successors, dtype=np.int32)
    if len(pointers) != nodes + 1 or pointers[0] != 0 or len(successors) != pointers[-1]:
        raise ValueError("pointers must start at 0 and end at the number of successors")
    problem, node = encode.check_lists(pointers, successors, nodes)
    if problem == encode.INPUT_OUT_OF_RANGE:
        raise ValueError(f"node {node} has a successor outside 0..{nodes - 1}")
    if problem == encode.INPUT_NOT_INCREASING:
        raise ValueError(f"the successors of node {node} are not strictly increasing")
    parameters = _parameters(nodes, compression)
    starts = np.empty(nodes + 1, np.int64)
    stats = np.zeros(encode.STATS, np.int64)
    buffer, nbits = encode.encode_all(pointers, successors, parameters, starts, stats)
    offsets_buffer, offsets_bits = encode.encode_offsets(starts, compression.codes["OFFSETS"])
    values = _statistics(nodes, graph.num_arcs, int(nbits), compression, stats)
    contents = {
        GRAPH: bitstream.bytes_of(buffer, int(nbits)),
        OFFSETS: bitstream.bytes_of(offsets_buffer, int(offsets_bits)),
    }
    for extension, key in CHECKSUM_KEYS.items():
        values[key] = xxhash.xxh3_64_hexdigest(contents[extension])
    contents[PROPERTIES] = format_properties(values).encode("latin-1")
    basename = Path(basename)
    _write_files(basename, contents)
    return values


def write_offsets(basename: Path | str) -> Path:
    """Writes `basename.offsets` for a graph that has none (as WebGraph's `BVGraph -O`), from a sequential pass."""
    graph = BVGraph.load(basename)
    buffer, nbits = encode.encode_offsets(graph.offsets.to_array(), graph.properties.compression.codes["OFFSETS"])
    _write_files(Path(basename), {OFFSETS: bitstream.bytes_of(buffer, int(nbits))})
    return _path(basename, OFFSETS)


def _write_files(basename: Path, contents: dict[str, bytes]) -> None:
    """Each file is written beside its final name, synced, and then all are renamed into place in order."""
    for extension, content in contents.items():
        with open(_path(basename, extension + ".tmp"), "wb") as file:
            file.write(content)
            file.flush()
            os.fsync(file.fileno())
    for extension in contents:
        os.replace(_path(basename, extension + ".tmp"), _path(basename, extension))


def _decimal(value: float) -> str:
    """Java's DecimalFormat("0.###") in Locale.US: three decimals, half-even, no trailing zeros."""
    text = str(Decimal(value).quantize(Decimal("0.001"), rounding=ROUND_HALF_EVEN))
    return text.rstrip("0").rstrip(".") if "." in text else text


def _stirling(n: float) -> float:
    return n * math.log(n) - n + math.log(2 * math.pi * n) / 2


def _gap_statistics(bins: NDArray[np.int64]) -> tuple[str, str, str]:
    """WebGraph's `*expstats`, `*avggap` and `*avgloggap` from gaps binned by ⌊log₂⌋."""
    nonzero = np.flatnonzero(bins)
    last = int(nonzero[-1]) if len(nonzero) else -1
    counts = [int(count) for count in bins[: last + 1]]
    total_gap = sum((3 * 2**i - 1) * count for i, count in enumerate(counts))
    total_log = sum((math.log2(3 * 2**i + 1) - 1) * count for i, count in enumerate(counts))
    gaps = sum(counts)
    if gaps == 0:
        return ",".join(map(str, counts)), "0", "0"
    average = (Decimal(total_gap) / Decimal(2 * gaps)).quantize(Decimal("0.001"), rounding=ROUND_HALF_EVEN)
    return ",".join(map(str, counts)), str(average), repr(total_log / gaps)


def _statistics(
    nodes: int, arcs: int, nbits: int, compression: Compression, stats: NDArray[np.int64]
) -> dict[str, str]:
    per_node = max(nodes, 1)
    values = {
        "graphclass": "it.unimi.dsi.webgraph.BVGraph",
        "version": "0",
        "nodes": str(nodes),
        "arcs": str(arcs),
        "windowsize": str(compression.window_size),
        "maxrefcount": str(compression.max_ref_count),
        "minintervallength": str(compression.min_interval_length),
        "zetak": str(compression.zeta_k),
        "compressionflags": compression.flags(),
        "bitsperlink": _decimal(nbits / max(arcs, 1)),
        "bitspernode": _decimal(nbits / per_node),
        "avgref": _decimal(int(stats[encode.S_TOTAL_REF]) / per_node),
        "avgdist": _decimal(int(stats[encode.S_TOTAL_DIST]) / per_node),
        "copiedarcs": str(int(stats[encode.S_COPIED_ARCS])),
        "intervalisedarcs": str(int(stats[encode.S_INTERVALISED_ARCS])),
        "residualarcs": str(int(stats[encode.S_RESIDUAL_ARCS])),
    }
    square = float(nodes) * nodes
    if 0 < arcs < square:
        bound = _stirling(square) - _stirling(arcs) - _stirling(square - arcs)
        values["compratio"] = _decimal(nbits * math.log(2) / bound)
    for component, index in (
        ("outdegrees", encode.S_BITS_OUTDEGREES),
        ("references", encode.S_BITS_REFERENCES),
        ("blocks", encode.S_BITS_BLOCKS),
        ("residuals", encode.S_BITS_RESIDUALS),
        ("intervals", encode.S_BITS_INTERVALS),
    ):
        values[f"bitsfor{component}"] = str(int(stats[index]))
        values[f"avgbitsfor{component}"] = _decimal(int(stats[index]) / per_node)
    for name, base in (("successor", encode.S_SUCCESSOR_GAPS), ("residual", encode.S_RESIDUAL_GAPS)):
        exponents, average, average_log = _gap_statistics(stats[base : base + 32])
        values[f"{name}expstats"] = exponents
        values[f"{name}avggap"] = average
        values[f"{name}avgloggap"] = average_log
    return values
