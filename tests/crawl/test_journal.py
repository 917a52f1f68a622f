"""The journal: batches replay whole or not at all; a torn tail is dropped, damage in the middle is an error."""

from __future__ import annotations

from pathlib import Path

import pytest

from crawlspace.crawl import journal
from crawlspace.crawl.checkpoint import CrawlState
from crawlspace.crawl.journal import Journal, JournalError, ReplayReport, replay
from crawlspace.crawl.ledger import Ledger, ReplayTarget
from crawlspace.frontier.entry import FrontierEntry


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


class _Replayed:
    """The link pipeline's side of a replay, as a record of the events it was given."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def replay_submitted(self, entry: FrontierEntry) -> None:
        self.events.append(("submitted", entry.url))

    def replay_drained(self) -> None:
        self.events.append(("drained", ""))

    def replay_admitted(self, entry: FrontierEntry, *, sitemap: bool) -> None:
        self.events.append(("admitted", entry.url))


def _replay(directory: Path, generation: int) -> tuple[Ledger, list[tuple[str, str]]]:
    ledger = Ledger(directory, before_write=[], on_failure=lambda exc: None)
    links = _Replayed()
    ledger.replay(generation, ReplayTarget(links, None, lambda *fetch: None, lambda url: None))
    return ledger, links.events


def _commit(ledger: Ledger, states: list[CrawlState]) -> int:
    ledger.checkpoint([], lambda generation: CrawlState(generation=generation), lambda data: states.append(
        CrawlState.decode(data, "test")
    ))  # fmt: skip
    return states[-1].generation


def test_a_resumed_run_journals_what_it_does_before_its_first_checkpoint_commits(tmp_path: Path) -> None:
    """What a resumed crawl writes before its first checkpoint commits (the replayed URLs drained and
    admitted, in the engine's constructor) goes on the journal it resumed from: a kill before that commit
    replays it, past the torn batch the earlier kill left; after the commit it is not replayed again.
    (It used to be dropped, while the URL set, made durable first, already knew those URLs: lost.)"""
    states: list[CrawlState] = []
    first = Ledger(tmp_path, before_write=[], on_failure=lambda exc: None)
    generation = _commit(first, states)
    first.submitted([FrontierEntry("http://a.test/found")])
    assert first.flush()
    first.close()
    with (tmp_path / "journal" / f"journal-{generation:08d}.log").open("ab") as torn:
        torn.write(b"S\t1\t0\thttp://a.test/half-writ")  # a batch cut short by the kill
    resumed, events = _replay(tmp_path, generation)
    assert events == [("submitted", "http://a.test/found")]
    resumed.drained()  # the constructor's drain: the URL is new, the URL set now knows it
    resumed.admitted(FrontierEntry("http://a.test/found"))
    assert resumed.flush()
    resumed.close()  # killed before its checkpoint's commit

    again, events = _replay(tmp_path, generation)
    assert events == [("submitted", "http://a.test/found"), ("drained", ""), ("admitted", "http://a.test/found")]
    committed = _commit(again, states)
    assert committed > generation
    again.close()
    _, after_commit = _replay(tmp_path, committed)
    assert after_commit == []  # the committed checkpoint holds the admission: no second copy


def test_a_closed_ledger_says_lines_given_to_it_were_not_written(tmp_path: Path) -> None:
    """After the engine's last checkpoint closed the journal, a flush of lines cannot be True: a
    partition acknowledges another's batch on that True, and the sender forgets the batch."""
    states: list[CrawlState] = []
    ledger = Ledger(tmp_path, before_write=[], on_failure=lambda exc: None)
    generation = _commit(ledger, states)
    ledger.close()
    assert ledger.flush()  # nothing to write: nothing lost
    ledger.submitted([FrontierEntry("http://a.test/late")])
    assert not ledger.flush()
    _, events = _replay(tmp_path, generation)
    assert events == []
