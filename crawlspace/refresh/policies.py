"""How often to refetch each page, given its change rate, its weight and the crawl's fetch budget.

Cho & Garcia-Molina (*Synchronizing a database to improve freshness*, SIGMOD 2000; *Effective page
refresh policies for Web crawlers*, TODS 2003): a page whose changes are a Poisson process of rate
lambda, refetched at regular intervals 1/f, is fresh (the copy equals the page) a fraction

    F(lambda, f) = (f / lambda) (1 - exp(-lambda / f))

of the time, and its copy is on average A(lambda, f) = 1/(2f) - 1/lambda + (f / lambda^2)(1 - exp(-lambda/f))
seconds out of date. With a budget of R fetches per second over N pages:

- `uniform`: every page at R / N;
- `proportional`: f proportional to lambda (what intuition says, and worse than uniform: it spends
  the budget on pages that change too often to be caught fresh);
- `optimal`: the allocation that maximizes the weighted mean freshness sum(w F) / sum(w) subject to
  sum(f) = R. Lagrange: w dF/df = mu for every page refetched, with dF/df = (1 - e^-r (1 + r)) / lambda
  at r = lambda / f, falling from 1 / lambda (f -> 0) to 0, so a page with w / lambda <= mu is not
  refetched at all: past a point, a page that changes more often gets less, not more. Solved by
  bisection on mu over numpy arrays (pages are independent given mu), so a million pages take a
  fraction of a second.

Weights are page quality (IIR 20.2.3: "high-quality pages that change frequently"; a spam page that
changes on every fetch and has no in-links gets next to nothing). Bounds (`min_interval`,
`max_interval`, as Nutch's `db.fetch.interval.max`) clip every policy's frequencies: a page estimated
never to change is still looked at now and then, since the estimate may be wrong.

A `RefreshPolicy` is the hook for users' own: one call from rates, weights and the budget to
frequencies.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

_BISECTIONS = 80
NEVER = 1e-30  # changes per second below which a page is taken never to change (once in 3e22 years)


class RefreshPolicy(Protocol):
    """Refetch frequencies (fetches per second, one per page) for pages of estimated change `rates`
    (changes per second) and `weights` (>= 0), spending at most `budget` fetches per second in all.
    A frequency of 0 means "not again" (bounds may still apply). Must not modify its arguments.

    `fit` is the same decision for a crawl too large to hold: fitted to a sample of the pages with
    the sample's share of the budget, it returns the rule that gives any page its frequency (the
    crawl's scheduler applies it to each page as it is refetched, and fits again now and then)."""

    @property
    def name(self) -> str: ...

    def frequencies(self, rates: FloatArray, weights: FloatArray, budget: float) -> FloatArray: ...

    def fit(self, rates: FloatArray, weights: FloatArray, budget: float) -> PageRule: ...


class PageRule(Protocol):
    def frequency(self, rate: float, weight: float) -> float: ...


@dataclass(frozen=True)
class _Constant:
    value: float
    low: float
    high: float

    def frequency(self, rate: float, weight: float) -> float:
        return min(max(self.value, self.low), self.high)


@dataclass(frozen=True)
class _Linear:
    per_change: float  # fetches per second per change per second
    low: float
    high: float

    def frequency(self, rate: float, weight: float) -> float:
        return min(max(self.per_change * rate, self.low), self.high)


@dataclass(frozen=True)
class _Marginal:
    """Optimal's rule once mu is known: w dF/df = mu."""

    mu: float
    low: float
    high: float
    scale: float = 1.0  # the budget left over where floating point ended the search, spread evenly

    def frequency(self, rate: float, weight: float) -> float:
        if rate < NEVER or weight <= 0 or weight / rate <= self.mu:
            return min(max(0.0, self.low), self.high)
        r = _inverse_gain_of(self.mu * rate / weight)
        return min(max(self.scale * rate / r, self.low), self.high)


def _inverse_gain_of(target: float) -> float:
    """`_inverse_gain` of one number, in plain floats (a page rescheduled: numpy's per-call cost is
    most of the work for one value)."""
    if target < 1e-9:
        r = math.sqrt(2.0 * target)
        return r + r * r / 3.0
    low, high = math.log(1e-5), math.log(800.0)
    for _ in range(_BISECTIONS):
        middle = (low + high) / 2.0
        guess = math.exp(middle)
        if -math.expm1(-guess) - guess * math.exp(-guess) > target:
            high = middle
        else:
            low = middle
    return math.exp((low + high) / 2.0)


def _pairs(rates: FloatArray, frequencies: FloatArray) -> tuple[FloatArray, FloatArray]:
    broadcast = np.broadcast_arrays(np.asarray(rates, np.float64), np.asarray(frequencies, np.float64))
    return np.where(broadcast[0] < NEVER, 0.0, broadcast[0]), broadcast[1]


def freshness(rates: FloatArray, frequencies: FloatArray) -> FloatArray:
    """Expected fraction of time each page's copy is fresh (1 for a page that never changes, 0 for one
    that changes and is never refetched)."""
    rates, frequencies = _pairs(rates, frequencies)
    out = np.where(rates > 0, 0.0, 1.0)
    both = (rates > 0) & (frequencies > 0)
    r = rates[both] / frequencies[both]
    safe = np.maximum(r, 1e-300)
    out[both] = np.where(r > 1e-12, -np.expm1(-safe) / safe, 1.0 - r / 2.0)  # the series where r vanishes
    return out


def age(rates: FloatArray, frequencies: FloatArray) -> FloatArray:
    """Expected seconds each page's copy is out of date (inf for a page that changes and is never
    refetched)."""
    rates, frequencies = _pairs(rates, frequencies)
    out = np.where((rates > 0) & (frequencies <= 0), np.inf, 0.0)
    both = (rates > 0) & (frequencies > 0)
    r = rates[both] / frequencies[both]
    # A = (1/f) (1/2 - 1/r + (1 - e^-r) / r^2); its series r/6 - r^2/24 where r is too small to subtract
    safe = np.maximum(r, 1e-3)
    bracket = np.where(r < 1e-3, r / 6.0 - r * r / 24.0, 0.5 - 1.0 / safe - np.expm1(-safe) / (safe * safe))
    out[both] = bracket / frequencies[both]
    return out


def _limits(min_interval: float | None, max_interval: float | None) -> tuple[float, float]:
    return (0.0 if max_interval is None else 1.0 / max_interval, np.inf if min_interval is None else 1.0 / min_interval)


def _bounded(frequencies: FloatArray, min_interval: float | None, max_interval: float | None) -> FloatArray:
    return np.clip(frequencies, *_limits(min_interval, max_interval))


@dataclass(frozen=True)
class Uniform:
    name: str = "uniform"
    min_interval: float | None = None
    max_interval: float | None = None

    def frequencies(self, rates: FloatArray, weights: FloatArray, budget: float) -> FloatArray:
        pages = len(rates)
        return _bounded(np.full(pages, budget / pages if pages else 0.0), self.min_interval, self.max_interval)

    def fit(self, rates: FloatArray, weights: FloatArray, budget: float) -> PageRule:
        return _Constant(budget / len(rates) if len(rates) else 0.0, *_limits(self.min_interval, self.max_interval))


@dataclass(frozen=True)
class Proportional:
    name: str = "proportional"
    min_interval: float | None = None
    max_interval: float | None = None

    def frequencies(self, rates: FloatArray, weights: FloatArray, budget: float) -> FloatArray:
        rates = np.asarray(rates, np.float64)
        total = float(rates.sum())
        shares = rates / total if total > 0 else np.full(len(rates), 1.0 / max(1, len(rates)))
        return _bounded(budget * shares, self.min_interval, self.max_interval)

    def fit(self, rates: FloatArray, weights: FloatArray, budget: float) -> PageRule:
        total = float(np.asarray(rates, np.float64).sum())
        limits = _limits(self.min_interval, self.max_interval)
        if total <= 0:  # nothing seen to change yet: every page alike
            return _Constant(budget / len(rates) if len(rates) else 0.0, *limits)
        return _Linear(budget / total, *limits)


def _inverse_gain(targets: FloatArray) -> FloatArray:
    """r with 1 - e^-r (1 + r) = target, for targets in (0, 1) (elementwise): the series r^2/2 - r^3/3
    inverted where the target is tiny, bisection in log r elsewhere."""
    small = targets < 1e-9
    r = np.sqrt(2.0 * np.where(small, targets, 0.0))
    r = r + r * r / 3.0  # the next term of the series' inverse: exact to O(r^3)
    low = np.full(targets.shape, np.log(1e-5))
    high = np.full(targets.shape, np.log(800.0))
    for _ in range(_BISECTIONS):
        middle = (low + high) / 2.0
        guess = np.exp(middle)
        above = -np.expm1(-guess) - guess * np.exp(-guess) > targets
        high = np.where(above, middle, high)
        low = np.where(above, low, middle)
    return np.where(small, r, np.exp((low + high) / 2.0))


@dataclass(frozen=True)
class Optimal:
    """Cho & Garcia-Molina's freshness-optimal allocation, weighted (weights all 1: plain freshness)."""

    name: str = "optimal"
    min_interval: float | None = None
    max_interval: float | None = None

    def _for(self, mu: float, rates: FloatArray, weights: FloatArray) -> FloatArray:
        frequencies = np.zeros(len(rates))
        value = np.divide(weights, rates, out=np.zeros(len(rates)), where=rates > 0)  # w / lambda = w dF/df at f -> 0
        worth = (rates > 0) & (value > mu)
        if worth.any():
            r = _inverse_gain(mu / value[worth])
            frequencies[worth] = rates[worth] / r
        return _bounded(frequencies, self.min_interval, self.max_interval)

    def frequencies(self, rates: FloatArray, weights: FloatArray, budget: float) -> FloatArray:
        return self._search(rates, weights, budget)[0]

    def fit(self, rates: FloatArray, weights: FloatArray, budget: float) -> PageRule:
        _, mu, scale = self._search(rates, weights, budget)
        return _Marginal(mu, *_limits(self.min_interval, self.max_interval), scale=scale)

    def _search(self, rates: FloatArray, weights: FloatArray, budget: float) -> tuple[FloatArray, float, float]:
        """The frequencies, the mu they answer to, and the factor that spends the budget's rest."""
        rates = np.asarray(rates, np.float64)
        rates = np.where(rates < NEVER, 0.0, rates)  # w / lambda must stay finite
        weights = np.asarray(weights, np.float64)
        nothing = _bounded(np.zeros(len(rates)), self.min_interval, self.max_interval)
        if len(rates) == 0 or not (rates > 0).any():
            return nothing, np.inf, 1.0
        # the spend falls as mu rises: bisect mu on a log scale between a spend over the budget and one
        # within it (at the largest w / lambda nothing is worth a fetch)
        mu_low = 1e-300
        mu_high = float(np.max(np.divide(weights, rates, out=np.zeros(len(rates)), where=rates > 0)))
        if mu_high <= 0:
            return nothing, np.inf, 1.0
        over, within = self._for(mu_low, rates, weights), self._for(mu_high, rates, weights)
        if over.sum() <= budget:
            return over, mu_low, 1.0
        for _ in range(_BISECTIONS):
            mu = float(np.exp((np.log(mu_low) + np.log(mu_high)) / 2.0))
            if not mu_low < mu < mu_high:
                break
            spent = self._for(mu, rates, weights)
            if spent.sum() > budget:
                mu_low, over = mu, spent
            else:
                mu_high, within = mu, spent
        # where floating point ends the bisection (a page's frequency jumps from lambda/40 to 0 as mu
        # passes w / lambda), what is left of the budget goes to the pages between the two allocations
        left, gap = budget - within.sum(), over.sum() - within.sum()
        if gap > 0 and left > 0:
            return (
                within + (over - within) * (left / gap),
                mu_high,
                float(budget / within.sum()) if within.sum() > 0 else 1.0,
            )
        return within, mu_high, 1.0


@dataclass(frozen=True)
class UserExperience(Optimal):
    """Seed 004's user-experience policy: the optimal allocation under weights that say how much a
    page's staleness hurts searchers (refresh.experience: its impressions in the top results of the
    logged queries), instead of page quality."""

    name: str = "user-experience"


POLICIES: dict[str, type[Uniform] | type[Proportional] | type[Optimal]] = {
    "uniform": Uniform,
    "proportional": Proportional,
    "optimal": Optimal,
    "user-experience": UserExperience,
}
