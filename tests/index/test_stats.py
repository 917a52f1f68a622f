from __future__ import annotations

from pathlib import Path

import pytest

from crawlspace.index.container import IndexFormatError
from crawlspace.index.layout import STATS, Index, build_index
from crawlspace.index.stats import CollectionStats, StatsFormatError
from tests.index.corpora import corpus


def test_statistics_read_back(tmp_path: Path) -> None:
    stats = CollectionStats.from_counts(10, [20, 300, 7], {"b": 3, "a": 10, "ß": 1})
    read = CollectionStats.read(stats.write(tmp_path / "s.cst"))
    assert read.doc_count == 10 and read.field_totals == (20, 300, 7)
    assert read.average_lengths == (2.0, 30.0, 0.7)
    assert dict(read.items()) == {"a": 10, "b": 3, "ß": 1}
    assert read.document_frequency("a") == 10 and read.document_frequency("zzz") == 0


def test_a_damaged_statistics_file_is_named_in_the_error(tmp_path: Path) -> None:
    path = CollectionStats.from_counts(3, [1, 2, 3], {"a": 1, "b": 2}).write(tmp_path / "s.cst")
    data = path.read_bytes()
    path.write_bytes(data[:-5])
    with pytest.raises(StatsFormatError, match=r"s\.cst.*truncated"):
        CollectionStats.read(path)
    damaged = bytearray(data)
    damaged[-3] ^= 1
    path.write_bytes(bytes(damaged))
    with pytest.raises(StatsFormatError, match="checksum"):
        CollectionStats.read(path)
    bigger = CollectionStats.from_counts(1, [1, 2, 3], {"a": 5})
    bigger.write(path)
    with pytest.raises(StatsFormatError, match="exceeds the document count"):
        CollectionStats.read(path)


def test_an_index_with_damaged_statistics_or_segment_does_not_open(tmp_path: Path) -> None:
    build_index(corpus(4, 200), tmp_path, shards=2)
    stats = tmp_path / STATS
    good = stats.read_bytes()
    stats.write_bytes(good[: len(good) // 2])
    with pytest.raises(IndexFormatError, match="truncated"):
        Index(tmp_path)
    stats.write_bytes(good)
    segment = next(tmp_path.glob("shard-001/*.seg"))
    segment.write_bytes(segment.read_bytes()[:100])
    with pytest.raises(IndexFormatError, match="shard-001"):
        Index(tmp_path)
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(IndexFormatError, match="unreadable manifest"):
        Index(tmp_path)
