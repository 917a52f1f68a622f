"""Word shingles and their MinHash signatures, vectorized with numpy (IIR ch. 19.6).

Why not datasketch: its `MinHash` hashes each shingle in Python (SHA-1 by default) and then
applies 128 permutations to every shingle, O(128 n) per document; measured on 25 KB pages
(bench/seen/bench_neardup.py) that is a few hundred documents per second per core, well
under the 2,000 the crawl needs. Hashing every shingle with xxh3 in a Python loop is also
too slow (one call per shingle). So:

* words are the maximal runs of ASCII letters and digits and non-ASCII bytes, ASCII folded
  to lower case; each word's hash is a polynomial hash mod 2^64 computed for all words at once
  from prefix sums (h(word) = sum c_j P^(j-start), the start's power cancelled with the inverse
  power of the odd P), then mixed (murmur3's fmix64);
* a shingle (k consecutive words, k = 4 by default) hashes to fmix64 of a weighted sum of its
  words' hashes;
* the signature is one-permutation MinHash (Li, Owen and Zhang 2012): the shingle hashes are
  split into `num_perm` bins by their top bits and each bin keeps its minimum, so a single
  sort gives all minima; empty bins (short documents) borrow from the next non-empty bin
  with an offset per step (Shrivastava and Li's rotation densification). Matching bins of
  two signatures estimate the Jaccard similarity of the shingle sets, as k-permutation
  MinHash does. Each minimum keeps its low 16 bits (b-bit MinHash: a chance match of
  two different minima is 2^-16, negligible at the thresholds used here).

The band keys for LSH are xxh3 hashes of `rows` consecutive signature values each.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import xxhash

U64 = npt.NDArray[np.uint64]
SigArray = npt.NDArray[np.uint16]

_P = 0x100000001B3  # odd, so invertible mod 2^64
_P_INV = pow(_P, -1, 1 << 64)
_FMIX1 = np.uint64(0xFF51AFD7ED558CCD)
_FMIX2 = np.uint64(0xC4CEB9FE1A85EC53)
_SHIFT33 = np.uint64(33)
_SHINGLE_WEIGHTS = (
    0x9E3779B97F4A7C15,
    0xC2B2AE3D27D4EB4F,
    0x165667B19E3779F9,
    0xD6E8FEB86659FD93,
    0xA0761D6478BD642F,
    0xE7037ED1A0B428DB,
    0x8EBC6AF09C88C6E3,
    0x589965CC75374CC3,
)
_ROTATION_OFFSET = 0x9E37
POWER_TABLE_BYTES = 1 << 18


def _word_byte_table() -> npt.NDArray[np.uint64]:
    table = np.zeros(256, np.uint64)
    for byte in range(256):
        char = chr(byte)
        if byte >= 0x80 or (char.isascii() and char.isalnum()):
            table[byte] = ord(char.lower()) if byte < 0x80 else byte
    return table


_WORD_BYTES = _word_byte_table()


def fmix64(values: U64) -> U64:
    """murmur3's 64-bit finalizer: every input bit reaches every output bit."""
    values = values ^ (values >> _SHIFT33)
    values *= _FMIX1
    values ^= values >> _SHIFT33
    values *= _FMIX2
    values ^= values >> _SHIFT33
    return values


def _powers(base: int, length: int) -> U64:
    steps = np.full(length, base, np.uint64)
    steps[0] = 1
    return np.cumprod(steps, dtype=np.uint64)


class Shingler:
    """Turns a text into its MinHash signature; holds only constant tables (reusable, no per-call state)."""

    def __init__(self, *, shingle_words: int = 4, num_perm: int = 128) -> None:
        if not 1 <= shingle_words <= len(_SHINGLE_WEIGHTS):
            raise ValueError(f"shingle_words must be in 1..{len(_SHINGLE_WEIGHTS)}")
        if num_perm < 8 or num_perm & (num_perm - 1) or num_perm > 1 << 12:
            raise ValueError("num_perm must be a power of two in 8..4096")
        self.shingle_words = shingle_words
        self.num_perm = num_perm
        self._bin_shift = np.uint64(64 - (num_perm.bit_length() - 1))
        self._bin_starts = np.arange(num_perm, dtype=np.uint64) << self._bin_shift
        self._weights = [np.uint64(w) for w in _SHINGLE_WEIGHTS[:shingle_words]]
        self._pow = _powers(_P, POWER_TABLE_BYTES + 1)
        self._inv_pow = _powers(_P_INV, POWER_TABLE_BYTES + 1)

    def word_hashes(self, text: str) -> U64:
        data = np.frombuffer(text.encode("utf-8", "surrogatepass"), np.uint8)
        codes = np.take(_WORD_BYTES, data)  # 0 outside words; a take is faster than an index here
        in_word = codes != 0
        edges = np.diff(in_word.view(np.int8), prepend=np.int8(0), append=np.int8(0))
        starts = np.flatnonzero(edges == 1)
        ends = np.flatnonzero(edges == -1)
        if starts.size == 0:
            return np.empty(0, np.uint64)
        if data.size < POWER_TABLE_BYTES:
            powers, inverse = self._pow, self._inv_pow
        else:
            powers, inverse = _powers(_P, data.size + 1), _powers(_P_INV, data.size + 1)
        prefix = np.empty(data.size + 1, np.uint64)
        prefix[0] = 0
        np.cumsum(codes * powers[: data.size], out=prefix[1:])
        hashes = (prefix[ends] - prefix[starts]) * inverse[starts]
        return fmix64(hashes + (ends - starts).astype(np.uint64))

    def shingle_hashes(self, text: str) -> U64:
        """Hashes of the text's shingles (k consecutive words; one shingle if fewer words than k)."""
        words = self.word_hashes(text)
        k = min(self.shingle_words, words.size)
        if k == 0:
            return words
        count = words.size - k + 1
        combined = words[:count] * self._weights[0]
        for offset in range(1, k):
            combined += words[offset : offset + count] * self._weights[offset]
        return fmix64(combined)

    def signature(self, text: str) -> SigArray | None:
        """One-permutation MinHash of the text's shingle set (b = 16 bits per bin), None without words."""
        hashes = self.shingle_hashes(text)
        if hashes.size == 0:
            return None
        hashes.sort()
        first = np.searchsorted(hashes, self._bin_starts)
        present = first < hashes.size
        minima = hashes[np.minimum(first, hashes.size - 1)]
        present &= (minima >> self._bin_shift) == np.arange(self.num_perm, dtype=np.uint64)
        values = minima.astype(np.uint16)  # the low 16 bits
        if not present.all():
            values = self._densify(values, present)
        return values

    def _densify(self, values: SigArray, present: npt.NDArray[np.bool_]) -> SigArray:
        k = self.num_perm
        doubled = np.concatenate([present, present])
        candidates = np.where(doubled, np.arange(2 * k), 2 * k)
        nearest = np.minimum.accumulate(candidates[::-1])[::-1][:k]  # next non-empty bin at or after each
        steps = (nearest - np.arange(k)).astype(np.uint32)
        borrowed = values[nearest % k].astype(np.uint32) + steps * np.uint32(_ROTATION_OFFSET)
        densified: SigArray = (borrowed & np.uint32(0xFFFF)).astype(np.uint16)
        return densified


def similarity(left: SigArray, right: SigArray) -> float:
    """Estimated Jaccard similarity of two signatures' shingle sets (b-bit corrected)."""
    matches = float(np.count_nonzero(left == right)) / left.size
    chance = 1.0 / 65536.0
    return max(0.0, (matches - chance) / (1.0 - chance))


def band_keys(signature: SigArray, rows: int) -> U64:
    """One 64-bit key per band of `rows` values (xxh3 of the band's bytes): equal keys, equal bands."""
    data = np.ascontiguousarray(signature).tobytes()
    width = 2 * rows
    return np.fromiter(
        (xxhash.xxh3_64_intdigest(data[start : start + width]) for start in range(0, len(data) - width + 1, width)),
        np.uint64,
        count=len(data) // width,
    )


def choose_bands(num_perm: int, threshold: float, recall: float = 0.999) -> tuple[int, int]:
    """(bands, rows) with the most rows per band that still makes a pair at `threshold` a candidate
    with probability `recall`: candidates are verified on the whole signature, so missed pairs cost
    recall while extra candidates only cost a lookup."""
    best = (num_perm, 1)
    for rows in range(1, num_perm + 1):
        bands = num_perm // rows
        if 1.0 - (1.0 - threshold**rows) ** bands >= recall:
            best = (bands, rows)
    return best
