"""A BVGraph's `.properties` file: what a reader needs to decode the bit stream, in WebGraph's key names.

WebGraph's Java loader needs `graphclass`, `version`, `nodes`, `arcs`, `windowsize`, `maxrefcount`,
`minintervallength`, `compressionflags` (empty: the default codes) and, for ζ residuals, `zetak`;
webgraph-rs reads the same keys and splits the flags at `|` without trimming, so ours are written with bare
`|`. Everything a file says is checked here, before a bit of the graph is read: a wrong or missing value is a
`GraphFormatError` naming the file and the byte offset of the line.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path

import javaproperties

from crawlspace.graph import bitstream
from crawlspace.graph.errors import GraphFormatError

GRAPH_CLASSES = ("it.unimi.dsi.webgraph.BVGraph", "it.unimi.dsi.big.webgraph.BVGraph")
MAX_NODES = 2**31 - 1
"""Node ids are Java ints in BVGraph (the `big` variant's longer ids are not supported)."""

CODE_NAMES = {bitstream.DELTA: "DELTA", bitstream.GAMMA: "GAMMA", bitstream.UNARY: "UNARY",
              bitstream.ZETA: "ZETA", bitstream.NIBBLE: "NIBBLE"}  # fmt: skip
_CODES_BY_NAME = {name: code for code, name in CODE_NAMES.items()}

COMPONENT_CODES = {
    "OUTDEGREES": (bitstream.GAMMA, bitstream.DELTA),
    "BLOCKS": (bitstream.GAMMA, bitstream.UNARY, bitstream.DELTA),
    "RESIDUALS": (bitstream.ZETA, bitstream.GAMMA, bitstream.DELTA, bitstream.NIBBLE),
    "REFERENCES": (bitstream.UNARY, bitstream.GAMMA, bitstream.DELTA),
    "BLOCK_COUNT": (bitstream.GAMMA, bitstream.UNARY, bitstream.DELTA),
    "OFFSETS": (bitstream.GAMMA, bitstream.DELTA),
}
"""For each component of a successor list, the codes WebGraph's `BVGraph` reads for it, its default first."""


@dataclass(frozen=True)
class Compression:
    """The parameters of reference compression and the code of each component (WebGraph's defaults)."""

    window_size: int = 7
    max_ref_count: int = 3
    min_interval_length: int = 4
    zeta_k: int = 3
    codes: dict[str, int] = field(default_factory=lambda: {name: codes[0] for name, codes in COMPONENT_CODES.items()})

    def __post_init__(self) -> None:
        if self.window_size < 0 or self.max_ref_count < 0 or self.min_interval_length < 0:
            raise ValueError("window size, maximum reference count and minimum interval length must be >= 0")
        if not 1 <= self.zeta_k <= 20:
            raise ValueError(f"zeta k must be in 1..20, not {self.zeta_k}")
        for component, code in self.codes.items():
            if code not in COMPONENT_CODES[component]:
                raise ValueError(f"code {code} is not one WebGraph reads for {component}")

    def flags(self) -> str:
        """`compressionflags`: the components whose code is not the default, as `OUTDEGREES_DELTA|...`."""
        return "|".join(
            f"{component}_{CODE_NAMES[code]}"
            for component, code in self.codes.items()
            if code != COMPONENT_CODES[component][0]
        )


@dataclass(frozen=True)
class GraphProperties:
    nodes: int
    arcs: int
    compression: Compression
    values: dict[str, str]
    """Every key of the file as written (WebGraph's statistics such as `bitsperlink` among them)."""


def read_properties(path: Path) -> GraphProperties:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise GraphFormatError(path, "the properties file is missing") from None
    values: dict[str, str] = {}
    line_offsets: dict[str, int] = {}
    offset = 0
    try:
        for entry in javaproperties.parse(io.BytesIO(data)):
            if isinstance(entry, javaproperties.KeyValue):
                values[entry.key] = entry.value
                line_offsets[entry.key] = offset
            offset += len(entry.source.encode("latin-1", errors="replace"))
    except (ValueError, UnicodeError) as error:  # a malformed \u escape
        raise GraphFormatError(path, f"not a properties file: {error}", byte=offset) from None

    def value_of(key: str, default: str | None = None) -> str:
        if key in values:
            return values[key]
        if default is None:
            raise GraphFormatError(path, f"the key {key!r} is missing")
        return default

    def integer(key: str, low: int, high: int, default: str | None = None) -> int:
        text = value_of(key, default).strip()
        try:
            number = int(text)
        except ValueError:
            raise GraphFormatError(path, f"{key}={text!r} is not an integer", byte=line_offsets[key]) from None
        if not low <= number <= high:
            raise GraphFormatError(path, f"{key}={number} is outside {low}..{high}", byte=line_offsets[key])
        return number

    graph_class = value_of("graphclass").strip()
    if graph_class not in GRAPH_CLASSES:
        raise GraphFormatError(path, f"graphclass {graph_class!r} is not a BVGraph", byte=line_offsets["graphclass"])
    if integer("version", 0, 1 << 31) != 0:
        raise GraphFormatError(
            path,
            "only BVGraph format version 0 (big-endian, WebGraph's codes) is supported",
            byte=line_offsets["version"],
        )
    if "endianness" in values and values["endianness"].strip() != "big":
        raise GraphFormatError(path, "only big-endian BVGraph files are supported", byte=line_offsets["endianness"])
    nodes = integer("nodes", 0, MAX_NODES)
    arcs = integer("arcs", 0, nodes * nodes)
    codes = {name: options[0] for name, options in COMPONENT_CODES.items()}
    for flag in filter(None, (part.strip() for part in value_of("compressionflags", "").split("|"))):
        component, _, code_name = flag.rpartition("_")
        code = _CODES_BY_NAME.get(code_name)
        if component not in COMPONENT_CODES or code not in COMPONENT_CODES[component]:
            raise GraphFormatError(
                path, f"compression flag {flag!r} is unknown or not supported", byte=line_offsets["compressionflags"]
            )
        codes[component] = code
    compression = Compression(
        window_size=integer("windowsize", 0, 1 << 20),
        max_ref_count=integer("maxrefcount", 0, 1 << 31),
        min_interval_length=integer("minintervallength", 0, 1 << 31),
        zeta_k=integer("zetak", 1, 20, default="3"),
        codes=codes,
    )
    return GraphProperties(nodes, arcs, compression, values)


def format_properties(values: dict[str, str]) -> str:
    return javaproperties.dumps(values, comments="BVGraph properties", sort_keys=False)
