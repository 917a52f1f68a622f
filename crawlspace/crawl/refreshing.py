"""The engine's side of a continuous crawl (`refresh = true`): the refresher (crawlspace.refresh) wired
to the fetch loop.

Four points of contact, so that the engine stays dispatch and lease: before a fetch, `skip` (a
second copy of a refresh that was fetched moments ago) and `validators` (a conditional GET); after a
fetch, `fetched` reschedules the page from what the response said (a 304 is "unchanged"; a page gone,
4xx, leaves the schedule; a transient failure keeps its lease, so it comes back); and `feed`, a task
that moves due pages into the frontier's front queues at the refresh budget's pace. URLs fed are not
journaled: the schedule keeps each under a lease (`LEASE` seconds) until its refetch, so a crash
loses none. `checkpoint` commits the schedule with the crawl's checkpoint.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from crawlspace.config import ConfigError, CrawlConfig
from crawlspace.fetch import FetchResult, Validators
from crawlspace.frontier import Frontier, FrontierEntry
from crawlspace.policies.pagerank import PartialPageRank
from crawlspace.refresh.experience import UserExperienceWeights
from crawlspace.refresh.policies import POLICIES
from crawlspace.refresh.querylog import QueryLogError, create_query_log, read_query_log
from crawlspace.refresh.refresher import Refresher
from crawlspace.refresh.schedule import RefreshSchedule

REFRESH_DIR = "refresh"
FEED_INTERVAL = 0.25  # seconds between two looks at the schedule
FEED_BATCH = 256  # URLs moved into the frontier at most per look
LEASE = 600.0  # seconds a fed URL stays leased in the schedule before it is handed out again

log = logging.getLogger("crawlspace")


def crawl_directory(out_dir: Path) -> Path:
    """The crawl's own directory, whose jobs/ hold the search index: a partition's state is in DIR/workers/<k>."""
    return out_dir.parent.parent if out_dir.parent.name == "workers" else out_dir


class Refreshing:
    def __init__(self, refresher: Refresher, frontier: Frontier, *, wake: Callable[[], None]) -> None:
        self.refresher = refresher
        self._frontier = frontier
        self._wake = wake

    def __repr__(self) -> str:
        return f"Refreshing({self.refresher!r})"

    @classmethod
    def open(
        cls, config: CrawlConfig, out_dir: Path, frontier: Frontier, *, resume: bool, partitions: int,
        wake: Callable[[], None],
    ) -> Refreshing:  # fmt: skip
        directory = out_dir / REFRESH_DIR
        if not resume:
            shutil.rmtree(directory, ignore_errors=True)
        assert config.max_rate is not None, "config validation: refresh needs max_rate"
        policy = POLICIES[config.refresh_policy](
            min_interval=config.refresh_min_interval, max_interval=config.refresh_max_interval
        )
        refresher = Refresher(
            RefreshSchedule(directory, sync=config.store_sync),
            policy,
            config.max_rate * config.refresh_share / partitions,
            min_interval=config.refresh_min_interval,
            max_interval=config.refresh_max_interval,
            quality=config.refresh_weights,
            pagerank=PartialPageRank(
                interval=config.pagerank_interval, growth=config.pagerank_growth, damping=config.pagerank_damping
            )
            if config.refresh_weights == "pagerank"
            else None,
        )
        if config.refresh_policy == "user-experience":
            assert config.refresh_query_log is not None, "config validation: user-experience needs a query log"
            query_log = Path(config.refresh_query_log)
            try:  # a log that cannot be read is an error now, not at the first recomputation
                create_query_log(query_log)  # the dashboard's searches are appended to it (`crawl --serve`)
                read_query_log(query_log)
            except QueryLogError as exc:
                raise ConfigError(f"refresh_query_log: {exc}") from None
            crawl = crawl_directory(out_dir)
            refresher.experience = UserExperienceWeights(
                crawl / "jobs" / "index", query_log, crawl_dir=crawl, interval=config.refresh_query_interval
            )
        return cls(refresher, frontier, wake=wake)

    def skip(self, url: str) -> bool:
        return self.refresher.recently_fetched(url)

    def validators(self, url: str) -> Validators | None:
        return self.refresher.validators(url)

    def fetched(
        self, result: FetchResult, entry: FrontierEntry, *, fingerprint: int | None, retry: bool,
        links: Sequence[str] = (),
    ) -> None:  # fmt: skip
        status = result.status
        if retry or not status or (300 <= status < 400 and status != 304):
            return  # comes back (a retry, or its lease), or is a redirect: its target is its own page
        if 400 <= status < 500:
            self.refresher.schedule.remove(result.url)  # gone: not refreshed again
            return
        if status >= 500:
            return
        self.refresher.fetched(
            result.url, status=status, fingerprint=fingerprint, etag=result.header("etag"),
            last_modified=result.header("last-modified"), depth=entry.depth, links=links,
        )  # fmt: skip

    async def feed(self) -> None:
        while True:
            await asyncio.sleep(FEED_INTERVAL)
            experience = self.refresher.experience
            if experience is not None and experience.due():
                await self._recompute(experience)
            due = self.refresher.due(FEED_BATCH, lease=LEASE)
            if due:
                self._frontier.add_many(FrontierEntry(url, depth) for url, depth in due)
                self._wake()

    async def _recompute(self, experience: UserExperienceWeights) -> None:
        """The user-experience weights again, in a thread (the queries take seconds on a large log); a
        query log that went missing keeps the weights as they were, and is said once per recomputation."""
        try:
            weights, stats = await asyncio.to_thread(experience.compute)
        except QueryLogError as exc:
            log.warning("refresh: %s; the user-experience weights stay as they were", exc)
            experience.install(experience.weights, {**experience.stats, "index": f"kept ({exc})"[:200]})
            return
        experience.install(weights, stats)
        self.refresher.reweigh()

    def checkpoint(self) -> None:
        self.refresher.commit()

    def commit_unsynced(self) -> None:
        """Before every journal write (the ledger's hook): the schedule is never behind the journal, so a
        page journaled as fetched is scheduled again after a kill -9."""
        self.refresher.commit(sync=False)

    def stats(self) -> dict[str, Any]:
        section: dict[str, Any] = {**self.refresher.stats.to_dict(), "scheduled_urls": len(self.refresher.schedule)}
        if self.refresher.experience is not None:
            section["user_experience"] = dict(self.refresher.experience.stats)
        pagerank = self.refresher.pagerank
        if pagerank is not None:
            ranks = pagerank.stats()
            section["pagerank"] = {
                key: ranks[key] for key in ("known_urls", "edges", "computations", "last_computation")
            }
        return section

    def close(self) -> None:
        self.refresher.close()  # commits what is buffered
