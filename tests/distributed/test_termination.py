"""Mattern's four-counter test decides the end of a partitioned crawl; these are the traps it avoids."""

from __future__ import annotations

from crawlspace.distributed.termination import ProbeAnswer, crawl_over, settled


def answers(*triples: tuple[bool, int, int]) -> dict[int, ProbeAnswer]:
    return {index: ProbeAnswer(*triple) for index, triple in enumerate(triples)}


def test_a_batch_in_transit_is_not_settled() -> None:
    assert not settled(answers((True, 3, 2), (True, 2, 2)))  # 5 sent, 4 received: one on the way
    assert settled(answers((True, 3, 2), (True, 2, 3)))


def test_one_settled_round_is_not_the_end() -> None:
    round_one = answers((True, 3, 2), (True, 2, 3))
    assert not crawl_over(None, round_one, 2)
    assert crawl_over(round_one, answers((True, 3, 2), (True, 2, 3)), 2)


def test_work_between_two_rounds_shows_in_the_counters() -> None:
    """Partition 1 received a batch and went idle again between the rounds: both look idle and
    settled each time, but the counters differ, so the crawl goes on."""
    round_one = answers((True, 3, 2), (True, 2, 3))
    round_two = answers((True, 4, 2), (True, 2, 4))
    assert settled(round_one) and settled(round_two)
    assert not crawl_over(round_one, round_two, 2)


def test_a_busy_or_missing_partition_is_not_the_end() -> None:
    idle = answers((True, 1, 1), (True, 1, 1))
    assert not crawl_over(idle, answers((True, 1, 1), (False, 1, 1)), 2)
    assert not crawl_over(idle, {0: ProbeAnswer(True, 1, 1)}, 2)  # an answer missing
    assert not crawl_over({0: ProbeAnswer(True, 1, 1)}, idle, 2)
