"""A sorted term dictionary with front coding (IIR 5.2.2): what maps a term to its ordinal.

Terms are sorted by code point (which is UTF-8 byte order) and cut into blocks of `BLOCK_TERMS`.
The first term of a block is written whole, each further one as the length of the prefix it shares
with the term before it and the rest: `varint(len) bytes` then `varint(shared) varint(len) bytes`.
`offsets[i]` is where block i starts, so a lookup is a binary search over the blocks' first terms
(read straight from the memory-mapped bytes) and a scan of one block, with no term held in memory;
a term's ordinal is its rank, which indexes the arrays stored beside the dictionary (document
frequencies, postings blocks).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["BLOCK_TERMS", "TermDictionary", "TermDictionaryError", "encode_terms"]

BLOCK_TERMS = 16


class TermDictionaryError(ValueError):
    """Bytes that are not a front-coded term dictionary."""


def _put_varint(out: bytearray, value: int) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _get_varint(data: bytes | memoryview, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data):
            raise TermDictionaryError("the term bytes end inside a length")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7
        if shift > 63:
            raise TermDictionaryError("a length code longer than 64 bits")


def encode_terms(terms: Sequence[str]) -> tuple[bytes, npt.NDArray[np.uint64]]:
    """The front-coded bytes of `terms` (sorted, distinct) and the start of each block (plus the end)."""
    out = bytearray()
    offsets: list[int] = []
    previous = b""
    for ordinal, term in enumerate(terms):
        encoded = term.encode("utf-8")
        if ordinal % BLOCK_TERMS == 0:
            offsets.append(len(out))
            _put_varint(out, len(encoded))
            out += encoded
        else:
            if encoded <= previous:
                raise ValueError(f"terms out of order or repeated: {previous!r} then {encoded!r}")
            shared = 0
            limit = min(len(encoded), len(previous))
            while shared < limit and encoded[shared] == previous[shared]:
                shared += 1
            _put_varint(out, shared)
            _put_varint(out, len(encoded) - shared)
            out += encoded[shared:]
        previous = encoded
    offsets.append(len(out))
    return bytes(out), np.array(offsets, dtype=np.uint64)


class TermDictionary:
    """Read access to front-coded terms over any buffer (a memory map at query time)."""

    __slots__ = ("_data", "_offsets", "count")

    def __init__(self, data: bytes | memoryview, offsets: npt.NDArray[np.uint64], count: int) -> None:
        blocks = (count + BLOCK_TERMS - 1) // BLOCK_TERMS
        if offsets.size != blocks + 1:
            raise TermDictionaryError(f"{offsets.size} block offsets for {count} terms (expected {blocks + 1})")
        if offsets.size and (int(offsets[-1]) != len(data) or np.any(np.diff(offsets.astype(np.int64)) <= 0)):
            raise TermDictionaryError("block offsets not increasing or not ending at the end of the term bytes")
        self._data = data
        self._offsets = offsets
        self.count = count

    def _first(self, block: int) -> bytes:
        at = int(self._offsets[block])
        length, at = _get_varint(self._data, at)
        return bytes(self._data[at : at + length])

    def _block(self, block: int) -> Iterator[bytes]:
        at = int(self._offsets[block])
        end = int(self._offsets[block + 1])
        length, at = _get_varint(self._data, at)
        term = bytes(self._data[at : at + length])
        at += length
        yield term
        while at < end:
            shared, at = _get_varint(self._data, at)
            length, at = _get_varint(self._data, at)
            if shared > len(term) or at + length > end:
                raise TermDictionaryError(f"term block {block} is damaged")
            term = term[:shared] + bytes(self._data[at : at + length])
            at += length
            yield term

    def ordinal(self, term: str) -> int | None:
        """The rank of `term`, or None when it is not in the dictionary."""
        if not self.count:
            return None
        key = term.encode("utf-8")
        low, high = 0, self._offsets.size - 2  # the last block whose first term <= key
        if key < self._first(0):
            return None
        while low < high:
            middle = (low + high + 1) // 2
            if self._first(middle) <= key:
                low = middle
            else:
                high = middle - 1
        for index, candidate in enumerate(self._block(low)):
            if candidate == key:
                return low * BLOCK_TERMS + index
            if candidate > key:
                break
        return None

    def __iter__(self) -> Iterator[str]:
        """Every term in order."""
        for block in range(self._offsets.size - 1):
            for term in self._block(block):
                yield term.decode("utf-8")

    def __len__(self) -> int:
        return self.count
