"""Reading the crawl table of a crawl made by several processes: one shard per partition, one view.

Each partition of a crawl (crawl.workers) writes its own RocksDB shard (one writer per database),
DIR/workers/<k>/table. A page's row lives in its host's partition, but anchor cells land in the
shard of the partition that parsed the linking page, so a row can be spread over shards. This view
merges them: `get` unites the cells of a key from every shard (newest first per column, within the
version limit asked), `scan` merges the shards' key-ordered streams. A single-process crawl has
DIR/table, read directly. The shards of several crawl directories (several nodes) merge the same
way; `reader.open_table` decides which tables to open, and everyone reads through `reader.CrawlReader`.
"""

from __future__ import annotations

import contextlib
import heapq
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType

from crawlspace.store.crawltable import CrawlTable, CrawlTableError, Row
from crawlspace.store.pagestore import TABLE_DIR

_FINER = 4
WORKERS_DIR = "workers"
"""Where a crawl of several processes keeps each one's state: DIR/workers/<k>/ (crawl.workers)."""


def table_shards(crawl_dir: Path) -> list[Path]:
    """The table directories of a crawl directory (one, or one per partition)."""
    shards = sorted(
        (path / TABLE_DIR for path in (crawl_dir / WORKERS_DIR).glob("*") if (path / TABLE_DIR).is_dir()),
        key=lambda path: int(path.parent.name) if path.parent.name.isdigit() else 0,
    )
    if (crawl_dir / TABLE_DIR).is_dir():
        shards.insert(0, crawl_dir / TABLE_DIR)
    return shards


class ShardedTable:
    """Read-only union of table shards: a `reader.TableReader`, as one `CrawlTable` is."""

    def __init__(self, paths: Sequence[Path]) -> None:
        if not paths:
            raise CrawlTableError("no crawl table")
        self.tables: list[CrawlTable] = []
        try:
            for path in paths:
                self.tables.append(CrawlTable(path, readonly=True))
        except BaseException:
            self.close()
            raise

    def get(self, url: str, family: str | Sequence[str] | None = None, versions: int | None = 1) -> Row | None:
        rows = [row for table in self.tables if (row := table.get(url, family=family, versions=versions)) is not None]
        return _merge(rows, versions)

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
        streams = [
            table.scan(prefix, start=start, stop=stop, family=family, versions=versions) for table in self.tables
        ]
        merged = heapq.merge(*streams, key=lambda row: row.key)
        count = 0
        group: list[Row] = []
        for row in merged:
            if group and row.key != group[0].key:
                yield _merged(group, versions)
                count += 1
                if limit is not None and count >= limit:
                    return
                group = []
            group.append(row)
        if group and (limit is None or count < limit):
            yield _merged(group, versions)

    def split_keys(self, parts: int) -> list[str]:
        """Quantiles of the union, from each shard's own: the shards of one crawl hold similar shares of
        the rows (hosts are hashed to partitions), so the merged cut points of all shards are about
        evenly spread over the union's rows, and every (len / parts)-th of them is kept. Each shard
        is asked for `_FINER` times as many as wanted, which keeps the ranges within about a
        `_FINER`-th of a range of equal."""
        if parts < 2:
            return []
        keys = sorted({key for table in self.tables for key in table.split_keys(parts * _FINER)})
        if len(keys) < parts:
            return keys
        return [keys[len(keys) * number // parts] for number in range(1, parts)]

    def close(self) -> None:
        for table in self.tables:
            with contextlib.suppress(Exception):
                table.close()

    def __enter__(self) -> ShardedTable:
        return self

    def __exit__(self, *exc: object | type[BaseException] | TracebackType | None) -> None:
        self.close()


def _merge(rows: list[Row], versions: int | None) -> Row | None:
    return _merged(rows, versions) if rows else None


def _merged(rows: list[Row], versions: int | None) -> Row:
    if len(rows) == 1:
        return rows[0]
    cells = sorted(
        (cell for row in rows for cell in row.cells), key=lambda cell: (cell.family, cell.qualifier, -cell.timestamp)
    )
    kept = []
    per_column: dict[tuple[str, str], int] = {}
    for cell in cells:
        column = (cell.family, cell.qualifier)
        seen = per_column.get(column, 0)
        if versions is None or seen < versions:
            kept.append(cell)
            per_column[column] = seen + 1
    return Row(rows[0].key, kept)
