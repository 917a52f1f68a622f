"""The built-in item sinks: what they write, what they refuse, and that a failure loses only what it must."""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from crawlspace.hooks import FunctionSink, ItemsLost, JsonlSink, ParquetSink
from crawlspace.hooks.sinks import as_sink


def test_jsonl_lines_in_order_and_unencodable_items_write_nothing(tmp_path: Path) -> None:
    path = tmp_path / "items.jsonl"
    sink = JsonlSink(path)
    sink.write({"url": "http://a.test/", "n": 1, "when": datetime.datetime(2026, 1, 2, tzinfo=datetime.UTC)})
    with pytest.raises(TypeError):
        sink.write({"bad": object()})
    sink.write({"url": "http://b.test/", "tags": ["x", "y"]})
    sink.close()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines == [
        {"url": "http://a.test/", "n": 1, "when": "2026-01-02T00:00:00Z"},
        {"url": "http://b.test/", "tags": ["x", "y"]},
    ]
    assert sink.items == 2


def test_jsonl_select_append_and_empty(tmp_path: Path) -> None:
    path = tmp_path / "items.jsonl"
    path.write_text('{"old": true}\n')
    sink = JsonlSink(path, append=True, select=lambda item: item["kind"] == "page")
    sink.write({"kind": "page"})
    sink.write({"kind": "link"})
    sink.close()
    assert path.read_text().splitlines() == ['{"old": true}', '{"kind":"page"}']
    empty = JsonlSink(tmp_path / "empty.jsonl")
    empty.close()
    assert (tmp_path / "empty.jsonl").read_text() == ""  # the crawl ran and found nothing


def test_jsonl_flushes_while_running(tmp_path: Path) -> None:
    path = tmp_path / "items.jsonl"
    sink = JsonlSink(path, flush_seconds=0)
    sink.write({"n": 1})
    assert path.read_text() == '{"n":1}\n'  # on disk before close: a crash keeps it
    sink.close()


def test_parquet_infers_schema_writes_row_groups_and_renames_at_close(tmp_path: Path) -> None:
    path = tmp_path / "items.parquet"
    sink = ParquetSink(path, batch_rows=2)
    for number in range(5):
        sink.write({"url": f"http://a.test/{number}", "n": number, "words": ["a"] * number})
    assert not path.exists() and (tmp_path / "items.parquet.partial").exists()  # no footer yet
    sink.close()
    assert not (tmp_path / "items.parquet.partial").exists()
    file = pq.ParquetFile(path)
    assert file.metadata.num_rows == 5 and file.metadata.num_row_groups == 3
    table = file.read()
    assert table.column("n").to_pylist() == [0, 1, 2, 3, 4]
    assert table.schema.field("words").type == pa.list_(pa.string())
    assert sink.items == 5


def test_parquet_refuses_what_does_not_fit_the_schema(tmp_path: Path) -> None:
    path = tmp_path / "items.parquet"
    sink = ParquetSink(path, schema=pa.schema([("url", pa.string()), ("n", pa.int64())]))
    sink.write({"url": "http://a.test/", "n": 1})
    sink.write({"url": "http://b.test/"})  # a missing column is a null
    with pytest.raises(ValueError, match="not in the Parquet schema: 'extra'"):
        sink.write({"url": "http://c.test/", "n": 3, "extra": 1})
    with pytest.raises((pa.ArrowInvalid, pa.ArrowTypeError, TypeError)):
        sink.write({"url": "http://d.test/", "n": "four"})
    sink.close()
    assert pq.read_table(path).to_pylist() == [{"url": "http://a.test/", "n": 1}, {"url": "http://b.test/", "n": None}]


def test_parquet_inference_from_disagreeing_rows_loses_only_the_misfits(tmp_path: Path) -> None:
    sink = ParquetSink(tmp_path / "items.parquet", batch_rows=3)
    sink.write({"n": 1})
    sink.write({"n": "two"})
    with pytest.raises(ItemsLost) as lost:
        sink.write({"n": 3})
    assert lost.value.count == 1
    sink.close()
    assert pq.read_table(tmp_path / "items.parquet").column("n").to_pylist() == [1, 3]


def test_parquet_without_items_leaves_an_empty_file(tmp_path: Path) -> None:
    sink = ParquetSink(tmp_path / "none.parquet", select=lambda item: False)
    sink.write({"n": 1})
    sink.close()
    assert pq.read_table(tmp_path / "none.parquet").num_rows == 0


def test_parquet_write_failure_counts_the_batch(tmp_path: Path) -> None:
    directory = tmp_path / "gone"
    directory.mkdir()
    sink = ParquetSink(directory / "items.parquet", batch_rows=2)
    sink.write({"n": 1})
    directory.rmdir()
    with pytest.raises(ItemsLost, match="2 items") as lost:
        sink.write({"n": 2})
    assert lost.value.count == 2


def test_function_sink_and_as_sink() -> None:
    seen: list[object] = []
    sink = as_sink(seen.append)
    assert isinstance(sink, FunctionSink) and sink.name == "append"
    sink.write({"n": 1})
    sink.close()
    assert seen == [{"n": 1}]
    chosen = FunctionSink(seen.append, select=lambda item: item["n"] > 1, name="big")
    chosen.write({"n": 1})
    chosen.write({"n": 2})
    assert seen == [{"n": 1}, {"n": 2}] and chosen.items == 1 and chosen.name == "big"
    with pytest.raises(TypeError, match="not an item sink"):
        as_sink(42)
