"""What every ordering policy is to the engine and the frontier, and the re-prioritization machinery.

The frontier asks a policy for a URL's level once, when the URL enters it (`priority`), and then
keeps the URL in a FIFO front queue: Mercator's front queues cannot reorder what they hold. But the
scores of the interesting policies (in-links, partial PageRank, OPIC cash, a host's pending count,
topical relevance) keep changing after that. `ScoredPolicy` reconciles the two honestly:

- it keeps a small record per pending URL (its entry, score, current level, number of copies in
  the front queues, and whether one copy has been handed on);
- when a URL's score rises enough to move it to a more urgent level, the policy offers the entry
  again (`requeue`), and the engine adds it to the frontier: a second copy, at the new level;
- when the frontier draws a URL from the front queues it asks `admit(entry)`: the first copy drawn
  is admitted, any later (stale) copy is dropped and counted.

Levels only rise: a URL whose score falls keeps its more urgent copy (taking a copy back out of a
FIFO queue would need a scan of it), so each URL has at most `levels - 1` extra copies, and the
total work of re-prioritization is bounded by `levels` frontier adds per URL.

Memory: one `Pending` record per URL placed and not yet done (pending in the front queues, waiting
in a back queue, or in flight), freed when the engine reports the URL done: about 120 bytes, 260
with the entry and URL string it keeps alive (which the frontier alone would have spilled to disk);
bench/policies measures it. Notes on linked URLs not placed yet (`_fresh`) live until the next drain
of the URL-seen buffer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

import numpy as np
import numpy.typing as npt

from crawlspace.frontier import FrontierEntry


class Outlink(NamedTuple):
    """A link of a fetched page as the policy sees it: normalized, through the URL filter, and
    reported whether or not its target was seen before (in-links to known URLs count too)."""

    url: str
    anchor: str = ""


class PageContent(NamedTuple):
    """The text of a parsed page, for policies that judge content (focused crawling)."""

    title: str
    text: str


class FrontPrioritizer(Protocol):
    """The frontier's prioritizer protocol (crawlspace.frontier.Prioritizer)."""

    @property
    def levels(self) -> int: ...

    def priority(self, entry: FrontierEntry) -> int: ...


class OrderingPolicy(Protocol):
    """A crawl ordering policy, as the engine drives it.

    The engine gives `prioritizer` to the frontier. When a fetch ends for good (a page parsed, an
    error, a robots.txt exclusion, a redirect) it calls `page_done` with the URL's outlinks that
    passed the URL filter, before they go through the URL-seen test, and adds every entry of
    `requeue()` back into the frontier. New URLs reach the frontier (and `priority`) later, when
    the URL-seen buffer is drained; their first level reflects every page that linked them until
    then, and after the drain the engine calls `settled()`.
    Policies change only the order of the crawl: never which URLs are fetched, nor when a host may
    be contacted.
    """

    name: str

    @property
    def prioritizer(self) -> FrontPrioritizer: ...

    @property
    def observes_pages(self) -> bool:
        """False when the policy needs no page events (the engine then skips building them)."""
        ...

    def page_done(self, url: str, outlinks: Sequence[Outlink], content: PageContent | None) -> None: ...

    def requeue(self) -> list[FrontierEntry]:
        """Entries to add to the frontier again, at a more urgent level than they were given."""
        ...

    def settled(self) -> None:
        """Every out-link reported so far is in the frontier now, or was known: notes kept for
        URLs on their way through the URL-seen test can go (the engine calls it after a drain)."""
        ...

    def stats(self) -> dict[str, Any]: ...

    def close(self) -> None: ...


_ROUNDING = 1e-9  # log(8) / log(2) is 2.9999999999999996: exact powers of the step stay on their level


class LogScale:
    """Score to level on a log scale: each level holds scores a factor `step` apart.

    Scores below `unit` (and zero) go to the last level; from `unit` up, one level more urgent per
    factor `step`, level 0 taking everything from unit x step^(levels - 2) up. With the frontier's
    2^-level draw, a factor `step` of score is then a factor 2 of drawing weight.
    """

    __slots__ = ("_inv_log_step", "_log_unit", "levels")

    def __init__(self, levels: int, unit: float, step: float = 2.0) -> None:
        if levels < 2:
            raise ValueError(f"a scored policy needs at least 2 levels, got {levels}")
        if not (unit > 0 and step > 1):
            raise ValueError(f"need unit > 0 and step > 1, got unit={unit}, step={step}")
        self.levels = levels
        self._log_unit = math.log(unit)
        self._inv_log_step = 1.0 / math.log(step)

    def level(self, score: float) -> int:
        if not score > 0.0:  # zero, negative, NaN
            return self.levels - 1
        octaves = (math.log(score) - self._log_unit) * self._inv_log_step + _ROUNDING
        if octaves < 0.0:
            return self.levels - 1
        level = self.levels - 2 - int(octaves)
        return level if level > 0 else 0

    def levels_of(self, scores: npt.NDArray[np.float64]) -> npt.NDArray[np.int8]:
        """`level` of every score of an array at once."""
        with np.errstate(divide="ignore", invalid="ignore"):
            octaves = (np.log(scores) - self._log_unit) * self._inv_log_step + _ROUNDING
        levels = np.where(octaves >= 0.0, self.levels - 2 - np.floor(np.nan_to_num(octaves, nan=-1.0)), self.levels - 1)
        return np.clip(levels, 0, self.levels - 1).astype(np.int8)


class Pending:
    """A URL the policy placed in the frontier and that is not done yet."""

    __slots__ = ("admitted", "copies", "done", "entry", "level", "score")

    def __init__(self, entry: FrontierEntry, score: float, level: int) -> None:
        self.entry = entry
        self.score = score
        self.level = level
        self.copies = 1  # copies in the front queues, not yet drawn
        self.admitted = False  # one copy went on to a back queue
        self.done = False  # the engine reported the URL done; kept only while stale copies remain

    def __repr__(self) -> str:
        state = "admitted" if self.admitted else "pending"
        return f"Pending({self.entry.url!r}, score={self.score:.4g}, level={self.level}, copies={self.copies}, {state})"


class ScoredPolicy:
    """Base of the policies whose score changes after a URL entered the frontier (module docstring).

    Subclasses set `name`, build a `LogScale`, and implement `_observe` (what a finished page does
    to the scores); new URLs get `_initial_score`, by default what `_fresh` collected for them
    from the pages observed since they were first linked (notes kept until `settled`).
    """

    name = "scored"

    def __init__(self, scale: LogScale) -> None:
        self.scale = scale
        self._pending: dict[str, Pending] = {}
        self._fresh: dict[str, float] = {}  # scores of linked URLs not pending (yet): new ones or known ones
        self._promoted: list[FrontierEntry] = []
        self._requeued = 0
        self._superseded = 0
        self._admitted = 0
        self._done = 0
        self._peak_pending = 0

    # -- the frontier's side ------------------------------------------------------------------

    @property
    def levels(self) -> int:
        return self.scale.levels

    @property
    def prioritizer(self) -> ScoredPolicy:
        return self

    @property
    def observes_pages(self) -> bool:
        return True

    def priority(self, entry: FrontierEntry) -> int:
        record = self._pending.get(entry.url)
        if record is not None:  # a copy offered by `requeue`: its level was decided then
            record.copies += 1
            return record.level
        score = self._initial_score(entry)
        record = Pending(entry, score, self._new_level(score))
        self._pending[entry.url] = record
        self._added(record)
        if len(self._pending) > self._peak_pending:
            self._peak_pending = len(self._pending)
        return record.level

    def admit(self, entry: FrontierEntry) -> bool:
        """The frontier drew `entry` from a front queue: True for the first copy of a URL, False for
        a stale copy (dropped by the frontier). URLs the policy never placed are admitted."""
        record = self._pending.get(entry.url)
        if record is None:
            return True
        record.copies -= 1
        if record.admitted:
            self._superseded += 1
            if record.done and record.copies <= 0:
                del self._pending[entry.url]
            return False
        record.admitted = True
        self._admitted += 1
        self._on_admit(record)
        return True

    # -- the engine's side ---------------------------------------------------------------------

    def page_done(self, url: str, outlinks: Sequence[Outlink], content: PageContent | None) -> None:
        self._observe(url, outlinks, content)
        record = self._pending.get(url)
        if record is not None:
            self._finish(url, record)
        self._done += 1

    def requeue(self) -> list[FrontierEntry]:
        promoted, self._promoted = self._promoted, []
        self._requeued += len(promoted)
        return promoted

    def settled(self) -> None:
        self._fresh.clear()

    def stats(self) -> dict[str, Any]:
        return {
            "policy": self.name,
            "levels": self.levels,
            "pending": len(self._pending),
            "peak_pending": self._peak_pending,
            "admitted": self._admitted,
            "done": self._done,
            "requeued": self._requeued,
            "superseded": self._superseded,
            "notes": len(self._fresh),
        }

    def close(self) -> None:
        """Nothing to release by default (the partial PageRank stops its worker)."""

    # -- for subclasses -----------------------------------------------------------------------

    def _initial_score(self, entry: FrontierEntry) -> float:
        return self._fresh.pop(entry.url, 0.0)

    def _level_of(self, score: float) -> int:
        return self.scale.level(score)

    def _new_level(self, score: float) -> int:
        """The level of a URL entering the frontier (`_level_of` unless the scale is relative)."""
        return self._level_of(score)

    def _added(self, record: Pending) -> None:
        """A new URL got its record (after its level was set)."""

    def _on_admit(self, record: Pending) -> None:
        """The URL's first copy went on to a back queue: it can no longer be promoted."""

    def _observe(self, url: str, outlinks: Sequence[Outlink], content: PageContent | None) -> None:
        raise NotImplementedError

    def _finish(self, url: str, record: Pending) -> None:
        """The URL is done: forget it, unless stale copies are still queued (`admit` must know to
        drop them; it forgets the record with the last one)."""
        if not record.admitted:  # done without being drawn (a put-back, a restored frontier)
            record.admitted = True
            self._on_admit(record)
        record.done = True
        if record.copies <= 0:
            del self._pending[url]

    def _set_score(self, record: Pending, score: float) -> None:
        """A pending URL's new score; requeued when it reaches a more urgent level."""
        record.score = score
        if record.admitted:
            return
        level = self._level_of(score)
        if level < record.level:
            record.level = level
            self._promoted.append(record.entry)


def distinct_targets(source: str, outlinks: Sequence[Outlink]) -> list[str]:
    """Each linked URL once, in order, without self-links: a page endorses a target once."""
    seen: set[str] = {source}
    targets: list[str] = []
    for link in outlinks:
        if link.url not in seen:
            seen.add(link.url)
            targets.append(link.url)
    return targets
