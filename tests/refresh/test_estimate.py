"""The change-rate estimator against pages of known rate: Cho & Garcia-Molina's closed form where the
intervals are regular, an error that shrinks as the history grows, Last-Modified used where it is
plausible and ignored where it is not, finite answers for any history."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from crawlspace.refresh.estimate import (
    WINDOW,
    Blend,
    ChangeHistory,
    EstimateError,
    Observation,
    estimate_rate,
    observe,
    regular_rate,
)

HOUR = 3600.0


def watched(rate: float, intervals: np.ndarray, rng: np.random.Generator, *, dated: bool = False) -> list[Observation]:
    """What fetches at the given intervals see of a Poisson page of `rate`: change or not, and with
    `dated` the age of the last change (a truthful Last-Modified)."""
    observations = []
    for interval in intervals:
        changes = rng.poisson(rate * interval)
        if changes and dated:  # the last of `changes` uniform points in the interval
            last = interval * rng.random() ** (1.0 / changes)
            observations.append(Observation(float(interval), True, float(interval - last) or 1e-9))
        else:
            observations.append(Observation(float(interval), bool(changes)))
    return observations


def test_regular_intervals_give_the_papers_closed_form() -> None:
    for fetches, changes in [(1, 1), (10, 0), (10, 3), (10, 10), (50, 49)]:
        history = [Observation(HOUR, i < changes) for i in range(fetches)]
        expected = -math.log((fetches - changes + 0.5) / (fetches + 0.5)) / HOUR
        assert estimate_rate(history) == pytest.approx(expected, rel=1e-9)
        assert regular_rate(fetches, changes, HOUR) == pytest.approx(expected, rel=1e-12)


def test_the_naive_estimate_is_biased_and_this_one_is_not() -> None:
    """A page changing every 20 minutes, fetched every hour: it changed at nearly every fetch. The naive
    estimate (changes seen / time) says once an hour; the bias-reduced one comes close to 3."""
    rng = np.random.default_rng(7)
    rate = 3 / HOUR
    estimates, naive = [], []
    for _ in range(300):
        history = watched(rate, np.full(WINDOW, HOUR), rng)
        estimates.append(estimate_rate(history))
        naive.append(sum(o.changed for o in history) / (WINDOW * HOUR))
    assert np.mean(naive) < 0.36 * rate
    assert abs(np.median(estimates) / rate - 1) < 0.15


def cramer_rao(rate: float, intervals: np.ndarray) -> float:
    """The smallest standard deviation any unbiased estimator can have from change/no-change observations
    at these intervals, relative to the rate: 1 / sqrt(Fisher information) / rate."""
    x = rate * intervals
    information = float(np.sum(intervals**2 * np.exp(-x) / -np.expm1(-x)))
    return 1.0 / math.sqrt(information) / rate


@pytest.mark.parametrize("rate", [0.2 / HOUR, 1 / HOUR, 4 / HOUR])
def test_the_error_shrinks_as_the_history_grows_at_irregular_intervals(rate: float) -> None:
    """Fetches every 6 minutes to 2 hours of pages changing every 15 minutes to every 5 hours: the root
    mean square error falls with the history and comes within 1.6 times the Cramer-Rao bound (the
    estimator is the maximum-likelihood one, efficient as the history grows), with little bias."""
    rng = np.random.default_rng(11)
    errors, bounds, biases = [], [], []
    for fetches in (4, 16, 64, 256):
        relative, bound = [], []
        for _ in range(200):
            intervals = rng.uniform(0.1 * HOUR, 2 * HOUR, fetches)
            relative.append(estimate_rate(watched(rate, intervals, rng)) / rate - 1)
            bound.append(cramer_rao(rate, intervals))
        errors.append(float(np.sqrt(np.mean(np.square(relative)))))
        bounds.append(float(np.mean(bound)))
        biases.append(float(np.mean(relative)))
    assert errors == sorted(errors, reverse=True), errors
    assert errors[-1] < 1.6 * bounds[-1], (errors, bounds)
    assert abs(biases[-1]) < 0.1, biases


def test_last_modified_makes_the_estimate_sharper() -> None:
    """Ages of changes carry more than change/no-change: at the same fetches of a page that changes
    faster than it is fetched (most fetches see a change, so change/no-change says little), the error
    is much smaller."""
    rng = np.random.default_rng(3)
    rate = 4 / HOUR
    plain, dated = [], []
    for _ in range(300):
        intervals = rng.uniform(0.5 * HOUR, 3 * HOUR, 24)
        state = rng.bit_generator.state
        plain.append(estimate_rate(watched(rate, intervals, rng)) / rate - 1)
        rng.bit_generator.state = state  # the same changes, seen with their dates
        dated.append(estimate_rate(watched(rate, intervals, rng, dated=True)) / rate - 1)
    assert np.sqrt(np.mean(np.square(dated))) < 0.6 * np.sqrt(np.mean(np.square(plain)))
    assert abs(np.median(dated)) < 0.1


def test_observe_uses_last_modified_only_inside_the_interval() -> None:
    assert observe(1000.0, 2000.0, changed=True, last_modified=1500.0) == Observation(1000.0, True, 500.0)
    # the time of the request (a dynamic page): the change happened "now", a tiny age, still plausible
    assert observe(1000.0, 2000.0, changed=True, last_modified=2003.0) == Observation(1000.0, True, 1000.0 * 1e-6)
    for implausible in (900.0, 1000.0, 2010.0):  # before the previous fetch, or later than any skew allows
        assert observe(1000.0, 2000.0, changed=True, last_modified=implausible) == Observation(1000.0, True)
    assert observe(1000.0, 2000.0, changed=False, last_modified=1500.0) == Observation(1000.0, False)
    assert observe(2000.0, 2000.0, changed=True) is None  # the clock stood still: nothing learnt
    assert observe(2000.0, 1000.0, changed=True) is None


def test_bad_observations_are_refused() -> None:
    bad_ones = [
        Observation(0.0, True), Observation(-1.0, False), Observation(math.inf, True), Observation(10.0, True, 11.0),
        Observation(10.0, False, 5.0), Observation(10.0, True, 0.0),
    ]  # fmt: skip
    for bad in bad_ones:
        with pytest.raises(EstimateError):
            estimate_rate([bad])
    with pytest.raises(EstimateError):
        regular_rate(3, 4, HOUR)


observations = st.builds(
    Observation,
    st.floats(1e-3, 1e7),
    st.booleans(),
)


@given(st.lists(observations, max_size=64))
def test_any_history_has_a_finite_non_negative_estimate(history: list[Observation]) -> None:
    rate = estimate_rate(history)
    assert math.isfinite(rate) and rate >= 0
    assert (rate > 0) == any(o.changed for o in history)


@given(st.lists(observations, min_size=1, max_size=32), st.floats(1.01, 10.0))
def test_more_changes_seen_never_lower_the_estimate(history: list[Observation], _: float) -> None:
    unchanged = [i for i, o in enumerate(history) if not o.changed]
    if not unchanged:
        return
    more = list(history)
    more[unchanged[0]] = Observation(history[unchanged[0]].interval, True)
    assert estimate_rate(more) >= estimate_rate(history) * (1 - 1e-9)


def test_a_history_keeps_its_window_and_round_trips() -> None:
    import msgspec

    history = ChangeHistory()
    for i in range(WINDOW + 10):
        history.add(Observation(HOUR, i % 2 == 0))
    history.add(None)  # nothing learnt: nothing kept
    assert len(history) == WINDOW
    assert history.observations[0] == Observation(HOUR, True)  # the 10 oldest went
    again = msgspec.msgpack.decode(msgspec.msgpack.encode(history), type=ChangeHistory)
    assert again == history and again.rate == history.rate


def test_a_page_with_little_history_borrows_its_clusters_rate() -> None:
    rng = np.random.default_rng(5)
    rate = 1 / HOUR
    cluster = [watched(rate, rng.uniform(0.5 * HOUR, 2 * HOUR, 8), rng) for _ in range(40)]
    pooled = estimate_rate([observation for history in cluster for observation in history])  # one process
    assert abs(pooled / rate - 1) < 0.2
    blend = Blend()
    assert blend.rate(estimate_rate([]), 0, pooled) == pooled  # no history: the cluster's
    short = [Observation(HOUR, True)]
    own = estimate_rate(short)
    assert min(pooled, own) <= blend.rate(own, len(short), pooled) <= max(pooled, own)
    long = watched(rate, np.full(400, HOUR), rng)
    assert 0.8 * rate < Blend(prior_weight=4.0).rate(estimate_rate(long), len(long), 10 * rate) < 1.25 * rate
