"""The control file: commands written atomically, read once each, never older than the engine."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from crawlspace.crawl.control import CONTROL_FILE, ControlError, ControlReader, read_command, send_command


def test_a_command_is_read_once_and_the_next_one_after_it(tmp_path: Path) -> None:
    reader = ControlReader(tmp_path / CONTROL_FILE, since=100.0)
    assert reader.poll() is None  # no file yet
    send_command(tmp_path, "pause", now=101.0)
    first = reader.poll()
    assert first is not None and first.command == "pause" and first.at == 101.0
    assert reader.poll() is None  # unchanged: not applied twice
    send_command(tmp_path, "resume", now=102.0)
    os.utime(tmp_path / CONTROL_FILE, ns=(1, 2))  # a different mtime even on a coarse clock
    second = reader.poll()
    assert second is not None and second.command == "resume"
    assert not [path for path in tmp_path.iterdir() if path.name != CONTROL_FILE]  # no temporary file left


def test_a_command_older_than_the_engine_is_not_its_own(tmp_path: Path) -> None:
    send_command(tmp_path, "stop", now=50.0)  # given to an earlier run of the crawl
    assert ControlReader(tmp_path / CONTROL_FILE, since=60.0).poll() is None


@pytest.mark.parametrize(
    "content",
    ["", "{", "[]", '{"command": "explode", "at": 1e12}', '{"command": "stop"}', '{"command": "stop", "at": "x"}'],
)
def test_a_damaged_or_foreign_file_is_ignored(tmp_path: Path, content: str) -> None:
    (tmp_path / CONTROL_FILE).write_text(content)
    assert read_command(tmp_path / CONTROL_FILE) is None
    assert ControlReader(tmp_path / CONTROL_FILE, since=0.0).poll() is None


def test_an_unknown_command_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ControlError, match="unknown command 'explode'"):
        send_command(tmp_path, "explode")
    assert not (tmp_path / CONTROL_FILE).exists()
