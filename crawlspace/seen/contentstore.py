"""Where the content set keeps its tables: a small key-value protocol, RocksDB behind it, a fake for tests.

Why not LMDB any more (it held the set until this module): a crawl process's LMDB content set was
its largest memory. Measured on `bench/throughput/run.py --skip-scrapy --fetch 100000` (92,483
pages, 2 crawl processes, smaps at the peak): per process 147-155 MB of the LMDB map resident and a
134 MB glibc heap, of the 801 MB PSS of the whole crawl. The keys are fingerprints, so every page's
two dozen gets and puts land on random B-tree pages: over a crawl every page of the file is faulted
into the map (the kernel maps 16 pages around each fault, MADV_RANDOM or not), and the file is twice
its live data (copy-on-write pages of long write transactions). A write transaction also copies
every B-tree page it touches into malloc'd memory (LMDB's dirty pages), which with random keys is
most of the tree: `bench/seen/bench_content_memory.py` with 50,000 synthetic pages in one process,
checkpointed every 5,000, ends with 132 MB of map and 62 MB of heap (against 18 MB of heap before
the first page). Committing more often bounds the heap but not the map (44 MB saved at 500 pages a
transaction, 32 us a page more).

RocksDB (rocksdict, already the crawl table's store) reads its files with pread into a block
cache of a size we choose, and keeps new writes in memtables of a size we choose, so the resident
part is bounded by configuration, not by the crawl's length; the rest is the kernel's page cache,
which belongs to no process. Measured with the same probe: see bench/README.md ("Memory").

Transactions: the content set's promise is that after a crash it reopens at or after its last
checkpoint, and that what came after the last commit is rolled back whole. RocksDB's write batches
are atomic, but rocksdict cannot read a batch before it is written, and the set reads its own
writes (a page's record, then its bands). So the writes since the last commit wait in `pending`
(a dict, read first) and go to RocksDB as one batch at `commit`; the caller bounds how many pages
that is (ContentSeen.commit_every). `sync` makes the committed batches durable against power loss
too (an fsync of RocksDB's write-ahead log); a commit alone survives kill -9.

Absent keys: most of a page's reads are of keys that are not there (a new page's URL and body
fingerprints, and nearly all of its LSH band keys, which hold 0 or 1 page each), and a RocksDB get
costs its bloom filters in every memtable and level plus rocksdict's call: issue 17 measured the
reads of the near-duplicate test alone (a MultiGet per page and owner for the bands, three gets of
the page's own entry) at a third of its CPU. So the tables the caller names as `filtered` (keys that
are fingerprints, random bits) have a bloom filter here in front of RocksDB (`KeyFilter`): a fixed
bitmap of `filter_bytes` (2 MiB by default: under 1% false positives for the 1 M keys a process of a
2-process crawl holds at 100,000 pages), set for the keys of every committed batch (the uncommitted
writes are read first: they need none) and never cleared (a deleted key only costs a lookup again).
It is only ever a superset of the committed keys, so its "no" is exact whatever a crash rolled back;
it is rebuilt from a scan of those tables' keys when the store opens, and once it has taken more keys
than it can tell apart (`KeyFilter.capacity`) it is turned off for good (every read goes to RocksDB,
as before it): neither its memory nor the scan grows with the crawl.

Counting: RocksDB keeps no exact count of keys, and `len()` of the set is asked for, so the store
counts the keys of the tables it is told to count, and writes the counts in every committed batch.
"""

from __future__ import annotations

import errno
import itertools
import struct
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Protocol, cast

import numpy as np
import rocksdict
import xxhash

from crawlspace.seen.sortedruns import SeenStateError

DEFAULT_CACHE_BYTES = 8 << 20
"""RocksDB's block cache (data, index and filter blocks) of one content set."""
DEFAULT_WRITE_BUFFER_BYTES = 4 << 20
"""One memtable; RocksDB keeps at most two (one being flushed)."""
DEFAULT_FILTER_BYTES = 2 << 20
"""The bloom filter of the `filtered` tables' keys (see the module: absent keys)."""
_COUNT_TABLE = 0
_COUNT = struct.Struct("<q")


class ContentStore(Protocol):
    """Tables of byte keys and values for seen.ContentSeen, with transactions of the caller's size.

    Contract for implementers:
    - `table` is a number in 1..255; keys of different tables never collide.
    - reads see every write made so far, committed or not.
    - `commit` makes the writes since the last commit one atomic unit that survives the process
      being killed (kill -9); `sync` commits and makes everything committed survive a power loss.
    - `abandon` drops the uncommitted writes and closes, as a crash would; reopening the same
      directory then shows exactly the committed state.
    - `count(table)` is exact for the tables named as counted when the store was made.
    """

    def get(self, table: int, key: bytes) -> bytes | None: ...

    def get_many(self, table: int, keys: list[bytes]) -> list[bytes | None]:
        """`get` of each key, in order (one call: a page's LSH bands)."""
        ...

    def put(self, table: int, key: bytes, value: bytes) -> None: ...

    def put_many(self, table: int, items: list[tuple[bytes, bytes]]) -> None:
        """`put` of each (key, value) (one call: a page's LSH bands)."""
        ...

    def delete(self, table: int, key: bytes) -> None: ...

    def values(self, table: int) -> Iterator[bytes]:
        """Every value of `table` (a full scan: for reports, tests and the small table of outdated notices)."""
        ...

    def count(self, table: int) -> int: ...

    def commit(self) -> None: ...

    def sync(self) -> None: ...

    def close(self) -> None:
        """Commit, sync and close."""
        ...

    def abandon(self) -> None: ...

    def disk_bytes(self) -> int: ...


class _Pending:
    """The writes since the last commit (None: deleted), and the counts they leave."""

    def __init__(self, counted: Iterable[int], counts: dict[int, int]) -> None:
        self.writes: dict[bytes, bytes | None] = {}
        self.counted = frozenset(counted)
        self.counts = dict(counts)

    def note(self, table: int, existed: bool, exists: bool) -> None:
        if table in self.counted and existed != exists:
            self.counts[table] = self.counts.get(table, 0) + (1 if exists else -1)

    def count(self, table: int) -> int:
        if table not in self.counted:
            raise ValueError(f"table {table} is not counted")
        return self.counts.get(table, 0)


class KeyFilter:
    """A bloom filter of keys (3 probes by double hashing of the key's xxh3), off once past `capacity`.

    Why xxh3 of the whole key rather than its bits: the keys of the band tables are band number and
    band key, and one band key value may stand in several bands; any hash does, as a collision only
    costs a lookup, but an even one keeps the false positives at their rate. Keys are added in bulk
    (`add_many`, numpy: a key added one by one in Python cost more than the RocksDB read it saves)."""

    def __init__(self, size_bytes: int) -> None:
        if size_bytes < 8 or size_bytes & (size_bytes - 1):
            raise ValueError("a key filter's size must be a power of two of at least 8 bytes")
        self._bits: bytearray | None = bytearray(size_bytes)
        self._mask = size_bytes * 8 - 1
        self.capacity = size_bytes
        """Keys past which the filter is turned off: 8 bits a key, about 3% false positives at 3 probes."""
        self.keys = 0
        """Keys added (a key added again counts again: the filter may turn off early, never late)."""

    @property
    def on(self) -> bool:
        return self._bits is not None

    def add_many(self, keys: list[bytes]) -> None:
        if self._bits is None or not keys:
            return
        self.keys += len(keys)
        if self.keys > self.capacity:
            self._bits = None  # saturated: every read goes to the store, and the memory is given back
            return
        bits = np.frombuffer(self._bits, np.uint8)
        mask = np.uint64(self._mask)
        hashed = np.fromiter(map(xxhash.xxh3_64_intdigest, keys), np.uint64, count=len(keys))
        first, step = hashed & mask, (hashed >> np.uint64(32)) | np.uint64(1)
        for probe in (first, first + step, first + np.uint64(2) * step):
            probe &= mask
            np.bitwise_or.at(
                bits, probe >> np.uint64(3), np.left_shift(np.uint8(1), (probe & np.uint64(7)).astype(np.uint8))
            )

    def may_hold_any(self, keys: list[bytes]) -> list[bytes]:
        """The `keys` that `may_hold` (one call for a page's bands: most often none)."""
        bits = self._bits
        if bits is None:
            return keys
        mask = self._mask
        hash_of = xxhash.xxh3_64_intdigest
        found = []
        for key in keys:
            hashed = hash_of(key)
            first, step = hashed & mask, (hashed >> 32) | 1
            if not bits[first >> 3] >> (first & 7) & 1:
                continue
            second = (first + step) & mask
            if not bits[second >> 3] >> (second & 7) & 1:
                continue
            third = (first + 2 * step) & mask
            if bits[third >> 3] >> (third & 7) & 1:
                found.append(key)
        return found

    def may_hold(self, key: bytes) -> bool:
        """False only if `key` was never added (always True once the filter is off)."""
        return self._bits is None or bool(self.may_hold_any([key]))


class RocksContentStore:
    """A ContentStore in a RocksDB database under `directory`, with bounded memory (see the module)."""

    def __init__(
        self,
        directory: str | Path,
        *,
        counted: Iterable[int] = (),
        filtered: Iterable[int] = (),
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        write_buffer_bytes: int = DEFAULT_WRITE_BUFFER_BYTES,
        filter_bytes: int = DEFAULT_FILTER_BYTES,
    ) -> None:
        """`filtered`: tables whose reads a bloom filter answers first (see the module: absent keys)."""
        self.directory = Path(directory)
        options = rocksdict.Options(raw_mode=True)
        options.create_if_missing(True)
        options.set_write_buffer_size(write_buffer_bytes)
        options.set_max_write_buffer_number(2)
        options.set_max_background_jobs(1)
        options.set_keep_log_file_num(2)
        options.set_max_log_file_size(1 << 20)
        options.set_compression_type(rocksdict.DBCompressionType.none())  # signatures and fingerprints: random
        table = rocksdict.BlockBasedOptions()
        table.set_block_cache(rocksdict.Cache(cache_bytes))
        table.set_bloom_filter(10, False)  # most lookups are of fingerprints not seen yet
        table.set_cache_index_and_filter_blocks(False)  # in the cache they cost 2x the CPU (evicted, read again)
        table.set_pin_l0_filter_and_index_blocks_in_cache(True)
        options.set_block_based_table_factory(table)
        try:
            self._db: rocksdict.Rdict | None = rocksdict.Rdict(str(self.directory), options=options)
        except Exception as exc:  # rocksdict raises plain exceptions: a lock held, a corrupt file
            raise SeenStateError(f"{self.directory}: cannot open the content set ({exc})") from exc
        self._unsynced = rocksdict.WriteOptions()
        self._unsynced.sync = False
        counts = {}
        for table_number in counted:
            stored = self._db.get(bytes((_COUNT_TABLE, table_number)))
            counts[table_number] = _COUNT.unpack(stored)[0] if stored is not None else 0
        self._pending = _Pending(counted, counts)
        self._filtered = frozenset(filtered)
        self._filter = KeyFilter(filter_bytes)
        for table_number in sorted(self._filtered):
            keys = self._keys(table_number)
            while self._filter.on:
                chunk = list(itertools.islice(keys, 1 << 16))
                if not chunk:
                    break
                self._filter.add_many(chunk)

    def _keys(self, table: int) -> Iterator[bytes]:
        """The committed keys of `table`, with its number in front."""
        options = rocksdict.ReadOptions()
        if table < 255:
            options.set_iterate_upper_bound(bytes((table + 1,)))
        iterator = self._open().iter(options)
        iterator.seek(bytes((table,)))
        while iterator.valid():
            yield iterator.key()
            iterator.next()

    def __repr__(self) -> str:
        return f"RocksContentStore({str(self.directory)!r}, {len(self._pending.writes)} uncommitted)"

    def _open(self) -> rocksdict.Rdict:
        if self._db is None:
            raise SeenStateError(f"{self.directory}: the content set is closed")
        return self._db

    def get(self, table: int, key: bytes) -> bytes | None:
        full = bytes((table,)) + key
        writes = self._pending.writes
        if full in writes:
            return writes[full]
        if table in self._filtered and not self._filter.may_hold(full):
            return None
        value: bytes | None = self._open().get(full)
        return value

    def get_many(self, table: int, keys: list[bytes]) -> list[bytes | None]:
        prefix = bytes((table,))
        full = [prefix + key for key in keys]
        writes = self._pending.writes
        if table in self._filtered:
            asked = self._filter.may_hold_any([key for key in full if key not in writes])
            if not asked:  # the common case: no band of a page shared with another
                return [writes.get(key) for key in full]
        else:
            asked = full
        db = self._open()
        found = cast(list[bytes | None], db.get(cast(list[Any], asked)))  # MultiGet: half the cost of gets
        stored = dict(zip(asked, found, strict=True))
        return [writes[key] if key in writes else stored.get(key) for key in full]

    def put(self, table: int, key: bytes, value: bytes) -> None:
        if table in self._pending.counted:
            self._pending.note(table, self.get(table, key) is not None, True)
        self._pending.writes[bytes((table,)) + key] = value

    def put_many(self, table: int, items: list[tuple[bytes, bytes]]) -> None:
        if table in self._pending.counted:
            for key, value in items:
                self.put(table, key, value)
            return
        prefix = bytes((table,))
        self._pending.writes.update([(prefix + key, value) for key, value in items])

    def delete(self, table: int, key: bytes) -> None:
        if table in self._pending.counted:
            self._pending.note(table, self.get(table, key) is not None, False)
        self._pending.writes[bytes((table,)) + key] = None

    def values(self, table: int) -> Iterator[bytes]:
        prefix = bytes((table,))
        writes = dict(self._pending.writes)
        options = rocksdict.ReadOptions()
        if table < 255:
            options.set_iterate_upper_bound(bytes((table + 1,)))
        iterator = self._open().iter(options)
        iterator.seek(prefix)
        while iterator.valid():
            key = iterator.key()
            if key[:1] != prefix:
                break
            if key in writes:
                value = writes.pop(key)
                if value is not None:
                    yield value
            else:
                yield iterator.value()
            iterator.next()
        for key, value in writes.items():
            if key[:1] == prefix and value is not None:
                yield value

    def count(self, table: int) -> int:
        return self._pending.count(table)

    def commit(self) -> None:
        pending = self._pending
        if not pending.writes:
            return
        batch = rocksdict.WriteBatch(raw_mode=True)
        for key, value in pending.writes.items():
            if value is None:
                batch.delete(key)
            else:
                batch.put(key, value)
        for table_number, count in pending.counts.items():
            batch.put(bytes((_COUNT_TABLE, table_number)), _COUNT.pack(count))
        try:
            self._open().write(batch, self._unsynced)
        except Exception as exc:  # rocksdict raises plain exceptions for I/O errors
            raise _os_error(self.directory, exc) from exc
        if self._filtered and self._filter.on:  # reads look in `pending` first: its keys need no filter before
            filtered = self._filtered
            self._filter.add_many(
                [key for key, value in pending.writes.items() if value is not None and key[0] in filtered]
            )
        pending.writes.clear()

    def sync(self) -> None:
        self.commit()
        try:
            self._open().flush_wal(True)
        except Exception as exc:
            raise _os_error(self.directory, exc) from exc

    def close(self) -> None:
        if self._db is None:
            return
        self.sync()
        self._db.close()
        self._db = None

    def abandon(self) -> None:
        if self._db is None:
            return
        self._pending.writes.clear()
        self._db.close()
        self._db = None

    def disk_bytes(self) -> int:
        return sum(path.stat().st_size for path in self.directory.iterdir() if path.is_file())


def _os_error(directory: Path, exc: Exception) -> OSError:
    """RocksDB's I/O error as the OSError the engine handles (ENOSPC stops the crawl as disk-full)."""
    text = str(exc)
    code = errno.ENOSPC if "No space left" in text else errno.EDQUOT if "quota" in text.lower() else errno.EIO
    return OSError(code, f"{directory}: the content set could not be written ({text})")


class MemoryContentStore:
    """A ContentStore in dicts, for tests: `committed` is what a reopened store would find."""

    def __init__(self, *, counted: Iterable[int] = (), committed: dict[bytes, bytes] | None = None) -> None:
        self.committed: dict[bytes, bytes] = {} if committed is None else committed
        self.commits = 0
        self.syncs = 0
        self.closed = False
        counts: dict[int, int] = {}
        for table in counted:
            counts[table] = sum(1 for key in self.committed if key[0] == table)
        self._pending = _Pending(counted, counts)

    def __repr__(self) -> str:
        return f"MemoryContentStore({len(self.committed)} committed, {len(self._pending.writes)} uncommitted)"

    def reopened(self) -> MemoryContentStore:
        """A new store over what this one committed (as after a crash or a close)."""
        return MemoryContentStore(counted=self._pending.counted, committed=self.committed)

    def get(self, table: int, key: bytes) -> bytes | None:
        full = bytes((table,)) + key
        if full in self._pending.writes:
            return self._pending.writes[full]
        return self.committed.get(full)

    def get_many(self, table: int, keys: list[bytes]) -> list[bytes | None]:
        return [self.get(table, key) for key in keys]

    def put(self, table: int, key: bytes, value: bytes) -> None:
        self._pending.note(table, self.get(table, key) is not None, True)
        self._pending.writes[bytes((table,)) + key] = value

    def put_many(self, table: int, items: list[tuple[bytes, bytes]]) -> None:
        for key, value in items:
            self.put(table, key, value)

    def delete(self, table: int, key: bytes) -> None:
        self._pending.note(table, self.get(table, key) is not None, False)
        self._pending.writes[bytes((table,)) + key] = None

    def values(self, table: int) -> Iterator[bytes]:
        merged = {**self.committed, **self._pending.writes}
        for key in sorted(merged):
            value = merged[key]
            if key[0] == table and value is not None:
                yield value

    def count(self, table: int) -> int:
        return self._pending.count(table)

    def commit(self) -> None:
        for key, value in self._pending.writes.items():
            if value is None:
                self.committed.pop(key, None)
            else:
                self.committed[key] = value
        self._pending.writes.clear()
        self.commits += 1

    def sync(self) -> None:
        self.commit()
        self.syncs += 1

    def close(self) -> None:
        self.sync()
        self.closed = True

    def abandon(self) -> None:
        self._pending.writes.clear()
        self._pending = _Pending(self._pending.counted, {t: self.reopened().count(t) for t in self._pending.counted})
        self.closed = True

    def disk_bytes(self) -> int:
        return sum(len(key) + len(value) for key, value in self.committed.items())


LMDB_TABLES = (b"fp", b"url", b"band", b"meta", b"oracle", b"nearband", b"nearsig", b"nearof")
"""The named databases of the LMDB content sets of crawls made before this store, in table order."""
LMDB_MULTI = (b"band", b"nearband")


def migrate_lmdb(directory: Path, store: ContentStore, numbers: dict[bytes, int]) -> bool:
    """Copy an LMDB content set (a crawl begun before this store) in `directory` into `store`, then
    remove its files; False if there is none. The values are the same bytes; a band table's values
    for one key (LMDB dupsort) become one value of concatenated members, as ContentSeen keeps them."""
    data = directory / "data.mdb"
    if not data.exists():
        return False
    import lmdb

    try:
        env = lmdb.open(str(directory), readonly=True, lock=False, max_dbs=len(LMDB_TABLES), subdir=True)
    except lmdb.Error as exc:
        raise SeenStateError(f"{directory}: cannot read the LMDB content set to migrate it ({exc})") from exc
    try:
        with env.begin() as txn:
            for name in LMDB_TABLES:
                try:
                    database = env.open_db(name, txn=txn, create=False, dupsort=name in LMDB_MULTI)
                except lmdb.NotFoundError:
                    continue  # a table the crawl's version did not have yet
                table = numbers[name]
                with txn.cursor(db=database) as cursor:
                    if name in LMDB_MULTI:
                        for key, group in itertools.groupby(cursor.iternext(), key=lambda pair: bytes(pair[0])):
                            store.put(table, key, b"".join(bytes(value) for _, value in group))
                    else:
                        for key, value in cursor.iternext():
                            store.put(table, bytes(key), bytes(value))
                store.commit()
    except lmdb.Error as exc:
        raise SeenStateError(f"{directory}: cannot read the LMDB content set to migrate it ({exc})") from exc
    finally:
        env.close()
    store.sync()
    for leftover in ("data.mdb", "lock.mdb"):
        (directory / leftover).unlink(missing_ok=True)
    return True
