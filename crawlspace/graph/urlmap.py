"""URL <-> id for the connectivity server (IIR 20.4): the crawl's URLs sorted by row key, front-coded, memory-mapped.

Ids. A URL's id is the rank of its crawl-table row key (`crawlspace.store.rowkey.row_key`: the host reversed,
`com.example.www/http/a`) among the graph's URLs, so a host's pages, and a domain's hosts, get consecutive ids:
that is what makes the gaps of the BV lists small and their intervals long.

File (`urls.fcmap`, little-endian). A 48-byte header (magic, URL count, block size, block count, bytes of the
dictionary and of the blocks, xxh3 of everything after the header), a zstd dictionary trained on the blocks,
the blocks, then the sparse index: the byte offset of each block (u64, one more than there are blocks). A block
holds `block_size` consecutive keys (UTF-8), front-coded: the first whole (LEB128 length, bytes), each next one
as the length of the prefix it shares with the one before and its own suffix (two LEB128s, bytes); then
compressed as one zstd frame (level 3) with the dictionary, which takes what front coding cannot: the
repeats across blocks (`.html`, `/archive/`, a host's name in every block of the host). Nothing else is
stored: the URL is the key read back (`rowkey.url_of`).

Lookups. `open` maps the file and reads each block's first key into a list (the sparse index in memory: one
key per `block_size` URLs); `id_of` finds the block by bisection over those keys, decompresses it (0.5 µs) and
walks at most one block; `url_of` does the same for the block of the id. Both are plain Python and a few
microseconds (`bench/graph`). Measured on the 91,415 URLs of bench/graph's crawl: front coding alone took 96
bits per URL, with the dictionary 39 (the whole sorted list under zstd -19, no random access: 21, the plain
list 275). Blocks of 8, 16 and 32 (front coding alone) took 62, 43 and 34 bits per URL on 100,000 URLs of
another shape, `url_of` 3.9, 4.7 and 7.0 µs: 16 keeps the walk short. The front coding is the search index's
term dictionary's (`crawlspace.index.terms`, IIR 5.2.2), which is not reused as it is: it has no
ordinal-to-term lookup (`url_of`), searches the first keys in the mapped bytes (a varint decode per step),
has no compression across blocks and reports damage without the file and the byte.

Bad input: a file that is truncated, whose checksum does not match, or whose blocks break the format raises
`GraphFormatError` with the file and the byte; a URL not in the map raises `UnknownURL` (with the URL), an id
out of range `IndexError`.
"""

from __future__ import annotations

import bisect
import itertools
import mmap
import os
import struct
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import NoReturn

import xxhash
import zstandard

from crawlspace.graph.errors import GraphFormatError
from crawlspace.store.rowkey import RowKeyError, row_key, url_of

URL_MAP = "urls.fcmap"
MAGIC = b"CSURLFC2"
HEADER = struct.Struct("<8sQIIQQQ")  # magic, urls, block size, blocks, dictionary bytes, block bytes, xxh3 of the rest
HEADER_BYTES = HEADER.size
BLOCK_SIZE = 16
ZSTD_LEVEL = 3
DICTIONARY_BYTES = 16384
MIN_TRAINING_BLOCKS = 32
"""Fewer blocks than this are compressed without a dictionary (zstd cannot train on so few samples, and the
dictionary would outweigh them)."""


class UnknownURL(LookupError):
    """A URL that is not a node of the graph: the crawl did not fetch it (or it is not a URL at all)."""

    def __init__(self, url: str, why: str = "is not a page of the crawl's graph") -> None:
        self.url = url
        super().__init__(f"{url} {why}")


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def sort_by_row_key(urls: Sequence[str]) -> tuple[list[int], list[str]]:
    """The order of `urls` by row key (position i of the sorted list is `urls[order[i]]`) and the keys in that
    order; a URL whose key does not give it back (`rowkey.url_of`) is refused, as the map could not return it."""
    keys = []
    for url in urls:
        try:
            key = row_key(url)
        except RowKeyError as error:
            raise ValueError(f"cannot number {url!r}: {error}") from None
        if url_of(key) != url:
            raise ValueError(f"cannot number {url!r}: its row key {key!r} gives back {url_of(key)!r}")
        keys.append(key)
    order = sorted(range(len(keys)), key=keys.__getitem__)
    return order, [keys[i] for i in order]


def _front_coded(keys: list[bytes]) -> bytes:
    out = bytearray(_varint(len(keys[0])) + keys[0])
    for previous, key in itertools.pairwise(keys):
        shared = 0
        limit = min(len(key), len(previous))
        while shared < limit and key[shared] == previous[shared]:
            shared += 1
        out += _varint(shared) + _varint(len(key) - shared) + key[shared:]
    return bytes(out)


def _dictionary(blocks: list[bytes]) -> bytes:
    """A zstd dictionary trained on the blocks, or none when there are too few to train on."""
    if len(blocks) < MIN_TRAINING_BLOCKS:
        return b""
    size = min(DICTIONARY_BYTES, max(1024, sum(map(len, blocks)) // 8))
    try:
        samples: list[bytes | bytearray | memoryview] = list(blocks)
        return bytes(zstandard.train_dictionary(size, samples).as_bytes())
    except zstandard.ZstdError:  # samples zstd finds too small or too alike: compress without
        return b""


def write_url_map(path: Path | str, keys: Iterable[str], block_size: int = BLOCK_SIZE) -> Path:
    """Row keys, strictly increasing, front-coded and compressed into `path` (written aside, synced, renamed)."""
    if block_size < 1:
        raise ValueError(f"block size must be >= 1, got {block_size}")
    encoded = [key.encode("utf-8") for key in keys]
    for previous, key in itertools.pairwise(encoded):
        if key <= previous:
            raise ValueError(f"row keys out of order or repeated: {previous.decode()!r} then {key.decode()!r}")
    blocks = [_front_coded(encoded[first : first + block_size]) for first in range(0, len(encoded), block_size)]
    dictionary = _dictionary(blocks)
    compressor = zstandard.ZstdCompressor(
        level=ZSTD_LEVEL,
        dict_data=zstandard.ZstdCompressionDict(dictionary) if dictionary else None,
        write_checksum=False,  # the file has one
        write_dict_id=False,  # there is one dictionary
    )
    body = bytearray(dictionary)
    offsets = [0]
    for block in blocks:
        body += compressor.compress(block)
        offsets.append(len(body) - len(dictionary))
    block_bytes = offsets[-1]
    body += struct.pack(f"<{len(offsets)}Q", *offsets)
    checksum = xxhash.xxh3_64_intdigest(body)
    header = HEADER.pack(MAGIC, len(encoded), block_size, len(blocks), len(dictionary), block_bytes, checksum)
    path = Path(path)
    staged = path.with_name(path.name + ".tmp")
    with open(staged, "wb") as file:
        file.write(header)
        file.write(body)
        file.flush()
        os.fsync(file.fileno())
    os.replace(staged, path)
    return path


class UrlMap:
    """The map of one graph: `id_of(url)`, `url_of(id)`, iteration in id order; `close` unmaps the file.

    Opening checks the header against the file's size, the checksum and the sparse index; each lookup checks
    the lengths it reads against its block, so a map written wrongly fails with its byte, never a wrong URL."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        try:
            with open(self.path, "rb") as file:
                size = os.fstat(file.fileno()).st_size
                if size < HEADER_BYTES:
                    raise GraphFormatError(self.path, f"{size} bytes cannot hold the header (truncated)", byte=size)
                self._data = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
        except FileNotFoundError:
            raise GraphFormatError(self.path, "the URL map is missing") from None
        try:
            self._check(size)
        except GraphFormatError:
            self._data.close()
            raise

    def _check(self, size: int) -> None:
        """The header against the size, the checksum, the sparse index; then each block's first key read."""
        magic, count, block_size, blocks, dictionary_bytes, block_bytes, checksum = HEADER.unpack_from(self._data)
        self.count: int = count
        self.block_size: int = block_size
        self._block_bytes: int = block_bytes
        if magic != MAGIC:
            raise GraphFormatError(self.path, f"not a crawlspace URL map (magic {magic!r})", byte=0)
        self._blocks_at = HEADER_BYTES + dictionary_bytes
        expected = self._blocks_at + self._block_bytes + 8 * (blocks + 1)
        if size != expected:
            raise GraphFormatError(
                self.path, f"{size} bytes where the header says {expected}", byte=min(size, expected)
            )
        if self.block_size < 1 or blocks != -(-self.count // self.block_size):
            raise GraphFormatError(
                self.path, f"{blocks} blocks of {self.block_size} cannot hold {self.count} URLs", byte=8
            )
        with memoryview(self._data) as whole, whole[HEADER_BYTES:] as body:  # hashed in place, not copied
            intact = xxhash.xxh3_64_intdigest(body) == checksum
        if not intact:
            raise GraphFormatError(self.path, "the checksum does not match (the file was changed)", byte=HEADER_BYTES)
        dictionary = self._data[HEADER_BYTES : self._blocks_at]
        self._decompressor = zstandard.ZstdDecompressor(
            dict_data=zstandard.ZstdCompressionDict(dictionary) if dictionary else None
        )
        self._decompressing = threading.Lock()  # python-zstandard's objects are not for two threads at once
        index_at = self._blocks_at + self._block_bytes
        self._offsets: tuple[int, ...] = struct.unpack_from(f"<{blocks + 1}Q", self._data, index_at)
        if (
            self._offsets[0] != 0
            or self._offsets[-1] != self._block_bytes
            or any(a >= b for a, b in zip(self._offsets, self._offsets[1:], strict=False))
        ):
            raise GraphFormatError(self.path, "the block offsets are not increasing within the blocks", byte=index_at)
        self._heads = [self._block(block)[1] for block in range(blocks)]

    @property
    def size_bytes(self) -> int:
        return len(self._data)

    @property
    def bits_per_url(self) -> float:
        """The whole file (header, dictionary, blocks, sparse index) in bits per URL."""
        return 8 * self.size_bytes / max(self.count, 1)

    def _block(self, block: int) -> tuple[bytes, bytes, int]:
        """A block's keys decompressed, its first key and where the next key starts (the rest: `_walk`)."""
        start = self._blocks_at + self._offsets[block]
        try:
            with self._decompressing:
                data = self._decompressor.decompress(self._data[start : self._blocks_at + self._offsets[block + 1]])
        except zstandard.ZstdError as error:
            raise GraphFormatError(self.path, f"block {block} does not decompress ({error})", byte=start) from None
        length, at = self._read_varint(data, 0, block)
        if at + length > len(data):
            self._damaged(block, at)
        return data, data[at : at + length], at + length

    def _read_varint(self, data: bytes, at: int, block: int) -> tuple[int, int]:
        value = shift = 0
        while True:
            if at >= len(data) or shift > 56:
                self._damaged(block, at)
            byte = data[at]
            at += 1
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value, at
            shift += 7

    def _damaged(self, block: int, at: int) -> NoReturn:
        raise GraphFormatError(
            self.path,
            f"block {block} breaks the front coding (at byte {at} of its keys decompressed)",
            byte=self._blocks_at + self._offsets[block],
        )

    def _walk(self, block: int, stop: int, wanted: bytes | None) -> tuple[int, bytes]:
        """Decode a block's keys in order until the `stop`-th or the first not below `wanted`: (position, key).

        Each key is checked to fit in the block; the one-byte case of both lengths is read inline (a few
        microseconds per lookup are the point of this class)."""
        data, key, at = self._block(block)
        position = 0
        size = len(data)
        while position < stop and (wanted is None or key < wanted):
            if at + 2 <= size and data[at] < 0x80 and data[at + 1] < 0x80:
                shared, length = data[at], data[at + 1]
                at += 2
            else:
                shared, at = self._read_varint(data, at, block)
                length, at = self._read_varint(data, at, block)
            if shared > len(key) or at + length > size:
                self._damaged(block, at)
            key = key[:shared] + data[at : at + length]
            at += length
            position += 1
        return position, key

    def _members(self, block: int) -> int:
        return min(self.block_size, self.count - block * self.block_size)

    def id_of(self, url: str) -> int:
        """The id of a URL (normalized, as the crawl stored it); `UnknownURL` if the graph has no such page."""
        try:
            key = row_key(url).encode("utf-8")
        except RowKeyError:
            raise UnknownURL(url, "is not an absolute URL") from None
        block = bisect.bisect_right(self._heads, key) - 1
        if block >= 0:
            position, found = self._walk(block, self._members(block) - 1, key)
            if found == key:
                return block * self.block_size + position
        raise UnknownURL(url)

    def url_of(self, node: int) -> str:
        if not 0 <= node < self.count:
            raise IndexError(f"node {node} is not in 0..{self.count - 1}")
        block, position = divmod(node, self.block_size)
        return url_of(self._walk(block, position, None)[1].decode("utf-8"))

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[str]:
        """Every URL in id order."""
        for node in range(self.count):
            yield self.url_of(node)

    def close(self) -> None:
        self._data.close()

    def __enter__(self) -> UrlMap:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
