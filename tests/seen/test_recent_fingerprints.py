"""The link pipeline's table of recent submissions: never a false hit, bounded, the latest in a slot wins."""

from __future__ import annotations

import numpy as np

from crawlspace.seen.urlset import RecentFingerprints


def test_inserted_fingerprints_are_found_and_others_are_not() -> None:
    recent = RecentFingerprints(1 << 20)
    rng = np.random.default_rng(7)
    inserted, others = rng.integers(1, 2**64 - 1, (2, 20_000), dtype=np.uint64)
    recent.insert(inserted)
    assert recent.nbytes == 1 << 20
    assert recent.probe(inserted).mean() > 0.9  # 20,000 in 131,072 slots: a few lost to collisions
    assert not recent.probe(others).any()


def test_zero_is_never_reported_and_a_slot_keeps_its_latest_fingerprint() -> None:
    recent = RecentFingerprints(16)  # two slots
    assert not recent.probe(np.zeros(3, np.uint64)).any()
    values = np.arange(1, 200, dtype=np.uint64)
    for value in values:
        recent.insert(np.array([value], np.uint64))
    assert recent.probe(values).sum() <= 2
    assert recent.probe(values[-1:]).all()


def test_a_budget_below_two_slots_disables_the_table() -> None:
    for budget in (0, 8, 15):
        recent = RecentFingerprints(budget)
        recent.insert(np.array([5], np.uint64))
        assert recent.nbytes == 0
        assert not recent.probe(np.array([5], np.uint64)).any()
