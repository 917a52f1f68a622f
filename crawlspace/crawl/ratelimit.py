"""The crawl's fetch-rate cap (`max_rate`): a bandwidth budget for the whole crawl, divided among its
partitions, enforced where a lease turns into a fetch.

Pure bookkeeping (GCRA, the "virtual scheduling" form of a token bucket): each fetch reserves the
next slot, 1/rate after the previous one, and is told how long to wait for it; a crawl that fell
behind (idle hosts, politeness) may catch up by at most `burst` fetches at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class RateLimit:
    rate: float  # fetches per second
    burst: float = 1.0  # fetches that may go at once after a pause
    _next: float = field(default=float("-inf"), repr=False)

    def __post_init__(self) -> None:
        if not self.rate > 0:
            raise ValueError(f"a rate limit needs a positive rate, not {self.rate!r}")

    def reserve(self, now: float) -> float:
        """Reserve the next fetch; seconds to wait before it may start (0: at once)."""
        interval = 1.0 / self.rate
        start = max(self._next, now - (self.burst - 1.0) * interval)
        self._next = start + interval
        return max(0.0, start - now)
