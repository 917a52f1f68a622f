"""Taking a host's URLs out of the frontier, for a crawl resized to another number of partitions:
every URL of the leaving hosts comes out once, the others stay in order, and the frontier's
invariants and checkpoint hold afterwards."""

from __future__ import annotations

from pathlib import Path

import pytest

from crawlspace.frontier import Frontier, FrontierEntry, FrontierError, Politeness
from tests.frontier.conftest import FakeClock, drain

LEAVING = {"h1.test", "h4.test", "h6.test"}


def _filled(tmp_path: Path, clock: FakeClock) -> tuple[Frontier, list[str]]:
    frontier = Frontier.open(
        tmp_path, Politeness(min_delay=0.0, delay_factor=0.0), clock=clock, front_window=16, back_window=4,
        back_queues=3,
    )  # fmt: skip
    urls = [f"http://h{i % 7}.test/{i}" for i in range(700)]
    frontier.add_many(FrontierEntry(url) for url in urls)
    return frontier, urls


def test_take_out_returns_exactly_the_leaving_hosts_urls(tmp_path: Path, clock: FakeClock) -> None:
    frontier, urls = _filled(tmp_path, clock)
    assert sorted(entry.url for entry in frontier.queued_entries()) == sorted(urls), "reading takes nothing out"
    assert len(frontier) == len(urls)
    taken = frontier.take_out(lambda host: host in LEAVING)
    leaving = [url for url in urls if url.split("/")[2] in LEAVING]
    assert sorted(entry.url for entry in taken) == sorted(leaving)
    assert len(frontier) == len(urls) - len(leaving)
    frontier.check_invariants(deep=True)
    for host in LEAVING:
        assert frontier.host_info(host) is None, "a leaving host's row goes too"
    left = [url for _, url in drain(frontier, clock)]
    staying = [url for url in urls if url.split("/")[2] not in LEAVING]
    assert sorted(left) == sorted(staying)
    for host in {url.split("/")[2] for url in staying}:  # each host's URLs still in the order they came
        assert [u for u in left if u.split("/")[2] == host] == [u for u in staying if u.split("/")[2] == host]


def test_take_out_survives_a_checkpoint_and_reopen(tmp_path: Path, clock: FakeClock) -> None:
    frontier, urls = _filled(tmp_path, clock)
    frontier.checkpoint()
    taken = frontier.take_out(lambda host: host in LEAVING)
    frontier.checkpoint()
    frontier.close()
    reopened = Frontier.open(tmp_path, Politeness(min_delay=0.0, delay_factor=0.0), clock=clock, back_queues=3)
    left = {url for _, url in drain(reopened, clock)}
    assert left == set(urls) - {entry.url for entry in taken}
    assert not {url.split("/")[2] for url in left} & LEAVING
    reopened.close()


def test_a_crash_before_the_checkpoint_keeps_every_url(tmp_path: Path, clock: FakeClock) -> None:
    """The sender removes a handed-over host only in its next checkpoint: until then its last one stands."""
    frontier, urls = _filled(tmp_path, clock)
    frontier.checkpoint()
    frontier.take_out(lambda host: host in LEAVING)
    frontier.close(checkpoint=False)  # killed
    reopened = Frontier.open(tmp_path, Politeness(min_delay=0.0, delay_factor=0.0), clock=clock, back_queues=3)
    assert sorted(entry.url for entry in reopened.queued_entries()) == sorted(urls)
    reopened.close()


def test_take_out_refuses_while_a_lease_is_out(tmp_path: Path, clock: FakeClock) -> None:
    frontier, _ = _filled(tmp_path, clock)
    lease = frontier.acquire()
    assert lease is not None
    with pytest.raises(FrontierError, match="leases out"):
        frontier.take_out(lambda host: True)
    frontier.release(lease, 0.0)
    assert len(frontier.take_out(lambda host: True)) == 699
    assert len(frontier) == 0
    frontier.check_invariants(deep=True)
    frontier.close()
