"""Refresh policies against Cho & Garcia-Molina: the freshness and age formulas against a simulation,
the budget spent, and the published order (optimal beats uniform, uniform beats proportional), and
quality weights that starve a spam page changing on every fetch."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawlspace.refresh.policies import POLICIES, Optimal, Proportional, Uniform, age, freshness

HOUR = 3600.0


def simulated(rate: float, frequency: float, horizon: float, rng: np.random.Generator) -> tuple[float, float]:
    """Time-averaged freshness and age of a Poisson page of `rate` refetched every 1/frequency seconds."""
    changes = np.cumsum(rng.exponential(1 / rate, int(rate * horizon * 2) + 10))
    changes = changes[changes < horizon]
    interval = 1 / frequency
    fresh = stale_age = 0.0
    for start in np.arange(0.0, horizon, interval):
        end = min(start + interval, horizon)
        inside = changes[(changes >= start) & (changes < end)]
        first = inside[0] if len(inside) else end
        fresh += first - start
        stale_age += (end - first) ** 2 / 2  # the copy's age grows from 0 at the first change
    return fresh / horizon, stale_age / horizon


@pytest.mark.parametrize(("rate", "frequency"), [(1 / HOUR, 1 / HOUR), (4 / HOUR, 1 / HOUR), (0.1 / HOUR, 1 / HOUR)])
def test_the_formulas_match_a_simulated_page(rate: float, frequency: float) -> None:
    rng = np.random.default_rng(1)
    fresh, mean_age = simulated(rate, frequency, 20_000 * HOUR, rng)
    assert freshness(np.array([rate]), np.array([frequency]))[0] == pytest.approx(fresh, rel=0.03)
    assert age(np.array([rate]), np.array([frequency]))[0] == pytest.approx(mean_age, rel=0.05)


def test_edges_of_the_formulas() -> None:
    rates = np.array([0.0, 1 / HOUR, 1 / HOUR, 1e-12])
    frequencies = np.array([0.0, 0.0, 1e9, 1 / HOUR])
    assert list(freshness(rates, frequencies)) == pytest.approx([1.0, 0.0, 1.0, 1.0])
    ages = age(rates, frequencies)
    assert ages[0] == 0.0 and ages[1] == np.inf and ages[2] == pytest.approx(0.0, abs=1e-6)
    assert ages[3] == pytest.approx(1e-12 * HOUR * HOUR / 6, rel=1e-3)  # the series where r is tiny


def heavy_tailed_rates(pages: int, rng: np.random.Generator) -> np.ndarray:
    """Most pages change rarely, some hourly, a few every few minutes."""
    return rng.pareto(1.2, pages) / (8 * HOUR)


def test_each_policy_spends_the_budget() -> None:
    rng = np.random.default_rng(2)
    rates = heavy_tailed_rates(20_000, rng)
    weights = np.ones(len(rates))
    budget = len(rates) / (6 * HOUR)
    for policy in (Uniform(), Proportional(), Optimal()):
        assert policy.frequencies(rates, weights, budget).sum() == pytest.approx(budget, rel=1e-6), policy.name


def test_optimal_beats_uniform_which_beats_proportional() -> None:
    """Cho & Garcia-Molina's result (SIGMOD 2000, TODS 2003) on a heavy-tailed web at one budget."""
    rng = np.random.default_rng(3)
    rates = heavy_tailed_rates(50_000, rng)
    weights = np.ones(len(rates))
    budget = len(rates) / (4 * HOUR)
    fresh = {
        policy.name: float(freshness(rates, policy.frequencies(rates, weights, budget)).mean())
        for policy in (Uniform(), Proportional(), Optimal())
    }
    assert fresh["optimal"] > fresh["uniform"] + 0.01 > fresh["proportional"] + 0.02, fresh
    frequencies = Optimal().frequencies(rates, weights, budget)
    fastest = rates > np.quantile(rates, 0.999)
    assert np.median(frequencies[fastest]) < np.median(frequencies[~fastest & (rates > np.median(rates))])
    assert (frequencies[fastest] == 0).mean() > 0.5  # too fast to keep fresh: not refetched at all


def test_quality_weights_starve_spam_that_changes_on_every_fetch() -> None:
    rates = np.array([1 / HOUR] * 10 + [1.0] * 10)  # ten good pages, ten spam pages changing every second
    weights = np.array([1.0] * 10 + [0.01] * 10)
    frequencies = Optimal().frequencies(rates, weights, budget=10 / HOUR)
    assert frequencies[10:].sum() == 0
    assert frequencies[:10] == pytest.approx(np.full(10, 1 / HOUR))


def test_bounds_clip_every_policy() -> None:
    rates = np.array([0.0, 1e-9, 1 / HOUR, 100 / HOUR])
    for name, kind in POLICIES.items():
        frequencies = kind(min_interval=600.0, max_interval=30 * 24 * HOUR).frequencies(rates, np.ones(4), 4 / HOUR)
        assert (frequencies >= 1 / (30 * 24 * HOUR)).all() and (frequencies <= 1 / 600.0).all(), name


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(0.0, 1.0), min_size=1, max_size=40),
    st.lists(st.floats(0.0, 10.0), min_size=40, max_size=40),
    st.floats(1e-4, 10.0),
)
def test_optimal_is_at_least_as_fresh_as_uniform_and_proportional(
    rates_list: list[float], weights_list: list[float], budget: float
) -> None:
    rates = np.array(rates_list)
    weights = np.array(weights_list[: len(rates)])
    best = Optimal().frequencies(rates, weights, budget)
    assert best.sum() <= budget * (1 + 1e-6)
    score = float((weights * freshness(rates, best)).sum())
    for other in (Uniform(), Proportional()):
        theirs = float((weights * freshness(rates, other.frequencies(rates, weights, budget))).sum())
        assert score >= theirs - 1e-6 * max(1.0, abs(theirs)), other.name


def test_a_rule_fitted_to_a_sample_gives_every_page_its_frequency() -> None:
    """What the crawl's scheduler does: fit on a sample with the sample's share of the budget, apply to
    each page as it is refetched; the whole crawl then spends about the budget, as the exact allocation."""
    rng = np.random.default_rng(8)
    rates = heavy_tailed_rates(40_000, rng)
    weights = rng.uniform(0.5, 2.0, len(rates))
    budget = len(rates) / (4 * HOUR)
    sample = rng.choice(len(rates), 2_000, replace=False)
    # proportional's constant is the sample's sum of rates, which the heavy tail makes noisy: 10 %
    tolerances = {"uniform": 0.03, "proportional": 0.1, "optimal": 0.03}
    for policy in (Uniform(max_interval=30 * 24 * HOUR), Proportional(), Optimal(max_interval=30 * 24 * HOUR)):
        rule = policy.fit(rates[sample], weights[sample], budget * len(sample) / len(rates))
        applied = np.array([rule.frequency(float(r), float(w)) for r, w in zip(rates, weights, strict=True)])
        assert applied.sum() == pytest.approx(budget, rel=tolerances[policy.name] * 3), policy.name
        exact = policy.frequencies(rates, weights, budget)
        fresh_applied = float((weights * freshness(rates, applied)).sum())
        fresh_exact = float((weights * freshness(rates, exact)).sum())
        assert fresh_applied == pytest.approx(fresh_exact, rel=tolerances[policy.name]), policy.name
