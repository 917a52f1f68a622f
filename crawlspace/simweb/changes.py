"""A simulated web that changes: every page's content at any instant is a pure function of (seed, page,
time), so a continuous crawl can be judged exactly for freshness and age from the server's log.

Change rates are heavy-tailed (Cho & Garcia-Molina measured a web where most pages change rarely and a
few change all the time): a third of the pages never change; most change every day to every two
months; some every ten minutes to every day; a few, the spam of IIR 20.2.3, on every request. Rates
are in changes per simulated second; `time_scale` simulated seconds pass in each real second (60:
an hour of changes in a minute of test), counted from `change_epoch` (a Unix time the config fixes,
so the server and the judge agree), before which every page is at version 0.

Changes form a Poisson process per page, drawn deterministically slot by slot: simulated time is
cut into slots of about four expected changes of the page (a minute to 400 days), and the arrivals
in slot k are exponential gaps from a generator seeded by (seed, page, k), which is exact for a
Poisson process (memoryless) and lets the version at any instant be found by looking back one or
two slots, and the next change by looking ahead, without any state. Spam pages change every
millisecond of simulated time instead: a different body at every request.

A version is a number that grows with time (0: the page as generated). What a change does to the
page (simweb.render): the opening words and one paragraph are rewritten from the version, and one
version in four adds a link to a news item (`/news/<page>-<version>.html`, a new URL that exists from
that version on).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from crawlspace.simweb.model import mix

DAY = 86_400.0
SPAM_TICK = 0.001  # simulated seconds between a spam page's versions
SLOT_CHANGES = 4.0  # expected changes per slot
SLOT_RANGE = (60.0, 400 * DAY)
SLOT_BITS = 20  # a version is slot << SLOT_BITS | arrival index + 1 (at most 2**20 arrivals a slot)
NEWS_EVERY = 4  # one version in this many adds a news link


class Kind:
    STATIC = 0
    SLOW = 1  # every day to every two months
    FAST = 2  # every ten minutes to every day
    SPAM = 3  # on every request


@dataclass(frozen=True, slots=True)
class Version:
    number: int  # grows with time; 0: as generated
    changed_at: float  # Unix time (real) of the change that made it; the epoch for version 0


class ChangeModel:
    """Rates, versions and change times of a changing web's pages (nodes below `pages`)."""

    def __init__(self, seed: int, pages: int, *, epoch: float, time_scale: float) -> None:
        self.seed = seed
        self.pages = pages
        self.epoch = epoch
        self.time_scale = time_scale
        self._rates: dict[int, tuple[int, float]] = {}

    def __repr__(self) -> str:
        return f"ChangeModel(seed={self.seed}, {self.pages} pages, epoch={self.epoch}, x{self.time_scale})"

    def kind_and_rate(self, page: int) -> tuple[int, float]:
        """The page's kind and its rate in changes per simulated second (inf for spam, 0 for static)."""
        known = self._rates.get(page)
        if known is not None:
            return known
        key = mix(self.seed, page, 91)
        draw = (key & 0xFFFF) / 65536.0
        spread = ((key >> 16) & 0xFFFF) / 65536.0
        if draw < 0.34:
            known = (Kind.STATIC, 0.0)
        elif draw < 0.84:
            known = (Kind.SLOW, 1.0 / (DAY * 60.0 ** (1.0 - spread)))  # log-uniform, 60 days to 1 day
        elif draw < 0.99:
            known = (Kind.FAST, 1.0 / (600.0 * 144.0 ** (1.0 - spread)))  # 1 day to 10 minutes
        else:
            known = (Kind.SPAM, math.inf)
        self._rates[page] = known
        return known

    def rate(self, page: int) -> float:
        """Changes per real second."""
        return self.kind_and_rate(page)[1] * self.time_scale

    def _simulated(self, at: float) -> float:
        return (at - self.epoch) * self.time_scale

    def _real(self, simulated: float) -> float:
        return self.epoch + simulated / self.time_scale

    def _slot(self, rate: float) -> float:
        return min(SLOT_RANGE[1], max(SLOT_RANGE[0], SLOT_CHANGES / rate))

    def _arrivals(self, page: int, slot: int, rate: float, length: float) -> list[float]:
        """Offsets of the changes within slot `slot` (simulated seconds from its start)."""
        generator = random.Random(mix(self.seed, page, slot, 92))
        offsets: list[float] = []
        offset = generator.expovariate(rate)
        while offset < length and len(offsets) < (1 << SLOT_BITS) - 1:
            offsets.append(offset)
            offset += generator.expovariate(rate)
        return offsets

    def version(self, page: int, at: float) -> Version:
        """The page's version at Unix time `at`."""
        kind, rate = self.kind_and_rate(page)
        now = self._simulated(at)
        if kind == Kind.STATIC or now <= 0:
            return Version(0, self.epoch)
        if kind == Kind.SPAM:
            tick = math.floor(now / SPAM_TICK) + 1
            while tick > 0 and self._real(tick * SPAM_TICK) > at:  # in real time, as next_change
                tick -= 1
            return Version(tick, self._real(tick * SPAM_TICK))
        length = self._slot(rate)
        slot = int(now // length)
        while slot >= 0:
            offsets = self._arrivals(page, slot, rate, length)
            start = slot * length
            before = [offset for offset in offsets if self._real(start + offset) <= at]  # in real time, as next_change
            if before:
                return Version((slot << SLOT_BITS) | len(before), self._real(start + before[-1]))
            slot -= 1
        return Version(0, self.epoch)

    def next_change(self, page: int, after: float, *, horizon: float) -> float | None:
        """The first change (Unix time) after `after`, None if none before `horizon`."""
        kind, rate = self.kind_and_rate(page)
        if kind == Kind.STATIC:
            return None
        start = max(0.0, self._simulated(after))
        end = self._simulated(horizon)
        if kind == Kind.SPAM:
            tick = math.floor(start / SPAM_TICK)
            while self._real(tick * SPAM_TICK) <= after:  # compared in real time: the conversions round
                tick += 1
            found = tick * SPAM_TICK
            return self._real(found) if found <= end else None
        length = self._slot(rate)
        slot = int(start // length)
        while slot * length <= end:
            for offset in self._arrivals(page, slot, rate, length):
                moment = slot * length + offset
                if self._real(moment) > after:
                    return self._real(moment) if moment <= end else None
            slot += 1
        return None

    def news_version(self, version: int, page: int) -> bool:
        """Whether this version of the page adds a news link (never a spam page's: it would be a trap)."""
        if version <= 0 or self.kind_and_rate(page)[0] in (Kind.STATIC, Kind.SPAM):
            return False
        return mix(self.seed, page, version, 93) % NEWS_EVERY == 0
