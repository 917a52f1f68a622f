"""The orderings that need no page events: breadth-first (the default), depth-first and random.

They decide a URL's level from the URL alone, once, so they keep no state and never requeue.
Breadth-first is the frontier's own `BreadthFirst` (one level: the frontier then skips the
prioritizer on its hot path); depth-first and random use the F front queues.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from crawlspace.frontier import BreadthFirst, FrontierEntry, Prioritizer
from crawlspace.policies.base import FrontPrioritizer, Outlink, PageContent


class _Stateless:
    name = "stateless"

    @property
    def prioritizer(self) -> FrontPrioritizer:
        raise NotImplementedError

    @property
    def observes_pages(self) -> bool:
        return False

    def page_done(self, url: str, outlinks: Sequence[Outlink], content: PageContent | None) -> None:
        return None

    def requeue(self) -> list[FrontierEntry]:
        return []

    def settled(self) -> None:
        return None

    def stats(self) -> dict[str, Any]:
        return {"policy": self.name, "levels": self.prioritizer.levels}

    def close(self) -> None:
        return None


class BreadthFirstOrder(_Stateless):
    """Discovery order (Najork & Wiener: "breadth-first search crawling yields high-quality pages"):
    one front queue, FIFO. Across hosts the back queues interleave it, host by host."""

    name = "bfs"

    def __init__(self) -> None:
        self._prioritizer = BreadthFirst()

    @property
    def prioritizer(self) -> FrontPrioritizer:
        return self._prioritizer


class DepthFirstOrder(_Stateless):
    """Deepest first: level = (levels - 1) - link depth, so the URLs found last, deepest in the
    link graph, are drawn first. Within a level the front queue is FIFO, and every depth beyond
    `levels - 1` shares level 0: depth-first as far as F FIFO queues can express it (a true stack
    would need a LIFO front queue, which the disk-backed Mercator frontier does not have)."""

    name = "dfs"

    def __init__(self, levels: int = 16) -> None:
        if levels < 2:
            raise ValueError(f"dfs needs at least 2 levels, got {levels}")
        self._levels = levels

    @property
    def prioritizer(self) -> DepthFirstOrder:
        return self

    @property
    def levels(self) -> int:
        return self._levels

    def priority(self, entry: FrontierEntry) -> int:
        level = self._levels - 1 - entry.depth
        return level if level > 0 else 0


class RandomOrder(_Stateless):
    """A uniformly random level per URL (seeded): the baseline of Cho et al. and Arasu et al. The
    order is a random interleaving of F FIFO queues, so it is random across the discovery order,
    not a uniform shuffle of the frontier; with F = 16 or more the difference is small."""

    name = "random"

    def __init__(self, levels: int = 16, seed: int = 0) -> None:
        if levels < 2:
            raise ValueError(f"random needs at least 2 levels, got {levels}")
        self._levels = levels
        self._rng = random.Random(seed)

    @property
    def prioritizer(self) -> RandomOrder:
        return self

    @property
    def levels(self) -> int:
        return self._levels

    def priority(self, entry: FrontierEntry) -> int:
        return self._rng.randrange(self._levels)


class GivenPrioritizer(_Stateless):
    """A plain frontier prioritizer passed through the API: it places URLs and hears no page events."""

    name = "custom"

    def __init__(self, prioritizer: Prioritizer) -> None:
        self._prioritizer = prioritizer

    @property
    def prioritizer(self) -> FrontPrioritizer:
        return self._prioritizer

    def stats(self) -> dict[str, Any]:
        return {"policy": f"custom ({type(self._prioritizer).__name__})", "levels": self._prioritizer.levels}
