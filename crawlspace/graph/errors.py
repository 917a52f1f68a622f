"""The one error a damaged graph raises, with where it is: the file, and the bit or byte offset and the node."""

from __future__ import annotations

from pathlib import Path


class GraphFormatError(ValueError):
    """A `.graph`, `.offsets` or `.properties` file that is truncated, corrupt or not what its properties say."""

    def __init__(
        self,
        path: Path | str,
        problem: str,
        *,
        bit: int | None = None,
        byte: int | None = None,
        node: int | None = None,
    ) -> None:
        self.path = Path(path)
        self.problem = problem
        self.bit = bit
        self.byte = byte if byte is not None or bit is None else bit // 8
        self.node = node
        where = []
        if bit is not None:
            where.append(f"bit {bit} (byte {bit // 8})")
        elif byte is not None:
            where.append(f"byte {byte}")
        if node is not None:
            where.append(f"node {node}")
        super().__init__(f"{self.path}: {problem}" + (f" at {', '.join(where)}" if where else ""))
