"""Per-origin cache of robots.txt rules, with the fetch-status semantics of RFC 9309 §2.3 and §2.4.

Sans-IO and clock-free: the engine fetches and passes `now`; the cache decides what an outcome
means and for how long it holds. Keyed by origin (scheme://host[:port]): robots.txt applies to
one scheme, host and port only (RFC 9309 §2.3).

- 2xx: the body is parsed; valid for `ttl` (24 h by default, RFC 9309 §2.4).
- 3xx: followed by the engine, at most 5 hops (§2.3.1.2); past that the file counts as
  unavailable, as Google does.
- 4xx ("unavailable", §2.3.1.3): no restrictions, for `ttl`. 429 is the exception: it asks us to
  slow down, so it is treated like a server error (Google does the same).
- 5xx, other statuses and network errors ("unreachable", §2.3.1.4): complete disallow, retried
  after `retry_delay`, doubling with each consecutive failure up to `ttl`. The engine keeps the
  host's URLs waiting for the next attempts (robots_max_retries of them) instead of dropping
  them, except after failures that waiting does not cure (unknown name, refused address).
- long unavailability (§2.3.1.4 allows either a cached copy or "unavailable" after ~30 days): if
  the host ever served a robots.txt, its last parsed copy stays in force for as long as the file
  is unreachable (§2.4 allows caching beyond 24 h in that case); if it never did, we keep the
  complete disallow and never fall back to "no restrictions": an unreachable robots.txt is not
  consent, and a crawl rarely outlives 30 days of errors.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from crawlspace.robots.rules import RobotsRules, parse

DAY = 86400.0
DEFAULT_RETRY_DELAY = 120.0
MAX_REDIRECT_HOPS = 5  # RFC 9309 §2.3.1.2
DEFAULT_MAX_ENTRIES = 100_000


class RobotsStatus(StrEnum):
    PARSED = "parsed"  # 2xx, body parsed
    UNAVAILABLE = "unavailable"  # 4xx or too many redirects: no restrictions
    UNREACHABLE = "unreachable"  # 5xx, 429, network error: disallow (or the last good copy)


@dataclass(slots=True)
class RobotsEntry:
    """What the cache knows about one origin's robots.txt."""

    rules: RobotsRules
    status: RobotsStatus
    expires: float
    failures: int = 0  # consecutive unreachable outcomes
    transient: bool = True  # worth waiting for (5xx, timeouts), unlike a refused address or unknown name
    unreachable_since: float | None = None
    last_good: RobotsRules | None = None  # last parsed or unavailable rules, kept through outages

    @property
    def unreachable(self) -> bool:
        return self.status is RobotsStatus.UNREACHABLE


class RobotsCache:
    """Bounded: beyond `max_entries` origins the least recently used entry is forgotten (and
    its robots.txt fetched again when the host comes back)."""

    def __init__(
        self, ttl: float = DAY, retry_delay: float = DEFAULT_RETRY_DELAY, max_entries: int = DEFAULT_MAX_ENTRIES
    ) -> None:
        if ttl <= 0 or retry_delay <= 0 or max_entries < 1:
            raise ValueError("ttl and retry_delay must be positive, max_entries at least 1")
        self._ttl = ttl
        self._retry_delay = retry_delay
        self._max_entries = max_entries
        self._entries: dict[str, RobotsEntry] = {}
        self.hits = 0  # asked of `entry`: answered by a fresh entry
        self.misses = 0  # asked of `entry`: nothing fresh, robots.txt must be fetched

    def get(self, origin: str, now: float) -> RobotsRules | None:
        """The rules in force for `origin`, or None when robots.txt must be (re)fetched."""
        entry = self.entry(origin, now)
        return None if entry is None else entry.rules

    def entry(self, origin: str, now: float) -> RobotsEntry | None:
        """The fresh entry of `origin`, or None when robots.txt must be (re)fetched."""
        entry = self._entries.pop(origin, None)
        if entry is None:
            self.misses += 1
            return None
        self._entries[origin] = entry  # most recently used last
        if entry.expires <= now:
            self.misses += 1
            return None
        self.hits += 1
        return entry

    def stats(self) -> dict[str, float | int]:
        """The "robots" section of stats.json."""
        asked = self.hits + self.misses
        return {
            "hits": self.hits,
            "misses": self.misses,
            "hit_rate": round(self.hits / asked, 4) if asked else 0.0,
            "cached_origins": len(self._entries),
        }

    def peek(self, origin: str) -> RobotsEntry | None:
        """The entry of `origin` even if expired (the engine's last-resort read, see CrawlEngine)."""
        return self._entries.get(origin)

    def store_response(self, origin: str, status: int, body: bytes, now: float) -> RobotsRules:
        """Record the final (non-redirect) HTTP response for /robots.txt of `origin`."""
        if 200 <= status < 300:
            return self._store(origin, parse(body), RobotsStatus.PARSED, now)
        if 400 <= status < 500 and status != 429:
            return self.store_unavailable(origin, now)
        return self.store_unreachable(origin, now)

    def store_unavailable(self, origin: str, now: float) -> RobotsRules:
        """4xx, or more than five redirects: no restrictions (RFC 9309 §2.3.1.2, §2.3.1.3)."""
        return self._store(origin, RobotsRules.allow_all(), RobotsStatus.UNAVAILABLE, now)

    def store_unreachable(self, origin: str, now: float, *, transient: bool = True) -> RobotsRules:
        """5xx, 429 or a network failure: complete disallow (or the last good copy), retried with backoff.

        `transient=False` for failures that waiting will not cure (DNS, refused addresses): the
        engine then drops the host's URLs at once instead of keeping them for the retry.
        """
        previous = self._entries.get(origin)
        failures = (previous.failures if previous else 0) + 1
        last_good = previous.last_good if previous else None
        since = previous.unreachable_since if previous and previous.unreachable_since is not None else now
        rules = last_good if last_good is not None else RobotsRules.disallow_all()
        wait = min(self._retry_delay * 2 ** min(failures - 1, 30), self._ttl)
        entry = RobotsEntry(rules, RobotsStatus.UNREACHABLE, now + wait, failures, transient, since, last_good)
        self._put(origin, entry)
        return rules

    def _store(self, origin: str, rules: RobotsRules, status: RobotsStatus, now: float) -> RobotsRules:
        self._put(origin, RobotsEntry(rules, status, now + self._ttl, last_good=rules))
        return rules

    def _put(self, origin: str, entry: RobotsEntry) -> None:
        self._entries.pop(origin, None)
        self._entries[origin] = entry
        while len(self._entries) > self._max_entries:
            del self._entries[next(iter(self._entries))]

    def forget(self, origin: str) -> None:
        self._entries.pop(origin, None)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"RobotsCache({len(self._entries)} origins, ttl={self._ttl}s, retry_delay={self._retry_delay}s)"
