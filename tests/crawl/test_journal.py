"""The journal: batches replay whole or not at all; a torn tail is dropped, damage in the middle is an error."""

from __future__ import annotations

from pathlib import Path

import pytest

from crawlspace.crawl import journal
from crawlspace.crawl.journal import Journal, JournalError, ReplayReport, replay


def write_batches(path: Path) -> list[list[str]]:
    batches = [
        [journal.submitted("http://a.test/1", 1, 0), journal.submitted("http://a.test/2", 1, 0)],
        [journal.admitted("http://a.test/1", 1, 0)],
        [journal.fetched("http://a.test/1", 200, "2xx", 1234), journal.done("http://a.test/1"), journal.drained()],
    ]
    with Journal(path) as log:
        for batch in batches:
            log.record(batch)
        log.record([])  # nothing to write: no batch
    return batches


def test_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "journal-1.log"
    batches = write_batches(path)
    report = ReplayReport()
    events = list(replay(path, report))
    assert [(e.kind, e.url) for e in events] == [
        ("S", "http://a.test/1"), ("S", "http://a.test/2"), ("A", "http://a.test/1"),
        ("F", "http://a.test/1"), ("D", "http://a.test/1"), ("N", "-"),
    ]  # fmt: skip
    assert events[2].fields == ("1", "0", "0", "http://a.test/1")
    assert events[3].fields == ("200", "2xx", "1234", "http://a.test/1")
    assert report.batches == len(batches) and report.events == 6 and report.torn_bytes == 0


def test_every_torn_tail_drops_only_the_last_batch(tmp_path: Path) -> None:
    path = tmp_path / "journal-1.log"
    write_batches(path)
    data = path.read_bytes()
    complete_prefixes = {0}  # offsets just after each batch's end line
    offset = 0
    for line in data.splitlines(keepends=True):
        offset += len(line)
        if line.startswith(b"E\t"):
            complete_prefixes.add(offset)
    assert max(complete_prefixes) == len(data)
    for cut in range(len(data) + 1):
        torn = tmp_path / "torn.log"
        torn.write_bytes(data[:cut])
        report = ReplayReport()
        events = list(replay(torn, report))
        whole = max(p for p in complete_prefixes if p <= cut)
        expected = list(replay_prefix(data[:whole], tmp_path))
        assert events == expected, cut
        assert report.torn_bytes == cut - whole


def replay_prefix(data: bytes, tmp_path: Path) -> list[journal.Event]:
    path = tmp_path / "prefix.log"
    path.write_bytes(data)
    return list(replay(path))


def test_damage_before_a_good_batch_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "journal-1.log"
    write_batches(path)
    data = bytearray(path.read_bytes())
    data[5] ^= 0x01  # flip a bit in the first batch
    path.write_bytes(bytes(data))
    with pytest.raises(JournalError, match="corrupt"):
        list(replay(path))


def test_missing_journal_replays_nothing(tmp_path: Path) -> None:
    assert list(replay(tmp_path / "absent.log")) == []


def test_unopenable_journal_is_named(tmp_path: Path) -> None:
    with pytest.raises(JournalError, match="cannot open journal"):
        Journal(tmp_path / "no-such-dir" / "journal-1.log")
