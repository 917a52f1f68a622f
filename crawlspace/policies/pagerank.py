"""Partial PageRank (seed 004 §3.4; Cho, Garcia-Molina & Page 1998): the highest PageRank over the known graph first.

The known graph: every URL discovered so far is a node, every fetched page's distinct out-links are
its edges; URLs not fetched yet have no out-edges. PageRank is computed over it every k fetched
pages (damping d; the rank of nodes without out-edges is spread evenly, so the vector sums to 1).
A URL not yet downloaded then has the teleport share plus the rank flowing into it from the
fetched pages that link it: the seed's "temporary PageRank value" of an unknown page.

Between two computations, the rank keeps flowing incrementally: when a page is fetched, d x its
current score is split over its out-links, so a URL discovered after the last computation, or
linked again since, has a temporary score = base + inflow right away (base = (1 - d) / n). A
pending URL whose score reaches a more urgent level is requeued there (base.py).

Not stalling the crawl. A computation runs on a worker thread (scipy's sparse product releases the
GIL), on a snapshot: the edge log is kept in fixed chunks that never change once full, so a
snapshot shares them and copies only the last partial chunk, plus one byte per node of current
levels. The worker returns the nodes whose level improved; the crawl applies at most
`apply_budget` of them per fetched page. A computation starts only when the previous one is
collected, after max(k, growth x pages fetched) pages: with a warm start (the previous vector) a
computation costs O(iterations x edges), and since the graph grows with the crawl, recomputing at a
fixed fraction of growth keeps the total work O(edges x log(pages)) instead of O(edges x pages / k).

Memory per known URL: a fingerprint -> node id entry (about 100 bytes), 8 bytes of rank, 1 byte of
level; 8 bytes per edge (two int32); plus the per-pending-URL record of base.py.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from crawlspace.frontier import FrontierEntry
from crawlspace.policies.base import LogScale, Outlink, PageContent, Pending, ScoredPolicy
from crawlspace.urls import url_fingerprint

Int32Array = npt.NDArray[np.int32]
Int8Array = npt.NDArray[np.int8]
FloatArray = npt.NDArray[np.float64]

NOT_PENDING = np.int8(127)  # level of a node that cannot be promoted (handed on, done, or never queued)
EDGE_CHUNK = 1 << 16


class EdgeLog:
    """Append-only (source, target) node pairs in chunks of EDGE_CHUNK; a full chunk never changes."""

    def __init__(self) -> None:
        self._full_sources: list[Int32Array] = []
        self._full_targets: list[Int32Array] = []
        self._sources: Int32Array = np.empty(EDGE_CHUNK, np.int32)
        self._targets: Int32Array = np.empty(EDGE_CHUNK, np.int32)
        self._fill = 0

    def __len__(self) -> int:
        return len(self._full_sources) * EDGE_CHUNK + self._fill

    def extend(self, source: int, targets: Sequence[int]) -> None:
        done = 0
        while done < len(targets):
            take = min(len(targets) - done, EDGE_CHUNK - self._fill)
            end = self._fill + take
            self._sources[self._fill : end] = source
            self._targets[self._fill : end] = targets[done : done + take]
            self._fill = end
            done += take
            if self._fill == EDGE_CHUNK:
                self._full_sources.append(self._sources)
                self._full_targets.append(self._targets)
                self._sources = np.empty(EDGE_CHUNK, np.int32)
                self._targets = np.empty(EDGE_CHUNK, np.int32)
                self._fill = 0

    def snapshot(self) -> tuple[list[Int32Array], list[Int32Array]]:
        """The edges so far, sharing the full chunks (immutable) and copying the partial one."""
        sources = [*self._full_sources, self._sources[: self._fill].copy()]
        targets = [*self._full_targets, self._targets[: self._fill].copy()]
        return sources, targets


def pagerank(
    sources: Int32Array,
    targets: Int32Array,
    nodes: int,
    start: FloatArray,
    damping: float,
    tolerance: float,
    max_iterations: int,
) -> tuple[FloatArray, int]:
    """PageRank by power iteration from `start`; rank of nodes without out-edges spreads evenly.

    Returns the vector (sums to 1) and the iterations done (until the L1 change is below
    `tolerance`, at most `max_iterations`).
    """
    out_degree = np.bincount(sources, minlength=nodes).astype(np.float64)
    dangling = out_degree == 0.0
    import scipy.sparse  # here, not at import: only this policy needs it (20 MB in every crawl process)

    matrix = scipy.sparse.csr_matrix(
        (1.0 / out_degree[sources], (targets, sources)), shape=(nodes, nodes), dtype=np.float64
    )
    rank = start / start.sum()
    iterations = 0
    for iterations in range(1, max_iterations + 1):  # noqa: B007 - the count is returned
        new = damping * (matrix @ rank)
        new += ((1.0 - damping) + damping * float(rank[dangling].sum())) / nodes
        new /= new.sum()
        change = float(np.abs(new - rank).sum())
        rank = new
        if change < tolerance:
            break
    return rank, iterations


@dataclass(frozen=True, slots=True)
class _Result:
    rank: FloatArray
    nodes: int
    edges: int
    iterations: int
    seconds: float
    improved: Int32Array  # nodes whose level is more urgent than in the snapshot
    improved_levels: Int8Array


def _compute(
    sources: list[Int32Array],
    targets: list[Int32Array],
    nodes: int,
    start: FloatArray,
    levels_then: Int8Array,
    scale: LogScale,
    damping: float,
    tolerance: float,
    max_iterations: int,
) -> _Result:
    """The worker's job: touches only its snapshot, never the policy."""
    began = time.perf_counter()
    source_array = np.concatenate(sources)
    target_array = np.concatenate(targets)
    rank, iterations = pagerank(source_array, target_array, nodes, start, damping, tolerance, max_iterations)
    new_levels = scale.levels_of(rank * nodes)
    improved = np.flatnonzero((new_levels < levels_then) & (levels_then != NOT_PENDING)).astype(np.int32)
    return _Result(
        rank, nodes, len(source_array), iterations, time.perf_counter() - began, improved, new_levels[improved]
    )


class PartialPageRank(ScoredPolicy):
    """Highest partial PageRank first; computations every k pages off the fetch path."""

    name = "pagerank"

    def __init__(
        self,
        levels: int = 16,
        *,
        interval: int = 100,
        growth: float = 0.1,
        damping: float = 0.85,
        tolerance: float = 1e-6,
        max_iterations: int = 100,
        apply_budget: int = 2000,
        background: bool = True,
    ) -> None:
        if interval < 1 or growth < 0 or not 0.0 < damping < 1.0 or apply_budget < 1:
            raise ValueError("need interval >= 1, growth >= 0, 0 < damping < 1, apply_budget >= 1")
        # levels on rank x nodes (1 = the uniform share); the bottom level holds pure teleport and less
        super().__init__(LogScale(levels, unit=(1.0 - damping) * 0.75, step=2.0))
        self._interval = interval
        self._growth = growth
        self._damping = damping
        self._tolerance = tolerance
        self._max_iterations = max_iterations
        self._apply_budget = apply_budget
        self._background = background
        self._executor: ThreadPoolExecutor | None = None
        self._ids: dict[int, int] = {}  # URL fingerprint -> node
        self._edges = EdgeLog()
        self._node_level: Int8Array = np.full(1024, NOT_PENDING, np.int8)
        self._waiting: dict[int, Pending] = {}  # node -> record, for URLs not yet handed on
        self._rank: FloatArray = np.empty(0, np.float64)
        self._rank_nodes = 0  # nodes of the last computation (0: none yet)
        self._flows: dict[int, float] = {}  # rank flowed in since the last snapshot
        self._flows_computing: dict[int, float] = {}  # ... between the previous snapshot and the running one's
        self._job: Future[_Result] | None = None
        self._todo: deque[tuple[Int32Array, Int8Array]] = deque()
        self._todo_position = 0
        self._pages = 0
        self._pages_at_snapshot = 0
        self._computations = 0
        self._compute_seconds = 0.0
        self._last: dict[str, Any] = {}
        self._recompute_promotions = 0
        self._failures = 0
        self._observed = bytearray()  # node -> its out-links are in the graph (observe_once)

    # -- nodes and scores -----------------------------------------------------------------------

    def _node(self, url: str) -> int:
        key = url_fingerprint(url)
        node = self._ids.get(key)
        if node is None:
            node = self._ids[key] = len(self._ids)
            if node >= len(self._node_level):
                grown = np.full(2 * len(self._node_level), NOT_PENDING, np.int8)
                grown[: len(self._node_level)] = self._node_level
                self._node_level = grown
        return node

    def _reference_nodes(self) -> int:
        return self._rank_nodes or max(len(self._ids), 1)

    def _score(self, node: int) -> float:
        """Last computed rank (or the teleport share for a node found since) plus the inflow since."""
        if node < self._rank_nodes:
            return float(self._rank[node]) + self._flows_computing.get(node, 0.0) + self._flows.get(node, 0.0)
        base = (1.0 - self._damping) / self._reference_nodes()
        return base + self._flows_computing.get(node, 0.0) + self._flows.get(node, 0.0)

    def _level_of(self, score: float) -> int:
        return self.scale.level(score * self._reference_nodes())

    def _initial_score(self, entry: FrontierEntry) -> float:
        return self._score(self._node(entry.url))

    def _added(self, record: Pending) -> None:
        node = self._node(record.entry.url)
        self._waiting[node] = record
        self._node_level[node] = record.level

    def _on_admit(self, record: Pending) -> None:
        node = self._node(record.entry.url)
        self._waiting.pop(node, None)
        self._node_level[node] = NOT_PENDING

    def _promote(self, node: int, record: Pending, score: float) -> None:
        before = record.level
        self._set_score(record, score)
        if record.level != before:
            self._node_level[node] = record.level

    # -- page events --------------------------------------------------------------------------

    def _observe(self, url: str, outlinks: Sequence[Outlink], content: PageContent | None) -> None:
        source = self._node(url)
        targets: list[int] = []
        seen = {source}
        for link in outlinks:
            target = self._node(link.url)
            if target not in seen:
                seen.add(target)
                targets.append(target)
        self._pages += 1
        if targets:
            self._edges.extend(source, targets)
            share = self._damping * self._score(source) / len(targets)
            flows = self._flows
            waiting = self._waiting
            for target in targets:
                flows[target] = flows.get(target, 0.0) + share
                record = waiting.get(target)
                if record is not None:
                    self._promote(target, record, self._score(target))
        self._schedule()
        self._apply_some()

    def _schedule(self) -> None:
        job = self._job
        if job is not None:
            if not job.done():
                return
            self._collect(job)
        due = max(self._interval, int(self._growth * self._pages))
        if self._pages - self._pages_at_snapshot >= due:
            self._start()

    def _start(self) -> None:
        nodes = len(self._ids)
        sources, targets = self._edges.snapshot()
        start = np.full(nodes, 1.0 / nodes)
        start[: self._rank_nodes] = self._rank  # warm start: the previous vector for the nodes it knew
        levels_then = self._node_level[:nodes].copy()
        self._flows_computing.update(self._flows)  # included in the snapshot's graph from now on
        self._flows = {}
        self._pages_at_snapshot = self._pages
        args = (
            sources, targets, nodes, start, levels_then, self.scale,
            self._damping, self._tolerance, self._max_iterations,
        )  # fmt: skip
        if not self._background:
            done: Future[_Result] = Future()
            done.set_result(_compute(*args))
            self._collect(done)
            return
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="crawlspace-pagerank")
        self._job = self._executor.submit(_compute, *args)

    def _collect(self, job: Future[_Result]) -> None:
        self._job = None
        try:
            result = job.result()
        except Exception as exc:  # a failed computation leaves the temporary scores in charge
            self._failures += 1
            self._last = {"error": f"{type(exc).__name__}: {exc}"}
            return
        self._rank = result.rank
        self._rank_nodes = result.nodes
        self._flows_computing = {}
        self._computations += 1
        self._compute_seconds += result.seconds
        self._last = {
            "nodes": result.nodes,
            "edges": result.edges,
            "iterations": result.iterations,
            "seconds": round(result.seconds, 4),
            "improved": len(result.improved),
        }
        self._todo.clear()  # a newer vector supersedes what was left of the previous one
        self._todo.append((result.improved, result.improved_levels))
        self._todo_position = 0

    def _apply_some(self) -> None:
        """Requeue up to `apply_budget` URLs that the last computation moved up."""
        budget = self._apply_budget
        while self._todo and budget > 0:
            nodes, levels = self._todo[0]
            start = self._todo_position
            end = min(len(nodes), start + budget)
            waiting = self._waiting
            for node, level in zip(nodes[start:end].tolist(), levels[start:end].tolist(), strict=True):
                record = waiting.get(node)
                if record is not None and level < record.level:
                    record.score = self._score(node)
                    record.level = level
                    self._node_level[node] = level
                    self._promoted.append(record.entry)
                    self._recompute_promotions += 1
            budget -= end - start
            if end >= len(nodes):
                self._todo.popleft()
                self._todo_position = 0
            else:
                self._todo_position = end

    def flush(self) -> None:
        """Wait for a running computation and apply all of it (tests and the end of an evaluation)."""
        if self._job is not None:
            self._collect(self._job)
        while self._todo:
            self._apply_some()

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
        self._job = None

    def stats(self) -> dict[str, Any]:
        return {
            **super().stats(),
            "known_urls": len(self._ids),
            "edges": len(self._edges),
            "computations": self._computations,
            "compute_seconds": round(self._compute_seconds, 3),
            "last_computation": self._last,
            "recompute_requeued": self._recompute_promotions,
            "computation_failures": self._failures,
            "interval_pages": self._interval,
            "damping": self._damping,
        }

    # -- as page quality (the refresh policy's weights, refresh/refresher.py) -----------------------

    def observe_once(self, url: str, outlinks: Sequence[Outlink]) -> bool:
        """Add a page's out-links to the graph unless they are in it already; True if they were added.
        A continuous crawl fetches a page many times, and each `page_done` adds its edges again (a
        page refetched ten times would pass ten times its rank on): a refresher's PageRank takes each
        page's links once per run (the links its first fetch in this process found)."""
        node = self._node(url)
        if node < len(self._observed) and self._observed[node]:
            return False
        if node >= len(self._observed):
            self._observed.extend(bytes(max(node + 1, 2 * len(self._observed)) - len(self._observed)))
        self._observed[node] = 1
        self._observe(url, outlinks, None)
        return True

    def relative_rank(self, url: str) -> float:
        """The page's partial PageRank times the nodes of the graph: 1 is the uniform share, a page
        nobody known links has the teleport share 1 - damping (about 0.15), a hub many times 1."""
        node = self._ids.get(url_fingerprint(url))
        if node is None:
            return 1.0 - self._damping
        return self._score(node) * self._reference_nodes()

    def scores(self) -> dict[int, float]:
        """Current score of every node (for tests and diagnostics; O(nodes))."""
        return {node: self._score(node) for node in range(len(self._ids))}
