"""The robots.txt cache on disk: fetched rules survive a restart, even a kill -9, instead of being fetched again.

Every robots.txt outcome worth keeping (a parsed 2xx file, or "unavailable": a 4xx or too many
redirects, meaning no restrictions) is recorded as one JSON line with its wall-clock fetch time
and raw body, and the lines are written to `robots.log` at the journal's cadence: the engine
calls `flush` where it writes its journal, once per turn of the event loop, so a process killed
at any instant loses at most the robots.txt fetched in that turn (an append survives the death of
the process; `sync` at checkpoints is for power loss). A resume reads the newest line per origin
and puts back those still within their lifetime, aged by the time that passed, so only the
expired ones are fetched again. Unreachable outcomes (5xx, 429, network failures) are not kept:
after a restart they are simply retried. The log is compacted (rewritten atomically with only the
live newest lines) when it has grown to several times what it holds alive.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path

from crawlspace.robots.cache import RobotsCache

LOG_NAME = "robots.log"
COMPACT_FACTOR = 4
COMPACT_MIN_BYTES = 1 << 20


class RobotsLog:
    def __init__(self, directory: Path, *, ttl: float, wall_clock: Callable[[], float] = time.time) -> None:
        self.path = directory / LOG_NAME
        directory.mkdir(parents=True, exist_ok=True)
        self._ttl = ttl
        self._wall = wall_clock
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._size = os.fstat(self._fd).st_size
        self._live: dict[str, int] = {}  # origin -> size of its newest line
        self._pending: list[bytes] = []  # recorded, written by the next flush

    def record(self, origin: str, status: int, body: bytes) -> None:
        """Keep the final response for /robots.txt of `origin`: a 2xx is its rules, any other status
        given here means "unavailable" (the caller passes only those outcomes). Written by `flush`."""
        line = (
            json.dumps(
                {"origin": origin, "status": status, "at": self._wall(), "body": base64.b64encode(body).decode()},
                separators=(",", ":"),
            )
            + "\n"
        ).encode()
        self._pending.append(line)
        self._live[origin] = len(line)

    @property
    def pending(self) -> int:
        """Lines recorded and not yet written."""
        return len(self._pending)

    def flush(self) -> None:
        """Append the recorded lines in one write (OSError propagates: the caller stops the crawl)."""
        if not self._pending:
            return
        data, self._pending = b"".join(self._pending), []
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]
        self._size += len(data)

    def restore(self, cache: RobotsCache, now: float) -> int:
        """Put every still-valid newest entry back into `cache` (its clock reading is `now`); returns how many."""
        newest = self._newest()
        wall = self._wall()
        restored = 0
        for origin, (status, fetched_at, body, raw) in newest.items():
            age = max(wall - fetched_at, 0.0)
            if age >= self._ttl:
                continue
            if 200 <= status < 300:
                cache.store_response(origin, status, body, now - age)
            else:
                cache.store_unavailable(origin, now - age)
            self._live[origin] = len(raw)
            restored += 1
        return restored

    def maybe_compact(self) -> bool:
        """Rewrite the log with only its live newest lines once it is mostly dead weight."""
        self.flush()
        live = sum(self._live.values())
        if self._size < max(COMPACT_MIN_BYTES, COMPACT_FACTOR * live):
            return False
        newest = self._newest()
        cutoff = self._wall() - self._ttl
        tmp = self.path.with_suffix(".tmp")
        data = b"".join(raw for _status, at, _body, raw in newest.values() if at > cutoff)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        os.close(self._fd)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        self._size = len(data)
        self._live = {origin: len(raw) for origin, (_s, at, _b, raw) in newest.items() if at > cutoff}
        return True

    def sync(self) -> None:
        self.flush()
        os.fsync(self._fd)

    def close(self) -> None:
        """Write what is recorded and close; a failed write here loses only robots.txt to fetch again."""
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                self.flush()
            os.close(self._fd)
            self._fd = -1

    def _newest(self) -> dict[str, tuple[int, float, bytes, bytes]]:
        return newest_entries(self.path)


def newest_entries(path: Path) -> dict[str, tuple[int, float, bytes, bytes]]:
    """origin -> (status, fetch time, body, the line itself) of its last complete line in the log at
    `path` ({} if there is none); it only reads, so the read side (store/reader.py) uses it too."""
    newest: dict[str, tuple[int, float, bytes, bytes]] = {}
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        return newest
    with handle:
        for raw in handle:
            parsed = _parse(raw)
            if parsed is not None:
                origin, status, at, body = parsed
                newest.pop(origin, None)  # re-inserted: the dict keeps file order of the newest lines
                newest[origin] = (status, at, body, raw)
    return newest


def _parse(raw: bytes) -> tuple[str, int, float, bytes] | None:
    """One line, or None for a line torn by a crash (the last one) or otherwise unreadable."""
    if not raw.endswith(b"\n"):
        return None
    try:
        record = json.loads(raw)
        return str(record["origin"]), int(record["status"]), float(record["at"]), base64.b64decode(record["body"])
    except (ValueError, KeyError, TypeError):
        return None
