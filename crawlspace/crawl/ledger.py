"""The ledger: everything a crawl writes so that a kill -9 loses nothing, in one place.

Who writes to it: every stage that changes durable state appends what happened, as it happens,
through the typed calls below (the link pipeline: URLs submitted, drained, admitted; the recorder:
fetches; the engine: leases finished; the partition router, as its `RouterJournal`: batches,
acknowledgements, moved and pinned hosts). Nothing is written then: the lines of one turn of the
event loop go out together in one journal write at its end (`flush_soon`), or at once where a
peer must not hear of something before it is durable (`flush` before a batch is sent or
acknowledged). Before each journal write the crawl table's rows of those pages are committed
(unsynced) and the robots.txt log is written: a page the journal calls done always has its row
and the rules it was fetched under.

Who reads it: a resume (`replay`) feeds the journals since the last checkpoint back to the
stages through a `ReplayTarget`; a checkpoint (`checkpoint`) makes every store durable, then commits
the frontier's atomic checkpoint holding the engine's `CrawlState`, and starts the next journal.

A failed write (disk full, I/O error) breaks the ledger for good: `on_failure` is told once (the
engine stops the crawl) and no later checkpoint may commit, since a store ahead of the journal
would hide the URLs found since. See crawl/checkpoint.py for the recovery rules.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from crawlspace.crawl import journal
from crawlspace.crawl.checkpoint import CheckpointError, CrawlState, Journals
from crawlspace.crawl.journal import ReplayReport, replay
from crawlspace.frontier.entry import FrontierEntry

JOURNAL_BROKEN = "the journal could not be written: the last checkpoint and journal stand"


class LinkReplay(Protocol):
    """The link pipeline's side of a resume: the URL-seen buffer and the frontier's admissions."""

    def replay_submitted(self, entry: FrontierEntry) -> None: ...

    def replay_drained(self) -> None: ...

    def replay_admitted(self, entry: FrontierEntry, *, sitemap: bool) -> None: ...


class RouterReplay(Protocol):
    """The partition router's side of a resume (distributed.router.PartitionRouter)."""

    def replay_sent(self, peer: int, number: int, entry: FrontierEntry, *, forward: bool) -> None: ...

    def replay_acked(self, peer: int, number: int) -> None: ...

    def replay_moved(self, host: str, owner: int) -> None: ...

    def replay_pinned(self, host: str) -> None: ...


@dataclass(frozen=True, slots=True)
class ReplayTarget:
    """Where a resume sends the journal's events back to, in the order they happened."""

    links: LinkReplay
    router: RouterReplay | None  # None in a crawl of one partition
    fetched: Callable[[int, str, int], None]  # (status, outcome, size): the statistics of a fetch
    done: Callable[[str], None]  # a URL whose lease ended for good


class Ledger:
    def __init__(
        self, crawl_dir: Path, before_write: Sequence[Callable[[], object]], on_failure: Callable[[OSError], None]
    ) -> None:
        """`before_write`: what must be written before a journal write says it happened (the crawl
        table's rows, the robots.txt log), called before every write; `on_failure`: told of the
        write error that broke the ledger."""
        self.journals = Journals(crawl_dir)
        self._lines: list[str] = []
        self._before_write = before_write
        self._on_failure = on_failure
        self.broken = False
        self.closed = False
        self._flush_scheduled = False

    def __repr__(self) -> str:
        return (
            f"Ledger(generation {self.journals.generation}, {len(self._lines)} lines buffered"
            f"{', broken' if self.broken else ''})"
        )

    # -- what happened ---------------------------------------------------------------------------

    def submitted(self, entries: Iterable[FrontierEntry]) -> None:
        self._lines.extend(journal.submitted(entry.url, entry.depth, entry.hops) for entry in entries)

    def drained(self) -> None:
        self._lines.append(journal.drained())

    def admitted(self, entry: FrontierEntry, *, sitemap: bool = False) -> None:
        self._lines.append(journal.admitted(entry.url, entry.depth, entry.hops, sitemap=sitemap))

    def fetched(self, url: str, status: int, outcome: str, size: int) -> None:
        self._lines.append(journal.fetched(url, status, outcome, size))

    def done(self, url: str) -> None:
        self._lines.append(journal.done(url))

    # the partition router's events (distributed.router.RouterJournal)

    def sent(self, peer: int, number: int, entry: FrontierEntry, *, forward: bool) -> None:
        self._lines.append(journal.sent(peer, number, entry.url, entry.depth, entry.hops, forward))

    def acked(self, peer: int, number: int) -> None:
        self._lines.append(journal.acked(peer, number))

    def moved(self, host: str, owner: int) -> None:
        self._lines.append(journal.moved(host, owner))

    def pinned(self, host: str) -> None:
        self._lines.append(journal.pinned(host))

    # -- writing -----------------------------------------------------------------------------

    def flush(self) -> bool:
        """Write the buffered lines (after the commits that must precede them); False when the
        ledger is broken, now or before, or closed with lines it could not write. A batch another
        partition sent between the engine's last checkpoint and the transport's close used to be
        acknowledged here unwritten (no journal was open: True), its URLs only in a URL set's buffer
        that was never written: the sender dropped them, lost for good (a resize test, 1 run in 7)."""
        lines, self._lines = self._lines, []
        if self.broken:
            return False
        if self.closed:
            return not lines
        try:
            for commit in self._before_write:
                commit()
            if lines and self.journals.current is not None:
                self.journals.current.record(lines)
        except OSError as exc:
            self.broken = True
            self._on_failure(exc)
            return False
        return True

    def flush_soon(self) -> None:
        """Flush at the end of this turn of the event loop: one write for all that ends in it. A kill
        before then loses what a kill during those fetches would: they are fetched again."""
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._deferred_flush)

    def _deferred_flush(self) -> None:
        self._flush_scheduled = False
        self.flush()

    # -- checkpoints and resume ----------------------------------------------------------------

    def checkpoint(
        self,
        make_durable: Sequence[Callable[[], object]],
        build_state: Callable[[int], CrawlState],
        commit: Callable[[bytes], None],
    ) -> None:
        """Flush, make every store durable (`make_durable`, in order), then `commit` the new
        generation's state (the frontier's atomic checkpoint: the commit point), start its journal."""
        if self.broken or not self.flush():  # what the checkpoint covers is in the old journal, if any
            raise CheckpointError(JOURNAL_BROKEN)
        for step in make_durable:
            step()
        generation = self.journals.generation + 1
        commit(build_state(generation).encode())
        self.journals.start(generation)

    def never_written(self) -> bool:
        """No journal at all: a crawl killed while it opened its state, before its first checkpoint."""
        return not self.journals.generations()

    def reset(self) -> None:
        """A fresh crawl: no journal of an earlier crawl in this directory may be replayed."""
        self.journals.reset()

    def replay(self, generation: int, target: ReplayTarget) -> tuple[list[Path], ReplayReport]:
        """Feed the journals since the checkpoint of `generation` to `target`; the files and the report.

        Then the newest of them is continued: what the resumed run writes before its own first
        checkpoint commits (the replayed URLs drained, the seeds, the batches cut) belongs to the
        checkpoint it resumed from. Those lines used to be dropped (no journal was open yet), while
        the stores that checkpoint made durable first (the URL set above all) could be ahead of them:
        a kill before the frontier's commit then left URLs known to the URL set and queued nowhere.
        A torn last batch is cut off first, so that the lines after it replay."""
        journals = self.journals
        journals.generation = max([generation, *journals.generations()])  # the next commit is past them all
        report = ReplayReport()
        paths = journals.since(generation)
        torn = 0
        for path in paths:
            of_file = ReplayReport()
            for event in replay(path, of_file):
                _dispatch(event.kind, event.fields, target, path)
            report.batches += of_file.batches
            report.events += of_file.events
            report.torn_bytes += of_file.torn_bytes
            torn = of_file.torn_bytes
        journals.resume(torn_bytes=torn)
        return paths, report

    def close(self) -> None:
        self.closed = True
        self.journals.close()


def _dispatch(kind: str, fields: tuple[str, ...], target: ReplayTarget, path: Path) -> None:
    if kind == journal.SUBMITTED:
        target.links.replay_submitted(FrontierEntry(fields[2], int(fields[0]), int(fields[1])))
    elif kind == journal.DRAINED:
        target.links.replay_drained()
    elif kind == journal.ADMITTED:
        entry = FrontierEntry(fields[3], int(fields[0]), int(fields[1]))
        target.links.replay_admitted(entry, sitemap=fields[2] == "1")
    elif kind == journal.FETCHED:
        target.fetched(int(fields[0]), fields[1], int(fields[2]))
    elif kind == journal.DONE:
        target.done(fields[0])
    else:
        router = target.router
        if router is None:
            raise CheckpointError(f"{path}: a journal of one of several partitions, resumed as a whole crawl")
        if kind == journal.SENT:
            entry = FrontierEntry(fields[5], int(fields[2]), int(fields[3]))
            router.replay_sent(int(fields[0]), int(fields[1]), entry, forward=fields[4] == "1")
        elif kind == journal.ACKED:
            router.replay_acked(int(fields[0]), int(fields[1]))
        elif kind == journal.MOVED:
            router.replay_moved(fields[1], int(fields[0]))
        elif kind == journal.PINNED:
            router.replay_pinned(fields[0])
