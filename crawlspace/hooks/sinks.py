"""Item sinks: JSON Lines, Parquet, and any function of yours.

Sinks run on the event loop, so each write is a buffered append; the expensive part (Parquet row
groups, zstd) happens once per `batch_rows` items. Files appear where you asked: a JSONL file is
written as items arrive (flushed at least every `flush_seconds`, so a crash loses at most that),
a Parquet file is written to `PATH.partial` and renamed at `close` (a Parquet file without its
footer is unreadable anyway, so a half-written one is never left under the final name).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, cast

import msgspec

from crawlspace.hooks.protocols import Item, ItemSink, hook_name


class ItemsLost(RuntimeError):
    """A sink lost `count` items at once (a batch that could not be written); counted as such."""

    def __init__(self, message: str, count: int) -> None:
        super().__init__(message)
        self.count = count


class JsonlSink:
    """One JSON object per line (UTF-8), in emission order; `append=True` keeps what the file held.

    `select(item)`, when given, picks the items this sink writes (every sink is offered every item).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        select: Callable[[Item], bool] | None = None,
        append: bool = False,
        flush_seconds: float = 1.0,
    ) -> None:
        self.path = Path(path)
        self.select = select
        self.name = f"jsonl:{self.path.name}"
        self.items = 0
        self._mode = "ab" if append else "wb"
        self._flush_seconds = flush_seconds
        self._encoder = msgspec.json.Encoder()
        self._handle: IO[bytes] | None = None
        self._tried = False  # a write tried to open the file
        self._last_flush = time.monotonic()

    def write(self, item: Item) -> None:
        if self.select is not None and not self.select(item):
            return
        line = self._encoder.encode(item) + b"\n"  # encode first: an item that cannot be encoded writes nothing
        if self._handle is None:
            self._tried = True
            self._handle = open(self.path, self._mode)  # noqa: SIM115 - kept open across writes, closed in close()
        self._handle.write(line)
        self.items += 1
        now = time.monotonic()
        if now - self._last_flush >= self._flush_seconds:
            self._handle.flush()
            self._last_flush = now

    def close(self) -> None:
        if self._handle is None:
            if self._tried:  # the file could not be opened: its writes were reported already
                return
            self._handle = open(self.path, self._mode)  # noqa: SIM115 - no item: the file says so
        handle, self._handle = self._handle, None
        handle.close()

    def __repr__(self) -> str:
        return f"JsonlSink({str(self.path)!r}, items={self.items})"


class ParquetSink:
    """Rows of a Parquet file (zstd), one row group per `batch_rows` items.

    The schema is `schema` (a pyarrow.Schema) or, when not given, inferred from the first
    `batch_rows` items. An item with a key the schema lacks, or a value of another type, is
    refused (reported and counted) rather than silently cut; a missing key is a null. Give the
    schema when a column may be empty in the first items (pyarrow would type it `null`).
    `select(item)`, when given, picks the items this sink writes (every sink is offered every item).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        select: Callable[[Item], bool] | None = None,
        schema: Any = None,
        batch_rows: int = 5000,
    ) -> None:
        import pyarrow as pa

        if batch_rows < 1:
            raise ValueError("batch_rows must be at least 1")
        self._pa = pa
        self.path = Path(path)
        self.select = select
        self.name = f"parquet:{self.path.name}"
        self.items = 0
        self._schema: Any = schema
        self._batch_rows = batch_rows
        self._untyped: list[dict[str, Any]] = []  # rows waiting for the schema to be inferred
        self._batches: list[Any] = []  # one-row record batches checked against the schema
        self._writer: Any = None
        self._partial = self.path.with_name(self.path.name + ".partial")

    @property
    def schema(self) -> Any:
        return self._schema

    def write(self, item: Item) -> None:
        if self.select is not None and not self.select(item):
            return
        row = dict(item)
        if self._schema is None:
            self._untyped.append(row)
            if len(self._untyped) >= self._batch_rows:
                self._infer_and_flush()
            return
        self._batches.append(self._checked(row))
        if len(self._batches) >= self._batch_rows:
            self._flush()

    def close(self) -> None:
        try:
            if self._schema is None:
                self._infer_and_flush()
            self._flush()
        finally:
            if self._writer is not None:
                writer, self._writer = self._writer, None
                writer.close()
                self._partial.replace(self.path)

    def _checked(self, row: dict[str, Any]) -> Any:
        extra = [key for key in row if key not in self._schema.names]
        if extra:
            raise ValueError(f"columns not in the Parquet schema: {', '.join(map(repr, extra))}")
        return self._pa.RecordBatch.from_pylist([row], schema=self._schema)

    def _infer_and_flush(self) -> None:
        pa = self._pa
        rows, self._untyped = self._untyped, []
        if not rows:
            if self._schema is None and self._writer is None:
                self._schema = pa.schema([])  # nothing was emitted: an empty file with no columns
            return
        try:
            self._schema = pa.Table.from_pylist(rows).schema
        except (pa.ArrowException, TypeError, ValueError):  # rows disagree: the first one decides
            self._schema = pa.Table.from_pylist(rows[:1]).schema
        refused: list[str] = []
        for row in rows:
            try:
                self._batches.append(self._checked(row))
            except (pa.ArrowException, TypeError, ValueError) as exc:
                refused.append(f"{type(exc).__name__}: {exc}")
        self._flush()
        if refused:
            raise ItemsLost(f"{len(refused)} items do not fit the inferred schema; first: {refused[0]}", len(refused))

    def _flush(self) -> None:
        import pyarrow.parquet as pq

        pa = self._pa
        batches, self._batches = self._batches, []
        try:
            if self._writer is None:
                self._writer = pq.ParquetWriter(self._partial, self._schema, compression="zstd")
            if batches:
                self._writer.write_table(pa.Table.from_batches(batches, schema=self._schema))
        except (OSError, pa.ArrowException) as exc:
            raise ItemsLost(f"a row group of {len(batches)} items could not be written: {exc}", len(batches)) from exc
        self.items += len(batches)

    def __repr__(self) -> str:
        return f"ParquetSink({str(self.path)!r}, items={self.items})"


class FunctionSink:
    """Your function as a sink: `fn(item)` for each item (that `select` picks, if given); nothing to close."""

    def __init__(
        self,
        function: Callable[[Item], object],
        *,
        select: Callable[[Item], bool] | None = None,
        name: str | None = None,
    ) -> None:
        self._function = function
        self.select = select
        self.name = name or hook_name(function)
        self.items = 0

    def write(self, item: Item) -> None:
        if self.select is not None and not self.select(item):
            return
        self._function(item)
        self.items += 1

    def close(self) -> None:
        return None

    def __repr__(self) -> str:
        return f"FunctionSink({self.name})"


def as_sink(sink: object) -> ItemSink:
    """A sink object as it is, a function wrapped in FunctionSink; TypeError for anything else."""
    if callable(getattr(sink, "write", None)) and callable(getattr(sink, "close", None)):
        return cast(ItemSink, sink)
    if callable(sink):
        return FunctionSink(sink)
    raise TypeError(f"not an item sink (needs write(item) and close(), or be a function): {sink!r}")
