"""The robots.txt cache on disk: restored aged after a restart, torn lines ignored, compaction keeps the newest."""

from __future__ import annotations

from pathlib import Path

import pytest

from crawlspace.robots import RobotsCache, persist
from crawlspace.robots.persist import LOG_NAME, RobotsLog


class Wall:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_restored_rules_and_remaining_lifetime(tmp_path: Path) -> None:
    wall = Wall()
    log = RobotsLog(tmp_path, ttl=100.0, wall_clock=wall)
    log.record("http://a.test", 200, b"User-agent: *\nDisallow: /private/\n")
    log.record("http://b.test", 404, b"")
    wall.now += 60
    log.record("http://c.test", 200, b"User-agent: *\nDisallow: /\n")
    log.close()
    wall.now += 50  # a.test and b.test are 110 s old now: expired; c.test is 50 s old
    cache = RobotsCache(ttl=100.0)
    restored = RobotsLog(tmp_path, ttl=100.0, wall_clock=wall).restore(cache, now=500.0)
    assert restored == 1
    assert cache.get("http://a.test", 500.0) is None and cache.get("http://b.test", 500.0) is None
    rules = cache.get("http://c.test", 500.0)
    assert rules is not None and not rules.allowed("http://c.test/x", "crawlspace")
    assert cache.get("http://c.test", 549.0) is not None and cache.get("http://c.test", 551.0) is None


def test_newest_line_wins_and_a_torn_line_is_ignored(tmp_path: Path) -> None:
    wall = Wall()
    log = RobotsLog(tmp_path, ttl=100.0, wall_clock=wall)
    log.record("http://a.test", 200, b"User-agent: *\nDisallow: /\n")
    log.record("http://a.test", 200, b"User-agent: *\nAllow: /\n")
    log.close()
    with (tmp_path / LOG_NAME).open("ab") as handle:
        handle.write(b'{"origin":"http://a.test","status":200,"at":1000000.0,"bo')  # killed mid-write
    cache = RobotsCache(ttl=100.0)
    assert RobotsLog(tmp_path, ttl=100.0, wall_clock=wall).restore(cache, now=10.0) == 1
    rules = cache.get("http://a.test", 10.0)
    assert rules is not None and rules.allowed("http://a.test/x", "crawlspace")


def test_compaction_keeps_only_live_newest_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(persist, "COMPACT_MIN_BYTES", 0)
    wall = Wall()
    log = RobotsLog(tmp_path, ttl=100.0, wall_clock=wall)
    for i in range(50):
        log.record("http://a.test", 200, f"User-agent: *\nDisallow: /{i}\n".encode())
    log.record("http://old.test", 404, b"")
    wall.now += 150
    log.record("http://b.test", 404, b"")
    assert log.maybe_compact()
    log.record("http://c.test", 404, b"")  # appends continue on the new file
    log.close()
    lines = (tmp_path / LOG_NAME).read_bytes().splitlines()
    assert len(lines) == 2 and b"b.test" in lines[0] and b"c.test" in lines[1]  # a.test and old.test expired


def test_lines_are_written_at_flush_and_unavailable_outcomes_restore_as_allow_all(tmp_path: Path) -> None:
    wall = Wall()
    log = RobotsLog(tmp_path, ttl=100.0, wall_clock=wall)
    log.record("http://a.test", 200, b"User-agent: *\nDisallow: /\n")
    log.record("http://b.test", 404, b"")
    log.record("http://c.test", 301, b"")  # a redirect that led nowhere: unavailable, no restrictions
    assert log.pending == 3 and (tmp_path / LOG_NAME).read_bytes() == b""  # one write, at the engine's flush
    log.flush()
    assert log.pending == 0 and len((tmp_path / LOG_NAME).read_bytes().splitlines()) == 3
    # no close: as after kill -9, what flush wrote is all there is
    cache = RobotsCache(ttl=100.0)
    assert RobotsLog(tmp_path, ttl=100.0, wall_clock=wall).restore(cache, now=10.0) == 3
    a, b, c = (cache.get(f"http://{name}.test", 10.0) for name in "abc")
    assert a is not None and not a.allowed("http://a.test/x", "crawlspace")
    assert b is not None and b.allows_everything and c is not None and c.allows_everything
    log.close()
