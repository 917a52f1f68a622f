"""Variable-byte codes (IIR 5.3.1) for whole arrays at once, in numpy: the index's integer compression.

A value is written in 7-bit groups, low group first, each byte's high bit set when more bytes of the
same value follow (LEB128 order). Encoding and decoding work on whole arrays without a Python loop
per value (a loop per byte position, at most 10 for 64-bit values), which is what lets the writer
compress millions of postings per second and the reader decode a postings block in microseconds.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["CodecError", "decode_varints", "encode_varints", "varint_lengths"]

U8Array = npt.NDArray[np.uint8]
U64Array = npt.NDArray[np.uint64]

_MAX_BYTES = 10  # ceil(64 / 7)


class CodecError(ValueError):
    """Bytes that are not a sequence of complete variable-byte codes."""


def varint_lengths(values: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """The number of bytes each value takes."""
    array = np.asarray(values, dtype=np.uint64)
    lengths = np.ones(array.shape, dtype=np.int64)
    for group in range(1, _MAX_BYTES):
        longer = array >= np.uint64(1 << (7 * group))
        if not longer.any():
            break
        lengths += longer
    return lengths


def encode_varints(values: npt.ArrayLike, lengths: npt.NDArray[np.int64] | None = None) -> U8Array:
    """The variable-byte codes of non-negative integers, concatenated (`lengths`: their
    `varint_lengths`, when the caller has them already)."""
    array = np.asarray(values)
    if array.size and array.min() < 0:
        raise ValueError("variable-byte codes are for non-negative integers")
    array = array.astype(np.uint64, copy=False).ravel()
    if lengths is None:
        lengths = varint_lengths(array)
    starts = np.cumsum(lengths) - lengths
    out = np.empty(int(starts[-1] + lengths[-1]) if array.size else 0, dtype=np.uint8)
    out[starts] = (array & np.uint64(0x7F)).astype(np.uint8) | ((lengths > 1).astype(np.uint8) << np.uint8(7))
    longer = np.flatnonzero(lengths > 1)  # the values that need another byte, fewer at each step
    group = 1
    while longer.size:
        byte = ((array[longer] >> np.uint64(7 * group)) & np.uint64(0x7F)).astype(np.uint8)
        more = lengths[longer] > group + 1
        out[starts[longer] + group] = byte | (more.astype(np.uint8) << np.uint8(7))
        longer = longer[more]
        group += 1
    return out


def decode_varints(
    codes: U8Array, count: int | None = None, dtype: type[np.unsignedinteger[Any] | np.signedinteger[Any]] = np.uint64
) -> npt.NDArray[Any]:
    """The values of concatenated variable-byte codes; `count`, when given, is checked. `dtype`
    int64 saves the index a conversion (its values are all below 2**63)."""
    buffer = np.asarray(codes, dtype=np.uint8)
    if buffer.size == 0:
        values = np.zeros(0, dtype=dtype)
    elif buffer.max() < 0x80:  # every value below 128: one byte each (most doc-id gaps and frequencies)
        values = buffer.astype(dtype)
    else:
        last = buffer < 0x80
        if not last[-1]:
            raise CodecError("the bytes end inside a code (its last byte has the continuation bit)")
        ends = np.flatnonzero(last)
        starts = np.empty_like(ends)
        starts[0] = 0
        starts[1:] = ends[:-1] + 1
        lengths = ends - starts + 1
        if lengths.max() > _MAX_BYTES:
            raise CodecError(f"a code of {int(lengths.max())} bytes: longer than a 64-bit value takes")
        # the byte's place in its code: counts up from 0, reset after each last byte
        place = np.ones(buffer.size, dtype=np.int64)
        place[starts[1:]] = 1 - lengths[:-1]
        place[0] = 0
        np.cumsum(place, out=place)
        wide = np.uint64 if lengths.max() > 4 else np.uint32  # 4 groups of 7 bits fit 32 bits
        parts = (buffer & np.uint8(0x7F)).astype(wide) << (place * 7).astype(wide)
        values = np.add.reduceat(parts, starts).astype(dtype, copy=False)
    if count is not None and values.size != count:
        raise CodecError(f"{values.size} codes where {count} were expected")
    return values
