"""robots.txt, checked immediately before every fetch (IIR §20.2.1: a URL may wait days in the frontier).

Who asks: the engine, for each lease, once the host's address is known. The gate answers from
the per-origin cache (robots/cache.py: RFC 9309 status semantics, lifetimes, backoff):

- no fresh entry: fetch /robots.txt now, through the same lease, so that the request is subject to
  the host's politeness like any other; the URL goes back to the frontier and is decided on its
  next turn (a robots.txt fetched for this very URL counts then, even if a short lifetime ran out);
- allowed: fetch the page;
- disallowed because robots.txt is unreachable (5xx, 429, network), still within its retries: the
  URL waits for the next attempt (its host is "parked": a crawl does not idle only for those);
- disallowed: the URL is dropped and counted (excluded, or unreachable for good).

Fetched outcomes worth keeping (rules, "unavailable") are logged for a resume (robots/persist.py)
at the journal's cadence; the sitemaps a robots.txt names are returned for the link pipeline.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field

from crawlspace.crawl.ledger import Ledger
from crawlspace.crawl.telemetry import CrawlStats
from crawlspace.fetch import Fetcher, Outcome
from crawlspace.robots import RobotsCache, RobotsRules
from crawlspace.robots.cache import MAX_REDIRECT_HOPS
from crawlspace.robots.persist import RobotsLog
from crawlspace.robots.rules import MAX_ROBOTS_BYTES
from crawlspace.store import PageStore
from crawlspace.urls import InvalidURL, join, normalize, origin_of


class Verdict(enum.Enum):
    FETCH_ROBOTS = "fetch robots.txt first"
    ALLOWED = "allowed"
    WAIT = "wait for robots.txt"
    DROPPED = "dropped"


@dataclass(frozen=True, slots=True)
class RobotsDecision:
    verdict: Verdict
    origin: str
    rules: RobotsRules | None = None  # in force (ALLOWED)
    retry_after: float = 0.0  # WAIT: until the next attempt at robots.txt


@dataclass(frozen=True, slots=True)
class RobotsFetched:
    rules: RobotsRules
    sitemaps: list[str] = field(default_factory=list)  # named by a 2xx robots.txt, when sitemaps are followed
    base: str = ""  # the robots.txt URL they are relative to (after redirects)


class RobotsGate:
    def __init__(
        self,
        cache: RobotsCache,
        log: RobotsLog,
        *,
        agent: str,
        max_retries: int,
        follow_sitemaps: bool,
        store: PageStore,
        ledger: Ledger,
        stats: CrawlStats,
    ) -> None:
        self.cache = cache
        self.log = log
        self.agent = agent
        self.parked: set[str] = set()  # hosts whose URLs wait for the retry of an unreachable robots.txt
        self._max_retries = max_retries
        self._follow_sitemaps = follow_sitemaps
        self._store = store
        self._ledger = ledger
        self._stats = stats
        self._fetched_for: dict[str, str] = {}  # origin -> URL whose lease fetched its robots.txt

    def __repr__(self) -> str:
        return f"RobotsGate({self.cache!r}, {len(self.parked)} hosts parked)"

    def decide(self, url: str, host: str, now: float) -> RobotsDecision:
        """What to do with `url` (leased, of `host`) now, from the cache alone."""
        origin = origin_of(url)
        fetched_for = self._fetched_for.pop(origin, None)
        robots = self.cache.entry(origin, now)
        if robots is None and fetched_for == url:
            # fetched for this very URL one politeness gap ago: it counts, even if a short TTL ran out
            robots = self.cache.peek(origin)
        if robots is None:
            return RobotsDecision(Verdict.FETCH_ROBOTS, origin)
        if robots.rules.allowed(url, self.agent):
            return RobotsDecision(Verdict.ALLOWED, origin, robots.rules)
        if robots.unreachable and robots.transient and robots.failures <= self._max_retries:
            # robots.txt could not be fetched: the URL waits for the next attempt, it is not dropped
            self.parked.add(host)
            return RobotsDecision(Verdict.WAIT, origin, retry_after=max(robots.expires - now, 0.0))
        if robots.unreachable:
            self._stats.robots_unreachable += 1
        else:
            self._stats.robots_excluded += 1
            self._stats.outcomes[Outcome.ROBOTS_EXCLUDED] += 1
        return RobotsDecision(Verdict.DROPPED, origin)

    def crawl_delay(self, rules: RobotsRules) -> float | None:
        return rules.crawl_delay(self.agent)

    async def fetch(self, fetcher: Fetcher, origin: str, for_url: str) -> RobotsFetched:
        """Fetch /robots.txt of `origin` (following up to 5 redirects) for the lease of `for_url`, and
        cache what it means."""
        fetched = await self._fetch(fetcher, origin)
        self._fetched_for[origin] = for_url
        return fetched

    async def _fetch(self, fetcher: Fetcher, origin: str) -> RobotsFetched:
        url = origin + "/robots.txt"
        status = 0
        for _ in range(MAX_REDIRECT_HOPS + 1):
            result = await fetcher.fetch(url)
            self._stats.robots_fetches += 1
            status = result.status
            if status:
                self._store.record(result)
            now = time.monotonic()
            if result.outcome is Outcome.REDIRECT:
                try:
                    url = normalize(join(url, result.header("location") or ""))
                except InvalidURL:
                    return RobotsFetched(self._unavailable(origin, status, now))
                continue
            if not status:
                self._stats.errors[f"robots:{result.outcome}"] += 1
                # a name that does not resolve or an address we refuse will not get better by waiting
                transient = result.outcome not in (Outcome.DNS_ERROR, Outcome.GUARD_REFUSED)
                return RobotsFetched(self.cache.store_unreachable(origin, now, transient=transient))
            body = result.content(MAX_ROBOTS_BYTES + 1)  # one byte more tells the parser it was cut
            rules = self.cache.store_response(origin, status, body, now)
            entry = self.cache.peek(origin)
            if entry is not None and not entry.unreachable:  # parsed or unavailable: kept across a restart
                self.log.record(origin, status, body if 200 <= status < 300 else b"")
                self._ledger.flush_soon()
            if 200 <= status < 300 and self._follow_sitemaps and rules.sitemaps:
                return RobotsFetched(rules, list(rules.sitemaps), url)
            return RobotsFetched(rules)
        return RobotsFetched(self._unavailable(origin, status, time.monotonic()))  # more than 5 redirects

    def _unavailable(self, origin: str, status: int, now: float) -> RobotsRules:
        """A redirect that leads nowhere or too far: no restrictions (RFC 9309 §2.3.1.2), kept like a 4xx."""
        self.log.record(origin, status, b"")
        self._ledger.flush_soon()
        return self.cache.store_unavailable(origin, now)
