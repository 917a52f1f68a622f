"""The recorder: one fetch result -> its store writes, its content verdict, and the links it leads to.

The middle of IIR fig. 20.1 (parse, content seen?) and the store beside it. For a page:

- every response is counted (and journaled as fetched) and stored: WARC record + crawl table row;
- a 2xx body of any type is tested against the content set by the fingerprint of its payload as
  received (what the WARC record's payload digest covers): an exact duplicate of another URL's body
  becomes a revisit record of that URL's response and its links are not followed again; this URL's
  own unchanged body is a revisit too, but its links are followed; parsed types also go through
  the near-duplicate test (shingles), and a near-duplicate is stored only if configured;
- a parsed page's links (less nofollow ones unless configured), its canonical URL and, for a
  redirect, its Location are returned as `Links` for the link pipeline: the recorder decides what
  a page leads to, it does not send anything anywhere.

In a crawl of several partitions the near-duplicate test is the partitions' together (the owners
of a page's LSH band keys answer: distributed.nearclaims), so recording a parsed new page is two
steps around the engine's question: `record` stops at the page's signature (`Recorded.near`), and
`record_near` finishes with the answer; the decisions are those of one process.

The original an exact duplicate refers to is always a stored response: a near-duplicate that is
not stored (`store_near_duplicates` off) gives up being its body's first URL (the peers hear of it
through `Recorded.settle`), and its exact copies are then tested as it was, as near-duplicates.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from crawlspace.config import CrawlConfig
from crawlspace.crawl.ledger import Ledger
from crawlspace.crawl.links import Links
from crawlspace.crawl.telemetry import CrawlStats
from crawlspace.distributed.claims import Answer
from crawlspace.distributed.nearclaims import NearMatch
from crawlspace.fetch import FetchResult, Outcome
from crawlspace.frontier import FrontierEntry
from crawlspace.parse import ParsedPage, parse_html
from crawlspace.parse.sitemap import SitemapKind, parse_sitemap
from crawlspace.policies import PageContent
from crawlspace.seen import ContentKind, ContentSeen, ContentVerdict
from crawlspace.seen.content import NEW
from crawlspace.seen.shingles import SigArray
from crawlspace.store import PageStore
from crawlspace.urls import InvalidURL, Normalizer


def header_values(result: FetchResult, name: str) -> list[str]:
    """Every value of a response header that may repeat (X-Robots-Tag, Link)."""
    lowered = name.lower()
    return [value for key, value in result.headers if key.lower() == lowered]


@dataclass(frozen=True, slots=True)
class PageInHand:
    """A 2xx response past the exact test: what storing it and handing on its links need."""

    result: FetchResult
    entry: FrontierEntry
    first: Answer | None  # the crawl's first URL with this body, from its owner (several partitions)
    fingerprint: int
    page: ParsedPage | None  # its parse, if of a parsed type


@dataclass(frozen=True, slots=True)
class NearPending:
    """A parsed new page waiting for the partitions' near-duplicate answer (`FetchRecorder.record_near`)."""

    held: PageInHand
    signature: SigArray


@dataclass(slots=True)
class Recorded:
    """What recording a fetch decided beyond the store: for the engine to hand on."""

    page: ParsedPage | None = None  # the parse of the body, if it was parsed
    links: Links | None = None  # for the link pipeline
    sitemap_files: list[str] = field(default_factory=list)  # sitemap files to queue (from a sitemap index)
    widen_scope: str | None = None  # a seed's redirect Location: the scope grows to its target
    settle: tuple[int, bool] | None = None  # (body fingerprint, stored): tell the peers, copies may wait
    near: NearPending | None = None  # several partitions: nothing recorded yet but the exact test; ask them


class FetchRecorder:
    def __init__(
        self,
        config: CrawlConfig,
        *,
        store: PageStore,
        content: ContentSeen,
        normalizer: Normalizer,
        ledger: Ledger,
        stats: CrawlStats,
        policy_reads_pages: bool,
        partitions: int = 1,
    ) -> None:
        self.config = config
        self.store = store
        self.content = content
        self.normalizer = normalizer
        self.ledger = ledger
        self.stats = stats
        self._policy_reads_pages = policy_reads_pages
        self._near_asked = partitions > 1  # the near-duplicate test is the partitions' together
        self._parsed_types = frozenset(config.parse_content_types) | {""}  # no Content-Type: sniffed as HTML

    def __repr__(self) -> str:
        return f"FetchRecorder({self.store!r}, {self.content!r})"

    # -- decisions without I/O ----------------------------------------------------------------

    def content_checked(self, result: FetchResult) -> bool:
        """Will `record` test this response's body against the content set? Every 2xx body, of any
        type, complete or cut at the size limit (the near-duplicate test is for parsed types only)."""
        return result.outcome is Outcome.OK or (result.outcome is Outcome.TOO_LARGE and 200 <= result.status < 300)

    def parseable(self, result: FetchResult) -> bool:
        """A response whose body is parsed for links and text: a 2xx of a parsed type, also when
        truncated at the size limit (stored marked as such and still parsed, as Heritrix does)."""
        return self.content_checked(result) and result.content_type in self._parsed_types

    def parse(self, result: FetchResult, body: bytes) -> ParsedPage:
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

    def count_fetch(self, result: FetchResult) -> None:
        size = len(result.body)
        self.stats.count_fetch(result.status, str(result.outcome), size)
        self.ledger.fetched(result.url, result.status, str(result.outcome), size)

    # -- pages --------------------------------------------------------------------------------

    def record(
        self, result: FetchResult, entry: FrontierEntry, *, first: Answer | None = None, fingerprint: int | None = None
    ) -> Recorded:
        """Account and store one fetch of a page; what it leads to.

        `first`: in a crawl of several partitions, the URL that had this body first in the crawl and
        its fetch time, as the partition owning the body's fingerprint answered (distributed.claims);
        `fingerprint`: that fingerprint (`payload_fingerprint`, which reads a spilled body's file).
        With several partitions, a parsed new page comes back with `near` set and nothing else: the
        caller asks the partitions and finishes with `record_near`."""
        self.count_fetch(result)
        if not result.status:
            self.store.record(result, depth=entry.depth)
            return Recorded()
        if result.not_modified:  # a conditional refetch (crawl/refreshing.py): the stored copy is current
            self.store.record_not_modified(result, depth=entry.depth)
            return Recorded()
        if result.outcome is Outcome.REDIRECT:
            self.store.record(result, depth=entry.depth)
            location = result.header("location")
            if not location:
                return Recorded()
            return Recorded(
                links=Links([(location, entry.depth, entry.hops + 1)], result.url, source=entry.url),
                widen_scope=location if entry.depth == 0 else None,
            )
        if not self.content_checked(result):
            self.store.record(result, depth=entry.depth)
            return Recorded()
        if fingerprint is None:
            fingerprint = result.payload_fingerprint()
        return self._record_content(result, entry, first, fingerprint)

    def _record_content(
        self, result: FetchResult, entry: FrontierEntry, first: Answer | None, fingerprint: int
    ) -> Recorded:
        stats, config = self.stats, self.config
        verdict = self.content.check(result.url, fingerprint, result.started, first=first)
        of_url, of_time = verdict.of_url, verdict.of_time
        if verdict.kind is ContentKind.EXACT:  # seen at another URL: a revisit record, links not extracted
            assert of_url is not None and of_time is not None
            stats.duplicate_content += 1
            self.store.record_duplicate(result, of_url, of_time, fingerprint=fingerprint, depth=entry.depth)
            return Recorded()
        page = self.parse(result, result.content(config.max_body_bytes)) if self.parseable(result) else None
        held = PageInHand(result, entry, first, fingerprint, page)
        if verdict.kind is ContentKind.UNCHANGED:  # this URL's own last body: a revisit, links followed
            assert of_time is not None
            self.store.record_duplicate(result, result.url, of_time, fingerprint=fingerprint, depth=entry.depth)
            return self._recorded(held, stored=True)
        if page is not None:
            if self._near_asked:
                signature = self.content.shingler.signature(page.raw_text)  # words only: no need to collapse
                if signature is not None:
                    return Recorded(page=page, near=NearPending(held, signature))
                verdict = NEW
            else:
                verdict = self.content.check_near(result.url, page.raw_text)
        return self._store_new(held, verdict)

    def record_near(self, pending: NearPending, match: NearMatch | None) -> Recorded:
        """Finish recording a page `record` left at its signature, with the partitions' best candidate."""
        near = match is not None and match.similarity >= self.content.near_threshold
        found = (match.url, match.fetched_at, match.similarity) if match is not None and near else None
        return self._store_new(pending.held, self.content.record_near(pending.held.result.url, found))

    def _store_new(self, held: PageInHand, verdict: ContentVerdict) -> Recorded:
        """Store a page whose content is new to the exact test: in full, unless it is a near-duplicate
        the crawl does not keep (its body then gives up being the first of its exact copies)."""
        stored = True
        if verdict.kind is ContentKind.NEAR:  # the relation is kept in DIR/seen/content
            self.stats.near_duplicate_content += 1
            stored = self.config.store_near_duplicates
        result = held.result
        if stored:
            self.store.record(result, page=held.page, fingerprint=held.fingerprint, depth=held.entry.depth)
        else:
            self.content.release_first(held.fingerprint, result.url)
        return self._recorded(held, stored=stored)

    def _recorded(self, held: PageInHand, *, stored: bool) -> Recorded:
        recorded = Recorded(page=held.page)
        first = held.first
        if first is not None and first[0] == held.result.url and not self.config.store_near_duplicates:
            recorded.settle = (held.fingerprint, stored)  # copies of it may wait for this
        if held.page is not None:
            recorded.links = self._links_of(held.page, held.result, held.entry)
        return recorded

    def _links_of(self, page: ParsedPage, result: FetchResult, entry: FrontierEntry) -> Links | None:
        stats = self.stats
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
        if not self.config.follow_links:  # only the processors' Follows lead on from a page
            return None
        content = PageContent(page.title, page.text) if self._policy_reads_pages else None
        return Links(followed, result.url, source=entry.url, anchors=anchors, content=content)

    # -- sitemaps -----------------------------------------------------------------------------

    def record_sitemap(self, result: FetchResult, entry: FrontierEntry) -> Recorded:
        """Account and store a sitemap fetch; the sitemap files and page URLs it lists."""
        self.count_fetch(result)
        if not result.status:
            return Recorded()
        self.store.record(result, depth=entry.depth)
        if result.outcome is Outcome.REDIRECT:
            return Recorded(sitemap_files=[result.header("location") or ""])
        if result.outcome is not Outcome.OK:
            return Recorded()
        sitemap = parse_sitemap(
            result.content(self.config.max_body_bytes),
            max_bytes=self.config.sitemap_max_bytes,
            max_urls=self.config.sitemap_max_urls,
        )
        self.stats.sitemaps_fetched += 1
        if sitemap.kind is SitemapKind.INDEX:
            return Recorded(sitemap_files=list(sitemap.urls))
        self.stats.sitemap_urls += len(sitemap.urls)
        return Recorded(links=Links([(url, entry.depth + 1, 0) for url in sitemap.urls], result.url, resolve=True))
