"""When a partition may call itself idle: only when every host holding URLs waits for an unreachable
robots.txt, never because of a stale entry for a host whose URLs went elsewhere (a resize, a per-IP
move): counted, such an entry stood for a host that held a URL and waited for nothing, and that
partition ended "frontier-empty" with the URL still queued."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from crawlspace.crawl.engine import CrawlEngine
from crawlspace.frontier import Frontier, FrontierEntry


def only_robots_waits(frontier: Frontier, parked: set[str]) -> tuple[bool, set[str]]:
    engine = SimpleNamespace(frontier=frontier, robots_gate=SimpleNamespace(parked=parked))
    answer = CrawlEngine._only_robots_waits(cast(Any, engine))
    return answer, engine.robots_gate.parked


def test_a_stale_robots_wait_does_not_stand_for_a_host_that_holds_urls() -> None:
    frontier = Frontier()
    frontier.add(FrontierEntry("http://held.test/a.html"))
    assert frontier.holds("held.test")
    answer, parked = only_robots_waits(frontier, {"gone.test"})  # its URLs were handed to another partition
    assert not answer and parked == set()


def test_every_held_host_waiting_for_its_robots_txt_is_idle() -> None:
    frontier = Frontier()
    frontier.add(FrontierEntry("http://waiting.test/a.html"))
    assert only_robots_waits(frontier, {"waiting.test", "gone.test"}) == (True, {"waiting.test"})
    assert only_robots_waits(frontier, set()) == (False, set())
