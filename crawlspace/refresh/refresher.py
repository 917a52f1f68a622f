"""A continuous crawl's refresher: what the engine asks after each fetch ("when again?") and before each
fetch ("what did it look like last time?"), and the feed of due URLs back into the frontier.

Who fills it and who drains it: the engine reports every page fetch (`fetched`: the status, the body's
fingerprint, the validators the server sent); the refresher turns it into an observation of the
page's change history (changed: another fingerprint; unchanged: the same one, or a 304), estimates
the page's change rate (estimate.py, borrowing its host's rate while the page's history is short),
asks the refresh policy for a frequency (a page with fewer than `EXPLORE` observations gets the even
share instead: a policy that judged it by its host's rate alone could put it out of reach for its
longest interval before anything was learnt of it), and puts the page into the schedule (schedule.py) at its
next due time, with the history and validators as the entry's data. The engine's feeder calls
`due(now)`, which hands out due URLs no faster than the refresh budget (`rate` fetches per second:
`max_rate x refresh_share` of this partition; when nothing is due and the budget has gone unspent
for a second, the pages due soonest go early, so that a policy spends the budget it was fitted to
even while the intervals it gave are longer than the crawl so far), for the frontier's front queues, where politeness,
robots.txt and the URL filter apply as for new URLs; before fetching one, the engine asks for its
`validators` (a conditional GET).

The policy is fitted every `refit_every` seconds (and whenever the schedule has grown or shrunk by a
tenth since) to a reservoir sample of the pages' current
estimates and weights (policies.RefreshPolicy.fit), so a crawl of any size holds a sample in memory,
not its pages.

Weights are page quality (IIR 20.2.3: "high-quality pages that change frequently should be
prioritized"), from in-links (`quality="in-links"`, the default): a page's weight is
log2(2 + the pages seen linking it), 1 for a page nobody links, growing by one per doubling, so that
a well-linked page that changes often is worth refetching and a spam page that changes on every
fetch and that nobody links is not. The links are counted as the crawl finds them, cheaply: when a
page is first fetched, each distinct target of its links (not itself) gains one, in the schedule's
store (schedule.py), in the same write as the page's scheduling. Links a page gains in later versions
are not counted (that would need each page's earlier link set). In a crawl of several partitions
each partition counts the links its own pages make: a page linked from other partitions weighs less
than it would in one process. `quality="pagerank"`: a page weighs 1 + log2(1 + its relative
partial PageRank) (policies.PartialPageRank.relative_rank: 1 is the uniform share, so a page nobody
links weighs about 1.2 and the average page 2), over the graph of the links each page's first fetch
in this process found (`observe_once`: a refetch adds no edges twice), computed every
`pagerank_interval` pages off the fetch path as the crawl-ordering policy of that name does; the
graph is rebuilt as pages are refetched after a resume, so weights start near even again. The same
partition caveat as for in-links applies. `quality="none"`: every weight is 1 (plain freshness).

Invariants: a page fetched is in the schedule once (its next due time); a URL handed out stays in
the schedule under a lease until its refetch reschedules it, so a crash between the two loses
nothing (schedule.py); a URL handed out again while its refetch is still queued is fetched at most
once per `min_interval` (`recently_fetched`).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Literal

import msgspec
import numpy as np

from crawlspace.fetch import Validators
from crawlspace.policies.base import Outlink
from crawlspace.policies.pagerank import PartialPageRank
from crawlspace.refresh.estimate import Blend, ChangeHistory, estimate_rate, observe
from crawlspace.refresh.experience import UserExperienceWeights
from crawlspace.refresh.policies import PageRule, RefreshPolicy
from crawlspace.refresh.schedule import Schedule
from crawlspace.urls import host_of

SAMPLE = 4096  # pages whose estimates the policy is fitted to
REFIT_EVERY = 30.0  # seconds between fits
HOST_HISTORY = 4  # observations before a page's own estimate counts towards its host's rate
DEFAULT_RATE = 1.0 / 86400.0  # changes per second assumed of a page of a host with nothing seen yet
EXPLORE = 3  # observations a page needs before the policy decides its interval (before: the even share)
RATE_FLOOR = 1e-9  # changes per second a page that showed none counts as, in a host's geometric mean
BLEND = Blend(prior_weight=2.0)  # a page's own estimate weighs as much as its host's after 2 observations


class PageRecord(msgspec.Struct, array_like=True):
    """What the schedule keeps with a page: its change history and what the last fetch saw."""

    fetched: float  # Unix time of the last fetch
    fingerprint: int | None
    etag: str | None
    last_modified: str | None
    depth: int
    history: ChangeHistory = msgspec.field(default_factory=ChangeHistory)
    counted: float | None = None  # the estimate this page last added to its host's rate (None: none yet)
    due: float = 0.0  # the next due time its last fetch gave (a hand-out's lease replaces it in the schedule)


@dataclass
class _HostRate:
    """The geometric mean of a host's pages' rates (a sum of logs): rates are heavy-tailed, and an
    arithmetic mean would be its one fast page's, making every quiet page of the host look busy."""

    log_total: float = 0.0
    pages: int = 0

    @property
    def rate(self) -> float | None:
        return math.exp(self.log_total / self.pages) if self.pages else None


def _log_rate(rate: float) -> float:
    return math.log(max(rate, RATE_FLOOR))


@dataclass
class RefreshStats:
    scheduled: int = 0  # fetches rescheduled
    changed: int = 0
    unchanged: int = 0
    not_modified: int = 0  # 304 answers to conditional GETs
    handed_out: int = 0
    skipped_recent: int = 0
    early: int = 0  # handed out before their due time, so that the budget is spent
    fits: int = 0

    def to_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


@dataclass
class Refresher:
    schedule: Schedule
    policy: RefreshPolicy
    rate: float  # refresh fetches per second this refresher may hand out
    min_interval: float = 60.0
    max_interval: float = 30 * 86400.0
    clock: Callable[[], float] = time.time
    refit_every: float = REFIT_EVERY
    quality: Literal["in-links", "pagerank", "none"] = "in-links"
    pagerank: PartialPageRank | None = None  # quality="pagerank": the graph and its ranks (made if not given)
    experience: UserExperienceWeights | None = None  # the user-experience policy: these weights, not quality
    stats: RefreshStats = field(default_factory=RefreshStats)

    def __post_init__(self) -> None:
        self._encoder = msgspec.msgpack.Encoder()
        self._decoder = msgspec.msgpack.Decoder(PageRecord)
        self._hosts: dict[str, _HostRate] = {}
        self._sampled: list[str] = []  # a uniform sample of the pages (reservoir sampling as they are first fetched)
        self._sample: dict[str, tuple[float, float]] = {}  # ... with each one's current estimate and weight
        self._pages_seen = 0
        self._random = random.Random(0)
        self._rule: PageRule | None = None
        self._fitted_at = -math.inf
        self._fitted_pages = 0
        self._tokens = 0.0
        self._tokens_at: float | None = None
        # handed out and not fetched yet, with the time (not handed out again early until their lease
        # ends); in hand-out order, so the ones whose lease ran out are at the front
        self._out: dict[str, float] = {}
        self._run_started = self.clock()
        if self.quality == "pagerank" and self.pagerank is None:
            self.pagerank = PartialPageRank()

    def __repr__(self) -> str:
        return f"Refresher({self.policy.name}, {self.rate:g}/s, {len(self.schedule)} scheduled)"

    # -- before a fetch ------------------------------------------------------------------------

    def record(self, url: str) -> PageRecord | None:
        entry = self.schedule.entry(url)
        if entry is None or not entry.data:
            return None
        try:
            return self._decoder.decode(entry.data)
        except msgspec.DecodeError:
            return None  # a damaged entry: the page is fetched as if new, and its record rewritten

    def validators(self, url: str) -> Validators | None:
        record = self.record(url)
        if record is None or not (record.etag or record.last_modified):
            return None
        return Validators(record.etag, record.last_modified)

    def recently_fetched(self, url: str) -> bool:
        """Fetched less than `min_interval` ago: a second copy of its refresh (a lease that ran out
        while the first waited in the frontier, a page handed out again after its first copy's
        refetch, or a resume) is dropped. The copy's hand-out leased the page for `lease` seconds:
        the page goes back to the due time its last fetch gave it (else a page the policy wants
        every few seconds would wait out the lease), and the budget the copy took is given back."""
        self._out.pop(url, None)
        record = self.record(url)
        if record is not None and self.clock() - record.fetched < self.min_interval:
            self.stats.skipped_recent += 1
            self._tokens = min(self._tokens + 1.0, max(1.0, self.rate))
            if record.due > record.fetched and self.schedule.due_time(url) != record.due:
                self.schedule.put(url, record.due, 0, self._encoder.encode(record))
            return True
        return False

    # -- after a fetch -------------------------------------------------------------------------

    def fetched(
        self,
        url: str,
        *,
        status: int,
        fingerprint: int | None,
        etag: str | None,
        last_modified: str | None,
        depth: int,
        at: float | None = None,
        links: Iterable[str] = (),
    ) -> float:
        """Reschedule a page after a fetch that got a response; its next due time. `links`: the
        (normalized) targets of the page's links, counted as in-links at its first fetch."""
        now = self.clock() if at is None else at
        record = self.record(url)
        # a page enters the sample at its first fetch in this run: after a resume the sample is empty, and
        # a crawl with nothing new to find would otherwise fit its policy to no page at all
        entering = record is None or record.fetched < self._run_started
        not_modified = status == 304
        if record is not None:
            if not_modified:
                fingerprint = record.fingerprint
                self.stats.not_modified += 1
            changed = fingerprint != record.fingerprint
            self.stats.changed += changed
            self.stats.unchanged += not changed
            modified_at = _http_date(last_modified) if changed else None
            record.history.add(observe(record.fetched, now, changed=changed, last_modified=modified_at))
            record.fetched, record.fingerprint = now, fingerprint
            record.etag = etag or (record.etag if not_modified else None)
            record.last_modified = last_modified or (record.last_modified if not_modified else None)
        else:
            record = PageRecord(now, fingerprint, etag, last_modified, depth)
        new_page = self.schedule.entry(url) is None
        if new_page and self.quality == "in-links":
            self.schedule.add_inlinks(set(links) - {url})
        elif self.pagerank is not None:
            self.pagerank.observe_once(url, [Outlink(link) for link in links])
        rate = self._rate(record, host_of(url))
        weight = self.weight(url)
        self._offer(url, rate, weight, new_page=entering)
        frequency = self._frequency(rate, weight, now, new_page=new_page)
        if len(record.history) < EXPLORE:  # too little seen to judge: the even share, to learn its rate
            frequency = self.rate / (len(self.schedule) + new_page)
        interval = self.max_interval if frequency <= 0 else 1.0 / frequency
        interval = min(max(interval, self.min_interval), self.max_interval)
        due = now + interval
        record.due = due
        self._out.pop(url, None)
        self.schedule.put(url, due, 0, self._encoder.encode(record))
        self.stats.scheduled += 1
        return due

    def _rate(self, record: PageRecord, host: str) -> float:
        """The page's estimate blended with its host's: seed 004's cluster sampling, the host's rate being
        the geometric mean of the latest estimates of its pages with a history (each page once, however
        often it is refetched: a mean over refetches would be its fastest pages' rate)."""
        history = record.history
        known = self._hosts.setdefault(host, _HostRate())
        own = estimate_rate(history.observations)
        if len(history) >= HOST_HISTORY:
            if record.counted is None:
                known.pages += 1
            else:
                known.log_total -= _log_rate(record.counted)
            known.log_total += _log_rate(own)
            record.counted = own
        prior = known.rate if known.rate is not None else self._global_rate()
        return BLEND.rate(own, len(history), prior)

    def weight(self, url: str) -> float:
        """The page's quality weight (see the module docstring), or how much its staleness hurts
        searchers under the user-experience policy (refresh.experience)."""
        if self.experience is not None:
            return self.experience.weight(url)
        if self.quality == "none":
            return 1.0
        if self.pagerank is not None:
            return 1.0 + math.log2(1.0 + self.pagerank.relative_rank(url))
        return math.log2(2.0 + self.schedule.inlinks(url))

    def _global_rate(self) -> float:
        return float(np.mean([rate for rate, _ in self._sample.values()])) if self._sample else DEFAULT_RATE

    def _offer(self, url: str, rate: float, weight: float, *, new_page: bool) -> None:
        """The sample the policy is fitted to: pages drawn uniformly (Vitter's algorithm R over pages as
        they are first fetched), each with its latest estimate; a page refetched more often must not
        weigh more."""
        if url in self._sample:
            self._sample[url] = (rate, weight)
            return
        if not new_page:
            return
        self._pages_seen += 1
        if len(self._sampled) < SAMPLE:
            self._sampled.append(url)
            self._sample[url] = (rate, weight)
            return
        slot = self._random.randrange(self._pages_seen)
        if slot < SAMPLE:
            del self._sample[self._sampled[slot]]
            self._sampled[slot] = url
            self._sample[url] = (rate, weight)

    def _frequency(self, rate: float, weight: float, now: float, *, new_page: bool) -> float:
        pages = len(self.schedule) + new_page  # the page being rescheduled counts, once
        grown = abs(pages - self._fitted_pages) > 0.1 * self._fitted_pages  # the crawl's first pass, mostly
        if self._rule is None or grown or now - self._fitted_at >= self.refit_every:
            self._fitted_pages = pages
            sample = np.array(list(self._sample.values()) or [(rate, weight)], np.float64)
            share = self.rate * len(sample) / max(pages, len(sample))
            self._rule = self.policy.fit(sample[:, 0], sample[:, 1], share)
            self._fitted_at = now
            self.stats.fits += 1
        return self._rule.frequency(rate, weight)

    def reweigh(self) -> None:
        """The weights changed (the user-experience policy's were recomputed): the sample the policy is
        fitted to takes them now, and the next reschedule fits again. A page's due time changes at its
        next fetch, at most `max_interval` away."""
        self._sample = {url: (rate, self.weight(url)) for url, (rate, _) in self._sample.items()}
        self._rule = None

    # -- the feed ------------------------------------------------------------------------------

    def due(self, limit: int, *, lease: float) -> list[tuple[str, int]]:
        """(url, depth) of due pages, no more than the budget allows since the last call."""
        now = self.clock()
        if self._tokens_at is None:
            self._tokens_at = now
        self._tokens = min(self._tokens + (now - self._tokens_at) * self.rate, max(1.0, self.rate))
        self._tokens_at = now
        full = self._tokens >= max(1.0, self.rate)  # the budget went unspent for a while
        allowed = min(limit, int(self._tokens))
        if allowed <= 0:
            return []
        while self._out and next(iter(self._out.values())) < now - lease:  # never fetched: leases over
            del self._out[next(iter(self._out))]
        taken = self.schedule.take(now, allowed, lease=lease)
        if full and len(taken) < allowed:  # work-conserving: the pages due soonest go early
            # (once every page not out is taken, the next soonest are the leased ones: pages still in
            # the frontier or in flight, and those just taken, whose second copy would only be dropped)
            now_out = {item.url for item in taken}
            early = [
                item
                for item in self.schedule.take(now, allowed - len(taken), lease=lease, until=math.inf)
                if item.url not in self._out and item.url not in now_out
            ]
            self.stats.early += len(early)
            taken += early
        self._tokens -= len(taken)
        self.stats.handed_out += len(taken)
        out: list[tuple[str, int]] = []
        for item in taken:
            self._out.pop(item.url, None)
            self._out[item.url] = now
            try:
                depth = self._decoder.decode(item.data).depth if item.data else 0
            except msgspec.DecodeError:
                depth = 0
            out.append((item.url, depth))
        return out

    def commit(self, *, sync: bool = True) -> None:
        self.schedule.commit(sync=sync)

    def close(self) -> None:
        if self.pagerank is not None:
            self.pagerank.close()
        self.schedule.close()


def _http_date(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
