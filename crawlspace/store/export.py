"""Export the fetched pages of a crawl table as JSON Lines or Parquet for DuckDB, pandas, Spark.

One record per fetched URL (rows that only hold anchors are pages never fetched and are left
out): url, status, fetch_time (UTC), title, text, outlinks, plus content_type and duplicate_of,
read through `reader.CrawlReader.pages(text=True)`: when the crawl kept only WARC pointers
(`store_text = false`), the text is extracted again from the WARC response the pointer names.
Parquet is written in row groups of `batch_rows` with zstd so that memory stays flat however
large the crawl.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import msgspec

from crawlspace.store.crawltable import CrawlTableError
from crawlspace.store.reader import DEFAULT_MAX_BODY_BYTES, CrawlReader

FORMATS = ("jsonl", "parquet")


class ExportError(RuntimeError):
    """The export cannot be written (no table, bad format, unwritable output)."""


@dataclass(slots=True)
class PageRecord:
    url: str
    status: int
    fetch_time: datetime
    title: str | None
    text: str | None
    outlinks: list[str]
    content_type: str | None
    duplicate_of: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "status": self.status,
            "fetch_time": self.fetch_time.isoformat().replace("+00:00", "Z"),
            "title": self.title,
            "text": self.text,
            "outlinks": self.outlinks,
            "content_type": self.content_type,
            "duplicate_of": self.duplicate_of,
        }


def page_records(crawl_dir: str | Path, *, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> Iterator[PageRecord]:
    """The export's records, one per fetched page, read through `CrawlReader`."""
    try:
        reader = CrawlReader(crawl_dir, max_body_bytes=max_body_bytes)
    except CrawlTableError as exc:
        raise ExportError(str(exc)) from None
    with reader:
        for page in reader.pages(text=True):
            fetch = page.fetch
            yield PageRecord(
                url=page.url,
                status=fetch.status,
                fetch_time=datetime.fromtimestamp(fetch.fetched, UTC),
                title=page.title,
                text=page.text,
                outlinks=[edge.target for edge in page.outlinks],
                content_type=fetch.content_type,
                duplicate_of=fetch.duplicate_of,
            )


def export(
    crawl_dir: str | Path, fmt: str, output: str | Path | None = None, *, batch_rows: int = 2000
) -> tuple[int, str]:
    """Write the export; returns (pages written, where). `output` '-' means stdout (JSON Lines only)."""
    if fmt not in FORMATS:
        raise ExportError(f"unknown export format {fmt!r}; use one of {', '.join(FORMATS)}")
    crawl_dir = Path(crawl_dir)
    target = str(output) if output is not None else str(crawl_dir / f"export.{fmt}")
    records = page_records(crawl_dir)
    if fmt == "jsonl":
        if target == "-":
            return _write_jsonl(records, sys.stdout.buffer), "stdout"
        return write_atomically(target, lambda handle: _write_jsonl(records, handle)), target
    if target == "-":
        raise ExportError("Parquet cannot be written to stdout; give --output FILE")
    return write_atomically(target, lambda handle: _write_parquet(records, handle, batch_rows)), target


def write_atomically(target: str, write: Any) -> int:
    path = Path(target)
    temporary = path.with_name(path.name + ".partial")
    try:
        with open(temporary, "wb") as handle:
            count: int = write(handle)
    except OSError as exc:
        raise ExportError(f"cannot write {path}: {exc.strerror or exc}") from None
    temporary.replace(path)
    return count


def _write_jsonl(records: Iterator[PageRecord], handle: IO[bytes]) -> int:
    encoder = msgspec.json.Encoder()
    count = 0
    for record in records:
        handle.write(encoder.encode(record.to_json()) + b"\n")
        count += 1
    handle.flush()
    return count


def _write_parquet(records: Iterator[PageRecord], handle: IO[bytes], batch_rows: int) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema(
        [
            ("url", pa.string()),
            ("status", pa.int32()),
            ("fetch_time", pa.timestamp("us", tz="UTC")),
            ("title", pa.string()),
            ("text", pa.string()),
            ("outlinks", pa.list_(pa.string())),
            ("content_type", pa.string()),
            ("duplicate_of", pa.string()),
        ]
    )
    count = 0
    with pq.ParquetWriter(handle, schema, compression="zstd") as writer:
        batch: list[PageRecord] = []
        for record in records:
            batch.append(record)
            if len(batch) >= batch_rows:
                writer.write_batch(_arrow_batch(batch, schema))
                count += len(batch)
                batch = []
        if batch or count == 0:
            writer.write_batch(_arrow_batch(batch, schema))
            count += len(batch)
    return count


def _arrow_batch(batch: list[PageRecord], schema: Any) -> Any:
    import pyarrow as pa

    columns = {
        "url": [r.url for r in batch],
        "status": [r.status for r in batch],
        "fetch_time": [r.fetch_time for r in batch],
        "title": [r.title for r in batch],
        "text": [r.text for r in batch],
        "outlinks": [r.outlinks for r in batch],
        "content_type": [r.content_type for r in batch],
        "duplicate_of": [r.duplicate_of for r in batch],
    }
    return pa.RecordBatch.from_pydict(columns, schema=schema)
