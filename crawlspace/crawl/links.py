"""The link pipeline: from an href on a page to a URL in the frontier (the right half of IIR fig. 20.1).

Who fills it: the recorder's links of a fetched page (and its redirect Location, canonical URL),
the sitemaps named in robots.txt and the URLs they list, seeds, URLs a page processor emitted, and
batches from other partitions. Each goes: resolve against the page -> crawlable scheme ->
normalize -> URL filter chain (built-in, then the user's) -> the ordering policy sees the page's
out-links -> host splitter (another partition's URLs leave in batches) -> URL-seen buffer. A drain
(`drain`) tests the buffered URLs in one batch against the disk-resident URL set; the new ones
pass the admission guards (per-host budgets, trap defences) and enter the frontier in arrival
order. Who drains it: the frontier, when the engine leases.

Most links of a page are repeats (its site's navigation, sidebar and footer: 9 in 10 on the
benchmark's web), so a link to a URL this partition submitted recently is dropped first, before the filter,
the host splitter and the journal: it passed them when it was first submitted, and the URL set
it went to would drop it again. The recent submissions are a table of their own
(`RecentFingerprints`), filled as URLs are submitted: the URL set's cache learns a URL only at
the drain after it, and never learns the URLs sent to other partitions.

Every step that changes durable state is told to the ledger as it happens (S, N, A lines);
sitemap files bypass the filter (the site owner named them) but not the URL-seen test.

Sans-IO: no sockets, no clock, no event loop. `wake` is called when URLs entered the frontier
(the dispatcher may have been waiting for them), `send_batches` when a batch for another
partition filled up, `send_soon` when one holds URLs (it leaves within the send interval).
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from crawlspace.crawl.ledger import Ledger
from crawlspace.crawl.telemetry import CrawlStats
from crawlspace.distributed.router import PartitionRouter
from crawlspace.frontier import Frontier, FrontierEntry
from crawlspace.hooks.runtime import Extensions
from crawlspace.policies import Outlink, PageContent
from crawlspace.policies.base import OrderingPolicy
from crawlspace.seen import RunStore, UrlSet
from crawlspace.seen.urlset import RecentFingerprints
from crawlspace.urls import InvalidURL, Normalizer, host_of, join, normalize, origin_of
from crawlspace.urls.filter import Reason, UrlFilter


@dataclass(frozen=True, slots=True)
class Links:
    """What a fetched page leads to, as the recorder found it: hrefs with their depth and redirect
    hops, their anchor texts, the page they come from (for the ordering policy) and its content."""

    hrefs: list[tuple[str, int, int]]
    base: str
    source: str | None = None
    anchors: list[str] | None = None
    content: PageContent | None = None
    resolve: bool = False  # resolve every href against `base` (parse_html's links are joined already)


class LinkPipeline:
    def __init__(
        self,
        *,
        normalizer: Normalizer,
        url_filter: UrlFilter,
        extensions: Extensions,
        policy: OrderingPolicy,
        urlset: UrlSet[FrontierEntry],
        frontier: Frontier,
        router: PartitionRouter | None,
        pinned_urls: RunStore | None = None,
        ledger: Ledger,
        stats: CrawlStats,
        sitemap_max_files: int,
        recent_cache_bytes: int = 0,
        wake: Callable[[], None],
        send_batches: Callable[[], None],
        send_soon: Callable[[], None],
    ) -> None:
        self.normalizer = normalizer
        self.url_filter = url_filter
        self.extensions = extensions
        self.policy = policy
        self.urlset = urlset
        self._fingerprint = urlset.scheme.function  # as the URL set's directory records
        self._recent = RecentFingerprints(recent_cache_bytes)  # submitted here (see the module docstring)
        self.pinned_urls = pinned_urls
        self.frontier = frontier
        self.router = router
        self.ledger = ledger
        self.stats = stats
        self.sitemaps: set[str] = set()  # sitemap URLs in the frontier, fetched as sitemaps
        self.sitemap_files: Counter[str] = Counter()  # sitemap files queued per origin
        self._sitemap_max_files = sitemap_max_files
        self._sitemaps_submitted: set[str] = set()  # sitemap URLs waiting in the URL buffer
        self._crawlable = ("http://", "https://", *(scheme + ":" for scheme in sorted(extensions.schemes)))
        self._observes_pages = policy.observes_pages
        self._policy_reported = ""  # the last URL whose page the policy saw through `enqueue`
        self._replay_pending: list[FrontierEntry] = []
        self._replay_admitted: list[FrontierEntry] = []
        self._wake = wake
        self._send_batches = send_batches
        self._send_soon = send_soon

    def __repr__(self) -> str:
        return f"LinkPipeline({self.urlset.pending} buffered, {len(self.sitemaps)} sitemaps in the frontier)"

    # -- in -------------------------------------------------------------------------------------

    def add_seeds(self, seeds: Iterable[str]) -> int:
        """Seeds widen the scope (every partition knows every seed) and enter like links; the number of
        new URLs in the frontier."""
        entries: list[FrontierEntry] = []
        for seed in seeds:
            try:
                url = self.normalizer(seed)
            except InvalidURL:
                self.stats.invalid_seeds += 1
                continue
            self.url_filter.add_seed(url)
            if self.router is None or self.router.mine(url):
                entries.append(FrontierEntry(url))
        before = self.stats.urls_discovered
        self.enqueue(entries)
        self.drain()
        return self.stats.urls_discovered - before

    def widen_scope(self, seed_url: str, location: str) -> None:
        """A seed's redirect widens the scope to its target (http -> https, www.)."""
        with contextlib.suppress(InvalidURL):
            self.url_filter.add_seed(self.normalizer(join(seed_url, location)))

    def follow(self, links: Links) -> list[FrontierEntry]:
        """Resolve and normalize the hrefs of `links`, then enqueue them; the entries, normalized (before
        the URL filter and the URL-seen test)."""
        entries: list[FrontierEntry] = []
        kept_anchors: list[str] = []
        normalizer, anchors, base = self.normalizer, links.anchors, links.base
        for index, (href, depth, hops) in enumerate(links.hrefs):
            try:
                absolute = join(base, href) if hops or links.resolve else href
            except InvalidURL:
                self.stats.filtered[Reason.INVALID_URL] += 1
                continue
            if not absolute.startswith(self._crawlable):
                self.stats.filtered[Reason.SCHEME] += 1
                continue
            entries.append(FrontierEntry(normalizer.serialized(absolute), depth, hops))
            if anchors is not None:
                kept_anchors.append(anchors[index])
        self.enqueue(
            entries, source=links.source, anchors=kept_anchors if anchors is not None else None, content=links.content
        )
        return entries

    def enqueue(
        self,
        entries: list[FrontierEntry],
        *,
        source: str | None = None,
        anchors: list[str] | None = None,
        content: PageContent | None = None,
    ) -> None:
        """Entries the URL filter accepts go to the URL set's buffer; new ones reach the frontier at a
        drain. With `source`, the ordering policy sees them first as the page's out-links (the known
        ones too: they passed the filter when they were first submitted)."""
        accepted: list[FrontierEntry] = []
        fingerprints: list[int] = []
        outlinks: list[Outlink] = []
        observe = source is not None and self._observes_pages
        all_fingerprints = [self._fingerprint(entry.url) for entry in entries]
        known = self._recent.probe(np.array(all_fingerprints, np.uint64)).tolist()
        for index, entry in enumerate(entries):
            if not known[index]:
                reason = self.url_filter.rejection(entry) or self.extensions.rejection(entry)
                if reason is not None:
                    self.stats.filtered[reason] += 1
                    continue
                accepted.append(entry)
                fingerprints.append(all_fingerprints[index])
            if observe:
                outlinks.append(Outlink(entry.url, anchors[index] if anchors is not None else ""))
        self.stats.duplicate_urls += len(entries) - known.count(False)
        if observe and source is not None:
            # before the URL-seen test: links to known URLs are in-links too; the new URLs get
            # their first level when a drain adds them, from what the policy gathered meanwhile
            self.policy.page_done(source, outlinks, content)
            self._policy_reported = source
            self._requeue()
        self._submit_fingerprinted(accepted, fingerprints)

    def add_sitemaps(self, hrefs: Iterable[str], base: str, depth: int) -> None:
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
            if self.sitemap_files[origin] >= self._sitemap_max_files:
                self.stats.filtered["sitemap-limit"] += 1
                continue
            self.sitemap_files[origin] += 1
            entries.append(FrontierEntry(url, depth))
            self._sitemaps_submitted.add(url)
        self.submit(entries)

    def submit(self, entries: list[FrontierEntry], *, route: bool = True) -> None:
        """Into the URL-seen buffer, after the host splitter (`route=False`: a batch another partition
        sent here, already routed).

        Not tested against the recent submissions, unlike a page's links: "submitted here" may mean
        "sent to another partition", and what comes back here that way (a batch from a partition that
        sent it here because the host moved, an unacknowledged batch routed again after a resize) may
        be the one copy left; the URL set decides."""
        self._submit_fingerprinted(entries, [self._fingerprint(entry.url) for entry in entries], route=route)

    def _submit_fingerprinted(
        self, entries: list[FrontierEntry], fingerprints: list[int], *, route: bool = True
    ) -> None:
        """`submit` of `entries`, whose `fingerprints` are these, remembered as submitted recently."""
        if not entries:
            return
        self._recent.insert(np.array(fingerprints, np.uint64))
        if self.router is not None and route:
            mine, full = self.router.route(entries)
            if full:
                self._send_batches()
            elif self.router.outbox.pending:
                self._send_soon()
            if len(mine) < len(entries):
                entries, fingerprints = mine, _fingerprints_of(mine, entries, fingerprints)
        self.ledger.submitted(entries)
        buffered = self.urlset.submit_many(fingerprints, entries)
        self.stats.duplicate_urls += len(entries) - buffered  # known to the URL set's cache
        if self.urlset.full:
            self.drain()

    def submit_forwarded(self, entries: list[FrontierEntry]) -> int:
        """URLs handed here for per-IP politeness (their hosts are pinned here now): their natural
        owner's URL set let them through, so they are tested only against the URLs of pinned hosts
        queued here (`pinned_urls`), never against the URL set, which may know a URL that is queued
        elsewhere (after a resize it holds the whole crawl's history) and would drop it for good."""
        if not entries or self.pinned_urls is None:
            self.submit(entries, route=False)
            return 0
        fingerprints = np.fromiter((self._fingerprint(e.url) for e in entries), np.uint64, len(entries))
        distinct, first = np.unique(fingerprints, return_index=True)
        new = self.pinned_urls.test_and_set(distinct)
        added = 0
        for index in np.sort(first[new]).tolist():
            entry = entries[index]
            reason = self.url_filter.admission(entry, host_of(entry.url))
            if reason is not None:
                self.stats.filtered[reason] += 1
                continue
            self.frontier.add(entry)
            self.ledger.admitted(entry)
            added += 1
        self.urlset.insert(distinct[new])  # seen here from now on: a link to it found here is a repeat
        self.stats.urls_discovered += added
        self.stats.duplicate_urls += len(entries) - added
        self._wake()
        return added

    def _note_pinned(self, entries: list[FrontierEntry]) -> None:
        """Admitted URLs of hosts another partition owns by the assignment (pinned here, or sent here
        for a host about to be: the owner of its address): a forward of one of them is a repeat."""
        router = self.router
        if self.pinned_urls is None or router is None or router.assignment.partitions == 1:
            return
        owner, index = router.assignment.owner, router.index
        foreign = [self._fingerprint(e.url) for e in entries if owner(host_of(e.url)) != index]
        if foreign:
            self.pinned_urls.test_and_set(np.unique(np.array(foreign, np.uint64)))

    def reset_pinned(self) -> None:
        """No host is pinned here any more (a resize dropped the old assignment's per-IP decisions)."""
        if self.pinned_urls is not None:
            directory, limit = self.pinned_urls.directory, self.pinned_urls.memtable_limit
            self.pinned_urls.close(checkpoint=False)
            self.pinned_urls = RunStore(directory, memtable_limit=limit, reset=True)

    # -- out ------------------------------------------------------------------------------------

    def drain(self) -> int:
        """Check the buffered URLs in one batch; the new ones go to the frontier in arrival order."""
        pending = self.urlset.pending
        if not pending:
            return 0
        new = self.urlset.drain()
        self.ledger.drained()
        sitemaps, self._sitemaps_submitted = self._sitemaps_submitted, set()
        added = 0
        for entry in new:
            if entry.url in sitemaps:  # named by the site owner: not through the admission filter
                self.sitemaps.add(entry.url)
                self.frontier.add(entry)
                self.ledger.admitted(entry, sitemap=True)
                continue
            reason = self.url_filter.admission(entry, host_of(entry.url))
            if reason is not None:
                self.stats.filtered[reason] += 1
                continue
            self.frontier.add(entry)  # its host's address is looked up when it gets a back queue
            self.ledger.admitted(entry)
            added += 1
        if self._observes_pages:  # every URL submitted so far is placed or known: the policy forgets its notes
            self.policy.settled()
            self._requeue()
        self._note_pinned(new)
        self.stats.urls_discovered += added
        self.stats.duplicate_urls += pending - len(new)
        self.ledger.flush()
        if new:
            self._wake()
        return added

    def is_sitemap(self, url: str) -> bool:
        """Is `url` in the frontier as a sitemap file (fetched and read as one)?"""
        return url in self.sitemaps

    @property
    def pending(self) -> int:
        """URLs waiting in the URL-seen buffer."""
        return self.urlset.pending

    # -- the ordering policy's events ---------------------------------------------------------

    def url_finished(self, url: str) -> None:
        """`url` left the crawl for good; the policy hears it unless it saw the page's links already."""
        if not self._observes_pages:
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
            self._wake()

    # -- resume -------------------------------------------------------------------------------

    def replay_submitted(self, entry: FrontierEntry) -> None:
        self._replay_pending.append(entry)  # submitted after the last drain: not yet checked

    def replay_drained(self) -> None:
        self._replay_pending.clear()

    def replay_admitted(self, entry: FrontierEntry, *, sitemap: bool) -> None:
        if sitemap:
            self.sitemaps.add(entry.url)
        else:
            self.url_filter.admission(entry, host_of(entry.url))
        self.frontier.add(entry)
        self._replay_admitted.append(entry)

    def finish_replay(self) -> None:
        """The URL set may know the replayed admissions already (it can be ahead of the checkpoint):
        make sure it does; what was submitted after the last drain is submitted again."""
        admitted, self._replay_admitted = self._replay_admitted, []
        self._note_pinned(admitted)
        if admitted:
            self.urlset.submit_many([self._fingerprint(entry.url) for entry in admitted], admitted)
            self.urlset.drain()
        pending, self._replay_pending = self._replay_pending, []
        if pending:
            self.submit(pending)


def _fingerprints_of(kept: list[FrontierEntry], entries: list[FrontierEntry], fingerprints: list[int]) -> list[int]:
    """The fingerprints of `kept`, the entries the router left to this partition: the same objects as
    in `entries`, in their order, so each one's fingerprint is found by walking both lists once."""
    found: list[int] = []
    for entry, fingerprint in zip(entries, fingerprints, strict=True):
        if len(found) < len(kept) and entry is kept[len(found)]:
            found.append(fingerprint)
    return found
