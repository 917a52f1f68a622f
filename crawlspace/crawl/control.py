"""The operator's control channel into a running crawl: DIR/control.json, polled by the engine.

Who fills it: `send_command` (the dashboard's pause, resume and stop buttons, or anyone who can
write the crawl directory), replacing the file atomically (write, fsync, rename) with one command
and the wall-clock time it was given. Who drains it: every engine of the crawl, at its progress
cadence (`progress_interval`), through a `ControlReader`: one `stat` per turn, the file read only
when its modification time changed. A file is the smallest channel that reaches a crawl in another
process without a socket of its own, survives nothing it should not (a command older than the
engine's start is ignored, so a resumed crawl starts running whatever a previous run was told),
and reaches every partition of a `--processes` crawl alike (they poll the same file).

Commands: `pause` (no new fetch starts; those in flight finish), `resume`, `stop` (the graceful
stop of Ctrl-C: in-flight fetches finish, a last checkpoint, stats.json).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

CONTROL_FILE = "control.json"

Command = Literal["pause", "resume", "stop"]
COMMANDS: tuple[str, ...] = get_args(Command)


class ControlError(ValueError):
    """A command that is not one of COMMANDS."""


@dataclass(frozen=True, slots=True)
class ControlCommand:
    command: Command
    at: float
    """When it was given (time.time()): commands older than an engine's start are not its own."""


def send_command(crawl_dir: Path, command: str, *, now: float | None = None) -> ControlCommand:
    """Give the crawl in `crawl_dir` a command; it is applied at the engine's next progress report."""
    if command not in COMMANDS:
        raise ControlError(f"unknown command {command!r}: expected one of {', '.join(COMMANDS)}")
    given = ControlCommand(command, time.time() if now is None else now)  # type: ignore[arg-type]
    path = crawl_dir / CONTROL_FILE
    tmp = path.with_name(f".{CONTROL_FILE}.{os.getpid()}.tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        json.dump({"command": given.command, "at": given.at}, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    return given


def read_command(path: Path) -> ControlCommand | None:
    """The command in a control file, or None when there is none or it is unreadable (a hand-edited
    file with anything else in it is ignored rather than allowed to stop a crawl)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        command, at = data["command"], float(data["at"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if command not in COMMANDS:
        return None
    return ControlCommand(command, at)


class ControlReader:
    """An engine's view of the control file: `poll` returns a command newer than the last one seen
    and than `since` (the engine's start), else None; it costs one stat when nothing changed."""

    def __init__(self, path: Path, *, since: float) -> None:
        self.path = path
        self._since = since
        self._seen_mtime: int | None = None

    def poll(self) -> ControlCommand | None:
        try:
            mtime = self.path.stat().st_mtime_ns
        except OSError:
            return None
        if mtime == self._seen_mtime:
            return None
        self._seen_mtime = mtime
        command = read_command(self.path)
        if command is None or command.at < self._since:
            return None
        self._since = command.at
        return command
