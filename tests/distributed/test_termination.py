"""The termination test decides the end of a partitioned crawl; these are the traps it avoids."""

from __future__ import annotations

from crawlspace.distributed.termination import ProbeAnswer, crawl_over, settled


def answers(*triples: tuple[bool, int, int]) -> dict[int, ProbeAnswer]:
    return {index: ProbeAnswer(*triple) for index, triple in enumerate(triples)}


def test_a_busy_partition_or_an_unacknowledged_batch_is_not_settled() -> None:
    """A sender whose batch is not acknowledged yet answers busy (its outbox waits)."""
    assert not settled(answers((False, 3, 2), (True, 2, 2)))
    assert settled(answers((True, 3, 2), (True, 2, 3)))


def test_one_settled_round_is_not_the_end() -> None:
    round_one = answers((True, 3, 2), (True, 2, 3))
    assert not crawl_over(None, round_one, 2)
    assert crawl_over(round_one, answers((True, 3, 2), (True, 2, 3)), 2)


def test_work_between_two_rounds_shows_in_the_counters() -> None:
    """Partition 1 answered idle just before a batch reached it, partition 0 idle just after its
    acknowledgement came back; by the next round partition 1 has worked through it and is idle
    again: both rounds look settled, but the counters differ, so the crawl goes on."""
    round_one = answers((True, 3, 2), (True, 2, 3))
    round_two = answers((True, 4, 2), (True, 2, 4))
    assert settled(round_one) and settled(round_two)
    assert not crawl_over(round_one, round_two, 2)


def test_repeated_deliveries_do_not_keep_the_crawl_alive() -> None:
    """At-least-once delivery: more deliveries than sends (a batch repeated) is no reason to wait."""
    round_one = answers((True, 5, 9), (True, 5, 7))
    assert settled(round_one) and crawl_over(round_one, dict(round_one), 2)


def test_a_missing_answer_decides_nothing() -> None:
    idle = answers((True, 1, 1), (True, 1, 1))
    assert not crawl_over(idle, answers((True, 1, 1), (False, 1, 1)), 2)
    assert not crawl_over(idle, {0: ProbeAnswer(True, 1, 1)}, 2)
    assert not crawl_over({0: ProbeAnswer(True, 1, 1)}, idle, 2)
