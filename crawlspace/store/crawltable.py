"""The crawl table: BigTable's webtable (seed 004) on an embedded RocksDB.

Logical model: rows keyed by the URL with its host reversed (`rowkey.row_key`), column families
`title`, `content`, `fetch` and `anchor`, cells addressed by (row, family, qualifier) and holding
timestamped versions, newest first. As in BigTable the model is flattened into one sorted
key/value map whose key is (row key, family, qualifier, timestamp):

    row-key-utf8  0x00  family-byte  qualifier-utf8  0x00  (2**64-1 - timestamp_us) big-endian

so that a row is one contiguous key range, its families follow each other in a fixed order
(title, content, fetch, then anchor, the large one, last: a page's own cells are read without
touching its thousands of anchors), and within a cell the newest version comes first. Qualifiers
of `anchor` are the linking pages' row keys (reversed hosts, as the seed has it); `content` has
`text`, `warc` (file, offset, length, record id, date, payload digest of the WARC response) and
`outlinks` ([target, anchor text, nofollow] per distinct target; crawls written before nofollow
was kept have [target, text], read as followed); `title` and `fetch` (a `FetchInfo`) have the
empty qualifier. Values are msgpack (anchor texts plain UTF-8), behind a one-byte tag; values
over 512 bytes (texts, outlink lists) are compressed with zstd level 1 (on the benchmark's text,
2.41x at 70 us per 22 KB text; level 3: 2.48x, a third slower).

Versions: each family keeps at most `max_versions[family]` versions of a cell. Reads never return
more; older versions are deleted when a cell is rewritten through `trim` (the page store does so
when it refetches a page) — BigTable's garbage collection, done where the writer already knows
the cell exists instead of by a read before every blind write.

Why RocksDB (rocksdict bindings): measured on this workload (bench/store/table_backends.py, 20,000
pages of 25 KB with 20 outlinks each, batches of 500 pages, one transaction each), RocksDB wrote
28,700 pages/s (717 k cells/s) into 10.8 KB/page on disk; LMDB 6,400 pages/s into 22.1 KB/page
(its B-tree pages do not compress and random anchor inserts split pages); SQLite (WAL, WITHOUT
ROWID) 2,500 pages/s into 16.2 KB/page (a second run on a busier machine: 12,600, 3,200 and 2,200
pages/s, same order). Point reads of whole rows favour LMDB (96 k vs 65 k/s) but the crawl
writes far more than it reads. A write batch is atomic and goes through RocksDB's
write-ahead log, so a killed process loses at most the uncommitted batch (with `sync`, a power
cut neither); readers in other processes open the table read-only while a crawl writes it.
"""

from __future__ import annotations

import json
import shutil
import struct
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import rocksdict
import zstandard

from crawlspace.store.rowkey import is_url, row_key, url_of

FAMILIES: dict[str, int] = {"title": 1, "content": 2, "fetch": 3, "anchor": 4}
FAMILY_NAMES: dict[int, str] = {code: name for name, code in FAMILIES.items()}
_FAMILY_BYTES: dict[str, bytes] = {name: bytes((code,)) for name, code in FAMILIES.items()}
DEFAULT_MAX_VERSIONS: dict[str, int] = {"title": 3, "content": 3, "fetch": 16, "anchor": 1}
FORMAT_KEY = b"\x00format"
FORMAT = b"crawlspace-table-1"
COMPRESS_OVER = 512
_SAMPLE_BELOW = 64 << 20
_MAX_TS = (1 << 64) - 1
_RAW = b"\x00"
_ZSTD = b"\x01"
_TEXT = b"\x02"
_TS = struct.Struct(">Q")


class CrawlTableError(RuntimeError):
    """A crawl table that cannot be opened or used (missing, locked, foreign format)."""


class FetchInfo(msgspec.Struct, omit_defaults=True, kw_only=True):
    """The value of a `fetch` cell; the versions of this cell are the page's change history."""

    status: int
    outcome: str
    fetched: float
    fetches: int
    """Fetches of this URL so far, this one included (with `changes` and `first_fetched`: the
    counts a change-rate estimator needs, kept even when old versions are trimmed)."""
    changes: int
    first_fetched: float
    duration: float = 0.0
    fingerprint: int | None = None
    etag: str | None = None
    last_modified: str | None = None
    content_type: str | None = None
    length: int = 0
    truncated: str | None = None
    address: str | None = None
    location: str | None = None
    error: str | None = None
    depth: int | None = None
    duplicate_of: str | None = None
    changed: bool | None = None


def fetch_info(value: Any) -> FetchInfo:
    """A `fetch` cell's value, typed; also the cells of crawls written before the counters existed.

    The first crawls wrote no `fetches`, `changes` or `first_fetched` (read as a first fetch with no
    change, first fetched when fetched) and a boolean `truncated` (true meant cut at the size limit:
    "length", the WARC-Truncated reason the fetcher gives it now). Such cells are upgraded here, on
    the slow path only: a current cell converts directly.
    """
    try:
        return msgspec.convert(value, FetchInfo)
    except msgspec.ValidationError:
        if not isinstance(value, dict):
            raise
    old = dict(value)
    old.setdefault("fetches", 1)
    old.setdefault("changes", 0)
    old.setdefault("first_fetched", old.get("fetched"))
    if isinstance(old.get("truncated"), bool):
        old["truncated"] = "length" if old["truncated"] else None
    return msgspec.convert(old, FetchInfo)


class _ReadOnlyView:
    """A private directory of links to a table's files, for opening it read-only.

    rocksdict writes its `rocksdict-config.json` into the directory it opens, even read-only (fixed
    upstream in RocksDict PR #186, not in a release as of 0.3.29), and a reader of a crawl must never
    modify it (the dashboard's promise). RocksDB itself only reads there, so the files it reads are
    linked, the config copied, and the logs, which a reader needs none of, left out."""

    def __init__(self, table: Path) -> None:
        self.path = Path(tempfile.mkdtemp(prefix="crawltable-read-"))
        for entry in table.iterdir():
            if entry.name == "rocksdict-config.json":
                shutil.copyfile(entry, self.path / entry.name)
            elif entry.name != "LOCK" and not entry.name.startswith("LOG"):
                (self.path / entry.name).symlink_to(entry.resolve())

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


@dataclass(frozen=True, slots=True)
class Cell:
    family: str
    qualifier: str
    timestamp: float
    value: Any


@dataclass(frozen=True, slots=True)
class Anchor:
    source: str
    text: str
    timestamp: float


@dataclass(slots=True)
class Row:
    """The cells of one row that a read returned, in key order (family, qualifier, newest first)."""

    key: str
    cells: list[Cell] = field(default_factory=list)

    @property
    def url(self) -> str:
        return url_of(self.key)

    def versions(self, family: str, qualifier: str = "") -> list[Cell]:
        return [cell for cell in self.cells if cell.family == family and cell.qualifier == qualifier]

    def latest(self, family: str, qualifier: str = "") -> Any:
        for cell in self.cells:
            if cell.family == family and cell.qualifier == qualifier:
                return cell.value
        return None

    @property
    def title(self) -> str | None:
        value = self.latest("title")
        return None if value is None else str(value)

    @property
    def text(self) -> str | None:
        value = self.latest("content", "text")
        return None if value is None else str(value)

    @property
    def fetch(self) -> FetchInfo | None:
        """The newest fetch of the page (None: a row of anchors only, a page never fetched)."""
        value = self.latest("fetch")
        return None if value is None else fetch_info(value)

    @property
    def fetches(self) -> list[FetchInfo]:
        """Every fetch version the read returned, newest first."""
        return [fetch_info(cell.value) for cell in self.versions("fetch")]

    @property
    def outlinks(self) -> list[tuple[str, str, bool]]:
        """(target, anchor text, nofollow) per distinct target of the newest parse."""
        value = self.latest("content", "outlinks") or []
        return [(str(link[0]), str(link[1]), len(link) > 2 and bool(link[2])) for link in value]

    @property
    def anchors(self) -> list[Anchor]:
        """Newest anchor text from each linking page."""
        found: list[Anchor] = []
        last = None
        for cell in self.cells:
            if cell.family == "anchor" and cell.qualifier != last:
                last = cell.qualifier
                found.append(Anchor(cell.qualifier, str(cell.value), cell.timestamp))
        return found

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form: {family: {qualifier: [{timestamp, value}, ...]}} (what the CLI prints)."""
        families: dict[str, dict[str, list[dict[str, Any]]]] = {}
        for cell in self.cells:
            versions = families.setdefault(cell.family, {}).setdefault(cell.qualifier, [])
            versions.append({"timestamp": cell.timestamp, "value": cell.value})
        return {"row": self.key, "url": self.url, "families": families}


def _family_code(family: str) -> int:
    try:
        return FAMILIES[family]
    except KeyError:
        raise ValueError(f"unknown column family {family!r}; families are {', '.join(FAMILIES)}") from None


def _check_part(text: str, what: str) -> bytes:
    if "\x00" in text:
        raise ValueError(f"{what} contains a NUL character: {text[:80]!r}")
    return text.encode("utf-8", "surrogatepass")


def _successor(prefix: bytes) -> bytes | None:
    """The smallest byte string greater than every string starting with `prefix` (None: no bound)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes((stripped[-1] + 1,))


def _key_range(prefix: str, start: str, stop: str | None) -> tuple[bytes, bytes | None]:
    """The byte range of table keys of the rows with `prefix` in [start, stop).

    A row's keys are its row key followed by NUL and more, and row keys hold no NUL, so comparing
    table keys with the bounds' bytes orders rows exactly as comparing their row keys does.
    """
    lower = max(_check_part(prefix, "prefix"), _check_part(start, "start key"), b"\x01")  # past FORMAT_KEY
    upper = _successor(_check_part(prefix, "prefix")) if prefix else None
    if stop is not None:
        bound = _check_part(stop, "stop key")
        upper = bound if upper is None else min(upper, bound)
    return lower, upper


class CrawlTable:
    """Rows of pages with versioned cells; writes are buffered and committed as one atomic batch."""

    def __init__(
        self,
        path: str | Path,
        *,
        max_versions: Mapping[str, int] | None = None,
        readonly: bool = False,
        sync: bool = True,
        zstd_level: int = 1,
    ) -> None:
        self.path = Path(path)
        self.max_versions = dict(DEFAULT_MAX_VERSIONS)
        for family, limit in (max_versions or {}).items():
            _family_code(family)
            if limit < 1:
                raise ValueError(f"max_versions[{family!r}] must be >= 1, got {limit}")
            self.max_versions[family] = limit
        self.readonly = readonly
        options = rocksdict.Options(raw_mode=True)
        options.create_if_missing(not readonly)
        options.set_compression_type(rocksdict.DBCompressionType.lz4())
        options.set_bottommost_compression_type(rocksdict.DBCompressionType.zstd())
        options.set_max_background_jobs(2)
        # 16 MB memtables (RocksDB's default is 64 MB, two of them): the table is one store among several
        # in every crawl process, and rows are small; measured on the throughput benchmark's crawl
        options.set_write_buffer_size(16 << 20)
        options.set_keep_log_file_num(2)
        options.set_max_log_file_size(1 << 20)
        if readonly and not (self.path / "CURRENT").exists():
            raise CrawlTableError(f"no crawl table at {self.path}")
        self._shadow: _ReadOnlyView | None = None
        self._db: rocksdict.Rdict = self._open(options)
        self._write_options = rocksdict.WriteOptions()
        self._write_options.sync = sync
        self._unsynced_options = rocksdict.WriteOptions()  # to the write-ahead log, no fsync: survives kill -9
        self._unsynced_options.sync = False
        stored = self._db.get(FORMAT_KEY)
        if stored is None and not readonly:
            self._db.put(FORMAT_KEY, FORMAT)
        elif stored is not None and stored != FORMAT:
            self._db.close()
            if self._shadow is not None:
                self._shadow.remove()
            raise CrawlTableError(f"{self.path} holds a crawl table of another format ({stored!r})")
        self._batch = rocksdict.WriteBatch(raw_mode=True)
        self._pending = 0
        self._cursor: rocksdict.RdictIter | None = None
        self._compressor = zstandard.ZstdCompressor(level=zstd_level)
        self._decompressor = zstandard.ZstdDecompressor()
        self._encoder = msgspec.msgpack.Encoder()
        self._decoder = msgspec.msgpack.Decoder()
        self.cells_written = 0
        self._closed = False

    def _open(self, options: rocksdict.Options) -> rocksdict.Rdict:
        """The store, read-write in place, or read-only through a `_ReadOnlyView`: made again once when
        the open fails, since a crawl writing the table may have added a file between the view's
        listing and RocksDB's reading of it."""
        attempts = 2 if self.readonly else 1
        for attempt in range(1, attempts + 1):
            self._shadow = _ReadOnlyView(self.path) if self.readonly else None
            try:
                if self._shadow is None:
                    return rocksdict.Rdict(
                        str(self.path), options=options, access_type=rocksdict.AccessType.read_write()
                    )
                return rocksdict.Rdict(
                    str(self._shadow.path), options=options, access_type=rocksdict.AccessType.read_only()
                )
            except Exception as exc:  # rocksdict raises plain Exception for lock and I/O errors
                if self._shadow is not None:
                    self._shadow.remove()
                if "lock" in str(exc).lower():
                    raise CrawlTableError(
                        f"crawl table {self.path} is in use by another writer (is a crawl running in this directory?)"
                    ) from None
                if attempt == attempts:
                    raise CrawlTableError(f"cannot open crawl table {self.path}: {exc}") from None
        raise AssertionError("unreachable")

    def __enter__(self) -> CrawlTable:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        mode = "read-only" if self.readonly else "read-write"
        return f"<CrawlTable {self.path} {mode} pending={self._pending}>"

    # -- keys and values ---------------------------------------------------------------------

    @staticmethod
    def _cell_prefix(row: str, family: str, qualifier: str) -> bytes:
        return (
            _check_part(row, "row key")
            + b"\x00"
            + bytes((_family_code(family),))
            + _check_part(qualifier, "qualifier")
            + b"\x00"
        )

    @staticmethod
    def _qualifier_key(family: str, qualifier: str) -> str:
        """Anchor qualifiers are stored as the linking URL's row key (reversed host)."""
        return row_key(qualifier) if family == "anchor" and qualifier else qualifier

    def _encode(self, value: Any) -> bytes:
        data = self._encoder.encode(value)
        if len(data) > COMPRESS_OVER:
            return _ZSTD + self._compressor.compress(data)
        return _RAW + data

    def _decode(self, data: bytes) -> Any:
        tag = data[:1]
        if tag == _ZSTD:
            return self._decoder.decode(self._decompressor.decompress(data[1:]))
        if tag == _TEXT:
            return data[1:].decode("utf-8", "surrogatepass")
        return self._decoder.decode(data[1:])

    def _parse_key(self, key: bytes) -> tuple[str, str, str, float]:
        split = key.index(b"\x00")
        family = FAMILY_NAMES[key[split + 1]]
        qualifier = key[split + 2 : -9].decode("utf-8", "surrogatepass")
        if family == "anchor" and qualifier:
            qualifier = url_of(qualifier)
        micros = _MAX_TS - _TS.unpack_from(key, len(key) - 8)[0]
        return key[:split].decode("utf-8", "surrogatepass"), family, qualifier, micros / 1_000_000

    # -- writes ------------------------------------------------------------------------------

    def _check_writable(self) -> None:
        if self.readonly:
            raise CrawlTableError(f"crawl table {self.path} is open read-only")

    def put(self, url: str, family: str, value: Any, *, qualifier: str = "", timestamp: float | None = None) -> None:
        """Add a version of a cell (committed with the next `commit`); `url` may be a row key."""
        self._check_writable()
        micros = int((time.time() if timestamp is None else timestamp) * 1_000_000)
        key = self._cell_prefix(self._row(url), family, self._qualifier_key(family, qualifier))
        self._batch.put(key + _TS.pack(_MAX_TS - micros), self._encode(value))
        self._pending += 1

    def put_cells(self, key: str, cells: Sequence[tuple[str, str, Any]], timestamp: float) -> None:
        """Versions of several cells of one row at one time: (family, qualifier, value) each.

        The fast path of the page store: `key` is a row key (not a URL) and anchor qualifiers are
        row keys too, so nothing is parsed here.
        """
        self._check_writable()
        row = _check_part(key, "row key") + b"\x00"
        stamp = b"\x00" + _TS.pack(_MAX_TS - int(timestamp * 1_000_000))
        put = self._batch.put
        for family, qualifier, value in cells:
            put(row + _FAMILY_BYTES[family] + _check_part(qualifier, "qualifier") + stamp, self._encode(value))
        self._pending += len(cells)

    def put_anchors(self, source_key: str, anchors: Sequence[tuple[str, str]], timestamp: float) -> None:
        """Anchor cells from one linking page (its row key) on the rows of its targets: (target key, text)."""
        self._check_writable()
        suffix = b"\x00" + _FAMILY_BYTES["anchor"] + _check_part(source_key, "qualifier")
        suffix += b"\x00" + _TS.pack(_MAX_TS - int(timestamp * 1_000_000))
        for target_key, _ in anchors:  # checked before any is put: a bad key leaves the batch as it was
            if "\x00" in target_key:
                _check_part(target_key, "row key")
        put = self._batch.put
        for target_key, text in anchors:  # anchor texts are short: stored as tagged UTF-8, not msgpack
            put(target_key.encode("utf-8", "surrogatepass") + suffix, _TEXT + text.encode("utf-8", "surrogatepass"))
        self._pending += len(anchors)

    def delete(self, url: str, family: str, *, qualifier: str = "", timestamp: float | None = None) -> None:
        """Delete one version of a cell, or all of them when `timestamp` is None (at the next commit)."""
        self._check_writable()
        prefix = self._cell_prefix(self._row(url), family, self._qualifier_key(family, qualifier))
        if timestamp is None:
            end = _successor(prefix)
            assert end is not None
            self._batch.delete_range(prefix, end)
        else:
            self._batch.delete(prefix + _TS.pack(_MAX_TS - int(timestamp * 1_000_000)))
        self._pending += 1

    def trim(self, url: str, family: str, *, qualifier: str = "", keep: int | None = None) -> int:
        """Delete the versions of a cell beyond `keep` (default: the family's limit); returns how many."""
        limit = self.max_versions[family] if keep is None else keep
        prefix = self._cell_prefix(self._row(url), family, self._qualifier_key(family, qualifier))
        stale = self._stale(self._committed(), prefix, limit)
        for key in stale:
            self._batch.delete(key)
        self._pending += len(stale)
        return len(stale)

    def trim_anchors(self, source_key: str, target_keys: Sequence[str], keep: int) -> int:
        """`trim` of the anchor cells from one linking page (its row key) on the rows of its targets
        (row keys): a refetched page's links, whose keys its store has made already; returns how many."""
        self._check_writable()
        middle = b"\x00" + _FAMILY_BYTES["anchor"] + _check_part(source_key, "qualifier") + b"\x00"
        cursor = self._committed()
        delete = self._batch.delete
        count = 0
        for target_key in target_keys:
            stale = self._stale(cursor, _check_part(target_key, "row key") + middle, keep)
            for key in stale:
                delete(key)
            count += len(stale)
        self._pending += count
        return count

    @staticmethod
    def _stale(cursor: rocksdict.RdictIter, prefix: bytes, keep: int) -> list[bytes]:
        """The keys of the versions of the cell `prefix` beyond the newest `keep` (from `_committed`)."""
        cursor.seek(prefix)
        stale = []
        number = 0
        while cursor.valid():
            key = cursor.key()
            if not key.startswith(prefix):
                break
            if number >= keep:
                stale.append(key)
            number += 1
            cursor.next()
        return stale

    @property
    def pending(self) -> int:
        """Mutations buffered since the last commit."""
        return self._pending

    def commit(self, *, sync: bool = True) -> int:
        """Write the buffered mutations as one atomic batch; returns how many there were. `sync=False`
        skips the fsync (the batch survives the process dying, not the machine losing power)."""
        if not self._pending:
            return 0
        count = self._pending
        batch, self._batch = self._batch, rocksdict.WriteBatch(raw_mode=True)
        self._pending = 0
        self._cursor = None  # it reads the table as it was before this batch
        self._db.write(batch, self._write_options if sync else self._unsynced_options)
        self.cells_written += count
        return count

    def close(self) -> None:
        if self._closed:
            return
        if not self.readonly:
            self.commit()
            self._db.flush_wal(True)
        self._cursor = None
        self._db.close()
        if self._shadow is not None:
            self._shadow.remove()
        self._closed = True

    # -- reads -------------------------------------------------------------------------------

    @staticmethod
    def _row(url_or_key: str) -> str:
        return row_key(url_or_key) if is_url(url_or_key) else url_or_key

    def _committed(self) -> rocksdict.RdictIter:
        """An iterator over the table as last committed, for the point reads of a writer (`latest`,
        `trim`), made again after each commit instead of once per read: making one costs more than
        the seek a first crawl's read is (one per page, for a row that is not there). Uncommitted
        writes are invisible to it, as to any read; a read-only table does not change while open."""
        if self._cursor is None:
            self._cursor = self._db.iter(rocksdict.ReadOptions())
        return self._cursor

    def _range(self, start: bytes, stop: bytes | None, *, values: bool = True) -> Iterator[tuple[bytes, bytes]]:
        """Keys and values (`values` False: empty values, not copied) in [start, stop)."""
        options = rocksdict.ReadOptions()
        if stop is not None:
            options.set_iterate_upper_bound(stop)
        iterator = self._db.iter(options)
        iterator.seek(start)
        while iterator.valid():
            yield iterator.key(), iterator.value() if values else b""
            iterator.next()

    def _families(self, family: str | Sequence[str] | None) -> list[int]:
        if family is None:
            return sorted(FAMILY_NAMES)
        names = [family] if isinstance(family, str) else list(family)
        return sorted(_family_code(name) for name in names)

    def _rows(self, start: bytes, stop: bytes | None, families: list[int], versions: int | None) -> Iterator[Row]:
        wanted = set(families)
        row: Row | None = None
        current_cell: tuple[str, str] | None = None
        count = 0
        for key, value in self._range(start, stop):
            if key[:1] == b"\x00":
                continue
            split = key.index(b"\x00")
            if key[split + 1] not in wanted:
                continue
            row_name, family, qualifier, timestamp = self._parse_key(key)
            if row is None or row.key != row_name:
                if row is not None and row.cells:
                    yield row
                row = Row(row_name)
                current_cell = None
            if current_cell != (family, qualifier):
                current_cell = (family, qualifier)
                count = 0
            count += 1
            limit = self.max_versions[family] if versions is None else min(versions, self.max_versions[family])
            if count <= limit:
                row.cells.append(Cell(family, qualifier, timestamp, self._decode(value)))
        if row is not None and row.cells:
            yield row

    def get(self, url: str, family: str | Sequence[str] | None = None, versions: int | None = 1) -> Row | None:
        """One row (only the given families, if any) with up to `versions` newest versions per cell.

        `url` is a URL (give it normalized: the key keeps its spelling) or a row key. `versions`
        None means as many as the family keeps. Reads see committed writes only.
        """
        if versions is not None and versions < 1:
            raise ValueError("versions must be >= 1")
        base = _check_part(self._row(url), "row key") + b"\x00"
        codes = self._families(family)
        for row in self._rows(base + bytes((codes[0],)), base + bytes((codes[-1] + 1,)), codes, versions):
            return row
        return None

    def latest(self, url: str, cells: Sequence[tuple[str, str]]) -> dict[tuple[str, str], Cell]:
        """The newest version of each named (family, qualifier) cell of a row that has one.

        One seek per cell and nothing else decoded: what a writer that needs a few cells of a
        possibly large row (a page with its text and thousands of anchors) reads.
        """
        base = _check_part(self._row(url), "row key") + b"\x00"
        found: dict[tuple[str, str], Cell] = {}
        cursor = self._committed()
        for family, qualifier in cells:
            prefix = base + _FAMILY_BYTES[family] + _check_part(self._qualifier_key(family, qualifier), "qualifier")
            prefix += b"\x00"
            cursor.seek(prefix)
            if cursor.valid():
                key = cursor.key()
                if key.startswith(prefix):
                    micros = _MAX_TS - _TS.unpack_from(key, len(key) - 8)[0]
                    value = self._decode(cursor.value())
                    found[(family, qualifier)] = Cell(family, qualifier, micros / 1_000_000, value)
        return found

    def scan(
        self,
        prefix: str = "",
        *,
        start: str = "",
        stop: str | None = None,
        family: str | Sequence[str] | None = None,
        versions: int | None = 1,
        limit: int | None = None,
    ) -> Iterator[Row]:
        """Rows whose key starts with `prefix` (e.g. `com.example`) and lies in [start, stop), in
        row-key order (`stop` None: no upper bound)."""
        if versions is not None and versions < 1:
            raise ValueError("versions must be >= 1")
        lower, upper = _key_range(prefix, start, stop)
        if upper is not None and upper <= lower:
            return
        for number, row in enumerate(self._rows(lower, upper, self._families(family), versions)):
            if limit is not None and number >= limit:
                return
            yield row

    def split_keys(self, parts: int) -> list[str]:
        """At most `parts - 1` row keys, ascending, that cut the table into about equal ranges.

        Read from RocksDB's file metadata (each table file's first row and size on disk), so a
        table of any size is cut without reading it. A table that is still mostly in memory (under
        `_SAMPLE_BELOW` bytes in files: a small crawl, or one whose writes are still in the
        write-ahead log) is cut by a scan of its keys instead, which takes well under a second there.
        """
        if parts < 2:
            return []
        files = [(item["start_key"], int(item["size"])) for item in self._db.live_files()]
        if sum(size for _, size in files) < _SAMPLE_BELOW:
            return self._sampled_split_keys(parts)
        return cuts_between_files(files, parts)

    def _sampled_split_keys(self, parts: int) -> list[str]:
        """Split keys by counting cells: a row key every (cells / parts) cells."""
        cells = int(self._db.property_int_value("rocksdb.estimate-num-keys") or 0)
        step = max(cells // parts, 1)
        cuts: list[str] = []
        for number, (key, _) in enumerate(self._range(b"\x01", None, values=False)):
            if number and number % step == 0:
                row = _row_of_key(key)
                if not cuts or row > cuts[-1]:
                    cuts.append(row)
                    if len(cuts) == parts - 1:
                        break
        return cuts


def _row_of_key(key: bytes) -> str:
    """The row a stored key belongs to ("" for the table's own keys, which start with a NUL)."""
    return key.split(b"\x00", 1)[0].decode("utf-8", "surrogatepass")


def cuts_between_files(files: list[tuple[bytes, int]], parts: int) -> list[str]:
    """At most `parts - 1` row keys, ascending, each the first row of the table file whose start lies
    nearest to the next k/parts of the bytes: files of about equal size are cut between them whichever
    way their few bytes differ (a rule of "the first start past k/parts" loses the last cut whenever the
    last file is a little larger than the rest). `files` are (first key, size) pairs in any order."""
    total = sum(size for _, size in files)
    starts: list[tuple[str, int]] = []  # (first row of a file, bytes of the files before it)
    passed = 0
    for start, size in sorted(files):
        row = _row_of_key(start)
        if row and passed:  # a cut before every byte would leave the first range empty
            starts.append((row, passed))
        passed += size
    cuts: list[str] = []
    for k in range(1, parts):
        target = total * k / parts
        later = [(abs(before - target), row) for row, before in starts if not cuts or row > cuts[-1]]
        if not later:
            break
        cuts.append(min(later)[1])
    return cuts


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _summary(cell: Cell) -> str:
    """A cell value in one line, spelled for a person (times as ISO dates, pointers as file@offset)."""
    value = cell.value
    if cell.family == "fetch" and isinstance(value, dict):
        shown = {
            k: _iso(v) if k in ("fetched", "first_fetched") and isinstance(v, float) else v for k, v in value.items()
        }
        return " ".join(f"{k}={v}" for k, v in shown.items())
    if (cell.family, cell.qualifier) == ("content", "warc") and isinstance(value, list) and len(value) >= 3:
        return f"{value[0]}@{value[1]} ({value[2]} bytes)"
    if (cell.family, cell.qualifier) == ("content", "outlinks") and isinstance(value, list):
        return f"{len(value)} links: " + " ".join(str(pair[0]) for pair in value)
    if isinstance(value, str):
        return json.dumps(" ".join(value.split()), ensure_ascii=False)
    return json.dumps(value, ensure_ascii=False)


def format_row(row: Row, *, width: int = 100, max_anchors: int | None = None) -> list[str]:
    """A row as an HBase-shell-like listing: one line per cell version, `family:qualifier time value`.

    With `max_anchors`, anchor cells beyond that many are counted instead of listed (scans of
    popular pages would otherwise print thousands of lines per row).
    """
    lines = [f"{row.key}    ({row.url})"]
    anchors = 0
    for cell in row.cells:
        if cell.family == "anchor":
            anchors += 1
            if max_anchors is not None and anchors > max_anchors:
                continue
        column = f"{cell.family}:{cell.qualifier}"
        text = _summary(cell)
        if len(text) > width:
            text = f"{text[: width - 1]}… ({len(text)} chars)"
        lines.append(f"  {column:<40} {_iso(cell.timestamp)}  {text}")
    if max_anchors is not None and anchors > max_anchors:
        lines.append(f"  … and {anchors - max_anchors} more anchor cells (table get shows them all)")
    return lines
