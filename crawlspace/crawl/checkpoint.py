"""Checkpoints and crash recovery: a crawl killed at any instant resumes without losing a URL.

Two mechanisms together (as a database does it):

- A checkpoint, every `checkpoint_interval` seconds and at a graceful stop, makes every store
  durable (URL set, content set, WARC files and crawl table, robots.txt log) and then commits the
  frontier's checkpoint, which carries the engine's own state (`CrawlState`: generation, statistics,
  per-host admission counts, retry counts...) in the same atomic write. That write is the commit
  point: a crash before it leaves the previous checkpoint in force, a crash after it the new one.
- Between checkpoints, the journal of the current generation (see journal.py) records every
  change as it happens. A resume restores the last checkpoint and replays the journal: URLs found
  since go back into the URL-seen test and the frontier, URLs finished since are not fetched again
  (kept in `CrawlState.done` until the frontier hands them out and the engine drops them), and the
  statistics count the fetches since. Only the pages in flight at the crash are fetched again.

The stores other than the frontier may be ahead of the checkpoint after a crash (they commit on
their own schedules); replay tolerates that: only journal admissions (A) put URLs into the frontier,
never a second look at a URL set that may already know them. If the last frontier checkpoint is
damaged, the frontier falls back to the one before it, and the journals of both generations are
replayed; a checkpoint that cannot be used at all is an error naming the file, never a silent
fresh start.

The layout under the crawl directory: `frontier/` (the commit point), `journal/journal-<g>.log`,
`seen/`, `warc/`, `table/`, `robots/robots.log`, `config.json`.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import Any

import msgspec

from crawlspace.crawl.journal import Journal
from crawlspace.durable import fsync_directory

FORMAT = "crawlspace-crawl-state"
VERSION = 1
JOURNAL_DIR = "journal"


class CheckpointError(Exception):
    """A crawl directory whose state cannot be resumed; says which file and why."""


log = logging.getLogger("crawlspace")


def report_recovery(out: Path, recovery: dict[str, Any]) -> None:
    """Say how a resumed crawl (or partition) continues: from which checkpoint, after what replay."""
    if recovery.get("fallback"):
        log.warning("%s; resumed from the previous checkpoint", recovery["fallback"])
    log.warning(
        "resuming %s from checkpoint %s, %s journal events replayed",
        out,
        recovery.get("generation"),
        recovery.get("journal_events"),
    )


class CrawlState(msgspec.Struct, kw_only=True):
    """The engine's part of a checkpoint (the frontier stores its own)."""

    format: str = FORMAT
    version: int = VERSION
    generation: int
    stats: dict[str, Any] = {}
    done: list[int] = []  # fingerprints of finished URLs the frontier may still hand out once
    filter_hosts: dict[str, tuple[int, int]] = {}  # host -> (admitted, min depth)
    seeds: list[str] = []
    attempts: dict[str, int] = {}  # URL -> failed attempts while a retry is pending
    sitemaps: list[str] = []  # URLs in the frontier that are sitemap files
    sitemap_files: dict[str, int] = {}  # sitemap files queued per origin
    robots_waiting: list[str] = []  # hosts whose URLs wait for an unreachable robots.txt to come back
    outbox: list[tuple[int, int, bool, list[tuple[str, int, int]]]] = []  # unacknowledged batches (peer, number,
    # forward, URLs) to other partitions
    next_batch: int = 1
    moved: dict[str, int] = {}  # hosts handed to the partition owning their IP address
    pinned: list[str] = []  # hosts handed to this partition for that reason
    resize_started: int = 0  # the last resize (its epoch) whose handover phase this partition began
    resize_handed: int = 0  # ... and the last one whose handover it finished (its hosts removed)
    resize_unconfirmed: list[tuple[str, int, int]] = []  # URLs handed over that wait for a URL-seen test
    resize_pinned: list[str] = []  # hosts held for per-IP politeness when the resize's phase began

    def encode(self) -> bytes:
        return msgspec.msgpack.encode(self)

    @classmethod
    def decode(cls, data: bytes, source: str) -> CrawlState:
        try:
            state = msgspec.msgpack.decode(data, type=cls)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise CheckpointError(f"{source}: the crawl state in the checkpoint is unreadable: {exc}") from None
        if state.format != FORMAT or state.version != VERSION:
            raise CheckpointError(
                f"{source}: crawl state {state.format} v{state.version}, expected {FORMAT} v{VERSION}"
            )
        return state


class Journals:
    """The journal files of a crawl directory, one per checkpoint generation."""

    def __init__(self, crawl_dir: Path) -> None:
        self.directory = crawl_dir / JOURNAL_DIR
        self.directory.mkdir(parents=True, exist_ok=True)
        self.current: Journal | None = None
        self.generation = 0

    def path(self, generation: int) -> Path:
        return self.directory / f"journal-{generation:08d}.log"

    def generations(self) -> list[int]:
        found = []
        for entry in self.directory.glob("journal-*.log"):
            with contextlib.suppress(ValueError):
                found.append(int(entry.stem.split("-", 1)[1]))
        return sorted(found)

    def since(self, generation: int) -> list[Path]:
        """The journals to replay on top of the checkpoint of `generation`, oldest first."""
        return [self.path(g) for g in self.generations() if g >= generation]

    def start(self, generation: int) -> Journal:
        """Write to the journal of `generation` from now on; journals older than its predecessor go
        (the predecessor stays: it is replayed if the newest checkpoint turns out damaged)."""
        if self.current is not None:
            self.current.sync()
            self.current.close()
        self.generation = generation
        self.current = Journal(self.path(generation))
        for old in self.generations():
            if old < generation - 1:
                with contextlib.suppress(FileNotFoundError):
                    self.path(old).unlink()
        fsync_directory(self.directory)
        return self.current

    def resume(self, *, torn_bytes: int = 0) -> Journal:
        """Go on writing the journal of `generation` (a resumed crawl's, after its replay), without the
        `torn_bytes` a kill left at its end; deletes nothing (the replay may have needed them all)."""
        path = self.path(self.generation)
        if torn_bytes:
            with path.open("r+b") as handle:
                handle.truncate(handle.seek(0, 2) - torn_bytes)
                os.fsync(handle.fileno())
        self.current = Journal(path)
        fsync_directory(self.directory)
        return self.current

    def reset(self) -> None:
        """A fresh crawl: no journal of an earlier crawl in this directory may be replayed."""
        for generation in self.generations():
            self.path(generation).unlink()

    def close(self) -> None:
        if self.current is not None:
            self.current.close()
            self.current = None


def _startup_errors() -> tuple[type[Exception], ...]:
    from crawlspace.crawl.journal import JournalError
    from crawlspace.frontier import FrontierError, FrontierStateError, FrontierStoreError
    from crawlspace.seen import SeenStateError
    from crawlspace.store import CrawlTableError

    return (
        CrawlTableError, CheckpointError, JournalError, FrontierError, FrontierStateError, FrontierStoreError,
        SeenStateError,
    )  # fmt: skip


STARTUP_ERRORS = _startup_errors()
"""What opening a crawl directory's stores can raise: held by another crawl, or damaged beyond resuming."""
