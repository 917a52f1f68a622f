"""Which embedded store holds the crawl table: SQLite, LMDB or RocksDB, measured on its own workload.

The workload is the crawl table's: per page a title, a zstd-compressed text, a WARC pointer, a
fetch cell and the outlinks on the page's row, plus one anchor cell on the row of each link's
target (random rows), written in batches of `--batch` pages, one transaction each; then point
reads of whole rows and prefix scans of hosts. Prints pages/s written, bytes on disk per page
and reads per second, side by side in one run.

    python bench/store/table_backends.py --pages 20000
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sqlite3
import struct
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

import lmdb
import msgspec
import zstandard

sys.path.insert(0, str(Path(__file__).parent))
from pages import PageFactory

try:
    import rocksdict
except ImportError:  # the table does not depend on it; measured only where installed
    rocksdict = None

MAX_TS = (1 << 64) - 1


class Backend(Protocol):
    name: str

    def write(self, items: list[tuple[bytes, bytes]]) -> None: ...
    def scan(self, start: bytes, stop: bytes) -> Iterator[tuple[bytes, bytes]]: ...
    def close(self) -> None: ...


class SqliteBackend:
    name = "sqlite"

    def __init__(self, path: Path) -> None:
        self.db = sqlite3.connect(path / "table.sqlite", isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("CREATE TABLE IF NOT EXISTS cells (k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID")

    def write(self, items: list[tuple[bytes, bytes]]) -> None:
        self.db.execute("BEGIN")
        self.db.executemany("INSERT OR REPLACE INTO cells VALUES (?, ?)", items)
        self.db.execute("COMMIT")

    def scan(self, start: bytes, stop: bytes) -> Iterator[tuple[bytes, bytes]]:
        yield from self.db.execute("SELECT k, v FROM cells WHERE k >= ? AND k < ? ORDER BY k", (start, stop))

    def close(self) -> None:
        self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self.db.close()


class LmdbBackend:
    name = "lmdb"

    def __init__(self, path: Path) -> None:
        self.env = lmdb.open(str(path / "table.lmdb"), map_size=1 << 36, sync=True, writemap=False)

    def write(self, items: list[tuple[bytes, bytes]]) -> None:
        with self.env.begin(write=True) as txn:
            cursor = txn.cursor()
            cursor.putmulti(items)

    def scan(self, start: bytes, stop: bytes) -> Iterator[tuple[bytes, bytes]]:
        with self.env.begin() as txn:
            cursor = txn.cursor()
            if cursor.set_range(start):
                for key, value in cursor:
                    if key >= stop:
                        break
                    yield key, value

    def close(self) -> None:
        self.env.close()


class RocksBackend:
    name = "rocksdb"

    def __init__(self, path: Path) -> None:
        assert rocksdict is not None
        options = rocksdict.Options(raw_mode=True)
        options.create_if_missing(True)
        options.set_compression_type(rocksdict.DBCompressionType.lz4())
        options.set_bottommost_compression_type(rocksdict.DBCompressionType.zstd())
        self.db = rocksdict.Rdict(str(path / "table.rocks"), options=options)

    def write(self, items: list[tuple[bytes, bytes]]) -> None:
        batch = rocksdict.WriteBatch(raw_mode=True)
        for key, value in items:
            batch.put(key, value)
        self.db.write(batch)

    def scan(self, start: bytes, stop: bytes) -> Iterator[tuple[bytes, bytes]]:
        iterator = self.db.iter()
        iterator.seek(start)
        while iterator.valid():
            key = iterator.key()
            if key >= stop:
                break
            yield key, iterator.value()
            iterator.next()

    def close(self) -> None:
        self.db.flush()
        self.db.close()


def rowkey(url: str) -> bytes:
    rest = url.split("://", 1)[1]
    host, _, path = rest.partition("/")
    return (".".join(reversed(host.split("."))) + ":http/" + path).encode()


def cell(row: bytes, family: int, qualifier: bytes, ts: int) -> bytes:
    return row + b"\x00" + bytes((family,)) + qualifier + b"\x00" + struct.pack(">Q", MAX_TS - ts)


def workload(pages: int, batch: int) -> Iterator[list[tuple[bytes, bytes]]]:
    factory = PageFactory(seed=11, hosts=max(10, pages // 100), pages_per_host=200)
    compressor = zstandard.ZstdCompressor(level=3)
    encoder = msgspec.msgpack.Encoder()
    template = factory.pages(200, size=25_000, links=20)
    items: list[tuple[bytes, bytes]] = []
    for number in range(pages):
        page = template[number % len(template)]
        url = factory.url(number % factory.hosts, number // factory.hosts)
        row = rowkey(url)
        ts = 1_700_000_000_000_000 + number
        items.append((cell(row, 1, b"", ts), page.title.encode()))
        items.append((cell(row, 2, b"text", ts), compressor.compress(page.text.encode())))
        items.append((cell(row, 2, b"warc", ts), encoder.encode(["crawl-20260101-00001.warc.gz", number * 9000, 9000])))
        items.append((cell(row, 2, b"outlinks", ts), compressor.compress(encoder.encode(page.links))))
        items.append((cell(row, 4, b"", ts), encoder.encode({"status": 200, "fp": number, "time": ts, "etag": "x"})))
        for _href, text in page.links:
            target = rowkey(factory.random_url())
            items.append((cell(target, 3, row, ts), text.encode()))
        if (number + 1) % batch == 0:
            items.sort()
            yield items
            items = []
    if items:
        items.sort()
        yield items


def directory_bytes(path: Path) -> int:
    return sum(entry.stat().st_size for entry in path.rglob("*") if entry.is_file())


def run(backend_type: type, pages: int, batch: int, batches: list[list[tuple[bytes, bytes]]]) -> dict[str, float]:
    root = Path(tempfile.mkdtemp(prefix="table-bench-"))
    try:
        backend = backend_type(root)
        started = time.perf_counter()
        for items in batches:
            backend.write(items)
        write_seconds = time.perf_counter() - started
        backend.close()
        size = directory_bytes(root)
        backend = backend_type(root)
        rows = [
            rowkey(PageFactory(seed=3).url(i % max(10, pages // 100), i // max(10, pages // 100))) for i in range(2000)
        ]
        random.Random(5).shuffle(rows)
        started = time.perf_counter()
        cells = 0
        for row in rows:
            cells += sum(1 for _ in backend.scan(row + b"\x00", row + b"\x01"))
        get_seconds = time.perf_counter() - started
        started = time.perf_counter()
        scanned = sum(1 for _ in backend.scan(b"com.example.site1", b"com.example.site2"))
        scan_seconds = time.perf_counter() - started
        backend.close()
        return {
            "pages_per_s": pages / write_seconds,
            "bytes_per_page": size / pages,
            "row_gets_per_s": len(rows) / get_seconds,
            "scan_cells_per_s": scanned / scan_seconds,
            "cells_read": cells,
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=500)
    args = parser.parse_args()
    batches = list(workload(args.pages, args.batch))
    cells = sum(len(items) for items in batches)
    payload = sum(len(k) + len(v) for items in batches for k, v in items)
    print(f"{args.pages} pages, {cells} cells, {payload / args.pages:.0f} B of keys+values per page, pid {os.getpid()}")
    backends: list[type] = [SqliteBackend, LmdbBackend] + ([RocksBackend] if rocksdict is not None else [])
    for backend_type in backends:
        result = run(backend_type, args.pages, args.batch, batches)
        cells_per_s = result["pages_per_s"] * cells / args.pages
        print(
            f"{backend_type.name:8s} write {result['pages_per_s']:8.0f} pages/s ({cells_per_s:9.0f} cells/s)"
            f"  disk {result['bytes_per_page']:7.0f} B/page  row gets {result['row_gets_per_s']:7.0f}/s"
            f"  scan {result['scan_cells_per_s']:8.0f} cells/s"
        )


if __name__ == "__main__":
    main()
