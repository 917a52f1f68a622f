"""Each policy's ordering on small link graphs, through a strict-priority front (harness.py)."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

import crawlspace.policies.pagerank as pagerank_module
from crawlspace.frontier import FrontierEntry
from crawlspace.policies import (
    BacklinkCount,
    BigSiteFirst,
    BreadthFirstOrder,
    DepthFirstOrder,
    FocusedCrawl,
    LogScale,
    OnlineImportance,
    Outlink,
    PartialPageRank,
    RandomOrder,
    TopicScorer,
)
from tests.policies.harness import StrictFront, crawl


def u(name: str, host: str = "s.test") -> str:
    return f"http://{host}/{name}"


TREE = {
    u("s"): [u("a"), u("b")],
    u("a"): [u("c")],
    u("b"): [u("d")],
    u("c"): [u("e")],
}


def names(order: list[str]) -> list[str]:
    return [url.rsplit("/", 1)[1] for url in order]


def test_breadth_first_is_discovery_order() -> None:
    assert names(crawl(BreadthFirstOrder(), TREE, [u("s")])) == ["s", "a", "b", "c", "d", "e"]
    assert BreadthFirstOrder().prioritizer.levels == 1


def test_depth_first_follows_the_deepest_link() -> None:
    assert names(crawl(DepthFirstOrder(8), TREE, [u("s")])) == ["s", "a", "c", "e", "b", "d"]


def test_depth_first_shares_the_last_level_beyond_its_depth() -> None:
    policy = DepthFirstOrder(4)
    assert [policy.priority(FrontierEntry("http://x.test/", depth)) for depth in range(7)] == [3, 2, 1, 0, 0, 0, 0]


def test_random_is_seeded_and_covers_everything() -> None:
    graph = {u("s"): [u(f"p{i}") for i in range(40)]}
    first = crawl(RandomOrder(16, seed=1), graph, [u("s")])
    assert first == crawl(RandomOrder(16, seed=1), graph, [u("s")])
    other = crawl(RandomOrder(16, seed=2), graph, [u("s")])
    assert other != first and sorted(other) == sorted(first)
    assert first != crawl(BreadthFirstOrder(), graph, [u("s")])


def test_backlinks_puts_the_most_linked_first() -> None:
    # after s, a b c t are pending with one in-link each; a and b both link t
    graph = {
        u("s"): [u("a"), u("b"), u("c"), u("t"), u("v")],
        u("a"): [u("t"), u("w")],
        u("b"): [u("t"), u("w"), u("v")],
        u("c"): [u("v")],
    }
    policy = BacklinkCount(8)
    order = names(crawl(policy, graph, [u("s")]))
    # a: t reaches 2 in-links and jumps the queue; b: t (3) is already handed on, v and w reach 2
    assert order[:3] == ["s", "a", "t"]
    assert order.index("v") < order.index("c")
    assert order.index("w") < order.index("c")
    stats = policy.stats()
    assert stats["pending"] == 0
    assert stats["requeued"] == stats["superseded"] > 0


def test_backlinks_count_a_page_once_and_never_a_self_link() -> None:
    policy = BacklinkCount(8)
    front = StrictFront(policy)
    for name in ("x", "y"):
        front.add(FrontierEntry(u(name)))
    policy.page_done(u("p"), [Outlink(u("x")), Outlink(u("x")), Outlink(u("x"))], None)
    policy.page_done(u("y"), [Outlink(u("y"))], None)  # done before it was drawn (a put-back, say)
    assert policy._pending[u("x")].score == 1.0
    assert policy._pending[u("y")].score == 0.0
    assert [entry.url for entry in iter(front.pop, None)] == [u("x")]  # y's queued copy is stale now
    assert front.dropped == 1
    assert list(policy._pending) == [u("x")]


def test_log_scale() -> None:
    scale = LogScale(6, unit=1.0, step=2.0)
    assert [scale.level(score) for score in (0, 0.5, 1, 1.9, 2, 3, 4, 8, 16, 1e9)] == [5, 5, 4, 4, 3, 3, 2, 1, 0, 0]
    scores = np.array([0, 0.5, 1, 1.9, 2, 3, 4, 8, 16, 1e9, np.nan])
    assert scale.levels_of(scores).tolist() == [5, 5, 4, 4, 3, 3, 2, 1, 0, 0, 5]
    assert scale.level(float("nan")) == 5
    with pytest.raises(ValueError):
        LogScale(1, unit=1.0)


def reference_pagerank(edges: dict[str, list[str]], nodes: list[str], damping: float) -> dict[str, float]:
    """Dense power iteration over the known graph (rank of nodes without out-edges spread evenly)."""
    index = {node: i for i, node in enumerate(nodes)}
    n = len(nodes)
    matrix = np.zeros((n, n))
    dangling = np.ones(n, bool)
    for source, targets in edges.items():
        distinct = [t for t in dict.fromkeys(targets) if t != source]
        for target in distinct:
            matrix[index[target], index[source]] += 1.0 / len(distinct)
        if distinct:
            dangling[index[source]] = False
    rank = np.full(n, 1.0 / n)
    for _ in range(1000):
        new = damping * matrix @ rank + ((1 - damping) + damping * rank[dangling].sum()) / n
        new /= new.sum()
        if np.abs(new - rank).sum() < 1e-13:
            break
        rank = new
    return {node: float(rank[index[node]]) for node in nodes}


def test_partial_pagerank_matches_pagerank_of_the_known_graph() -> None:
    graph = {
        u("s"): [u("a"), u("b"), u("c")],
        u("a"): [u("b"), u("d")],
        u("b"): [u("a"), u("c"), u("e")],
        u("c"): [u("a")],
        u("d"): [u("s"), u("f")],
    }
    policy = PartialPageRank(16, interval=1, growth=0.0, background=False, tolerance=1e-13, max_iterations=1000)
    order = crawl(policy, graph, [u("s")], limit=4)
    known_edges = {url: graph.get(url, []) for url in order}
    nodes = list(dict.fromkeys([u("s"), *[t for url in order for t in graph.get(url, [])]]))
    expected = reference_pagerank(known_edges, nodes, 0.85)
    got = policy.scores()
    assert len(got) == len(nodes)
    for node_id, url in enumerate(nodes):  # ids are given in discovery order
        assert got[node_id] == pytest.approx(expected[url], rel=1e-6), url
    assert policy.stats()["computations"] == 4


def test_partial_pagerank_prefers_rank_flowing_from_a_strong_page() -> None:
    # y is found early from a weak page, x late from the hub h (linked by every leaf)
    leaves = [u(f"l{i}") for i in range(4)]
    graph = {
        u("s"): [*leaves, u("h")],
        u("l3"): [u("h"), u("y")],
        u("h"): [u("x")],
        **{leaf: [u("h")] for leaf in leaves[:3]},
    }
    policy = PartialPageRank(16, interval=2, growth=0.0, background=False)
    order = names(crawl(policy, graph, [u("s")]))
    assert order.index("h") < order.index("l1")  # promoted by in-flowing rank before the other leaves
    assert order.index("x") < order.index("y")
    assert policy.stats()["pending"] == 0


def test_partial_pagerank_computes_off_the_loop_and_applies_later(monkeypatch: pytest.MonkeyPatch) -> None:
    threads: list[str] = []
    compute = pagerank_module._compute

    def recording(*args: Any) -> Any:
        threads.append(threading.current_thread().name)
        return compute(*args)

    monkeypatch.setattr(pagerank_module, "_compute", recording)
    graph = {u(f"p{i}"): [u(f"p{(i * 7 + k) % 50}") for k in range(1, 6)] for i in range(50)}
    policy = PartialPageRank(16, interval=5, growth=0.0, background=True)
    try:
        order = crawl(policy, graph, [u("p0")])
        assert sorted(order) == sorted(graph)
        policy.flush()
        stats = policy.stats()
        assert stats["computations"] == len(threads) >= 1
        assert all(name.startswith("crawlspace-pagerank") for name in threads)
        assert 0 < stats["last_computation"]["nodes"] <= 50
        assert stats["computation_failures"] == 0
    finally:
        policy.close()


def test_opic_moves_cash_and_fetches_the_richest_first() -> None:
    graph = {
        u("s"): [u("a"), u("b")],
        u("a"): [u("c")],
        u("b"): [u("d"), u("e"), u("c")],
        u("c"): [u("f")],
    }
    policy = OnlineImportance(16)
    front = StrictFront(policy)
    order = names(crawl(policy, graph, [u("s")], front=front))
    assert order[:3] == ["s", "a", "b"]
    # c holds 1/2 + 1/6 of the seed's cash, d and e 1/6 each: c first although found before them
    assert order[3] == "c"
    stats = policy.stats()
    assert stats["total_cash"] == 1.0
    assert stats["pending_cash"] == pytest.approx(0.0, abs=1e-12)
    assert stats["virtual_cash"] == pytest.approx(1.0 - 0.0, abs=1e-12)  # every leaf's cash ends there


def test_opic_cash_is_conserved_midway() -> None:
    policy = OnlineImportance(16)
    front = StrictFront(policy)
    front.add(FrontierEntry(u("s")))
    assert front.pop() is not None
    policy.page_done(u("s"), [Outlink(u("a")), Outlink(u("b")), Outlink(u("c")), Outlink(u("s"))], None)
    for name in "abc":
        front.add(FrontierEntry(u(name)))
    assert {name: policy._pending[u(name)].score for name in "abc"} == pytest.approx(dict.fromkeys("abc", 1 / 3))
    assert policy.stats()["pending_cash"] == pytest.approx(1.0)


def test_big_site_first() -> None:
    graph = {u("s"): [u("a1", "a.test"), u("b1", "b.test"), u("b2", "b.test"), u("b3", "b.test"), u("c1", "c.test")]}
    policy = BigSiteFirst(8)
    order = crawl(policy, graph, [u("s")])
    hosts = [url.split("/")[2] for url in order[1:]]
    assert hosts[:3] == ["b.test"] * 3
    assert policy.stats()["pending"] == 0
    assert policy.stats()["hosts_pending"] == 0


def test_big_site_keeps_its_level_while_it_is_crawled() -> None:
    policy = BigSiteFirst(8)
    front = StrictFront(policy)
    for i in range(4):
        front.add(FrontierEntry(u(f"b{i}", "b.test")))
    level = policy._pending[u("b0", "b.test")].level
    entry = front.pop()
    assert entry is not None
    policy.page_done(entry.url, [], None)
    assert policy.priority(FrontierEntry(u("b9", "b.test"))) == level  # 4 pending again, same level


def test_topic_scorer() -> None:
    scorer = TopicScorer.from_keywords(["Car repair", "engine"])
    assert scorer.terms == ["car", "engine", "repair"]
    assert scorer.score("car repair engine") == pytest.approx(1.0)
    assert scorer.score("The car") == pytest.approx(1 / 3**0.5)
    assert scorer.score("cooking recipes") == 0.0
    assert scorer.score("") == 0.0
    assert scorer.page_score("Engine repair", "nothing at all here") > scorer.score("nothing at all here")
    example = TopicScorer.from_document("engine engine engine car. The and of.")
    assert example.terms == ["car", "engine"]
    with pytest.raises(ValueError):
        TopicScorer.from_keywords(["the", "of"])


def test_focused_follows_relevant_anchors_and_pages() -> None:
    graph = {
        u("s"): [(u("x1"), "cooking recipes"), (u("y1"), "car repair guide"), (u("z1"), "gardening")],
        u("y1"): [(u("y2"), "more"), (u("w"), "weather")],
        u("x1"): [(u("x2"), "more")],
        u("z1"): [(u("z2"), "more")],
    }
    texts = {u("y1"): "how to repair the engine of a car", u("y2"): "car engine repair", u("x1"): "pasta"}
    policy = FocusedCrawl(TopicScorer.from_keywords(["car", "repair", "engine"]), 16, threshold=0.3)
    order = names(crawl(policy, graph, [u("s")], texts=texts))
    assert order[:3] == ["s", "y1", "y2"]  # the relevant anchor, then the relevant page's link
    assert order.index("w") < order.index("x1")  # inherits from its relevant parent page
    stats = policy.stats()
    assert stats["relevant_pages"] == 2 and stats["pages_judged"] == len(order)
    assert stats["harvest_rate"] == pytest.approx(2 / len(order), abs=1e-4)


@pytest.mark.parametrize(
    "make",
    [
        lambda: BacklinkCount(6),
        lambda: OnlineImportance(6),
        lambda: BigSiteFirst(6),
        lambda: PartialPageRank(6, interval=3, growth=0.0, background=False),
        lambda: FocusedCrawl(TopicScorer.from_keywords(["alpha"]), 6),
    ],
    ids=["backlinks", "opic", "bigsite", "pagerank", "focused"],
)
def test_requeued_urls_are_fetched_once_and_forgotten(make) -> None:  # type: ignore[no-untyped-def]
    hubs = [u(f"h{i}", f"h{i % 3}.test") for i in range(6)]
    graph: dict[str, list[str | tuple[str, str]]] = {
        u(f"p{i}"): [(hub, "alpha" if k % 2 else "beta") for k, hub in enumerate(hubs[: i % 6 + 1])] + [u(f"p{i + 1}")]
        for i in range(30)
    }
    policy = make()
    front = StrictFront(policy)
    order = crawl(policy, graph, [u("p0")], front=front)
    assert len(order) == len(set(order)) == 37
    stats = policy.stats()
    assert stats["pending"] == 0
    assert stats["requeued"] == stats["superseded"] == front.dropped
    assert stats["requeued"] <= 37 * (policy.levels - 1)
