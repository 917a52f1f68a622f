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

Memory: numpy needs about 40 bytes per byte of text for these arrays (8-byte codes, powers, prefix
sums, hashes), so a 10 MiB text taken at once cost 400 MB. The text is therefore taken in blocks
of `block_chars` characters (64 Ki: at most 256 KiB of UTF-8, a few MB of arrays, and within the
precomputed power tables); a word cut by a block boundary is finished in the next block (its
polynomial hash continues: h = h_first + P^len_first * h_rest), the last k - 1 words of a block
start the shingles of the next, and each block's bin minima are merged into the signature's. The
result is the same as for the whole text at once, whatever the block size.

Why a C path: even so, the signature was about 18% of the crawl's CPU (issue 17: 0.23-0.28 ms for an
18,000-character text, numpy's dozen whole-array passes and their temporaries). `signature` is therefore
computed by crawlspace.seen._minhash (C, setup.py) in one pass over the text's code points, fed to the word
hash as their UTF-8 bytes: no encoded copy, no arrays but the bins, so no blocks either (block_chars shapes
only the numpy path). numba did the same but loaded LLVM, 150 MB of RSS in every crawl process, against a
500 MB target (bench/README.md, issue 17). The extension is optional: where no compiler built it, numpy is
the fallback, bit for bit the same signatures (tests/seen/test_shingles.py compares the two). The word and
shingle hashes (`word_hashes`, `shingle_hashes`: tests and Jaccard checks, not the crawl) stay numpy's.

The band keys for LSH are xxh3 hashes of `rows` consecutive signature values each.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import numpy.typing as npt
import xxhash

try:
    from crawlspace.seen._minhash import signature as compiled_signature
except ImportError:  # built without a compiler: the numpy path
    compiled_signature = None  # type: ignore[assignment]

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
_MOD = 1 << 64
BLOCK_CHARS = 1 << 16


def _word_byte_table() -> npt.NDArray[np.uint64]:
    table = np.zeros(256, np.uint64)
    for byte in range(256):
        char = chr(byte)
        if byte >= 0x80 or (char.isascii() and char.isalnum()):
            table[byte] = ord(char.lower()) if byte < 0x80 else byte
    return table


_WORD_BYTES = _word_byte_table()
_IN_WORD = _WORD_BYTES != 0


def fmix64(values: U64) -> U64:
    """murmur3's 64-bit finalizer: every input bit reaches every output bit."""
    values = values ^ (values >> _SHIFT33)
    values *= _FMIX1
    values ^= values >> _SHIFT33
    values *= _FMIX2
    values ^= values >> _SHIFT33
    return values


def _word_hash(polynomial: int, length: int) -> U64:
    """The hash of one word from its polynomial hash and length (as `_word_blocks` mixes them)."""
    return fmix64(np.array([(polynomial + length) % _MOD], np.uint64))


def _joined(blocks: list[U64]) -> U64:
    return np.concatenate(blocks) if blocks else np.empty(0, np.uint64)


def _powers(base: int, length: int) -> U64:
    steps = np.full(length, base, np.uint64)
    steps[0] = 1
    return np.cumprod(steps, dtype=np.uint64)


class Shingler:
    """Turns a text into its MinHash signature; holds only constant tables (reusable, no per-call state)."""

    def __init__(
        self, *, shingle_words: int = 4, num_perm: int = 128, block_chars: int = BLOCK_CHARS, compiled: bool = True
    ) -> None:
        if not 1 <= shingle_words <= len(_SHINGLE_WEIGHTS):
            raise ValueError(f"shingle_words must be in 1..{len(_SHINGLE_WEIGHTS)}")
        if num_perm < 8 or num_perm & (num_perm - 1) or num_perm > 1 << 12:
            raise ValueError("num_perm must be a power of two in 8..4096")
        if block_chars < 1:
            raise ValueError("block_chars must be at least 1")
        self.shingle_words = shingle_words
        self.num_perm = num_perm
        self.block_chars = block_chars
        self._kernel = compiled_signature if compiled else None  # compiled=False: numpy, to compare the two
        self._bin_shift = np.uint64(64 - (num_perm.bit_length() - 1))
        self._bin_starts = np.arange(num_perm, dtype=np.uint64) << self._bin_shift
        self._bins = np.arange(num_perm, dtype=np.uint64)
        self._weights = [np.uint64(w) for w in _SHINGLE_WEIGHTS[:shingle_words]]
        table = 4 * block_chars + 1  # UTF-8 takes at most 4 bytes per character
        self._pow = _powers(_P, table)
        self._inv_pow = _powers(_P_INV, table)

    @property
    def compiled(self) -> bool:
        """Signatures come from the C kernel (built, and not turned off)."""
        return self._kernel is not None

    def _word_blocks(self, text: str) -> Iterator[U64]:
        """The hashes of the text's words, block by block (a word cut by a block's end is carried over)."""
        carry: tuple[int, int] | None = None  # (polynomial hash, length) of a word the last block ended in
        for first in range(0, len(text), self.block_chars):
            data = np.frombuffer(text[first : first + self.block_chars].encode("utf-8", "surrogatepass"), np.uint8)
            size = data.size
            # word boundaries: where the in-word flag changes, with a non-word byte on either side;
            # they alternate start, end, start, end... (one pass instead of a diff and two compares)
            flags = np.zeros(size + 2, np.bool_)
            np.take(_IN_WORD, data, out=flags[1:-1])
            boundaries = np.flatnonzero(flags[1:] != flags[:-1])
            starts, ends = boundaries[0::2], boundaries[1::2]
            prefix = np.empty(size + 1, np.uint64)
            prefix[0] = 0
            np.multiply(np.take(_WORD_BYTES, data), self._pow[:size], out=prefix[1:])  # 0 outside words
            np.cumsum(prefix[1:], out=prefix[1:])
            hashes = (prefix[ends] - prefix[starts]) * self._inv_pow[starts]  # polynomial, before mixing
            lengths = (ends - starts).astype(np.uint64)
            finished: list[U64] = []
            if carry is not None:
                carried, carried_length = carry
                if starts.size and starts[0] == 0:  # the carried word goes on in this block
                    hashes[0] = (carried + pow(_P, carried_length, _MOD) * int(hashes[0])) % _MOD
                    lengths[0] += np.uint64(carried_length)
                else:  # it ended with the last block
                    finished.append(_word_hash(carried, carried_length))
                carry = None
            more = first + self.block_chars < len(text)
            if more and ends.size and ends[-1] == data.size:  # the last word may go on in the next block
                carry = (int(hashes[-1]), int(lengths[-1]))
                hashes, lengths = hashes[:-1], lengths[:-1]
            finished.append(fmix64(hashes + lengths))
            yield np.concatenate(finished) if len(finished) > 1 else finished[0]

    def _shingle_blocks(self, text: str) -> Iterator[U64]:
        """The hashes of the text's shingles, block by block; one shingle of all words if fewer than k."""
        k = self.shingle_words
        tail = np.empty(0, np.uint64)  # the last k - 1 words: the next block's first shingles start there
        total = 0
        for block in self._word_blocks(text):
            total += block.size
            words = np.concatenate([tail, block]) if tail.size else block
            if words.size >= k:
                yield self._combine(words, k)
            tail = words[max(words.size - (k - 1), 0) :]
        if 0 < total < k:  # all the words are in the tail
            yield self._combine(tail, total)

    def _combine(self, words: U64, k: int) -> U64:
        count = words.size - k + 1
        combined = words[:count] * self._weights[0]
        for offset in range(1, k):
            combined += words[offset : offset + count] * self._weights[offset]
        return fmix64(combined)

    def word_hashes(self, text: str) -> U64:
        """Hashes of the text's words, in order (a word: a maximal run of letters, digits, non-ASCII)."""
        return _joined(list(self._word_blocks(text)))

    def shingle_hashes(self, text: str) -> U64:
        """Hashes of the text's shingles (k consecutive words; one shingle if fewer words than k)."""
        return _joined(list(self._shingle_blocks(text)))

    def signature(self, text: str) -> SigArray | None:
        """One-permutation MinHash of the text's shingle set (b = 16 bits per bin), None without words."""
        if self._kernel is not None:
            values: SigArray = np.empty(self.num_perm, np.uint16)
            return values if self._kernel(text, self.shingle_words, values) else None
        minima: U64 | None = None
        present = np.zeros(self.num_perm, np.bool_)
        for hashes in self._shingle_blocks(text):
            if not hashes.size:
                continue
            hashes.sort()
            first = np.searchsorted(hashes, self._bin_starts)
            found = first < hashes.size
            block_minima = hashes[np.minimum(first, hashes.size - 1)]
            found &= (block_minima >> self._bin_shift) == self._bins
            if minima is None:  # the first block (of most pages, the only one)
                minima, present = block_minima, found
            else:
                lower = found & (~present | (block_minima < minima))
                minima[lower] = block_minima[lower]
                present |= found
        if minima is None:
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
    return np.array(band_key_list(np.ascontiguousarray(signature, "<u2").tobytes(), rows), np.uint64)


def band_key_list(signature: bytes, rows: int) -> list[int]:
    """`band_keys` of a signature's bytes (uint16 little-endian), as ints: what a near-duplicate question
    carries, without the array and its conversion back (distributed.nearclaims)."""
    width = 2 * rows
    return [
        xxhash.xxh3_64_intdigest(signature[start : start + width])
        for start in range(0, len(signature) - width + 1, width)
    ]


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
