"""The engine: one asyncio loop driving the crawl loop of DESIGN.md §2.

A dispatcher takes leases from the frontier while fetch slots are free and starts one task per
lease. The task checks robots.txt from the per-origin cache (fetching it through the same lease
when missing, so that the robots request is subject to the host's politeness too), fetches,
stores, parses and sends the links through filter, normalization and the URL-seen test back
into the frontier. Redirect targets take the same path as links (Mercator).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crawlspace.config import CrawlConfig
from crawlspace.crawl.housekeeping import CrawlStats, ProgressReporter
from crawlspace.dns import AddressGuard, Resolver
from crawlspace.fetch import Fetcher, FetchResult, Outcome
from crawlspace.frontier import Frontier, FrontierEntry, Lease, Politeness
from crawlspace.parse import parse_html
from crawlspace.robots import RobotsCache, RobotsRules
from crawlspace.seen import ContentKind, ContentSeen, UrlSet
from crawlspace.store import WarcWriter
from crawlspace.store.warc import warc_date
from crawlspace.urls import InvalidURL, join, normalize, origin_of, url_fingerprint
from crawlspace.urls.filter import UrlFilter
from crawlspace.urls.fingerprint import content_fingerprint

ROBOTS_MAX_REDIRECTS = 5
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml", ""})
RETRY_AFTER_CAP = 3600.0


@dataclass(frozen=True, slots=True)
class SeedProblem:
    line: int
    text: str
    reason: str


def read_seeds(path: Path) -> tuple[list[str], list[SeedProblem]]:
    """Normalized seed URLs of a seeds file (one per line, # comments), and the lines that were not."""
    seeds: list[str] = []
    problems: list[SeedProblem] = []
    for number, raw in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), start=1):
        text = raw.split("#", 1)[0].strip() if raw.lstrip().startswith("#") else raw.strip()
        if not text:
            continue
        try:
            seeds.append(normalize(text))
        except InvalidURL as exc:
            problems.append(SeedProblem(number, text, str(exc)))
    return seeds, problems


def parse_retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return min(max(float(value.strip()), 0.0), RETRY_AFTER_CAP)
    except ValueError:
        return None


class CrawlEngine:
    def __init__(
        self, config: CrawlConfig, out_dir: str | Path, *, live_progress: bool | None = None, resume: bool = False
    ) -> None:
        self.config = config
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.stats = CrawlStats()
        self.politeness = Politeness(
            min_delay=config.min_delay,
            delay_factor=config.delay_factor,
            max_delay=config.max_delay,
            max_conn_per_host=config.max_conn_per_host,
        )
        self.frontier = Frontier(self.politeness, back_queues=3 * config.concurrency)
        self.robots = RobotsCache(ttl=config.robots_ttl)
        seen_dir = self.out_dir / "seen"
        self.urlset: UrlSet[FrontierEntry] = UrlSet.open(
            seen_dir / "urls",
            cache_bytes=config.seen_cache_bytes,
            buffer_urls=config.seen_buffer_urls,
            reset=not resume,
        )
        self.content = ContentSeen(
            seen_dir / "content", near_threshold=config.near_duplicate_threshold, reset=not resume
        )
        self._low_water = 2 * config.concurrency
        self.url_filter = UrlFilter(max_depth=config.max_depth, max_redirects=config.max_redirects)
        self.resolver = Resolver(overrides=config.resolve, hosts_file=config.hosts_file)
        self.guard = AddressGuard(allow_private=config.allow_private_addresses)
        self.warc = WarcWriter(self.out_dir / "warc", max_file_bytes=config.warc_max_bytes)
        self._live_progress = live_progress
        self._changed = asyncio.Event()
        self._stopping = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._started = time.monotonic()

    # -- public ------------------------------------------------------------------------------

    def add_seeds(self, seeds: Iterable[str]) -> int:
        """Seeds go through the URL set like links (a repeated seed counts once); returns how many are new."""
        before = self.stats.urls_discovered
        self._enqueue([FrontierEntry(url) for url in seeds])
        self._drain_urls()
        return self.stats.urls_discovered - before

    def stop(self, reason: str = "stopped") -> None:
        """Stop taking new URLs; in-flight fetches finish."""
        if not self._stopping:
            self._stopping = True
            self.stats.termination = self.stats.termination or reason
            self._changed.set()

    async def run(self) -> CrawlStats:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, self.stop, "interrupted")
        fetcher = Fetcher(
            self.resolver,
            self.guard,
            user_agent=self.config.user_agent,
            from_header=self.config.from_header,
            max_connections=self.config.concurrency,
            max_conn_per_host=self.config.max_conn_per_host,
            connect_timeout=self.config.connect_timeout,
            read_timeout=self.config.read_timeout,
            total_timeout=self.config.total_timeout,
            max_body_bytes=self.config.max_body_bytes,
        )
        reporter = ProgressReporter(self.stats, self._gauges, self.out_dir / "progress.jsonl", live=self._live_progress)
        try:
            async with fetcher:
                with reporter:
                    progress = asyncio.create_task(self._report_periodically(reporter))
                    try:
                        await self._dispatch(fetcher)
                    finally:
                        progress.cancel()
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                    loop.remove_signal_handler(sig)
            self.warc.close()
            self._drain_urls()  # URLs still buffered go to the frontier, so that the URL set can close
            self.urlset.close()
            self.content.close()
            self.stats.finished_at = time.time()
            self.stats.write(self.out_dir / "stats.json")
        return self.stats

    # -- dispatch ----------------------------------------------------------------------------

    async def _dispatch(self, fetcher: Fetcher) -> None:
        slots = asyncio.Semaphore(self.config.concurrency)
        while True:
            self._check_limits()
            if self._stopping:
                break
            await slots.acquire()
            if self.urlset.pending and len(self.frontier) < self._low_water:
                self._drain_urls()
            lease = self.frontier.acquire()
            while lease is None and not self._stopping:
                if self.urlset.pending:  # nothing is ready: the buffered URLs may be
                    self._drain_urls()
                    lease = self.frontier.acquire()
                    continue
                if len(self.frontier) == 0 and self.frontier.in_flight == 0:
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
            task = asyncio.create_task(self._process(fetcher, lease))
            self._tasks.add(task)
            task.add_done_callback(functools.partial(self._task_done, slots=slots))
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

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
        if config.max_pages is not None and self.stats.pages_fetched + self.frontier.in_flight >= config.max_pages:
            self.stop("max-pages")
        elif config.max_seconds is not None and time.monotonic() - self._started >= config.max_seconds:
            self.stop("max-seconds")
        elif config.max_bytes is not None and self.stats.bytes_downloaded >= config.max_bytes:
            self.stop("max-bytes")

    async def _report_periodically(self, reporter: ProgressReporter) -> None:
        while True:
            await asyncio.sleep(self.config.progress_interval)
            reporter.report()

    def _gauges(self) -> dict[str, Any]:
        return {
            "frontier": len(self.frontier),
            "in_flight": self.frontier.in_flight,
            "active_hosts": self.frontier.active_hosts,
            "urls_seen": len(self.urlset),
            "urls_buffered": self.urlset.pending,
            "robots_cached": len(self.robots),
            "dns_cached": len(self.resolver),
        }

    # -- one lease ---------------------------------------------------------------------------

    async def _process(self, fetcher: Fetcher, lease: Lease) -> None:
        entry = lease.entry
        origin = origin_of(entry.url)
        agent = self.config.robots_agent
        rules = self.robots.get(origin, time.monotonic())
        if rules is None:
            started = time.monotonic()
            rules = await self._fetch_robots(fetcher, origin)
            self.frontier.release(
                lease, time.monotonic() - started, put_back=entry, crawl_delay=rules.crawl_delay(agent)
            )
            return
        if not rules.allowed(entry.url, agent):
            self.stats.robots_excluded += 1
            self.stats.outcomes[Outcome.ROBOTS_EXCLUDED] += 1
            self.frontier.release(lease, 0.0, contacted=False)
            return
        result = await fetcher.fetch(entry.url)
        retry_after = None
        try:
            retry_after = self._record(result, entry)
        finally:
            self.frontier.release(
                lease,
                result.duration,
                crawl_delay=rules.crawl_delay(agent),
                retry_after=retry_after,
                contacted=result.outcome not in (Outcome.DNS_ERROR, Outcome.GUARD_REFUSED),
            )

    async def _fetch_robots(self, fetcher: Fetcher, origin: str) -> RobotsRules:
        url = origin + "/robots.txt"
        for _ in range(ROBOTS_MAX_REDIRECTS + 1):
            result = await fetcher.fetch(url)
            self.stats.robots_fetches += 1
            if result.status:
                self.warc.write_exchange(result)
            now = time.monotonic()
            if result.outcome is Outcome.REDIRECT:
                location = result.header("location")
                try:
                    url = normalize(join(url, location or ""))
                except InvalidURL:
                    return self.robots.store_response(origin, 404, b"", now)
                continue
            if not result.status:
                self.stats.errors[f"robots:{result.outcome}"] += 1
                return self.robots.store_unreachable(origin, now)
            body = result.content(self.config.max_body_bytes)
            return self.robots.store_response(origin, result.status, body, now)
        return self.robots.store_response(origin, 404, b"", time.monotonic())

    def _record(self, result: FetchResult, entry: FrontierEntry) -> float | None:
        """Account, store and follow up one fetch; returns a Retry-After delay for the host, if any."""
        stats = self.stats
        stats.pages_fetched += 1
        stats.outcomes[result.outcome] += 1
        if not result.status:
            stats.errors[str(result.outcome)] += 1
            return None
        stats.responses_by_status[result.status] += 1
        stats.bytes_downloaded += len(result.body)
        if result.outcome is Outcome.REDIRECT:
            self.warc.write_exchange(result)
            location = result.header("location")
            if location:
                self._follow([(location, entry.depth, entry.hops + 1)], result.url)
            return None
        if result.status in (429, 503):
            self.warc.write_exchange(result)
            return parse_retry_after(result.header("retry-after"))
        if result.outcome is not Outcome.OK or result.content_type not in HTML_TYPES:
            self.warc.write_exchange(result)
            return None
        body = result.content(self.config.max_body_bytes)
        verdict = self.content.check(result.url, content_fingerprint(body), result.started)
        if verdict.kind is ContentKind.EXACT:  # seen at another URL: a revisit record, links not extracted
            stats.duplicate_content += 1
            self.warc.write_revisit(result, str(verdict.of_url), _refers_to_date(verdict.of_time))
            return None
        page = parse_html(body, result.url, result.header("content-type"), result.header("x-robots-tag"))
        if verdict.kind is ContentKind.UNCHANGED:  # this URL's own earlier capture; its links are followed
            self.warc.write_revisit(result, result.url, _refers_to_date(verdict.of_time))
        else:
            verdict = self.content.check_near(result.url, page.text)
            if verdict.kind is ContentKind.NEAR:
                stats.near_duplicate_content += 1
            if verdict.kind is not ContentKind.NEAR or self.config.store_near_duplicates:
                self.warc.write_exchange(result)
        followed = [(link.url, entry.depth + 1, 0) for link in page.links if not link.nofollow]
        stats.links_extracted += len(page.links)
        self._follow(followed, result.url)
        return None

    def _follow(self, links: list[tuple[str, int, int]], base: str) -> None:
        entries: list[FrontierEntry] = []
        for href, depth, hops in links:
            try:
                url = normalize(join(base, href)) if hops else normalize(href)
            except InvalidURL:
                self.stats.filtered["not-http-url"] += 1
                continue
            entries.append(FrontierEntry(url, depth, hops))
        self._enqueue(entries)

    def _enqueue(self, entries: list[FrontierEntry]) -> None:
        """Filtered entries go to the URL set's buffer; they reach the frontier when it is drained."""
        accepted: list[FrontierEntry] = []
        for entry in entries:
            reason = self.url_filter.rejection(entry)
            if reason is not None:
                self.stats.filtered[reason] += 1
                continue
            accepted.append(entry)
        buffered = self.urlset.submit_many([url_fingerprint(entry.url) for entry in accepted], accepted)
        self.stats.duplicate_urls += len(accepted) - buffered  # known to the URL set's cache
        if self.urlset.full:
            self._drain_urls()

    def _drain_urls(self) -> int:
        """Check the buffered URLs in one batch; the new ones go to the frontier in arrival order."""
        pending = self.urlset.pending
        if not pending:
            return 0
        new = self.urlset.drain()
        for entry in new:
            self.frontier.add(entry)
        self.stats.urls_discovered += len(new)
        self.stats.duplicate_urls += pending - len(new)
        if new:
            self._changed.set()
        return len(new)


def _refers_to_date(fetched_at: float | None) -> str | None:
    return None if fetched_at is None else warc_date(fetched_at)
