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

from crawlspace.frontier import FrontierEntry
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


def crawl(
    policy: OrderingPolicy,
    graph: Graph,
    seeds: Sequence[str],
    *,
    texts: Mapping[str, str] | None = None,
    front: StrictFront | None = None,
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
        for again in policy.requeue():
            front.add(again)
    return order
