"""How often does a page change? Estimates of a page's Poisson change rate from what refetches saw.

A crawler never sees a page's changes, only whether it differs from the last fetch (and, from some
servers, when it last changed: `Last-Modified`). Cho & Garcia-Molina (*Estimating frequency of
change*, ACM TOIT 2003) model changes as a Poisson process of rate lambda and show that the naive
estimate (changes seen / time watched) is badly biased: a page fetched daily that changes hourly
shows a change at every fetch and is estimated at one change a day. Their answer for fetches at a
regular interval I, X changes seen in n fetches, is the bias-reduced

    lambda = -log((n - X + 0.5) / (n + 0.5)) / I

which stays finite when every fetch saw a change. A crawler's fetches are not regular (politeness,
the queue, a crash), so this module solves the maximum-likelihood equation of irregular intervals,
with the same half observation of "no change" added at the mean interval of the changes seen
without a date, which makes it equal to the formula above whenever the intervals are equal
(tested), and finite always. (Dated changes need no such help: their likelihood is an
exponential's, whose estimate is finite; the half observation would only bias it down.) Each
observation is one interval between two fetches of one of three kinds:

- unchanged over t:                         likelihood exp(-lambda t)
- changed within t, time unknown:           1 - exp(-lambda t)
- changed, the last change u before the fetch (a plausible `Last-Modified`, after the previous
  fetch): lambda exp(-lambda u), a change then and none since

so the log-likelihood's derivative, with T0 the time watched without a change (unchanged intervals,
the ages u, the half observation) and D the dated changes,

    g(lambda) = sum over undated changes of t / (exp(lambda t) - 1) + D / lambda - T0

falls strictly from +infinity to -T0: one root, found by Newton steps safeguarded by bisection in
a bracket, in a handful of iterations from the regular-interval formula as the first guess (a few
tens of microseconds for a window of 32 observations, once per refetch). No change seen: 0.

`Last-Modified` is used only where it is plausible (after the previous fetch and not after this
one, within `CLOCK_SKEW`): dynamic pages send the time of the request, and many servers send one
date for every page; such a date makes the observation an undated change.

A history is a bounded window of the latest observations (`ChangeHistory`, `WINDOW`), so an
estimate follows a page whose rate drifts, and its record has a bounded size. Pages with little
history borrow the rate of their cluster (seed 004's cluster sampling; the refresher keeps each host's):
`Blend` weights a page's own estimate by its history against the cluster's.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import msgspec

WINDOW = 32  # observations kept per page: the estimate's memory, and how fast it follows a drift
CLOCK_SKEW = 5.0  # seconds a Last-Modified may lie after the fetch (server clocks) and still count
HALF = 0.5  # the pseudo-observation of Cho & Garcia-Molina's bias reduction
_ITERATIONS = 100
_TOLERANCE = 1e-12


class Observation(msgspec.Struct, array_like=True, frozen=True):
    """One interval between two fetches of a page.

    `interval`: seconds between the fetches (> 0); `changed`: the second fetch differed; `age`: for a
    change, seconds from its last modification to the second fetch when known (0 < age <= interval),
    else None."""

    interval: float
    changed: bool
    age: float | None = None


class EstimateError(ValueError):
    """An observation that cannot be one (a non-positive interval, an age beyond its interval)."""


def observe(
    previous_fetch: float, fetch: float, *, changed: bool, last_modified: float | None = None
) -> Observation | None:
    """The observation two fetches make (times in seconds since the epoch); None when the clock went
    backwards or stood still between them (nothing can be learnt). `last_modified` is used only when
    it falls within the interval (up to `CLOCK_SKEW` after the fetch)."""
    interval = fetch - previous_fetch
    if not interval > 0 or not math.isfinite(interval):
        return None
    age = None
    if changed and last_modified is not None and previous_fetch < last_modified <= fetch + CLOCK_SKEW:
        age = min(interval, max(fetch - last_modified, interval * 1e-6))
    return Observation(interval, changed, age)


def _checked(observations: Iterable[Observation]) -> list[Observation]:
    kept = list(observations)
    for observation in kept:
        if not (observation.interval > 0 and math.isfinite(observation.interval)):
            raise EstimateError(f"an interval must be a positive number of seconds, not {observation.interval!r}")
        if observation.age is not None and not (0 < observation.age <= observation.interval):
            raise EstimateError(
                f"an age must lie in (0, interval], not {observation.age!r} of {observation.interval!r}"
            )
        if observation.age is not None and not observation.changed:
            raise EstimateError("an unchanged interval has no age of a change")
    return kept


def estimate_rate(observations: Sequence[Observation]) -> float:
    """The page's change rate (changes per second) from its observations; 0.0 when none saw a change
    (or there are none)."""
    kept = _checked(observations)
    undated = [o.interval for o in kept if o.changed and o.age is None]
    dated = sum(1 for o in kept if o.age is not None)
    if not undated and not dated:
        return 0.0
    mean_interval = sum(o.interval for o in kept) / len(kept)
    watched = sum(o.interval for o in kept if not o.changed) + sum(o.age for o in kept if o.age is not None)
    if undated:  # the bias reduction, where change/no-change is all there is to go by
        watched += HALF * sum(undated) / len(undated)

    def slope(rate: float) -> tuple[float, float]:
        """g(rate) and g'(rate)."""
        value, derivative = dated / rate - watched, -dated / (rate * rate)
        for t in undated:
            x = rate * t
            if x > 700.0:  # exp overflows; the term and its derivative are 0 to double precision
                continue
            grown = math.expm1(x)
            value += t / grown
            derivative -= t * t * (grown + 1.0) / (grown * grown)
        return value, derivative

    changes = len(undated) + dated
    # the regular-interval formula as the first guess, and a bracket around the root
    guess = math.log((len(kept) + HALF) / (len(kept) - changes + HALF)) / mean_interval
    low, high = guess, guess
    while slope(low)[0] < 0:
        low /= 2.0
    while slope(high)[0] > 0:
        high *= 2.0
    rate = min(max(guess, low), high)
    for _ in range(_ITERATIONS):
        value, derivative = slope(rate)
        if abs(value) <= _TOLERANCE * watched:
            break
        if value > 0:
            low = rate
        else:
            high = rate
        if high - low <= _TOLERANCE * high:
            return (low + high) / 2.0
        step = rate - value / derivative if derivative < 0 else math.nan
        rate = step if low < step < high else (low + high) / 2.0
    return rate


def regular_rate(fetches: int, changes: int, interval: float) -> float:
    """Cho & Garcia-Molina's bias-reduced estimator for `fetches` observations at one `interval`."""
    if not 0 <= changes <= fetches or interval <= 0:
        raise EstimateError(f"{changes} changes in {fetches} observations of {interval!r} s is not a history")
    return -math.log((fetches - changes + HALF) / (fetches + HALF)) / interval


class ChangeHistory(msgspec.Struct, array_like=True):
    """A page's latest observations (at most `WINDOW`), oldest first: what its estimate is made of."""

    observations: list[Observation] = msgspec.field(default_factory=list)

    def add(self, observation: Observation | None, window: int = WINDOW) -> None:
        if observation is None:
            return
        self.observations.append(observation)
        if len(self.observations) > window:
            del self.observations[: len(self.observations) - window]

    @property
    def rate(self) -> float:
        return estimate_rate(self.observations)

    def __len__(self) -> int:
        return len(self.observations)


@dataclass(frozen=True, slots=True)
class Blend:
    """A page's estimate weighted against its cluster's: `own` with weight n / (n + `prior_weight`)
    for n observations, so a page with no history has its cluster's rate and one with a long history
    its own."""

    prior_weight: float = 4.0

    def rate(self, own: float, observations: int, cluster: float) -> float:
        weight = observations / (observations + self.prior_weight)
        return weight * own + (1.0 - weight) * cluster
