"""The shared tail of appended-to files (crawlspace.linetail), against a file written as a writer would."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from crawlspace.linetail import LineTail


def test_only_what_was_appended_is_returned_and_a_torn_line_waits_for_its_end(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"one\ntwo\nthr")
    tail = LineTail(path)
    first = tail.read()
    assert first.lines == [b"one", b"two"] and first.partial == b"thr" and not first.restarted
    with path.open("ab") as handle:
        handle.write(b"ee\nfour\n")
    second = tail.read()
    assert second.lines == [b"three", b"four"] and second.partial == b""
    assert tail.read().lines == []


def test_a_file_cut_shorter_or_replaced_is_read_again_from_its_start(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"a\nb\nc\n")
    tail = LineTail(path)
    assert tail.read().lines == [b"a", b"b", b"c"]
    path.write_bytes(b"x\n")  # truncated and rewritten: shorter than what was read
    cut = tail.read()
    assert cut.restarted and cut.lines == [b"x"] and tail.restarts == 1
    replacement = tmp_path / "log.new"
    replacement.write_bytes(b"x\ny\nz\nlonger than before\n")
    os.replace(replacement, path)  # a new inode, longer than the offset: still a restart
    replaced = tail.read()
    assert replaced.restarted and replaced.lines == [b"x", b"y", b"z", b"longer than before"]
    assert tail.restarts == 2


def test_an_overlong_line_is_skipped_and_counted_without_being_held(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"short\n" + b"y" * 5000)
    tail = LineTail(path, max_line_bytes=1000)
    first = tail.read()
    assert first.lines == [b"short"] and first.partial == b"" and tail.overlong == 1
    with path.open("ab") as handle:
        handle.write(b"y" * 5000 + b"\nafter\n")  # the same line goes on, then ends
    second = tail.read()
    assert second.lines == [b"after"] and tail.overlong == 1


def test_a_missing_file_is_the_callers_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        LineTail(tmp_path / "absent").read()
