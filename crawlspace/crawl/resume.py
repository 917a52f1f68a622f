"""What a crawl carries across a restart besides its stores: the engine's part of a checkpoint.

`capture` gathers it from the stages into one `CrawlState` (checkpoint.py), which the frontier's
atomic checkpoint commits; `restore` puts it back into the stages of a new run and replays the
journals written since (ledger.py), so a resumed crawl continues where the last one stopped or
was killed: statistics, per-host admission counts, retry counts, sitemap state, hosts waiting
for an unreachable robots.txt, the partition router's unacknowledged batches and moved or pinned
hosts, and the URLs finished after the checkpoint (`done`: the restored frontier still holds them
once and the engine drops them without a request).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable
from typing import Any

from crawlspace.crawl.checkpoint import CrawlState
from crawlspace.crawl.ledger import Ledger, ReplayTarget
from crawlspace.crawl.links import LinkPipeline
from crawlspace.crawl.robotsgate import RobotsGate
from crawlspace.crawl.telemetry import CrawlStats
from crawlspace.distributed.router import PartitionRouter
from crawlspace.frontier.entry import FrontierEntry
from crawlspace.urls import url_fingerprint
from crawlspace.urls.filter import UrlFilter


class ResumeState:
    def __init__(
        self,
        *,
        stats: CrawlStats,
        url_filter: UrlFilter,
        links: LinkPipeline,
        robots_gate: RobotsGate,
        router: PartitionRouter | None,
    ) -> None:
        self.stats = stats
        self.url_filter = url_filter
        self.links = links
        self.robots_gate = robots_gate
        self.router = router
        self.done: set[int] = set()  # finished URLs the restored frontier may still hand out once
        self.attempts: dict[str, int] = {}  # URL -> failed attempts, while a retry is pending
        self.resize_started = 0  # epochs of the last resize whose phase began / ended here (repartition.py)
        self.resize_handed = 0
        self.resize_unconfirmed: list[tuple[str, int, int]] = []
        self.resize_pinned: list[str] = []

    def __repr__(self) -> str:
        return f"ResumeState({len(self.done)} done since the checkpoint, {len(self.attempts)} retries pending)"

    def capture(self, generation: int) -> CrawlState:
        outbox, next_batch, moved, pinned = self.router.checkpointed() if self.router else ([], 1, {}, [])
        return CrawlState(
            generation=generation,
            stats=self.stats.snapshot(),
            done=sorted(self.done),
            filter_hosts=self.url_filter.host_counts(),
            seeds=self.url_filter.seeds,
            attempts=dict(self.attempts),
            sitemaps=sorted(self.links.sitemaps),
            sitemap_files=dict(self.links.sitemap_files),
            robots_waiting=sorted(self.robots_gate.parked),
            outbox=outbox,
            next_batch=next_batch,
            moved=moved,
            pinned=pinned,
            resize_started=self.resize_started,
            resize_handed=self.resize_handed,
            resize_unconfirmed=list(self.resize_unconfirmed),
            resize_pinned=list(self.resize_pinned),
        )

    def restore(self, state: CrawlState, ledger: Ledger) -> dict[str, Any]:
        """Put a checkpoint's state back and replay the journals since; what the resume did (for
        stats.json and the log)."""
        self.url_filter.restore(state.seeds, state.filter_hosts)
        self.done = set(state.done)
        self.attempts = dict(state.attempts)
        self.resize_started, self.resize_handed = state.resize_started, state.resize_handed
        self.resize_unconfirmed = [(str(url), int(depth), int(hops)) for url, depth, hops in state.resize_unconfirmed]
        self.resize_pinned = [str(host) for host in state.resize_pinned]
        self.links.sitemaps = set(state.sitemaps)
        self.links.sitemap_files = Counter(state.sitemap_files)
        self.robots_gate.parked = set(state.robots_waiting)
        restored_robots = self.robots_gate.log.restore(self.robots_gate.cache, time.monotonic())
        if self.router is not None:
            self.router.start_replay(state.outbox, state.next_batch, state.moved, state.pinned)
        target = ReplayTarget(self.links, self.router, self.stats.count_fetch, self._replay_done)
        journals, report = ledger.replay(state.generation, target)
        self.links.finish_replay()
        if self.router is not None:
            self.router.finish_replay()
        return {
            "generation": state.generation,
            "journals": [path.name for path in journals],
            "journal_events": report.events,
            "journal_torn_bytes": report.torn_bytes,
            "robots_restored": restored_robots,
        }

    def _replay_done(self, url: str) -> None:
        self.done.add(url_fingerprint(url))

    def copies_taken_out(self, entries: Iterable[FrontierEntry]) -> None:
        """Queued URLs left the frontier without being handed out (a resize's handover took their
        hosts out): their `done` marks go too. A mark stands for the one stale copy the restored
        frontier holds; left behind, it would drop the next copy of that URL queued here unfetched,
        and that copy is a live one (handed back by the partition the URL was handed to, say)."""
        if self.done:
            self.done.difference_update(url_fingerprint(entry.url) for entry in entries)

    def finished_before_crash(self, url: str) -> bool:
        """Was `url` fetched after the checkpoint this run resumed from? (Then it is dropped, once.)"""
        if not self.done:
            return False
        fingerprint = url_fingerprint(url)
        if fingerprint not in self.done:
            return False
        self.done.discard(fingerprint)
        return True
