"""Repeated links (a site's navigation on every page) are dropped before the URL filter, the host splitter
and the journal: a URL submitted once is neither filtered, journaled nor sent to its owner again, and the
crawl still learns every new URL once, in order."""

from __future__ import annotations

from pathlib import Path

from crawlspace.config import CrawlConfig
from crawlspace.crawl.assembly import url_filter
from crawlspace.crawl.links import LinkPipeline, Links
from crawlspace.crawl.telemetry import CrawlStats
from crawlspace.distributed.assignment import ModuloAssignment
from crawlspace.distributed.router import PartitionRouter
from crawlspace.frontier import FrontierEntry
from crawlspace.hooks.runtime import Extensions
from crawlspace.policies.registry import make_policy
from crawlspace.seen import UrlSet
from crawlspace.urls import Normalizer, host_of


class RecordingLedger:
    """The ledger's side the link pipeline writes to, as lists."""

    def __init__(self) -> None:
        self.submitted_urls: list[str] = []
        self.admitted_urls: list[str] = []
        self.sent: list[tuple[int, str]] = []

    def submitted(self, entries: list[FrontierEntry]) -> None:
        self.submitted_urls += [entry.url for entry in entries]

    def drained(self) -> None:
        pass

    def admitted(self, entry: FrontierEntry, *, sitemap: bool = False) -> None:
        self.admitted_urls.append(entry.url)

    def flush(self) -> bool:
        return True

    # the router's journal
    def sent_entry(self, peer: int, number: int, entry: FrontierEntry, *, forward: bool) -> None:
        self.sent.append((peer, entry.url))

    def acked(self, peer: int, number: int) -> None:
        pass

    def moved(self, host: str, owner: int) -> None:
        pass

    def pinned(self, host: str) -> None:
        pass


class RouterJournal:
    def __init__(self, ledger: RecordingLedger) -> None:
        self.sent = ledger.sent_entry
        self.acked = ledger.acked
        self.moved = ledger.moved
        self.pinned = ledger.pinned


class Frontier:
    def __init__(self) -> None:
        self.urls: list[str] = []

    def add(self, entry: FrontierEntry) -> None:
        self.urls.append(entry.url)


def pipeline(
    tmp_path: Path, *, router: PartitionRouter | None = None, ledger: RecordingLedger, recent_cache_bytes: int = 1 << 16
) -> tuple[LinkPipeline, Frontier, list[str], CrawlStats]:
    asked: list[str] = []

    def count(entry: FrontierEntry) -> bool:
        asked.append(entry.url)
        return True

    config = CrawlConfig()
    frontier = Frontier()
    stats = CrawlStats()
    links = LinkPipeline(
        normalizer=Normalizer(),
        url_filter=url_filter(config),
        extensions=Extensions(filters=[count]),
        policy=make_policy(config),
        urlset=UrlSet.open(tmp_path / "urls", cache_bytes=1 << 16, buffer_urls=1000, reset=True),
        frontier=frontier,  # type: ignore[arg-type]
        router=router,
        ledger=ledger,  # type: ignore[arg-type]
        stats=stats,
        sitemap_max_files=10,
        recent_cache_bytes=recent_cache_bytes,
        wake=lambda: None,
        send_batches=lambda: None,
        send_soon=lambda: None,
    )
    return links, frontier, asked, stats


def page(source: str, hrefs: list[str]) -> Links:
    return Links(hrefs=[(href, 1, 0) for href in hrefs], base=source, source=source)


NAVIGATION = [f"http://a.test/section/{k}" for k in range(10)]


def test_a_repeated_link_is_filtered_and_journaled_once_and_every_new_url_reaches_the_frontier(tmp_path: Path) -> None:
    ledger = RecordingLedger()
    links, frontier, asked, stats = pipeline(tmp_path, ledger=ledger)
    links.add_seeds(["http://a.test/"])
    asked.clear()
    pages = [page(f"http://a.test/p{k}", [*NAVIGATION, f"http://a.test/p{k + 1}"]) for k in range(20)]
    for found in pages:
        links.follow(found)
    links.drain()
    new = [*NAVIGATION, *(f"http://a.test/p{k + 1}" for k in range(20))]
    assert asked == new  # the user's filter saw each URL once, in the order found
    assert ledger.submitted_urls == ["http://a.test/", *new]  # one journal line each
    assert frontier.urls == ["http://a.test/", *new]
    assert stats.urls_discovered == 1 + len(new)
    assert stats.duplicate_urls == 19 * len(NAVIGATION)
    links.urlset.close()


def test_without_the_recent_cache_repeats_are_filtered_again_and_the_url_set_still_drops_them(tmp_path: Path) -> None:
    """The cache is what saves the work (a crawl with `seen_cache_bytes=0`: the URL set alone decides)."""
    ledger = RecordingLedger()
    links, frontier, asked, stats = pipeline(tmp_path, ledger=ledger, recent_cache_bytes=0)
    links.add_seeds(["http://a.test/"])
    for k in range(3):
        links.follow(page(f"http://a.test/p{k}", NAVIGATION))
    links.drain()
    assert len(asked) == 1 + 3 * len(NAVIGATION)
    assert frontier.urls == ["http://a.test/", *NAVIGATION]
    assert stats.duplicate_urls == 2 * len(NAVIGATION)
    links.urlset.close()


def test_a_url_for_another_partition_is_sent_to_it_once(tmp_path: Path) -> None:
    ledger = RecordingLedger()
    assignment = ModuloAssignment(2)
    router = PartitionRouter(0, assignment, RouterJournal(ledger), per_ip=False)
    links, frontier, asked, stats = pipeline(tmp_path, router=router, ledger=ledger)
    hosts = [f"h{k}.test" for k in range(40)]
    mine = [host for host in hosts if assignment.owner(host) == 0]
    theirs = [host for host in hosts if assignment.owner(host) == 1]
    assert mine and theirs
    links.add_seeds([f"http://{host}/" for host in mine])
    targets = [f"http://{host}/x" for host in hosts]
    for k in range(5):
        links.follow(page(f"http://{mine[0]}/p{k}", targets))
    links.drain()
    assert ledger.sent == [(1, f"http://{host}/x") for host in theirs]  # each queued (and journaled) once
    assert [entry.url for batch in router.cut() for entry in batch.entries] == [f"http://{host}/x" for host in theirs]
    assert [url for url in frontier.urls if url.endswith("/x")] == [f"http://{host}/x" for host in mine]
    assert all(host_of(url) in mine for url in frontier.urls)
    assert asked == [*(f"http://{host}/" for host in mine), *targets]  # the filter saw each once
    assert stats.duplicate_urls == 4 * len(hosts)
    links.urlset.close()


def test_a_url_sent_to_another_partition_and_sent_back_is_kept(tmp_path: Path) -> None:
    """The host moved (per-IP politeness) or the crawl was resized while the URL was on its way: the batch
    that brings it back may hold its one copy, so the URL set decides, not the recent submissions (a loss
    the lossy-transport crawl test found: each side took the other's copy for its own)."""
    ledger = RecordingLedger()
    assignment = ModuloAssignment(2)
    router = PartitionRouter(0, assignment, RouterJournal(ledger), per_ip=False)
    links, frontier, _asked, _stats = pipeline(tmp_path, router=router, ledger=ledger)
    theirs = next(f"http://h{k}.test/x" for k in range(100) if assignment.owner(f"h{k}.test") == 1)
    links.follow(page("http://a.test/p", [theirs]))
    assert ledger.sent == [(1, theirs)]
    links.submit([FrontierEntry(theirs, 2, 0)], route=False)  # partition 1 sends it here
    links.drain()
    assert frontier.urls == [theirs]
    links.urlset.close()


def test_each_url_kept_here_is_tested_under_its_own_fingerprint_once_the_others_are_routed_away(
    tmp_path: Path,
) -> None:
    """Routing takes the other partition's URLs out from between this one's: the URL set must still see
    each kept URL with its own fingerprint, or it drops a new URL in place of a known one."""
    ledger = RecordingLedger()
    assignment = ModuloAssignment(2)
    router = PartitionRouter(0, assignment, RouterJournal(ledger), per_ip=False)
    links, frontier, _asked, stats = pipeline(tmp_path, router=router, ledger=ledger, recent_cache_bytes=0)
    hosts = [f"h{k}.test" for k in range(40)]
    mine = [host for host in hosts if assignment.owner(host) == 0]
    theirs = [host for host in hosts if assignment.owner(host) == 1]
    known = f"http://{mine[0]}/"
    links.add_seeds([known])
    links.drain()
    fresh = [f"http://{host}/new" for host in mine[1:4]]
    links.follow(page(known, [known, f"http://{theirs[0]}/", *fresh, f"http://{theirs[1]}/"]))
    links.drain()
    assert frontier.urls == [known, *fresh]
    assert stats.duplicate_urls == 1
    links.urlset.close()
