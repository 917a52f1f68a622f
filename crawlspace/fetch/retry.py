"""When a failed attempt is worth another, and how long the host must rest first. Sans-IO.

The fetcher never sleeps or retries: the engine asks `RetryPolicy.decide` after each attempt and,
for a retry, puts the URL back at the head of its host's queue with the host's next contact time
pushed back by `delay` (the frontier's `release(put_back=..., retry_after=...)`). A worker is
never held, politeness still holds (a retry is just another contact with the host), and the
number of attempts per URL is bounded.

429 and 503 carry the server's Retry-After, which is honoured for the whole host; with it, the
URL is retried after that rest (the server invited it). Network failures (timeouts, resets,
refused connections) back off exponentially from `initial_delay`. Other statuses are answers, not
failures, and are not retried unless configured (`statuses`, e.g. 500, 502, 504; Scrapy retries
those, Heritrix does not): a 500 that is a property of the page would only be fetched again.
"""

from __future__ import annotations

from dataclasses import dataclass

from crawlspace.fetch.fetcher import FetchResult

SLOW_DOWN_STATUSES = frozenset({429, 503})


@dataclass(frozen=True, slots=True)
class RetryDecision:
    retry: bool
    delay: float | None  # seconds the host must rest beyond its politeness delay (None: no extra rest)
    reason: str = ""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_retries: int = 3
    initial_delay: float = 30.0
    max_delay: float = 3600.0
    statuses: frozenset[int] = frozenset()  # retried like network failures

    def backoff(self, attempts: int) -> float:
        """Rest after the `attempts`-th failed attempt: initial, 2x, 4x, ... capped at max_delay."""
        return float(min(self.initial_delay * 2.0 ** max(attempts - 1, 0), self.max_delay))

    def decide(self, result: FetchResult, attempts: int) -> RetryDecision:
        """`attempts` counts the attempts made on this URL so far, this one included."""
        retry_after = None
        if result.status in SLOW_DOWN_STATUSES:
            retry_after = result.retry_after()
            if retry_after is not None:
                retry_after = min(retry_after, self.max_delay)
        invited = retry_after is not None
        transient = result.outcome.is_transient or result.status in self.statuses or invited
        if not transient:
            return RetryDecision(False, retry_after)
        return self.failed(str(result.status or result.outcome), attempts, retry_after)

    def failed(self, reason: str, attempts: int, retry_after: float | None = None) -> RetryDecision:
        """After the `attempts`-th failed attempt: again after the backoff (or the server's `retry_after`,
        the longer), or given up once `max_retries` retries were made."""
        if attempts > self.max_retries:
            return RetryDecision(False, retry_after, f"{reason}: gave up after {attempts} attempts")
        return RetryDecision(True, max(self.backoff(attempts), retry_after or 0.0), reason)
