"""Reading a line-oriented file that another process appends to, a little at a time.

Two readers follow a file while its writer keeps appending: the dashboard's progress series (a
crawl's `progress.jsonl`) and the user-experience refresh policy's query log. Both want only what
was appended since their last look (a log that grows all day costs its growth per read, not its
size), both must never take half a line for a whole one, and both must notice when the file was
replaced or cut shorter and read it again from its start. This is that part, once.

A line longer than `max_line_bytes` is not held in memory to its end: it is skipped and counted
(`overlong`), since neither file has a legitimate line that long and a reader must not grow with
a hostile or damaged file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

READ_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class Appended:
    """What one `LineTail.read` found."""

    lines: list[bytes]  # complete lines since the last read, without their newline
    partial: bytes  # a last line without its newline yet (read again, whole, once it ends)
    restarted: bool  # the file shrank or was replaced: `lines` start at its beginning


@dataclass
class LineTail:
    path: Path
    max_line_bytes: int = 1 << 20
    restarts: int = 0  # times the file shrank or was replaced
    overlong: int = 0  # lines skipped for their length (since the file's last restart)
    _offset: int = 0  # where the first line not yet returned whole starts
    _identity: tuple[int, int] | None = None
    _skipping: bool = False  # inside an overlong line: its rest is dropped up to its newline

    def read(self) -> Appended:
        """The lines appended since the last read; OSError (a missing file too) is the caller's."""
        restarted = False
        with self.path.open("rb") as handle:
            status = os.fstat(handle.fileno())
            identity = (status.st_dev, status.st_ino)
            if self._identity is not None and (identity != self._identity or status.st_size < self._offset):
                self._offset, self._skipping, self.overlong = 0, False, 0
                self.restarts += 1
                restarted = True
            self._identity = identity
            handle.seek(self._offset)
            lines: list[bytes] = []
            pending = b""
            while chunk := handle.read(READ_CHUNK):
                *complete, rest = (pending + chunk).split(b"\n")
                for raw in complete:
                    self._offset += len(raw) + 1
                    if self._skipping:  # the end of an overlong line, counted when it began
                        self._skipping = False
                    else:
                        lines.append(raw)
                pending = rest
                if len(pending) > self.max_line_bytes:  # skipped to its end, not held
                    self._offset += len(pending)
                    pending = b""
                    if not self._skipping:
                        self.overlong += 1
                    self._skipping = True
        return Appended(lines, b"" if self._skipping else pending, restarted)
