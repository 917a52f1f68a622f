"""Front queues (IIR fig. 20.3, top half): the prioritizer and F FIFO queues, one per priority level.

The prioritizer gives every URL entering the frontier a level, 0 the most urgent; the URL joins
that level's queue. The back-queue router drains the front queues through `FrontQueues.pop`,
whose choice of level is random and biased towards high priority (see `FrontQueues`).
"""

from __future__ import annotations

import random
from typing import Protocol

from crawlspace.frontier.diskqueue import DiskQueue, SegmentLog
from crawlspace.frontier.entry import FrontierEntry

MAX_LEVELS = 64


class Prioritizer(Protocol):
    """Assigns each URL a front-queue level: 0 is the most urgent, `levels - 1` the least.

    Implementers see every URL once, when it enters the frontier, and answer on the add path, so
    they must be quick (a dict lookup, not I/O). They may keep their own state (in-link counts,
    OPIC cash, change rates); `levels` must not change while a frontier uses them, and a frontier
    reopened from a checkpoint must be given a prioritizer with the same number of levels. A level
    outside 0..levels-1 is clamped into range and counted in `FrontierStats.priorities_clamped`.

    A prioritizer whose scores change after a URL entered (crawlspace.policies) adds the URL again
    at its new level and may define `admit(entry) -> bool`: the frontier then asks it about every
    URL it draws from a front queue and drops one it does not admit (a stale copy), counting it in
    `FrontierStats.urls_superseded`.
    """

    @property
    def levels(self) -> int: ...

    def priority(self, entry: FrontierEntry) -> int: ...


class BreadthFirst:
    """Every URL at one level: the frontier then serves in discovery order (BFS), host by host."""

    @property
    def levels(self) -> int:
        return 1

    def priority(self, entry: FrontierEntry) -> int:
        return 0


class ByDepth:
    """Shallow URLs first: level = link depth from the seeds, the deepest levels sharing the last queue."""

    def __init__(self, levels: int = 4) -> None:
        if not 1 <= levels <= MAX_LEVELS:
            raise ValueError(f"levels must be in 1..{MAX_LEVELS}, got {levels}")
        self._levels = levels

    @property
    def levels(self) -> int:
        return self._levels

    def priority(self, entry: FrontierEntry) -> int:
        return min(entry.depth, self._levels - 1)


class FrontQueues:
    """F disk-backed FIFO queues and the biased front-queue selector.

    The bias: each draw picks a non-empty level i with probability proportional to 2^-i
    (`bias` = 2). Level 0, when it has URLs, gets at least half of the draws, level 1 a quarter
    of what is left, and so on, so high-priority URLs flow into the back queues faster while no
    non-empty level starves (level F-1 still gets at least 2^-(F-1) / 2 of the draws). The draw
    uses the frontier's seeded RNG, whose state is checkpointed: a reopened frontier makes the
    same choices.
    """

    def __init__(
        self, levels: int, log: SegmentLog, window: int, file_bytes: int, rng: random.Random, *, bias: float = 2.0
    ) -> None:
        if not 1 <= levels <= MAX_LEVELS:
            raise ValueError(f"front queue count must be in 1..{MAX_LEVELS}, got {levels}")
        if bias < 1.0:
            raise ValueError(f"bias must be at least 1 (1: no preference), got {bias}")
        self.queues = [DiskQueue(log, window, file_bytes) for _ in range(levels)]
        self.weights = [bias**-level for level in range(levels)]
        self.rng = rng
        self.size = 0

    def __len__(self) -> int:
        return self.size

    def push(self, level: int, entry: FrontierEntry) -> None:
        self.queues[level].push(entry)
        self.size += 1

    def pop(self) -> FrontierEntry | None:
        """The head of a biased-random non-empty level, or None when every level is empty."""
        queues = self.queues
        while self.size:
            queue = queues[0] if len(queues) == 1 else self._choose()
            entry = queue.pop()
            if entry is not None:
                self.size -= 1
                return entry
            self.size = sum(q.size for q in queues)  # a corrupt block was skipped: recount
        return None

    def _choose(self) -> DiskQueue:
        weights = self.weights
        total = 0.0
        for level, queue in enumerate(self.queues):
            if queue.size:
                total += weights[level]
        draw = self.rng.random() * total
        chosen = self.queues[0]
        for level, queue in enumerate(self.queues):
            if queue.size:
                chosen = queue
                draw -= weights[level]
                if draw < 0.0:
                    break
        return chosen

    def sizes(self) -> list[int]:
        return [queue.size for queue in self.queues]
