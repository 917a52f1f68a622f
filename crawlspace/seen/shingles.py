"""Word shingles and their MinHash signatures, in one compiled pass over the text (IIR ch. 19.6).

Why not datasketch: its `MinHash` hashes each shingle in Python (SHA-1 by default) and then
applies 128 permutations to every shingle, O(128 n) per document; measured on 25 KB pages
(bench/seen/bench_neardup.py) that is a few hundred documents per second per core, well
under the 2,000 the crawl needs. Hashing every shingle with xxh3 in a Python loop is also
too slow (one call per shingle). So:

* words are the maximal runs of ASCII letters and digits and non-ASCII bytes (of the UTF-8
  text), ASCII folded to lower case; a word's hash is its polynomial hash mod 2^64
  (h(word) = sum c_j P^j over its bytes) plus its length, mixed by murmur3's fmix64;
* a shingle (k consecutive words, k = 4 by default) hashes to fmix64 of a weighted sum of its
  words' hashes; a text of fewer than k words is one shingle of all of them;
* the signature is one-permutation MinHash (Li, Owen and Zhang 2012): the shingle hashes are
  split into `num_perm` bins by their top bits and each bin keeps its minimum; empty bins
  (short documents) borrow from the next non-empty bin with an offset per step (Shrivastava
  and Li's rotation densification). Matching bins of two signatures estimate the Jaccard
  similarity of the shingle sets, as k-permutation MinHash does. Each minimum keeps its low
  16 bits (b-bit MinHash: a chance match of two different minima is 2^-16, negligible at the
  thresholds used here).

Why compiled (numba, through crawlspace.jit): the signature was computed with numpy, a dozen
whole-array passes (byte codes, powers, prefix sums, boundaries, word and shingle hashes, a sort,
a search) with their temporaries; in the throughput benchmark's crawl that was 18% of the CPU
(bench/README.md, issue 17). One loop over the bytes keeps the last k word hashes in a ring and
each bin's minimum, so a page costs a few ns a byte and no memory beyond its UTF-8 encoding,
whatever its length. The hashes are the numpy version's, bit for bit (tests/seen compare
them with a plain-Python rendering of the definitions above).

The band keys for LSH are xxh3 hashes of `rows` consecutive signature values each.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import xxhash

from crawlspace.jit import jit

U64 = npt.NDArray[np.uint64]
SigArray = npt.NDArray[np.uint16]

_P = 0x100000001B3
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


@jit
def _fmix64_one(value: np.uint64) -> np.uint64:
    value ^= value >> np.uint64(33)
    value *= np.uint64(0xFF51AFD7ED558CCD)
    value ^= value >> np.uint64(33)
    value *= np.uint64(0xC4CEB9FE1A85EC53)
    value ^= value >> np.uint64(33)
    return value


@jit
def _word_hashes(data: npt.NDArray[np.uint8], table: U64, out: U64) -> int:
    """The hashes of the words of `data` into `out` (room for len(data) // 2 + 1); their count."""
    base = np.uint64(_P)
    count = 0
    polynomial = np.uint64(0)
    power = np.uint64(1)
    length = np.uint64(0)
    for index in range(data.size + 1):
        code = table[data[index]] if index < data.size else np.uint64(0)
        if code:
            polynomial += code * power
            power *= base
            length += np.uint64(1)
        elif length:
            out[count] = _fmix64_one(polynomial + length)
            count += 1
            polynomial = np.uint64(0)
            power = np.uint64(1)
            length = np.uint64(0)
    return count


_RING = 8  # at least the longest shingle; a power of two, so that a position is masked, not divided
assert len(_SHINGLE_WEIGHTS) <= _RING


@jit
def _shingle(ring: U64, newest: int, count: int, weights: U64) -> np.uint64:
    """The hash of the `count` words ending with ring[newest] (the ring holds the last _RING)."""
    combined = np.uint64(0)
    first = newest - count + 1 + _RING
    for offset in range(count):
        combined += ring[(first + offset) & (_RING - 1)] * weights[offset]
    mixed: np.uint64 = _fmix64_one(combined)
    return mixed


@jit
def _bin_minima(
    data: npt.NDArray[np.uint8], table: U64, weights: U64, shift: np.uint64, minima: U64, present: npt.NDArray[np.bool_]
) -> int:
    """Each bin's minimum shingle hash into `minima`, `present` where a shingle fell; the number of words."""
    k = weights.size
    ring = np.zeros(_RING, np.uint64)
    base = np.uint64(_P)
    words = 0
    polynomial = np.uint64(0)
    power = np.uint64(1)
    length = np.uint64(0)
    for index in range(data.size + 1):
        code = table[data[index]] if index < data.size else np.uint64(0)
        if code:
            polynomial += code * power
            power *= base
            length += np.uint64(1)
        elif length:
            newest = words & (_RING - 1)
            ring[newest] = _fmix64_one(polynomial + length)
            if words >= k - 1:
                value = _shingle(ring, newest, k, weights)
                slot = value >> shift
                if not present[slot] or value < minima[slot]:
                    minima[slot] = value
                    present[slot] = True
            words += 1
            polynomial = np.uint64(0)
            power = np.uint64(1)
            length = np.uint64(0)
    if 0 < words < k:  # one shingle of all the words
        value = _shingle(ring, words - 1, words, weights)
        slot = value >> shift
        minima[slot] = value
        present[slot] = True
    return words


def _utf8(text: str) -> npt.NDArray[np.uint8]:
    return np.frombuffer(text.encode("utf-8", "surrogatepass"), np.uint8)


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
        self._weights = np.array(_SHINGLE_WEIGHTS[:shingle_words], np.uint64)

    def word_hashes(self, text: str) -> U64:
        """Hashes of the text's words, in order (a word: a maximal run of letters, digits, non-ASCII)."""
        data = _utf8(text)
        out = np.empty(data.size // 2 + 1, np.uint64)
        return out[: _word_hashes(data, _WORD_BYTES, out)].copy()

    def shingle_hashes(self, text: str) -> U64:
        """Hashes of the text's shingles (k consecutive words; one shingle if fewer words than k)."""
        words = self.word_hashes(text)
        if not words.size:
            return words
        k = min(self.shingle_words, words.size)
        count = words.size - k + 1
        combined = words[:count] * self._weights[0]
        for offset in range(1, k):
            combined += words[offset : offset + count] * self._weights[offset]
        return fmix64(combined)

    def signature(self, text: str) -> SigArray | None:
        """One-permutation MinHash of the text's shingle set (b = 16 bits per bin), None without words."""
        minima = np.zeros(self.num_perm, np.uint64)
        present = np.zeros(self.num_perm, np.bool_)
        if not _bin_minima(_utf8(text), _WORD_BYTES, self._weights, self._bin_shift, minima, present):
            return None
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
