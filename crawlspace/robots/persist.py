"""The robots.txt cache on disk: fetched rules survive a restart instead of being fetched again.

Every robots.txt outcome worth keeping (a parsed file, or "unavailable": no restrictions) is
appended to `robots.log` as one JSON line with its wall-clock fetch time and raw body, at the
moment it enters the cache; a process killed at any instant keeps all complete lines. A resume
reads the newest line per origin and puts back those still within their lifetime, aged by the
time that passed. Unreachable outcomes are not kept: after a restart they are simply retried.
The log is compacted (rewritten atomically with only the live newest lines) when it has grown to
several times what it holds alive.
"""

from __future__ import annotations

import base64
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

    def record(self, origin: str, status: int, body: bytes) -> None:
        line = (
            json.dumps(
                {"origin": origin, "status": status, "at": self._wall(), "body": base64.b64encode(body).decode()},
                separators=(",", ":"),
            )
            + "\n"
        ).encode()
        view = memoryview(line)
        while view:
            view = view[os.write(self._fd, view) :]
        self._size += len(line)
        self._live[origin] = len(line)

    def restore(self, cache: RobotsCache, now: float) -> int:
        """Put every still-valid newest entry back into `cache` (its clock reading is `now`); returns how many."""
        newest = self._newest()
        wall = self._wall()
        restored = 0
        for origin, (status, fetched_at, body, raw) in newest.items():
            age = max(wall - fetched_at, 0.0)
            if age >= self._ttl:
                continue
            cache.store_response(origin, status, body, now - age)
            self._live[origin] = len(raw)
            restored += 1
        return restored

    def maybe_compact(self) -> bool:
        """Rewrite the log with only its live newest lines once it is mostly dead weight."""
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
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def _newest(self) -> dict[str, tuple[int, float, bytes, bytes]]:
        """origin -> (status, fetch time, body, the line itself) of its last complete line."""
        newest: dict[str, tuple[int, float, bytes, bytes]] = {}
        try:
            handle = self.path.open("rb")
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
