"""The frontier's `admit` hook and the policies driven through the real Mercator frontier."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from crawlspace.frontier import Frontier, FrontierEntry, Politeness
from crawlspace.policies import (
    BacklinkCount,
    BigSiteFirst,
    BreadthFirstOrder,
    DepthFirstOrder,
    FocusedCrawl,
    OnlineImportance,
    OrderingPolicy,
    PartialPageRank,
    RandomOrder,
    TopicScorer,
)
from tests.policies.harness import FakeClock, MercatorFront, crawl


class Requeuing:
    """Two levels; `admit` refuses the URLs named stale."""

    def __init__(self) -> None:
        self.stale: set[str] = set()
        self.asked: list[str] = []

    @property
    def levels(self) -> int:
        return 2

    def priority(self, entry: FrontierEntry) -> int:
        return 0 if entry.url.endswith("/hot") else 1

    def admit(self, entry: FrontierEntry) -> bool:
        self.asked.append(entry.url)
        return entry.url not in self.stale


def test_stale_copies_are_dropped_and_not_counted() -> None:
    clock = FakeClock()
    prioritizer = Requeuing()
    frontier = Frontier(Politeness(min_delay=0.0), back_queues=1, prioritizer=prioritizer, clock=clock)
    prioritizer.stale.add("http://b.test/x")  # already handed on elsewhere: this copy is stale
    for url in ("http://a.test/1", "http://b.test/x", "http://c.test/hot"):
        frontier.add(FrontierEntry(url))
    handed: list[str] = []
    while len(frontier) or frontier.in_flight:
        lease = frontier.acquire()
        if lease is None:
            wake = frontier.next_contact()
            assert wake is not None
            clock.now = wake
            continue
        handed.append(lease.entry.url)
        frontier.release(lease, 0.0)
    assert handed == ["http://a.test/1", "http://c.test/hot"]
    assert "http://b.test/x" in prioritizer.asked  # asked when drawn, then dropped
    assert len(frontier) == 0


def test_a_prioritizer_without_admit_is_never_asked() -> None:
    frontier = Frontier(Politeness(min_delay=0.0), back_queues=1, clock=FakeClock())
    frontier.add(FrontierEntry("http://a.test/"))
    lease = frontier.acquire()
    assert lease is not None and lease.entry.url == "http://a.test/"


POLICIES: dict[str, Callable[[], OrderingPolicy]] = {
    "bfs": BreadthFirstOrder,
    "dfs": lambda: DepthFirstOrder(8),
    "random": lambda: RandomOrder(8, seed=3),
    "backlinks": lambda: BacklinkCount(8),
    "pagerank": lambda: PartialPageRank(8, interval=3, growth=0.0, background=False),
    "opic": lambda: OnlineImportance(8),
    "bigsite": lambda: BigSiteFirst(8),
    "focused": lambda: FocusedCrawl(TopicScorer.from_keywords(["red"]), 8),
}

graphs = st.dictionaries(
    keys=st.integers(0, 30),
    values=st.lists(st.tuples(st.integers(0, 30), st.sampled_from(["red", "blue", ""])), max_size=8),
    max_size=31,
)


def url_of(page: int) -> str:
    return f"http://h{page % 5}.test/p{page}"


@settings(max_examples=40, deadline=None)
@given(graph=graphs, policy_name=st.sampled_from(sorted(POLICIES)), back_queues=st.integers(1, 4))
def test_every_policy_fetches_each_reachable_url_once(
    graph: dict[int, list[tuple[int, str]]], policy_name: str, back_queues: int
) -> None:
    links = {url_of(page): [(url_of(target), anchor) for target, anchor in out] for page, out in graph.items()}
    seeds = [url_of(0)]
    reachable = {seeds[0]}
    todo = list(seeds)
    while todo:
        for target, _ in links.get(todo.pop(), []):
            if target not in reachable:
                reachable.add(target)
                todo.append(target)
    policy = POLICIES[policy_name]()
    front = MercatorFront(policy, back_queues=back_queues)
    order = crawl(policy, links, seeds, front=front)
    assert sorted(order) == sorted(reachable)  # each once: a policy changes the order only
    assert len(front.frontier) == 0
    stats = policy.stats()
    assert stats.get("pending", 0) == 0
    assert stats.get("requeued", 0) == stats.get("superseded", 0)
