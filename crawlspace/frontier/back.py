"""Back queues: per-host FIFO queues, the host table and the politeness timing of each host."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from crawlspace.frontier.entry import FrontierEntry


@dataclass(frozen=True, slots=True)
class Politeness:
    min_delay: float = 1.0
    delay_factor: float = 10.0
    max_delay: float = 60.0
    max_conn_per_host: int = 1

    def next_gap(self, duration: float, crawl_delay: float | None) -> float:
        """Seconds between the end of a fetch and the next contact with its host."""
        gap = min(max(self.min_delay, self.delay_factor * duration), self.max_delay)
        return max(gap, crawl_delay or 0.0)


@dataclass(slots=True)
class HostState:
    """Per-host bookkeeping; kept while the host has URLs queued or in flight, or a delay to honour."""

    name: str
    next_contact: float = 0.0
    in_flight: int = 0
    queue: deque[FrontierEntry] = field(default_factory=deque)
    active: bool = False  # owns a back queue
    in_heap: bool = False
