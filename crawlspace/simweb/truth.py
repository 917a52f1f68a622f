"""Ground truth computed from the arrays: what a correct crawl fetches, and PageRank.

Both work on node ids (model.py) and never look at rendered bodies or hrefs, so they judge
the renderer as much as the crawler. The trap's calendar space has no node ids and is left out.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

import numpy as np

from crawlspace.simweb.model import ExtraKind, FloatArray, WebData
from crawlspace.simweb.robots import RobotsKind, path_allowed


def allowed_nodes(data: WebData, agent: str) -> list[bool]:
    """robots.txt verdict of every node for `agent` (by the hand-written rules of robots.py)."""
    kinds = [RobotsKind(int(kind)) for kind in data.host_robots.tolist()]
    return [path_allowed(kinds[data.host_of_node(node)], data.path_of(node), agent) for node in range(data.nodes)]


class LinkTable:
    """Followable out-links of every node as Python lists (fast to walk), built once per query."""

    def __init__(self, data: WebData, follow_nofollow: bool) -> None:
        self.data = data
        starts = data.link_start.tolist()
        destinations = data.link_dst.tolist()
        nofollow = data.link_nofollow.tolist()
        self.page_links: list[list[int]] = [
            [
                destinations[i]
                for i in range(starts[page], starts[page + 1])
                if destinations[i] >= 0 and (follow_nofollow or not nofollow[i])
            ]
            for page in range(data.pages)
        ]
        self.kinds = data.extra_kind.tolist()
        self.targets = data.extra_target.tolist()

    def link_source(self, node: int) -> int:
        """The page whose links a node's body carries: itself, or the original of a copy or near-copy."""
        pages = self.data.pages
        if node >= pages and self.kinds[node - pages] in (ExtraKind.COPY, ExtraKind.NEAR):
            return int(self.targets[node - pages])
        return node

    def out(self, node: int) -> list[int]:
        """Nodes a body links to; copies and near-copies carry their original's links."""
        source = self.link_source(node)
        return self.page_links[source] if source < self.data.pages else []

    def redirect(self, node: int) -> int | None:
        pages = self.data.pages
        if node >= pages and self.kinds[node - pages] == ExtraKind.REDIRECT:
            return int(self.targets[node - pages])
        return None


def expected_fetch_nodes(
    data: WebData,
    seeds: Iterable[int],
    *,
    agent: str,
    follow_nofollow: bool,
    max_redirects: int,
    follow_duplicate_links: bool = True,
) -> set[int]:
    """Nodes a correct crawler requests, each once: BFS over followed links and redirects.

    A node is fetched when robots.txt allows it and it is reached from a seed through links,
    where a redirect target counts one hop more than its redirect and link targets count zero;
    targets beyond `max_redirects` hops are not fetched (unless reached otherwise). With
    `follow_duplicate_links` false, only the first fetched of an original and its exact and near
    copies has its links followed, as a crawler with a content-seen test does; since all of them
    carry the same absolute links, the result must not change (the tests assert it).
    """
    allowed = allowed_nodes(data, agent)
    table = LinkTable(data, follow_nofollow)
    hops = [max_redirects + 1] * data.nodes
    fetched: set[int] = set()
    expanded: set[int] = set()
    queue: deque[tuple[int, int]] = deque()
    for seed in seeds:
        if allowed[seed] and hops[seed] > 0:
            hops[seed] = 0
            queue.append((seed, 0))
    while queue:
        node, hop = queue.popleft()
        if hop > hops[node]:
            continue
        first_visit = node not in fetched
        fetched.add(node)
        target = table.redirect(node)
        if target is not None:
            if hop + 1 <= max_redirects and allowed[target] and hop + 1 < hops[target]:
                hops[target] = hop + 1
                queue.append((target, hop + 1))
            continue
        if not first_visit:
            continue
        source = table.link_source(node)
        if not follow_duplicate_links and source in expanded:
            continue
        expanded.add(source)
        for linked in table.out(node):
            if allowed[linked] and hops[linked] > 0:
                hops[linked] = 0
                queue.append((linked, 0))
    return fetched


def pagerank(data: WebData, damping: float, tolerance: float = 1e-12, max_iterations: int = 200) -> FloatArray:
    """PageRank of every node by power iteration; nofollow links carry no rank, redirects pass it on.

    Edges: each page's distinct followed link targets, a copy's or near-copy's those of its
    original, a redirect to its target. Rank of nodes without out-edges (404s, 5xx, leaves) is
    spread evenly over all nodes, so the vector always sums to 1.
    """
    table = LinkTable(data, follow_nofollow=False)
    sources: list[int] = []
    destinations: list[int] = []
    for node in range(data.nodes):
        target = table.redirect(node)
        out = [target] if target is not None else sorted(set(table.out(node)))
        sources.extend([node] * len(out))
        destinations.extend(out)
    n = data.nodes
    src = np.array(sources, dtype=np.int64)
    dst = np.array(destinations, dtype=np.int64)
    out_degree = np.bincount(src, minlength=n).astype(np.float64)
    dangling = out_degree == 0
    rank = np.full(n, 1.0 / n)
    for _ in range(max_iterations):
        share = np.divide(rank, out_degree, out=np.zeros(n), where=~dangling)
        new = np.bincount(dst, weights=share[src], minlength=n)
        new = (1.0 - damping) / n + damping * (new + rank[dangling].sum() / n)
        new /= new.sum()
        delta = float(np.abs(new - rank).sum())
        rank = new
        if delta < tolerance:
            break
    return rank
