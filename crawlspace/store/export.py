"""Export the fetched pages of a crawl table as JSON Lines or Parquet for DuckDB, pandas, Spark.

One record per fetched URL (rows that only hold anchors are pages never fetched and are left
out): url, status, fetch_time (UTC), title, text, outlinks, plus content_type and duplicate_of.
When the crawl kept only WARC pointers (`store_text = false`), the text is extracted again from
the WARC response the pointer names. Parquet is written in row groups of `batch_rows` with zstd
so that memory stays flat however large the crawl.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import msgspec

from crawlspace.fetch.decode import DecodeError, decode_body
from crawlspace.parse import parse_html
from crawlspace.store.crawltable import Row
from crawlspace.store.pagestore import TABLE_DIR, WARC_DIR
from crawlspace.store.shards import open_crawl_table, table_shards
from crawlspace.store.warc import Capture, WarcFormatError, parse_http_response, read_record

FORMATS = ("jsonl", "parquet")
_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml", ""})


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


def _text_from_warc(warc_dir: Path, pointer: list[Any], max_bytes: int) -> tuple[str | None, str | None]:
    """(title, text) parsed again from the WARC response a content pointer names."""
    capture = Capture.from_list(pointer)
    try:
        record = read_record(warc_dir / capture.filename, capture.offset, capture.length)
        if record.type != "response":
            return None, None
        _, headers, body = parse_http_response(record.block)
    except (OSError, WarcFormatError):
        return None, None
    content_type = headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type not in _HTML_TYPES:
        return None, None
    try:
        content = decode_body(body, headers.get("content-encoding"), max_bytes)
    except DecodeError:
        return None, None
    page = parse_html(content, record.headers.get("warc-target-uri", ""), headers.get("content-type"), None)
    return page.title, page.text


def page_records(crawl_dir: str | Path, *, max_body_bytes: int = 10 * 1024 * 1024) -> Iterator[PageRecord]:
    crawl_dir = Path(crawl_dir)
    if not table_shards(crawl_dir):
        raise ExportError(f"no crawl table in {crawl_dir} (expected {crawl_dir / TABLE_DIR})")
    with open_crawl_table(crawl_dir) as table:
        for row in table.scan("", family=("title", "content", "fetch")):
            record = _record_of(row, crawl_dir / WARC_DIR, max_body_bytes)
            if record is not None:
                yield record


def _record_of(row: Row, warc_dir: Path, max_body_bytes: int) -> PageRecord | None:
    fetch = row.fetch
    if fetch is None:
        return None
    title, text = row.title, row.text
    pointer = row.latest("content", "warc")
    if text is None and pointer and fetch.get("status") == 200 and not fetch.get("duplicate_of"):
        title, text = _text_from_warc(warc_dir, pointer, max_body_bytes)
    return PageRecord(
        url=row.url,
        status=int(fetch.get("status", 0)),
        fetch_time=datetime.fromtimestamp(float(fetch.get("fetched", 0.0)), UTC),
        title=title,
        text=text,
        outlinks=[target for target, _ in row.outlinks],
        content_type=fetch.get("content_type"),
        duplicate_of=fetch.get("duplicate_of"),
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
        return _atomically(target, lambda handle: _write_jsonl(records, handle)), target
    if target == "-":
        raise ExportError("Parquet cannot be written to stdout; give --output FILE")
    return _atomically(target, lambda handle: _write_parquet(records, handle, batch_rows)), target


def _atomically(target: str, write: Any) -> int:
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
