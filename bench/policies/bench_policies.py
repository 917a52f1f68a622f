"""Costs of the ordering policies: memory per pending URL, CPU per page, and partial PageRank's stalls.

Run: .venv/bin/python bench/policies/bench_policies.py [--pages 50000 --links 10 --hosts 2000 --stall-pages 200000]

A synthetic crawl (power-law in-links, hosts of heavy-tailed size) is driven through a minimal
strict-priority front exactly as the engine drives the frontier: page_done with every out-link,
new URLs added, requeued URLs added again, stale copies dropped by admit. Figures are printed side
by side with breadth-first on the same events, which costs the policy nothing.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
import tracemalloc
from collections import deque
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from crawlspace.frontier import FrontierEntry
from crawlspace.policies import (
    BacklinkCount,
    BigSiteFirst,
    BreadthFirstOrder,
    DepthFirstOrder,
    FocusedCrawl,
    OnlineImportance,
    OrderingPolicy,
    Outlink,
    PageContent,
    PartialPageRank,
    RandomOrder,
    TopicScorer,
)

WORDS = ["alpha", "beta", "gamma", "delta", "kappa", "sigma", "omega", "theta", "lambda", "zeta"]


def synthetic_web(pages: int, links: int, hosts: int, seed: int = 1) -> tuple[list[str], list[list[int]]]:
    rng = np.random.default_rng(seed)
    host_of = np.minimum((rng.pareto(1.2, pages) * hosts / 20).astype(int), hosts - 1)
    urls = [f"http://host{host_of[i]:05d}.test/s{i % 7}/d{i % 3}/page{i:07d}.html" for i in range(pages)]
    popular = rng.zipf(1.6, pages * links) % pages  # heavy-tailed in-degrees
    anywhere = rng.integers(0, pages, pages * links)
    pick_popular = rng.random(pages * links) < 0.5
    targets = np.where(pick_popular, popular, anywhere)
    out = [[(i + 1) % pages, *targets[i * links : (i + 1) * links - 1].tolist()] for i in range(pages)]
    return urls, out


def drive(policy: OrderingPolicy, urls: list[str], out: list[list[int]], stall: list[float] | None = None) -> int:
    """Crawl the synthetic web to the end; returns pages crawled. Records page_done times in `stall`."""
    prioritizer = policy.prioritizer
    levels = prioritizer.levels
    queues: list[deque[FrontierEntry]] = [deque() for _ in range(levels)]
    admit: Callable[[FrontierEntry], bool] | None = getattr(prioritizer, "admit", None)
    index = {url: i for i, url in enumerate(urls)}
    seen = {urls[0]}
    seed = FrontierEntry(urls[0])
    queues[prioritizer.priority(seed) if levels > 1 else 0].append(seed)
    anchors = [WORDS[i % len(WORDS)] for i in range(len(urls))]
    crawled = 0
    observe = policy.observes_pages
    while True:
        entry = None
        for queue in queues:
            while queue:
                candidate = queue.popleft()
                if admit is None or admit(candidate):
                    entry = candidate
                    break
            if entry is not None:
                break
        if entry is None:
            return crawled
        crawled += 1
        page = index[entry.url]
        targets = [urls[t] for t in out[page]]
        if observe:
            outlinks = [Outlink(url, anchors[t]) for url, t in zip(targets, out[page], strict=True)]
            began = time.perf_counter()
            policy.page_done(entry.url, outlinks, PageContent(anchors[page], anchors[page]))
            if stall is not None:
                stall.append(time.perf_counter() - began)
        for url in targets:
            if url not in seen:
                seen.add(url)
                new = FrontierEntry(url, entry.depth + 1)
                queues[prioritizer.priority(new) if levels > 1 else 0].append(new)
        if observe:
            policy.settled()
            for again in policy.requeue():
                queues[prioritizer.priority(again)].append(again)


def policies(background: bool = True) -> dict[str, Callable[[], OrderingPolicy]]:
    return {
        "bfs": BreadthFirstOrder,
        "dfs": DepthFirstOrder,
        "random": RandomOrder,
        "backlinks": BacklinkCount,
        "pagerank": lambda: PartialPageRank(background=background),
        "opic": OnlineImportance,
        "bigsite": BigSiteFirst,
        "focused": lambda: FocusedCrawl(TopicScorer.from_keywords(["alpha", "omega"])),
    }


def memory_per_pending(count: int) -> None:
    print(f"\nmemory per pending URL ({count:,} URLs placed, none drawn; tracemalloc)")
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    entries = [FrontierEntry(f"http://host{i % 5000:05d}.test/s{i % 7}/page{i:07d}.html") for i in range(count)]
    entry_bytes = (tracemalloc.get_traced_memory()[0] - before) / count
    print(f"  {'entry with its URL':<22} {entry_bytes:7.0f} B  (made by the engine; the frontier spills it to disk)")
    for name in ("backlinks", "pagerank", "opic", "bigsite", "focused"):
        policy = policies(background=False)[name]()
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        for entry in entries:
            policy.priority(entry)
        used = (tracemalloc.get_traced_memory()[0] - before) / count
        print(f"  {name:<22} {used:7.0f} B  (+ the entry it keeps: {used + entry_bytes:.0f} B)")
        policy.close()
        del policy
    tracemalloc.stop()


def cpu_per_page(urls: list[str], out: list[list[int]]) -> None:
    print(f"\nCPU per page: {len(urls):,} pages, {sum(map(len, out)):,} links, driven to the end (best of 3)")
    baseline = None
    for name, make in policies().items():
        times = []
        crawled = 0
        for _ in range(3):
            policy = make()
            gc.collect()
            began = time.process_time()
            crawled = drive(policy, urls, out)
            if isinstance(policy, PartialPageRank):
                policy.flush()
            times.append(time.process_time() - began)
            stats = policy.stats()
            policy.close()
        per_page = min(times) / crawled * 1e6
        baseline = baseline or per_page
        extra = f"requeued {stats.get('requeued', 0):,}, dropped {stats.get('superseded', 0):,}"
        print(f"  {name:<10} {per_page:7.1f} us/page  {per_page / baseline:5.2f}x bfs   {crawled:,} pages; {extra}")


def pagerank_stalls(urls: list[str], out: list[list[int]]) -> None:
    print("\npartial PageRank: time of one page event on the crawl's thread (k = 100, growth 0.1)")
    for background in (False, True):
        policy = PartialPageRank(background=background)
        stall: list[float] = []
        began = time.perf_counter()
        drive(policy, urls, out, stall)
        policy.flush()
        wall = time.perf_counter() - began
        stats = policy.stats()
        policy.close()
        stall.sort()
        where = "worker thread" if background else "inline      "
        print(
            f"  {where}  max {stall[-1] * 1e3:7.2f} ms  p99.9 {stall[int(len(stall) * 0.999)] * 1e3:6.2f} ms  "
            f"median {statistics.median(stall) * 1e6:5.1f} us  computations {stats['computations']}, "
            f"{stats['compute_seconds']:.2f} s computing, crawl loop {wall:.2f} s; last: {stats['last_computation']}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pages", type=int, default=50_000)
    parser.add_argument("--links", type=int, default=10)
    parser.add_argument("--hosts", type=int, default=2_000)
    parser.add_argument("--pending", type=int, default=100_000, help="URLs placed for the memory figure")
    parser.add_argument("--stall-pages", type=int, default=200_000, help="pages of the PageRank stall figure")
    args = parser.parse_args()
    memory_per_pending(args.pending)
    urls, out = synthetic_web(args.pages, args.links, args.hosts)
    cpu_per_page(urls, out)
    for pages in sorted({args.pages, args.stall_pages}):
        print(f"\n{pages:,} pages:", end="")
        pagerank_stalls(*synthetic_web(pages, args.links, args.hosts * pages // args.pages))


if __name__ == "__main__":
    main()
