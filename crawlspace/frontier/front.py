"""Front queues: one FIFO per priority level, drained by a random choice biased to high priority."""

from __future__ import annotations

import random
from collections import deque
from typing import Protocol

from crawlspace.frontier.entry import FrontierEntry


class Prioritizer(Protocol):
    """Assigns each URL a front-queue level: 0 is the most urgent, `levels - 1` the least.

    Implementers see every URL once, when it enters the frontier; they may keep their own state
    (in-link counts, cash) but must answer quickly: this runs on the add path.

    A prioritizer whose scores change after a URL entered may add the URL again at a more urgent
    level, and define `admit(entry) -> bool`: the frontier calls it for every URL it draws from
    the front queues, and drops (and no longer counts) a URL it does not admit, i.e. a stale copy.
    """

    @property
    def levels(self) -> int: ...

    def priority(self, entry: FrontierEntry) -> int: ...


class BreadthFirst:
    """Every URL at one level: front queues then serve in discovery order (BFS)."""

    @property
    def levels(self) -> int:
        return 1

    def priority(self, entry: FrontierEntry) -> int:
        return 0


class FrontQueues:
    """F FIFO queues. Level i is chosen with weight 2^-(i) among the non-empty ones (Mercator's bias):
    high-priority URLs flow faster into the back queues without starving the low ones."""

    def __init__(self, levels: int, rng: random.Random) -> None:
        self._queues: list[deque[FrontierEntry]] = [deque() for _ in range(levels)]
        self._weights = [2.0**-level for level in range(levels)]
        self._rng = rng
        self._size = 0

    def push(self, level: int, entry: FrontierEntry) -> None:
        self._queues[level].append(entry)
        self._size += 1

    def pop(self) -> FrontierEntry | None:
        if self._size == 0:
            return None
        candidates = [i for i, queue in enumerate(self._queues) if queue]
        if len(candidates) == 1:
            level = candidates[0]
        else:
            level = self._rng.choices(candidates, weights=[self._weights[i] for i in candidates])[0]
        self._size -= 1
        return self._queues[level].popleft()

    def __len__(self) -> int:
        return self._size
