"""The engine: one asyncio loop driving the crawl loop of DESIGN.md §2.

A dispatcher takes leases from the frontier while fetch slots are free and starts one task per
lease. The task checks robots.txt from the per-origin cache (fetching it through the same lease
when missing, so that the robots request is subject to the host's politeness too), fetches,
stores, parses and sends the links through normalization, the filter chain, the URL-seen test
and the per-host admission guards back into the frontier. Redirect targets take the same path
as links (Mercator), and so do canonical URLs, meta refresh targets and the URLs of sitemaps;
the sitemap files named in robots.txt go to the frontier as themselves (robots-checked, polite).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import os
import signal
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from crawlspace.config import CrawlConfig
from crawlspace.crawl import journal
from crawlspace.crawl.checkpoint import CheckpointError, CrawlState, Journals
from crawlspace.crawl.journal import ReplayReport, replay
from crawlspace.crawl.telemetry import (
    PROGRESS_FILE,
    CrawlStats,
    Gauges,
    JsonLinesSink,
    Snapshot,
    Telemetry,
    TelemetrySink,
    display_sink,
)
from crawlspace.crawl.workers import PageBudget, PartitionLink
from crawlspace.distributed.splitter import Batch
from crawlspace.dns import AddressGuard, DNSFailure, Resolver
from crawlspace.dns.resolver import hostname_of_authority
from crawlspace.fetch import Fetcher, FetchResult, Outcome
from crawlspace.fetch.retry import RetryPolicy
from crawlspace.frontier import Frontier, FrontierEntry, Lease, Politeness, Prioritizer
from crawlspace.hooks.protocols import Page, ProtocolHandler
from crawlspace.hooks.runtime import Extensions
from crawlspace.parse import ParsedPage, parse_html
from crawlspace.parse.sitemap import SitemapKind, parse_sitemap
from crawlspace.policies import Outlink, PageContent, as_policy, make_policy
from crawlspace.robots import RobotsCache, RobotsRules
from crawlspace.robots.cache import MAX_REDIRECT_HOPS
from crawlspace.robots.persist import RobotsLog
from crawlspace.robots.rules import MAX_ROBOTS_BYTES
from crawlspace.seen import ContentKind, ContentSeen, UrlSet
from crawlspace.store import PageStore, StoreOptions
from crawlspace.urls import InvalidURL, Normalizer, host_of, join, normalize, origin_of, url_fingerprint
from crawlspace.urls.filter import Reason, filter_from_config


def _host_failed(result: FetchResult) -> bool:
    """A failure that says something about the host rather than the URL: it backs the host off,
    and repeated ones park it and finally give it up (a 404 or a 500 is the page's problem)."""
    return result.outcome.is_transient or result.status in (429, 503)


_ABRUPT = frozenset(
    {"interrupted", "disk-full", "journal-failed", "checkpoint-failed", "stopped", "worker-failed", "coordinator-gone"}
)
"""Terminations after which in-flight fetches get `shutdown_grace` seconds, then are abandoned."""

_JOURNAL_BROKEN = "the journal could not be written: the last checkpoint and journal stand"


def header_values(result: FetchResult, name: str) -> list[str]:
    """Every value of a response header that may repeat (X-Robots-Tag, Link)."""
    lowered = name.lower()
    return [value for key, value in result.headers if key.lower() == lowered]


class CrawlEngine:
    def __init__(
        self,
        config: CrawlConfig,
        out_dir: str | Path,
        *,
        live_progress: bool | None = None,
        resume: bool = False,
        unstarted_seeds: Sequence[str] | None = None,
        extensions: Extensions | None = None,
        prioritizer: Prioritizer | None = None,
        handle_signals: bool = True,
        partition: PartitionLink | None = None,
        budget: PageBudget | None = None,
        telemetry: Sequence[TelemetrySink] | None = None,
    ) -> None:
        """`telemetry`: the sinks of the crawl's Snapshots besides DIR/progress.jsonl (None: the
        terminal's, `display_sink(live_progress)`; a partition's goes to its coordinator)."""
        self.config = config
        self.partition = partition  # one of several processes of a crawl (crawl.workers), or None
        self.budget = budget or PageBudget(config.max_pages)
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.stats = CrawlStats()
        self.politeness = Politeness(
            min_delay=config.min_delay,
            delay_factor=config.delay_factor,
            max_delay=config.max_delay,
            max_conn_per_host=config.max_conn_per_host,
            per_ip=config.per_ip,
            max_conn_per_ip=config.max_conn_per_ip,
            error_delay=config.error_delay,
            park_after_errors=config.park_after_errors,
            park_seconds=config.park_seconds,
            give_up_after_parks=config.give_up_after_parks,
        )
        self._back_queues = config.back_queues or 3 * config.concurrency
        self.resolver = Resolver.from_config(config)
        self._lookups: set[asyncio.Task[None]] = set()
        self.resuming = resume
        # the crawl order (config.policy unless a prioritizer is given): fed page events if it is a policy
        self.policy = as_policy(prioritizer) if prioritizer is not None else make_policy(config)
        self._policy_pages = self.policy.observes_pages
        self._policy_reported = ""  # the last URL whose page the policy saw through _enqueue
        self.frontier = Frontier.open(
            self.out_dir / "frontier",
            self.politeness,
            fresh=not resume,
            back_queues=self._back_queues,
            prioritizer=self.policy.prioritizer,
            front_window=config.frontier_front_window,
            back_window=config.frontier_back_window,
            on_activate=self._host_activated,
        )
        self.robots = RobotsCache(ttl=config.robots_ttl, retry_delay=config.robots_retry_delay)
        robots_dir = self.out_dir / "robots"
        if not resume:
            (robots_dir / "robots.log").unlink(missing_ok=True)
        self.robots_log = RobotsLog(robots_dir, ttl=config.robots_ttl)
        seen_dir = self.out_dir / "seen"  # a new crawl starts with empty sets; a resumed one reopens them
        self.urlset: UrlSet[FrontierEntry] = UrlSet.open(
            seen_dir / "urls",
            cache_bytes=config.seen_cache_bytes // (partition.count if partition else 1),  # the crawl's budget
            buffer_urls=config.seen_buffer_urls,
            reset=not resume,
        )
        self.content = ContentSeen(
            seen_dir / "content", near_threshold=config.near_duplicate_threshold, reset=not resume
        )
        self._low_water = 2 * config.concurrency  # below this many queued URLs the URL buffer is drained
        self._sitemaps_submitted: set[str] = set()  # sitemap URLs waiting in the URL buffer
        # the user's filters, processors, sinks and protocol handlers (crawlspace.hooks); the schemes of
        # the handlers are crawlable: normalized, let through the scheme filter and followed
        self.extensions = extensions or Extensions()
        self._crawlable = ("http://", "https://", *(scheme + ":" for scheme in sorted(self.extensions.schemes)))
        self._not_http = tuple(scheme + ":" for scheme in sorted(self.extensions.other_schemes))
        self.normalizer = Normalizer(
            strip_session_ids=config.strip_session_ids,
            strip_tracking=config.strip_tracking_params,
            strip_params=config.strip_params,
            sort_query=config.sort_query,
            extra_schemes=self.extensions.schemes,
        )
        self.url_filter = filter_from_config(config)
        self.url_filter.schemes |= self.extensions.schemes
        self._sitemaps: set[str] = set()  # sitemap URLs in the frontier, fetched as sitemaps
        self._robots_fetched_for: dict[str, str] = {}  # origin -> URL whose lease fetched its robots.txt
        self._parked: set[str] = set()  # hosts whose URLs wait for the retry of an unreachable robots.txt
        self._sitemap_files: Counter[str] = Counter()  # sitemap files queued per origin
        self.guard = AddressGuard.from_config(config)
        self.retry = RetryPolicy(
            max_retries=config.max_retries, initial_delay=config.retry_delay, statuses=frozenset(config.retry_statuses)
        )
        self._attempts: dict[str, int] = {}  # URL -> failed attempts, while a retry is pending
        self._parsed_types = frozenset(config.parse_content_types) | {""}  # no Content-Type: sniffed as HTML
        self.store = PageStore(
            self.out_dir,
            StoreOptions.from_config(config),
            warcinfo={"http-header-user-agent": config.user_agent, "robots": "obey", "isPartOf": self.out_dir.name},
            warc_dir=partition.warc_dir if partition else None,
            recover=partition is None,  # the partitions share one WARC directory, recovered before they start
        )
        sinks = telemetry if telemetry is not None else [display_sink(live_progress)]
        self.telemetry = Telemetry([JsonLinesSink(self.out_dir / PROGRESS_FILE), *sinks])
        # Ctrl-C and SIGTERM stop the crawl gracefully; not when it runs inside an application's own loop
        self._signals = (signal.SIGINT, signal.SIGTERM) if handle_signals else ()
        self._changed = asyncio.Event()
        self._stopping = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._started = time.monotonic()
        self.journals = Journals(self.out_dir)
        self._journal_lines: list[str] = []
        self._done: set[int] = set()  # finished URLs the restored frontier may still hand out once
        self._moved: dict[str, int] = {}  # hosts this partition handed to the owner of their IP address
        self._pinned: set[str] = set()  # hosts another partition handed to this one
        self.disk_full: str | None = None
        self._journal_broken = False
        self._flush_scheduled = False
        self.recovery: dict[str, Any] = {}
        restart = resume and unstarted_seeds is not None and self._never_checkpointed()
        if resume and not restart:
            self._resume()
        else:
            self.journals.reset()
        self.extensions.attach(self.stats.errors)  # the resumed crawl's counters, when resuming
        self.checkpoint()  # the base every later crash resumes from
        if restart:  # killed before its first checkpoint: nothing was fetched, start it again
            self.recovery = {"restarted_from_seeds": True}
            self.add_seeds(unstarted_seeds or ())

    # -- public ------------------------------------------------------------------------------

    def add_seeds(self, seeds: Iterable[str]) -> int:
        entries: list[FrontierEntry] = []
        for seed in seeds:
            try:
                url = self.normalizer(seed)
            except InvalidURL:
                self.stats.invalid_seeds += 1
                continue
            self.url_filter.add_seed(url)  # every partition knows every seed (scope)
            if self.partition is None or self.partition.owner(host_of(url)) == self.partition.index:
                entries.append(FrontierEntry(url))
        before = self.stats.urls_discovered
        self._enqueue(entries)
        self._drain_urls()
        self._flush_journal()
        return self.stats.urls_discovered - before

    def stop(self, reason: str = "stopped") -> None:
        """Stop taking new URLs; in-flight fetches finish."""
        if not self._stopping:
            self._stopping = True
            self.stats.termination = self.stats.termination or reason
            self._changed.set()

    def _on_signal(self) -> None:
        """First SIGINT/SIGTERM: stop gracefully (finish in-flight fetches, checkpoint). Second: exit
        at once; the last checkpoint and the journal still resume the crawl."""
        if self._stopping and self.stats.termination == "interrupted":
            os._exit(130)
        self.stop("interrupted")

    # -- checkpoints (see checkpoint.py) ------------------------------------------------------

    def checkpoint(self) -> None:
        """Make the whole crawl state durable; the frontier's atomic checkpoint is the commit point."""
        if self._journal_broken:
            raise CheckpointError(_JOURNAL_BROKEN)
        self._send_batches()  # URLs for other partitions leave as journaled batches, kept until acknowledged
        self._drain_urls()  # the URL set checkpoints with an empty buffer
        if not self._flush_journal():  # what the checkpoint covers is in the old journal, if any
            raise CheckpointError(_JOURNAL_BROKEN)
        self.urlset.checkpoint()
        self.content.checkpoint()
        self.store.flush()
        self.robots_log.sync()
        self.robots_log.maybe_compact()
        generation = self.journals.generation + 1
        state = CrawlState(
            generation=generation,
            stats=self.stats.snapshot(),
            done=sorted(self._done),
            filter_hosts=self.url_filter.host_counts(),
            seeds=self.url_filter.seeds,
            attempts=dict(self._attempts),
            sitemaps=sorted(self._sitemaps),
            sitemap_files=dict(self._sitemap_files),
            robots_waiting=sorted(self._parked),
            outbox=[
                (batch.peer, batch.number, batch.forward, [(e.url, e.depth, e.hops) for e in batch.entries])
                for batch in (self.partition.outbox.unacked.values() if self.partition else ())
            ],
            next_batch=self.partition.outbox.next_number if self.partition else 1,
            moved=dict(self._moved),
            pinned=sorted(self._pinned),
        )
        self.frontier.checkpoint(state.encode())
        self.journals.start(generation)

    def _never_checkpointed(self) -> bool:
        """No checkpoint and no journal: the crawl was killed while it opened its state, before its
        first checkpoint (the one its constructor writes, before any URL is fetched)."""
        return not self.frontier.extra and not self.journals.generations()

    def _resume(self) -> None:
        """Continue from the last checkpoint: restore the engine's state, replay the journals since."""
        if not self.frontier.extra:
            raise CheckpointError(f"{self.out_dir} has no checkpoint to resume (was a crawl started there?)")
        state = CrawlState.decode(self.frontier.extra, str(self.out_dir / "frontier"))
        self.stats = CrawlStats.resumed(state.stats)
        self.url_filter.restore(state.seeds, state.filter_hosts)
        self._done = set(state.done)
        self._attempts = dict(state.attempts)
        self._sitemaps = set(state.sitemaps)
        self._sitemap_files = Counter(state.sitemap_files)
        self._parked = set(state.robots_waiting)
        restored_robots = self.robots_log.restore(self.robots, time.monotonic())
        self.journals.generation = max([state.generation - 1, *self.journals.generations()])
        report = ReplayReport()
        journals = self.journals.since(state.generation)
        self._moved = dict(state.moved)
        self._pinned = set(state.pinned)
        unacked = {
            (peer, number): Batch(
                peer, number, [FrontierEntry(url, depth, hops) for url, depth, hops in entries], forward
            )
            for peer, number, forward, entries in state.outbox
        }
        self._replay(journals, report, unacked)
        if self.partition is not None:
            self.partition.outbox.restore(
                [unacked[key] for key in sorted(unacked)],
                max([state.next_batch, *(number + 1 for _, number in unacked)]),
            )
        self.budget.set_used(self.stats.pages_fetched)
        self.recovery = {
            "generation": state.generation,
            "fallback": self.frontier.fallback,
            "journals": [path.name for path in journals],
            "journal_events": report.events,
            "journal_torn_bytes": report.torn_bytes,
            "robots_restored": restored_robots,
            "warc_recovered": [str(item) for item in self.store.stats.recovered],
        }
        self.stats.sections["recovery"] = self.recovery

    def _replay(self, paths: list[Path], report: ReplayReport, unacked: dict[tuple[int, int], Batch]) -> None:
        pending: list[FrontierEntry] = []  # submitted after the last drain: not yet checked
        admitted: list[FrontierEntry] = []
        for path in paths:
            for event in replay(path, report):
                fields = event.fields
                if event.kind == journal.SUBMITTED:
                    pending.append(FrontierEntry(fields[2], int(fields[0]), int(fields[1])))
                elif event.kind == journal.DRAINED:
                    pending.clear()
                elif event.kind == journal.ADMITTED:
                    entry = FrontierEntry(fields[3], int(fields[0]), int(fields[1]))
                    if fields[2] == "1":
                        self._sitemaps.add(entry.url)
                    else:
                        self.url_filter.admission(entry, host_of(entry.url))
                    self.frontier.add(entry)
                    admitted.append(entry)
                elif event.kind == journal.FETCHED:
                    self.stats.count_fetch(int(fields[0]), fields[1], int(fields[2]))
                elif event.kind == journal.DONE:
                    self._done.add(url_fingerprint(fields[0]))
                elif event.kind == journal.SENT:
                    peer, number = int(fields[0]), int(fields[1])
                    batch = unacked.setdefault((peer, number), Batch(peer, number, [], fields[4] == "1"))
                    batch.entries.append(FrontierEntry(fields[5], int(fields[2]), int(fields[3])))
                elif event.kind == journal.ACKED:
                    unacked.pop((int(fields[0]), int(fields[1])), None)
                elif event.kind == journal.MOVED:
                    self._moved[fields[1]] = int(fields[0])
                elif event.kind == journal.PINNED:
                    self._pinned.add(fields[0])
        if admitted:  # the URL set may know them already (it can be ahead of the checkpoint): make sure
            self.urlset.submit_many([url_fingerprint(entry.url) for entry in admitted], admitted)
            self.urlset.drain()
        if pending:
            self._submit(pending)

    def _flush_journal(self) -> bool:
        """Write the buffered journal lines; False when the journal could not be written.

        What those lines record is then lost to a resume (as in a crash) and the crawl stops: a full
        disk as "disk-full", any other I/O error as "journal-failed". From then on no store may commit
        a checkpoint: a URL set ahead of the journal would hide the URLs found since.
        """
        lines, self._journal_lines = self._journal_lines, []
        if self._journal_broken:
            return False
        try:
            self.robots_log.flush()  # the robots.txt the pages of these lines were fetched under
            if not lines or self.journals.current is None:
                return True
            self.store.commit_unsynced()  # the rows of the pages this batch finishes go first
            self.journals.current.record(lines)
        except OSError as exc:
            self._journal_broken = True
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                self._disk_full(exc)
            else:
                self.stats.errors["journal-write-failed"] += 1
                self.stop("journal-failed")
            return False
        return True

    def _release(self, lease: Lease, duration: float, *, put_back: FrontierEntry | None = None, **options: Any) -> None:
        """End a lease; a lease that does not put its URL back finishes the URL (journaled)."""
        self.frontier.release(lease, duration, put_back=put_back, **options)
        if put_back is None:
            self._journal_lines.append(journal.done(lease.entry.url))
            self._policy_done(lease.entry.url)

    # -- partitions (crawl.workers) -----------------------------------------------------------

    def _route(self, entries: list[FrontierEntry]) -> list[FrontierEntry]:
        """The host splitter: keep this partition's URLs, queue the others for their owners."""
        link = self.partition
        assert link is not None
        mine: list[FrontierEntry] = []
        full = False
        pinned, moved = self._pinned, self._moved
        for entry in entries:
            host = host_of(entry.url)
            owner = link.index if host in pinned else moved[host] if host in moved else link.owner(host)
            if owner == link.index:
                mine.append(entry)
            else:
                number, now_full = link.outbox.add(owner, entry)
                self._journal_lines.append(journal.sent(owner, number, entry.url, entry.depth, entry.hops))
                full |= now_full
        if full:
            self._send_batches()
        return mine

    def _send_batches(self) -> None:
        """Cut the open batches and send them once the journal holds their URLs (X lines, written as
        the URLs were queued): a batch is never sent unjournaled."""
        link = self.partition
        if link is None or not link.outbox.pending:
            return
        batches = link.outbox.cut()
        if self._flush_journal():
            link.transmit(batches)

    def receive_urls(self, entries: list[FrontierEntry], *, forwarded: bool = False) -> bool:
        """A batch from another partition for this one's hosts; True when it is journaled (then acked).
        `forwarded`: hosts handed over for per-IP politeness; this partition keeps them from now on."""
        assert self.partition is not None
        self.partition.idle = False
        if forwarded:
            for host in {host_of(entry.url) for entry in entries} - self._pinned:
                self._pinned.add(host)
                self._journal_lines.append(journal.pinned(host))
        self._submit(entries, route=False)  # the sender chose this partition
        journaled = self._flush_journal()
        self._changed.set()
        return journaled

    def _owner_by_address(self, host: str, address: str | None) -> int | None:
        """With per-IP politeness, hosts live with the partition owning their address: another
        partition's index when this host should be handed over (once, for good), else None."""
        link = self.partition
        if link is None or not self.config.per_ip or host in self._pinned:
            return None
        owner = self._moved.get(host)
        if owner is None and address:
            owner = link.owner(address)
            if owner != link.index:
                self._moved[host] = owner
                self._journal_lines.append(journal.moved(host, owner))
        return None if owner is None or owner == link.index else owner

    def _hand_over(self, lease: Lease, owner: int) -> None:
        """Send a leased URL to the partition that now owns its host; no request was made."""
        assert self.partition is not None

        self.stats.handed_over += 1
        entry = lease.entry
        number, _ = self.partition.outbox.add(owner, entry, forward=True)
        self._journal_lines.append(journal.sent(owner, number, entry.url, entry.depth, entry.hops, forward=True))
        self._release(lease, 0.0, contacted=False)
        self._send_batches()

    def batch_acknowledged(self, peer: int, number: int) -> None:
        assert self.partition is not None
        if self.partition.outbox.acknowledge(peer, number):
            self._journal_lines.append(journal.acked(peer, number))
            self._flush_journal()

    async def _send_periodically(self) -> None:
        while True:
            await asyncio.sleep(0.02)
            self._send_batches()

    def snapshot(self) -> Snapshot:
        """The crawl as it stands: the counters (copied) and the gauges."""
        return Snapshot.take(self.stats, self._gauges())

    def _count_fetch(self, result: FetchResult) -> None:
        size = len(result.body)
        self.stats.count_fetch(result.status, str(result.outcome), size)
        self._journal_lines.append(journal.fetched(result.url, result.status, str(result.outcome), size))

    async def run(self) -> CrawlStats:
        loop = asyncio.get_running_loop()
        for host in self.frontier.hosts_awaiting_address():  # activated before the loop ran
            self._host_activated(host)
        for sig in self._signals:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, self._on_signal)
        fetcher = Fetcher.from_config(self.config, self.resolver, self.guard, spill_dir=self.out_dir)
        try:
            async with fetcher:
                progress = asyncio.create_task(self._report_periodically())
                sender = asyncio.create_task(self._send_periodically()) if self.partition else None
                try:
                    await self._dispatch(fetcher)
                finally:
                    progress.cancel()
                    if sender is not None:
                        sender.cancel()
        finally:
            for sig in self._signals:
                with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                    loop.remove_signal_handler(sig)
            for lookup in self._lookups:  # no DNS for hosts activated at shutdown
                lookup.cancel()
            await self.resolver.close()
            await self._close_extensions()
            self.policy.close()
            self.stats.sections.update(dns=self.resolver.stats(), guard=self.guard.stats(), fetch=fetcher.stats())
            self.stats.sections["frontier"] = {
                **self.frontier.stats.to_dict(),
                "given_up_reasons": dict(self.frontier.given_up_reasons),
                "parked_hosts": self.frontier.parked_hosts,
            }
            self.stats.sections["policy"] = self.policy.stats()
            self._shut_down()
        return self.stats

    def close_unstarted(self) -> None:
        """Close a crawl that was opened but will not run (another partition could not open its state)."""
        self.stats.termination = self.stats.termination or "not-started"
        self._shut_down()

    def _shut_down(self) -> None:
        """A last checkpoint (what was left to crawl survives the run), stats.json, then close the stores.
        With the disk full the checkpoint may fail: the previous one and the journal still resume."""
        committed = False
        try:
            self.checkpoint()
            committed = True
        except CheckpointError:
            self.stats.errors["checkpoint-failed"] += 1
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            self._disk_full(exc)
            self.stats.errors["checkpoint-failed"] += 1
        self.stats.finished_at = time.time()
        with contextlib.suppress(OSError) if self.disk_full else contextlib.nullcontext():
            self.stats.write(self.out_dir / "stats.json")
        with contextlib.suppress(OSError) if self.disk_full else contextlib.nullcontext():
            self.telemetry.close(self.snapshot())  # the last Snapshot, what stats.json says, to every sink
        for close in (
            functools.partial(self.urlset.close, checkpoint=committed),  # never ahead of the journal
            self.content.close,
            self.store.close,
            self.robots_log.close,
            self.journals.close,
            functools.partial(self.frontier.close, checkpoint=committed),
        ):
            if self.disk_full:
                with contextlib.suppress(OSError):
                    close()
            else:
                close()

    # -- dispatch ----------------------------------------------------------------------------

    async def _dispatch(self, fetcher: Fetcher) -> None:
        try:
            await self._dispatch_leases(fetcher)
        except OSError as exc:  # a full disk met outside a lease (a drain's write to the URL set): stop cleanly
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            self._disk_full(exc)
        await self._finish_in_flight()

    async def _dispatch_leases(self, fetcher: Fetcher) -> None:
        slots = asyncio.Semaphore(self.config.concurrency)
        while True:
            self._check_limits()
            if self._stopping:
                break
            await slots.acquire()
            await self.extensions.room()  # processors keep up, or no new fetch starts
            if self.urlset.pending and len(self.frontier) < self._low_water:
                self._drain_urls()
            lease = self.frontier.acquire()
            while lease is None and not self._stopping:
                if self.urlset.pending:  # nothing is ready: the buffered URLs may be
                    self._drain_urls()
                    lease = self.frontier.acquire()
                    continue
                if (
                    self.frontier.in_flight == 0
                    and not self.extensions.busy  # a page being processed may still emit URLs
                    and (len(self.frontier) == 0 or self._only_robots_waits())
                ):
                    # nothing left that may be fetched: a crawl does not idle only to retry the
                    # robots.txt of unreachable hosts; their URLs stay queued (robots_waiting)
                    self.stats.robots_waiting = len(self.frontier)
                    if self.partition is not None:  # idle: only the coordinator knows if the crawl is over
                        self._send_batches()
                        self.partition.idle = not self.partition.outbox.waiting
                        await self._idle_wait()
                        lease = self.frontier.acquire()
                        continue
                    self.stats.termination = "frontier-empty"
                    self._stopping = True
                    break
                wake = self.frontier.next_contact()
                timeout = None if wake is None else max(0.0, wake - time.monotonic())
                self._changed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), timeout=self._wait_cap(timeout))
                self._check_limits()
                lease = self.frontier.acquire()
            if lease is None:
                slots.release()
                break
            if self.partition is not None:
                self.partition.idle = False
            task = asyncio.create_task(self._process(fetcher, lease))
            self._tasks.add(task)
            task.add_done_callback(functools.partial(self._task_done, slots=slots))

    async def _finish_in_flight(self) -> None:
        """Let the fetches in flight end (within the grace period after an interrupt or a full disk)."""
        grace = self.config.shutdown_grace if self.stats.termination in _ABRUPT else None
        if self._tasks:
            _, late = await asyncio.wait(set(self._tasks), timeout=grace)
            for task in late:  # abandoned: their URLs were leased, so the checkpoint hands them out again
                task.cancel()
            if late:
                self.stats.errors["abandoned-at-shutdown"] += len(late)
                await asyncio.gather(*late, return_exceptions=True)
        await self.extensions.drain(timeout=grace)  # pages fetched are processed, within the grace period

    async def _idle_wait(self) -> None:
        self._changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), timeout=self._wait_cap(0.05))
        self._check_limits()

    def _only_robots_waits(self) -> bool:
        """Is every queued URL on a host that waits for the retry of an unreachable robots.txt?

        True when the front queues are empty and every host holding a back queue (active, or set
        aside by the frontier until its retry time) is such a host.
        """
        frontier = self.frontier
        holding = frontier.active_hosts + frontier.parked_hosts
        return sum(frontier.front_sizes()) == 0 and 0 < holding == len(self._parked)

    def _wait_cap(self, timeout: float | None) -> float:
        cap = self.config.progress_interval
        if self.config.max_seconds is not None:
            cap = min(cap, max(0.01, self.config.max_seconds - (time.monotonic() - self._started)))
        return cap if timeout is None else min(timeout, cap)

    def _task_done(self, task: asyncio.Task[None], *, slots: asyncio.Semaphore) -> None:
        self._tasks.discard(task)
        slots.release()
        self._changed.set()
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            self.stats.errors[f"internal:{type(exc).__name__}"] += 1

    def _check_limits(self) -> None:
        config = self.config
        if self.budget.exhausted():  # every page of the budget fetched or being fetched (by any partition)
            self.stop("max-pages")
        elif config.max_seconds is not None and time.monotonic() - self._started >= config.max_seconds:
            self.stop("max-seconds")
        elif config.max_bytes is not None and self.stats.bytes_downloaded >= config.max_bytes:
            self.stop("max-bytes")

    async def _report_periodically(self) -> None:
        last_checkpoint = time.monotonic()
        while True:
            await asyncio.sleep(self.config.progress_interval)
            try:
                if time.monotonic() - last_checkpoint >= self.config.checkpoint_interval:
                    self.checkpoint()
                    last_checkpoint = time.monotonic()
                else:
                    self.store.maybe_flush()
            except OSError as exc:
                if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                    self._disk_full(exc)
                else:  # an I/O error: crawling on without checkpoints would only grow what a crash loses
                    self.stats.errors["checkpoint-failed"] += 1
                    self.stop("checkpoint-failed")
            except CheckpointError:  # the journal failed before: the crawl is stopping already
                self.stats.errors["checkpoint-failed"] += 1
            self.telemetry.publish(self.snapshot())

    def _gauges(self) -> Gauges:
        return Gauges(
            **self.frontier.gauges(),
            urls_seen=len(self.urlset),
            urls_buffered=self.urlset.pending,
            robots_cached=len(self.robots),
            dns_cached=len(self.resolver),
            **self.extensions.gauges(),
        )

    # -- one lease ---------------------------------------------------------------------------

    async def _process(self, fetcher: Fetcher, lease: Lease) -> None:
        try:
            if self._done and self._finished_before_crash(lease):
                return
            await self._process_lease(fetcher, lease)
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            self._disk_full(exc)
        finally:
            self._flush_journal_soon()

    def _flush_journal_soon(self) -> None:
        """Journal (and commit the table rows of) the pages that end in this turn of the event loop
        together, at its end: one write for all of them. A kill before it loses what a kill during
        their fetches would: those pages are fetched again."""
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._deferred_flush)

    def _deferred_flush(self) -> None:
        self._flush_scheduled = False
        self._flush_journal()

    def _finished_before_crash(self, lease: Lease) -> bool:
        """A URL fetched after the checkpoint a resume started from comes out of the frontier once
        more: drop it without a request."""
        fingerprint = url_fingerprint(lease.entry.url)
        if fingerprint not in self._done:
            return False
        self._done.discard(fingerprint)
        self._release(lease, 0.0, contacted=False)
        return True

    def _disk_full(self, exc: OSError) -> None:
        """No space left: stop cleanly. What the failed write was for is in flight: the last checkpoint
        and the journal (whose torn last batch is dropped on resume) still describe a consistent crawl."""
        self.stats.errors["disk-full"] += 1
        self.disk_full = f"{exc.filename or 'a crawl file'}: {exc.strerror or exc}"
        self.stop("disk-full")

    async def _process_lease(self, fetcher: Fetcher, lease: Lease) -> None:
        entry = lease.entry
        if self._not_http and entry.url.startswith(self._not_http):
            await self._process_by_handler(lease)
            return
        self._parked.discard(lease.host)
        try:  # usually answered from the cache (prefetched); a dead host fails here, before robots.txt
            address = await self.resolver.resolve(hostname_of_authority(lease.host))
        except DNSFailure as exc:
            self._dns_failed(lease, exc)
            return
        self.frontier.set_host_address(lease.host, address)  # no-op unless it changed or was unknown
        owner = self._owner_by_address(lease.host, address) if self.partition is not None else None
        if owner is not None:
            self._hand_over(lease, owner)
            return
        origin = origin_of(entry.url)
        agent = self.config.robots_agent
        now = time.monotonic()
        fetched_for = self._robots_fetched_for.pop(origin, None)
        robots = self.robots.entry(origin, now)
        if robots is None and fetched_for == entry.url:
            # fetched for this very URL one politeness gap ago: it counts, even if a short TTL ran out
            robots = self.robots.peek(origin)
        if robots is None:
            started = time.monotonic()
            rules = await self._fetch_robots(fetcher, origin, entry.depth)
            self._robots_fetched_for[origin] = entry.url
            self._release(lease, time.monotonic() - started, put_back=entry, crawl_delay=rules.crawl_delay(agent))
            return
        rules = robots.rules
        if not rules.allowed(entry.url, agent):
            if robots.unreachable and robots.transient and robots.failures <= self.config.robots_max_retries:
                # robots.txt could not be fetched: the URL waits for the next attempt, it is not dropped
                self._parked.add(lease.host)
                self._release(lease, 0.0, put_back=entry, retry_after=max(robots.expires - now, 0.0))
                return
            if robots.unreachable:
                self.stats.robots_unreachable += 1
            else:
                self.stats.robots_excluded += 1
                self.stats.outcomes[Outcome.ROBOTS_EXCLUDED] += 1
            self._sitemaps.discard(entry.url)
            self._release(lease, 0.0, contacted=False)
            return
        if not self.budget.claim():  # the crawl's page budget is spent (by this or another partition)
            self._release(lease, 0.0, put_back=entry, contacted=False)
            self.stop("max-pages")
            return
        result = await self._fetch_page(fetcher, entry.url)
        attempts = self._attempts.pop(entry.url, 0) + 1
        decision = self.retry.decide(result, attempts)
        first = None
        if self.partition is not None and entry.url not in self._sitemaps and self._content_checked(result):
            first = await self.partition.claim_first(result.payload_fingerprint(), result.url, result.started)
        try:
            if entry.url in self._sitemaps:
                if not decision.retry:
                    self._sitemaps.discard(entry.url)
                self._record_sitemap(result, entry)
            else:
                page = self._record(result, entry, first=first)
                if not decision.retry:
                    self._page_done(result, entry, page)
            if decision.retry:  # back into the frontier, behind a longer rest of its host: no worker waits
                self._attempts[entry.url] = attempts
                self.stats.retries += 1
            elif decision.reason:
                self.stats.errors["gave-up-after-retries"] += 1
        finally:
            result.release()  # stored and parsed: a spilled body's files go now, not when the task is collected
            self._release(
                lease,
                result.duration,
                put_back=entry if decision.retry else None,
                crawl_delay=rules.crawl_delay(agent),
                retry_after=decision.delay,
                contacted=result.outcome not in (Outcome.DNS_ERROR, Outcome.GUARD_REFUSED),
                error=_host_failed(result),
            )

    def _host_activated(self, host: str) -> None:
        """The frontier gave `host` a back queue: find its address meanwhile (Mercator's DNS
        prefetch). With per-IP politeness the frontier hands the host out once it has it."""
        if self._stopping:
            return  # URLs drained into the frontier at shutdown are not fetched in this run
        if not host:  # file:///...: no name to look up (its handler reads local files)
            self.frontier.set_host_address(host, None)
            return
        address = self.resolver.cached(hostname_of_authority(host))
        if address is not None:
            self.frontier.set_host_address(host, address)
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # seeds added before the loop runs: `run` resolves the waiting hosts
        task = loop.create_task(self._resolve_host(host))
        self._lookups.add(task)
        task.add_done_callback(self._lookups.discard)

    async def _resolve_host(self, host: str) -> None:
        address: str | None = None  # unresolvable: scheduled alone; its fetch accounts for the failure
        try:
            address = await self.resolver.resolve(hostname_of_authority(host))
        except DNSFailure:
            pass
        except Exception as exc:  # never leave a host waiting for an address forever
            self.stats.errors[f"internal:dns-prefetch:{type(exc).__name__}"] += 1
        self.frontier.set_host_address(host, address)
        self._changed.set()

    def _dns_failed(self, lease: Lease, failure: DNSFailure) -> None:
        """A temporary failure puts the URL back until the resolver's backoff has passed; a definitive
        one accounts for the URL (and, one by one without lookups, for the rest of its host's URLs)."""
        self.stats.outcomes[Outcome.DNS_ERROR] += 1
        self.stats.errors[str(Outcome.DNS_ERROR)] += 1
        if failure.retry_at is not None:
            wait = max(failure.retry_at - time.monotonic(), 0.0)
            self._release(lease, 0.0, put_back=lease.entry, retry_after=wait)
        else:
            self._release(lease, 0.0, contacted=False)

    async def _fetch_robots(self, fetcher: Fetcher, origin: str, depth: int) -> RobotsRules:
        """Fetch /robots.txt of `origin` (following up to 5 redirects) and cache what it means."""
        url = origin + "/robots.txt"
        status = 0
        for _ in range(MAX_REDIRECT_HOPS + 1):
            result = await fetcher.fetch(url)
            self.stats.robots_fetches += 1
            status = result.status
            if status:
                self.store.record(result)
            now = time.monotonic()
            if result.outcome is Outcome.REDIRECT:
                try:
                    url = normalize(join(url, result.header("location") or ""))
                except InvalidURL:
                    return self._robots_unavailable(origin, status, now)
                continue
            if not status:
                self.stats.errors[f"robots:{result.outcome}"] += 1
                # a name that does not resolve or an address we refuse will not get better by waiting
                transient = result.outcome not in (Outcome.DNS_ERROR, Outcome.GUARD_REFUSED)
                return self.robots.store_unreachable(origin, now, transient=transient)
            body = result.content(MAX_ROBOTS_BYTES + 1)  # one byte more tells the parser it was cut
            rules = self.robots.store_response(origin, status, body, now)
            entry = self.robots.peek(origin)
            if entry is not None and not entry.unreachable:  # parsed or unavailable: kept across a restart
                self.robots_log.record(origin, status, body if 200 <= status < 300 else b"")
                self._flush_journal_soon()
            if 200 <= status < 300 and self.config.sitemaps and rules.sitemaps:
                self._add_sitemaps(rules.sitemaps, url, depth)
            return rules
        return self._robots_unavailable(origin, status, time.monotonic())  # more than 5 redirects

    def _robots_unavailable(self, origin: str, status: int, now: float) -> RobotsRules:
        """A redirect that leads nowhere or too far: no restrictions (RFC 9309 §2.3.1.2), kept like a 4xx."""
        self.robots_log.record(origin, status, b"")
        self._flush_journal_soon()
        return self.robots.store_unavailable(origin, now)

    def _add_sitemaps(self, hrefs: Iterable[str], base: str, depth: int) -> None:
        """Queue sitemap files: in the frontier (polite, robots-checked), not through the URL filter
        (the site owner named them), but through the URL-seen test; at most sitemap_max_files per origin."""
        entries: list[FrontierEntry] = []
        for href in hrefs:
            try:
                url = normalize(join(base, href))
            except InvalidURL:
                self.stats.filtered["sitemap-invalid-url"] += 1
                continue
            origin = origin_of(url)
            if self._sitemap_files[origin] >= self.config.sitemap_max_files:
                self.stats.filtered["sitemap-limit"] += 1
                continue
            self._sitemap_files[origin] += 1
            entries.append(FrontierEntry(url, depth))
            self._sitemaps_submitted.add(url)
        self._submit(entries)

    def _record_sitemap(self, result: FetchResult, entry: FrontierEntry) -> None:
        """Account and store a sitemap fetch, queue what it lists."""
        stats = self.stats
        self._count_fetch(result)
        if not result.status:
            return
        self.store.record(result, depth=entry.depth)
        if result.outcome is Outcome.REDIRECT:
            self._add_sitemaps([result.header("location") or ""], result.url, entry.depth)
            return
        if result.outcome is not Outcome.OK:
            return
        sitemap = parse_sitemap(
            result.content(self.config.max_body_bytes),
            max_bytes=self.config.sitemap_max_bytes,
            max_urls=self.config.sitemap_max_urls,
        )
        stats.sitemaps_fetched += 1
        if sitemap.kind is SitemapKind.INDEX:
            self._add_sitemaps(sitemap.urls, result.url, entry.depth)
            return
        stats.sitemap_urls += len(sitemap.urls)
        self._follow([(url, entry.depth + 1, 0) for url in sitemap.urls], result.url, resolve=True)

    def _content_checked(self, result: FetchResult) -> bool:
        """Will `_record` test this response's body against the content set? Every 2xx body, of any
        type, complete or cut at the size limit (the near-duplicate test is for parsed types only)."""
        return result.outcome is Outcome.OK or (result.outcome is Outcome.TOO_LARGE and 200 <= result.status < 300)

    def _record(
        self, result: FetchResult, entry: FrontierEntry, *, first: tuple[str, float] | None = None
    ) -> ParsedPage | None:
        """Account, store and follow up one fetch; returns the parse of its body if it was parsed.

        `first`: in a crawl of several partitions, the URL that had this body first in the crawl and
        its fetch time, as the partition owning the body's fingerprint answered (crawl.workers).

        The body's fingerprint is that of the payload as received, which the WARC record stores, so
        that an exact duplicate's revisit record can say "identical payload" (seen.content). The
        original an exact duplicate refers to is always a stored response: a near-duplicate that is
        not stored (`store_near_duplicates` off) gives up being its body's first URL, and its exact
        copies are then tested as it was, as near-duplicates (not stored either, counted as such)."""
        stats = self.stats
        self._count_fetch(result)
        if not result.status:
            self.store.record(result, depth=entry.depth)
            return None
        if result.outcome is Outcome.REDIRECT:
            self.store.record(result, depth=entry.depth)
            location = result.header("location")
            if location:
                if entry.depth == 0:  # a seed's redirect widens the scope to its target (http -> https, www.)
                    with contextlib.suppress(InvalidURL):
                        self.url_filter.add_seed(self.normalizer(join(result.url, location)))
                self._follow([(location, entry.depth, entry.hops + 1)], result.url, source=entry.url)
            return None
        if not self._content_checked(result):
            self.store.record(result, depth=entry.depth)
            return None
        fingerprint = result.payload_fingerprint()
        verdict = self.content.check(result.url, fingerprint, result.started, first=first)
        of_url, of_time = verdict.of_url, verdict.of_time
        if verdict.kind is ContentKind.EXACT:  # seen at another URL: a revisit record, links not extracted
            assert of_url is not None and of_time is not None
            stats.duplicate_content += 1
            self.store.record_duplicate(result, of_url, of_time, fingerprint=fingerprint, depth=entry.depth)
            return None
        page = self._parse(result, result.content(self.config.max_body_bytes)) if self._parseable(result) else None
        stored = True
        if verdict.kind is ContentKind.UNCHANGED:  # this URL's own last body: a revisit, links followed
            assert of_time is not None
            self.store.record_duplicate(result, result.url, of_time, fingerprint=fingerprint, depth=entry.depth)
        else:
            if page is not None:
                verdict = self.content.check_near(result.url, page.raw_text)  # words only: no need to collapse
                if verdict.kind is ContentKind.NEAR:  # the relation is kept in DIR/seen/content
                    stats.near_duplicate_content += 1
                    stored = self.config.store_near_duplicates
            if stored:
                self.store.record(result, page=page, fingerprint=fingerprint, depth=entry.depth)
            else:
                self.content.release_first(fingerprint, result.url)
        if first is not None and first[0] == result.url and not self.config.store_near_duplicates:
            assert self.partition is not None
            self.partition.settle(fingerprint, result.url, stored=stored)  # copies of it may wait for this
        if page is None:
            return None
        stats.links_extracted += len(page.links)
        stats.links_dropped += page.dropped_links
        follow_all = self.config.follow_nofollow
        kept = [link for link in page.links if follow_all or not link.nofollow]
        followed = [(link.url, entry.depth + 1, 0) for link in kept]
        anchors = [link.anchor_text for link in kept]
        stats.nofollow_links += len(page.links) - len(followed)
        if page.meta_noindex:
            stats.noindex_pages += 1
        if page.canonical is not None and (follow_all or not page.meta_nofollow):
            try:
                canonical = self.normalizer.serialized(page.canonical)
            except InvalidURL:
                canonical = result.url
            if canonical != result.url:
                # crawled like a link (the URL-seen test drops it if known); the page itself is
                # kept: the indexer prefers the canonical when both are stored
                stats.canonical_elsewhere += 1
                followed.append((canonical, entry.depth + 1, 0))
                anchors.append("")
        if self.config.follow_links:  # else only the processors' Follows lead on from a page
            content = PageContent(page.title, page.text) if self._policy_pages else None
            self._follow(followed, result.url, source=entry.url, anchors=anchors, content=content)
        return page

    def _follow(
        self,
        links: list[tuple[str, int, int]],
        base: str,
        *,
        resolve: bool = False,
        source: str | None = None,
        anchors: list[str] | None = None,
        content: PageContent | None = None,
    ) -> None:
        """Normalize links (resolving redirect Locations, and all hrefs when `resolve`) and enqueue them.
        With `source`, the fetched URL they come from: the policy sees them as its out-links."""
        entries: list[FrontierEntry] = []
        kept_anchors: list[str] = []
        normalizer = self.normalizer
        for index, (href, depth, hops) in enumerate(links):
            try:
                absolute = join(base, href) if hops or resolve else href  # parse_html's links are joined
            except InvalidURL:
                self.stats.filtered[Reason.INVALID_URL] += 1
                continue
            if not absolute.startswith(self._crawlable):
                self.stats.filtered[Reason.SCHEME] += 1
                continue
            entries.append(FrontierEntry(normalizer.serialized(absolute), depth, hops))
            if anchors is not None:
                kept_anchors.append(anchors[index])
        self._enqueue(entries, source=source, anchors=kept_anchors if anchors is not None else None, content=content)

    def _enqueue(
        self,
        entries: list[FrontierEntry],
        *,
        source: str | None = None,
        anchors: list[str] | None = None,
        content: PageContent | None = None,
    ) -> None:
        """Entries the URL filter accepts go to the URL set's buffer; new ones reach the frontier at a drain.
        With `source`, the ordering policy sees them first as the page's out-links."""
        accepted: list[FrontierEntry] = []
        outlinks: list[Outlink] = []
        observe = source is not None and self._policy_pages
        for index, entry in enumerate(entries):
            reason = self._rejection(entry)
            if reason is not None:
                self.stats.filtered[reason] += 1
                continue
            accepted.append(entry)
            if observe:
                outlinks.append(Outlink(entry.url, anchors[index] if anchors is not None else ""))
        if observe and source is not None:
            # before the URL-seen test: links to known URLs are in-links too; the new URLs get
            # their first level when a drain adds them, from what the policy gathered meanwhile
            self.policy.page_done(source, outlinks, content)
            self._policy_reported = source
            self._requeue()
        self._submit(accepted)

    def _submit(self, entries: list[FrontierEntry], *, route: bool = True) -> None:
        if self.partition is not None and route:
            entries = self._route(entries)
        self._journal_lines.extend(journal.submitted(entry.url, entry.depth, entry.hops) for entry in entries)
        buffered = self.urlset.submit_many([url_fingerprint(entry.url) for entry in entries], entries)
        self.stats.duplicate_urls += len(entries) - buffered  # known to the URL set's cache
        if self.urlset.full:
            self._drain_urls()

    def _drain_urls(self) -> int:
        """Check the buffered URLs in one batch; the new ones go to the frontier in arrival order."""
        pending = self.urlset.pending
        if not pending:
            return 0
        new = self.urlset.drain()
        lines = self._journal_lines
        lines.append(journal.drained())
        sitemaps, self._sitemaps_submitted = self._sitemaps_submitted, set()
        added = 0
        for entry in new:
            if entry.url in sitemaps:  # named by the site owner: not through the admission filter
                self._sitemaps.add(entry.url)
                self.frontier.add(entry)
                lines.append(journal.admitted(entry.url, entry.depth, entry.hops, sitemap=True))
                continue
            reason = self.url_filter.admission(entry, host_of(entry.url))
            if reason is not None:
                self.stats.filtered[reason] += 1
                continue
            self.frontier.add(entry)  # its host's address is looked up when it gets a back queue
            lines.append(journal.admitted(entry.url, entry.depth, entry.hops))
            added += 1
        if self._policy_pages:  # every URL submitted so far is placed or known: the policy forgets its notes
            self.policy.settled()
            self._requeue()
        self.stats.urls_discovered += added
        self.stats.duplicate_urls += pending - len(new)
        self._flush_journal()
        if new:
            self._changed.set()
        return added

    # -- extension points (crawlspace.hooks) --------------------------------------------------

    def _rejection(self, entry: FrontierEntry) -> str | None:
        """The built-in filter chain's reason to keep `entry` out, else the user filters'."""
        return self.url_filter.rejection(entry) or self.extensions.rejection(entry)

    def _parseable(self, result: FetchResult) -> bool:
        """A response whose body is parsed for links and text: a 2xx of a parsed type, also when
        truncated at the size limit (stored marked as such and still parsed, as Heritrix does)."""
        complete_or_cut = result.outcome is Outcome.OK or (
            result.outcome is Outcome.TOO_LARGE and 200 <= result.status < 300
        )
        return complete_or_cut and result.content_type in self._parsed_types

    def _parse(self, result: FetchResult, body: bytes) -> ParsedPage:
        return parse_html(
            body,
            result.url,
            result.header("content-type"),
            header_values(result, "x-robots-tag"),
            agent=self.config.robots_agent,
            link_headers=header_values(result, "link"),
            max_links=self.config.max_links_per_page,
            max_text_chars=self.config.max_text_chars,
        )

    async def _fetch_page(self, fetcher: Fetcher, url: str) -> FetchResult:
        """The built-in HTTP fetch, or the handler registered for the URL's scheme."""
        handler = self.extensions.handler_for(url)
        return await (fetcher.fetch(url) if handler is None else self.extensions.fetch(handler, url))

    async def _process_by_handler(self, lease: Lease) -> None:
        """A URL of a non-HTTP scheme (file:) that a registered handler fetches: no DNS, no robots.txt,
        no retries; the host's politeness delay applies only if the handler asks for it."""
        entry = lease.entry
        handler: ProtocolHandler | None = self.extensions.handler_for(entry.url)
        assert handler is not None, f"no handler for {entry.url}"
        if not self.budget.claim():
            self._release(lease, 0.0, put_back=entry, contacted=False)
            self.stop("max-pages")
            return
        result = await self.extensions.fetch(handler, entry.url)
        try:
            self._page_done(result, entry, self._record(result, entry))
        finally:
            self._release(lease, result.duration, contacted=bool(handler.polite))

    def _page_done(self, result: FetchResult, entry: FrontierEntry, parsed: ParsedPage | None) -> None:
        """Hand a fetched response to the processors (robots.txt and sitemaps are not pages).

        `parsed` is `_record`'s parse, None where it did not parse the body: not 2xx, not a parsed
        type, or an exact duplicate of a page seen before. Duplicates are parsed here: the crawler
        does not follow their links again, but processors see every page they were fetched as.
        """
        if not self.extensions.processes_pages or not result.status:
            return
        body = result.content(self.config.max_body_bytes)
        if parsed is None and self._parseable(result):
            parsed = self._parse(result, body)
        page = Page(
            url=result.url,
            status=result.status,
            headers=tuple(result.headers),
            body=body,
            depth=entry.depth,
            fetched_at=result.started,
            truncated=result.truncated,
            title=parsed.title if parsed else "",
            text=parsed.text if parsed else "",
            links=tuple(parsed.links) if parsed else (),
            canonical=parsed.canonical if parsed else None,
            noindex=parsed.meta_noindex if parsed else False,
        )
        task = self.extensions.submit(page, self._follow_emitted)
        task.add_done_callback(lambda _: self._changed.set())  # the crawl may end once processors are done

    def _follow_emitted(self, page: Page, hrefs: list[str]) -> None:
        """URLs a processor emitted: resolved against the page, then the path of its links."""
        self._follow([(href, page.depth + 1, 0) for href in hrefs], page.url, resolve=True)

    async def _close_extensions(self) -> None:
        """Processors of pages still in hand finish (or are cancelled if the crawl failed), then every
        extension is closed, so that the sinks' last items are in stats.json."""
        self.extensions.cancel()
        await self.extensions.drain()
        await self.extensions.close()
        if self.extensions.active:
            self.stats.sections["extensions"] = self.extensions.stats()

    # -- the ordering policy's events ---------------------------------------------------------

    def _policy_done(self, url: str) -> None:
        """`url` left the crawl for good; the policy hears it unless it saw the page's links already."""
        if not self._policy_pages:
            return
        if self._policy_reported == url:
            self._policy_reported = ""
            return
        self.policy.page_done(url, (), None)
        self._requeue()

    def _requeue(self) -> None:
        """URLs whose level rose go into the frontier again at the new level (the stale copy is
        dropped when the frontier draws it: the policy does not admit it)."""
        requeued = self.policy.requeue()
        for entry in requeued:
            self.frontier.add(entry)
        if requeued:
            self._changed.set()
