"""The crawl journal: a redo log of what happened since the last checkpoint.

A checkpoint every 30 s would lose up to 30 s of work to a `kill -9`: thousands of pages fetched
again, and the links found on them gone if they still waited in the URL-seen buffer. So between
checkpoints every change that matters is appended here, in the same event-loop step as the change
itself: a URL submitted to the URL-seen test (S), a URL admitted to the frontier (A), a lease that
ended for good (D, with the fetch's status, outcome and size when there was one). A resume loads the
last checkpoint and replays the journal of that generation; only what was in flight at the kill is
done again.

Each batch is one `write` of complete lines followed by an end line holding the batch's line count
and CRC-32, so a batch torn by the kill (a write cut short by the fatal signal) is recognised and
dropped as a whole. Writes go to the kernel at once (no user-space buffer): a killed process loses
nothing it wrote. `sync` (fsync) is for checkpoints and power loss, not needed for a process crash.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

SUBMITTED = "S"
DRAINED = "N"
ADMITTED = "A"
FETCHED = "F"
DONE = "D"
SENT = "X"  # a URL in a batch for another partition (crawl.workers)
ACKED = "K"  # that partition journaled the batch
MOVED = "M"  # a host handed to the partition that owns its IP address
PINNED = "P"  # a host handed to this partition
_END = "E"
_KINDS = frozenset({SUBMITTED, DRAINED, ADMITTED, FETCHED, DONE, SENT, ACKED, MOVED, PINNED})


class JournalError(Exception):
    """A journal that cannot be written or read; names the file."""


@dataclass(frozen=True, slots=True)
class Event:
    kind: str
    fields: tuple[str, ...]  # the URL is always the last field

    @property
    def url(self) -> str:
        return self.fields[-1]


def submitted(url: str, depth: int, hops: int) -> str:
    return f"{SUBMITTED}\t{depth}\t{hops}\t{url}"


def drained() -> str:
    return f"{DRAINED}\t-"


def admitted(url: str, depth: int, hops: int, sitemap: bool = False) -> str:
    return f"{ADMITTED}\t{depth}\t{hops}\t{int(sitemap)}\t{url}"


def fetched(url: str, status: int, outcome: str, size: int) -> str:
    return f"{FETCHED}\t{status}\t{outcome}\t{size}\t{url}"


def done(url: str) -> str:
    return f"{DONE}\t{url}"


def sent(peer: int, batch: int, url: str, depth: int, hops: int, forward: bool = False) -> str:
    return f"{SENT}\t{peer}\t{batch}\t{depth}\t{hops}\t{int(forward)}\t{url}"


def moved(host: str, owner: int) -> str:
    return f"{MOVED}\t{owner}\t{host}"


def pinned(host: str) -> str:
    return f"{PINNED}\t{host}"


def acked(peer: int, batch: int) -> str:
    return f"{ACKED}\t{peer}\t{batch}\t-"


class Journal:
    """Append-only; one instance per generation (file `journal-<generation>.log`)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError as exc:
            raise JournalError(f"cannot open journal {path}: {exc.strerror or exc}") from None
        self.batches = 0

    def record(self, lines: Sequence[str]) -> None:
        """Append one batch atomically (as far as replay is concerned)."""
        if not lines:
            return
        payload = ("\n".join(lines) + "\n").encode("utf-8", "surrogateescape")
        data = payload + f"{_END}\t{len(lines)}\t{zlib.crc32(payload)}\n".encode()
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        self.batches += 1

    def sync(self) -> None:
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class ReplayReport:
    batches: int = 0
    events: int = 0
    torn_bytes: int = 0  # a last batch cut short by the crash, dropped


def replay(path: Path, report: ReplayReport | None = None) -> Iterator[Event]:
    """Events of the complete batches of `path`, in order. A torn or corrupt tail is dropped and
    reported; a corrupt batch followed by good ones means the file was damaged, not torn: an error."""
    report = report if report is not None else ReplayReport()
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise JournalError(f"cannot read journal {path}: {exc.strerror or exc}") from None
    position = 0
    pending: list[bytes] = []
    batch_start = 0
    while position < len(data):
        end = data.find(b"\n", position)
        if end < 0:
            break
        line = data[position:end]
        position = end + 1
        if not line.startswith(b"E\t"):
            pending.append(line)
            continue
        fields = line.split(b"\t")
        payload = data[batch_start : position - len(line) - 1]
        valid = (
            len(fields) == 3
            and fields[1] == str(len(pending)).encode()
            and fields[2] == str(zlib.crc32(payload)).encode()
        )
        if not valid:
            if data.find(b"\nE\t", position - 1) >= 0:
                raise JournalError(f"journal {path} is corrupt at byte {batch_start} (a batch fails its checksum)")
            position = batch_start
            break
        for raw in pending:
            parts = raw.decode("utf-8", "surrogateescape").split("\t")
            if parts[0] not in _KINDS:
                raise JournalError(f"journal {path}: unknown event {parts[0]!r} at byte {batch_start}")
            report.events += 1
            yield Event(parts[0], tuple(parts[1:]))
        report.batches += 1
        pending = []
        batch_start = position
    report.torn_bytes = len(data) - batch_start
