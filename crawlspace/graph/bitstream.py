"""Big-endian bit streams and the instantaneous codes of WebGraph's `InputBitStream`/`OutputBitStream`.

A stream is held as 64-bit words (`uint64`), the first bit of the file being the highest bit of word 0; a
reader's word array carries two zero words past the data so that a read of up to 63 bits that starts at or
before the end never indexes out of range. Every reader takes the stream's length in bits and returns the
position after the code; a code that runs past the end returns a position past `nbits` and a code whose
value cannot be an int64 returns `TOO_LONG`, so a caller checks one comparison per code and can say where
the bad code began. The codes are exactly dsiutils': unary is x zeros then a one; γ is the unary length of
x + 1's binary form and then its bits below the leading one; δ codes that length in γ; ζ_k (Boldi and Vigna,
Internet Math. 2005) codes h = ⌊log₂(x + 1) / k⌋ in unary and then x + 1 in a minimal binary code of the
interval [2^hk, 2^(h+1)k); nibble codes groups of 3 bits, each after a bit that is 1 on the last group.

The `emit_*` writers do two jobs with one body: with `write` they set the bits in a zeroed word buffer that the
caller made large enough, without it they only add the code's length, which is how the encoder prices each
candidate reference before it writes the cheapest.
"""

from __future__ import annotations

import numpy as np
from numba.cpython.unsafe.numbers import leading_zeros
from numba.extending import overload

from crawlspace.jit import jit

DELTA = 1
GAMMA = 2
UNARY = 5
ZETA = 6
NIBBLE = 7
"""WebGraph's `CompressionFlags` numbers for the codes this module reads and writes (Golomb, 3 and 4, are not
supported)."""

TOO_LONG = np.int64(1 << 62)
"""The position a reader returns for a code whose value does not fit: larger than any stream's length."""

MAX_CODE_BITS = 62


def leading_zeros_64(value: int) -> int:
    """The zeros before the first one of a 64-bit word: LLVM's ctlz when compiled, `bit_length` when numba is
    disabled (NUMBA_DISABLE_JIT=1 runs these kernels as plain Python, which is how their speed-up is measured)."""
    return 64 - int(value).bit_length()


@overload(leading_zeros_64)
def _leading_zeros_64_compiled(value):
    return lambda value: leading_zeros(value)


@jit
def read_bits(words, pos, count):
    """The `count` (0..63) bits at bit `pos`, as a non-negative int64."""
    if count == 0:
        return np.int64(0)
    index = pos >> 6
    offset = np.uint64(pos & 63)
    window = words[index] << offset
    if offset != 0:
        window |= words[index + 1] >> (np.uint64(64) - offset)
    return np.int64(window >> np.uint64(64 - count))


@jit
def read_unary(words, pos, nbits):
    value = np.int64(0)
    while pos < nbits:
        index = pos >> 6
        offset = np.uint64(pos & 63)
        window = words[index] << offset
        if offset != 0:
            window |= words[index + 1] >> (np.uint64(64) - offset)
        if window != 0:
            zeros = np.int64(leading_zeros_64(window))
            end = pos + zeros
            if end >= nbits:
                return np.int64(0), nbits + 1
            return value + zeros, end + 1
        value += 64
        pos += 64
    return np.int64(0), nbits + 1


@jit
def _below_leading_one(words, pos, nbits, length):
    """γ's and δ's second part: x + 1 has `length` bits below its leading one, which are read here."""
    if pos > nbits:
        return np.int64(0), pos
    if length > MAX_CODE_BITS:
        return np.int64(0), TOO_LONG
    value = (np.int64(1) << length) | read_bits(words, pos, length)
    return value - 1, pos + length


@jit
def read_gamma(words, pos, nbits):
    length, pos = read_unary(words, pos, nbits)
    return _below_leading_one(words, pos, nbits, length)


@jit
def read_delta(words, pos, nbits):
    length, pos = read_gamma(words, pos, nbits)
    return _below_leading_one(words, pos, nbits, length)


@jit
def read_zeta(words, pos, nbits, k):
    h, pos = read_unary(words, pos, nbits)
    if pos > nbits:
        return np.int64(0), pos
    if h * k + k > MAX_CODE_BITS + 1:
        return np.int64(0), TOO_LONG
    left = np.int64(1) << (h * k)
    m = read_bits(words, pos, h * k + k - 1)
    pos += h * k + k - 1
    if m < left:
        return m + left - 1, pos
    return (m << 1) + read_bits(words, pos, 1) - 1, pos + 1


@jit
def read_nibble(words, pos, nbits):
    value = np.int64(0)
    for _ in range(21):  # 63 bits
        last = read_bits(words, pos, 1)
        value = (value << 3) | read_bits(words, pos + 1, 3)
        pos += 4
        if pos > nbits:
            return np.int64(0), pos
        if last == 1:
            return value, pos
    return np.int64(0), TOO_LONG


@jit
def read_code(code, k, words, pos, nbits):
    if code == GAMMA:
        return read_gamma(words, pos, nbits)
    if code == ZETA:
        return read_zeta(words, pos, nbits, k)
    if code == UNARY:
        return read_unary(words, pos, nbits)
    if code == DELTA:
        return read_delta(words, pos, nbits)
    return read_nibble(words, pos, nbits)


@jit
def most_significant_bit(value):
    """⌊log₂ value⌋ for value > 0 (dsiutils' `Fast.mostSignificantBit`); -1 for 0."""
    return 63 - np.int64(leading_zeros_64(np.uint64(value)))


@jit
def nat2int(value):
    return (value >> 1) ^ -(value & 1)


@jit
def int2nat(value):
    return (value << 1) ^ (value >> 63)


@jit
def write_bits(buffer, pos, value, count):
    """Sets `count` (0..63) bits at `pos` to `value` (< 2**count) in a zeroed buffer."""
    if count == 0:
        return pos
    index = pos >> 6
    bits = np.uint64(value)
    free = 64 - (pos & 63)
    if count <= free:
        buffer[index] |= bits << np.uint64(free - count)
    else:
        spill = count - free
        buffer[index] |= bits >> np.uint64(spill)
        buffer[index + 1] |= bits << np.uint64(64 - spill)
    return pos + count


@jit
def emit_unary(buffer, pos, value, write):
    if not write:
        return pos + value + 1
    return write_bits(buffer, pos + value, 1, 1)


@jit
def emit_gamma(buffer, pos, value, write):
    value += 1
    length = most_significant_bit(value)
    if not write:
        return pos + 2 * length + 1
    pos = write_bits(buffer, pos + length, 1, 1)
    return write_bits(buffer, pos, value & ((np.int64(1) << length) - 1), length)


@jit
def emit_delta(buffer, pos, value, write):
    value += 1
    length = most_significant_bit(value)
    pos = emit_gamma(buffer, pos, length, write)
    if not write:
        return pos + length
    return write_bits(buffer, pos, value & ((np.int64(1) << length) - 1), length)


@jit
def emit_zeta(buffer, pos, value, k, write):
    value += 1
    h = most_significant_bit(value) // k
    if h * k + k > MAX_CODE_BITS + 1:  # the reader refuses codes this long (read_zeta): never write one
        raise ValueError("value too large for a zeta code of this k")
    pos = emit_unary(buffer, pos, h, write)
    left = np.int64(1) << (h * k)
    if value - left < left:
        if not write:
            return pos + h * k + k - 1
        return write_bits(buffer, pos, value - left, h * k + k - 1)
    if not write:
        return pos + h * k + k
    return write_bits(buffer, pos, value, h * k + k)


@jit
def emit_nibble(buffer, pos, value, write):
    if value == 0:
        return write_bits(buffer, pos, 8, 4) if write else pos + 4
    groups = most_significant_bit(value) // 3
    if not write:
        return pos + 4 * (groups + 1)
    while groups >= 0:
        pos = write_bits(buffer, pos, 1 if groups == 0 else 0, 1)
        pos = write_bits(buffer, pos, (value >> (3 * groups)) & 7, 3)
        groups -= 1
    return pos


@jit
def emit_code(code, k, buffer, pos, value, write):
    if code == GAMMA:
        return emit_gamma(buffer, pos, value, write)
    if code == ZETA:
        return emit_zeta(buffer, pos, value, k, write)
    if code == UNARY:
        return emit_unary(buffer, pos, value, write)
    if code == DELTA:
        return emit_delta(buffer, pos, value, write)
    return emit_nibble(buffer, pos, value, write)


MAX_PADDING_BITS = 128
"""What may follow the last code: WebGraph pads its streams to a byte; webgraph-rs writes whole 64-bit words
(and, in its `.offsets`, one zero word more)."""


@jit
def is_padding(words, pos, nbits):
    """Whether the bits from `pos` to `nbits` are zero padding, as a writer leaves after its last code."""
    if nbits - pos >= MAX_PADDING_BITS:
        return False
    while pos < nbits:
        count = min(nbits - pos, 63)
        if read_bits(words, pos, count) != 0:
            return False
        pos += count
    return True


def words_of(data: bytes) -> np.ndarray:
    """A file's bytes as the big-endian words the readers take, with two zero words past the end."""
    padded = data + bytes(-len(data) % 8 + 16)
    return np.frombuffer(padded, dtype=">u8").astype(np.uint64)


def bytes_of(buffer: np.ndarray, nbits: int) -> bytes:
    """The first `nbits` bits of a writer's buffer, the last byte padded with zeros as `OutputBitStream` does."""
    return buffer.astype(">u8").tobytes()[: (nbits + 7) // 8]
