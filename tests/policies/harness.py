"""A crawl of a link graph in memory, driving a policy exactly as the engine does.

`StrictFront` is a reference front: F FIFO queues drained strictly by level (lowest non-empty
first), with the `admit` hook, so that a policy's ordering can be asserted without Mercator's
biased random choice. `crawl` runs a graph to the end through a front (the strict one, or the real
frontier) and returns the fetch order.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from crawlspace.frontier import Frontier, FrontierEntry, Politeness
from crawlspace.policies import OrderingPolicy, Outlink, PageContent

Graph = Mapping[str, Sequence[str | tuple[str, str]]]  # url -> links (url, or (url, anchor text))


@dataclass
class StrictFront:
    policy: OrderingPolicy
    queues: list[deque[FrontierEntry]] = field(default_factory=list)
    dropped: int = 0

    def __post_init__(self) -> None:
        self.queues = [deque() for _ in range(self.policy.prioritizer.levels)]

    def add(self, entry: FrontierEntry) -> None:
        prioritizer = self.policy.prioritizer
        level = prioritizer.priority(entry) if prioritizer.levels > 1 else 0
        assert 0 <= level < prioritizer.levels
        self.queues[level].append(entry)

    def pop(self) -> FrontierEntry | None:
        admit: Callable[[FrontierEntry], bool] | None = getattr(self.policy.prioritizer, "admit", None)
        for queue in self.queues:
            while queue:
                entry = queue.popleft()
                if admit is None or admit(entry):
                    return entry
                self.dropped += 1
        return None

    def __len__(self) -> int:
        return sum(len(queue) for queue in self.queues)


def links_of(graph: Graph, url: str) -> list[Outlink]:
    out: list[Outlink] = []
    for link in graph.get(url, ()):
        out.append(Outlink(link, "") if isinstance(link, str) else Outlink(*link))
    return out


def depth_of(graph: Graph, seeds: Sequence[str]) -> dict[str, int]:
    depth = dict.fromkeys(seeds, 0)
    queue = deque(seeds)
    while queue:
        url = queue.popleft()
        for link in links_of(graph, url):
            if link.url not in depth:
                depth[link.url] = depth[url] + 1
                queue.append(link.url)
    return depth


class Front(Protocol):
    def add(self, entry: FrontierEntry) -> None: ...

    def pop(self) -> FrontierEntry | None: ...


def crawl(
    policy: OrderingPolicy,
    graph: Graph,
    seeds: Sequence[str],
    *,
    texts: Mapping[str, str] | None = None,
    front: Front | None = None,
    limit: int = 100_000,
) -> list[str]:
    """Fetch order of a crawl of `graph` from `seeds`: page events as the engine sends them."""
    if front is None:
        front = StrictFront(policy)
    seen: set[str] = set()
    order: list[str] = []
    for seed in seeds:
        if seed not in seen:
            seen.add(seed)
            front.add(FrontierEntry(seed))
    while len(order) < limit:
        entry = front.pop()
        if entry is None:
            break
        order.append(entry.url)
        outlinks = links_of(graph, entry.url)
        content = PageContent(entry.url, texts.get(entry.url, "")) if texts is not None else None
        policy.page_done(entry.url, outlinks, content)
        for link in outlinks:
            if link.url not in seen:
                seen.add(link.url)
                front.add(FrontierEntry(link.url, entry.depth + 1))
        policy.settled()
        for again in policy.requeue():
            front.add(again)
    return order


class FakeClock:
    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


class MercatorFront:
    """The real frontier behind the harness's front interface: a URL is leased when its host's
    politeness allows (on a fake clock) and released at once after a fetch of `duration`."""

    def __init__(self, policy: OrderingPolicy, *, back_queues: int = 2, duration: float = 0.01) -> None:
        self.clock = FakeClock()
        self.frontier = Frontier(
            Politeness(min_delay=0.0, delay_factor=1.0, max_delay=1.0),
            back_queues=back_queues,
            prioritizer=policy.prioritizer,
            clock=self.clock,
        )
        self.duration = duration
        self.leases = 0

    def add(self, entry: FrontierEntry) -> None:
        self.frontier.add(entry)

    def pop(self) -> FrontierEntry | None:
        while True:
            lease = self.frontier.acquire()
            if lease is not None:
                self.leases += 1
                self.clock.now += self.duration
                self.frontier.release(lease, self.duration)
                return lease.entry
            wake = self.frontier.next_contact()
            if wake is None:
                assert len(self.frontier) == 0 and self.frontier.in_flight == 0, "frontier stuck"
                return None
            self.clock.now = max(self.clock.now, wake)

    def __len__(self) -> int:
        return len(self.frontier)
