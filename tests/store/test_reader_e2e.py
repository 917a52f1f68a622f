"""The read side over real crawls of the simulated web, in one process and in two (a table shard each),
judged from outside: the server's request log (what was fetched, how often, in which order), the web's
ground truth (links, anchor texts, nofollow) and the WARC files as warcio reads them."""

from __future__ import annotations

import collections
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from crawlspace.simweb import SimWeb, SimWebConfig
from crawlspace.simweb.generator import unescape_unreserved
from crawlspace.simweb.server import LogEntry, read_log, serve_in_background
from crawlspace.store.reader import CrawlReader, Edge, StoredPage
from crawlspace.store.shards import table_shards
from tests.store.test_store_e2e import crawl_command, environment

WEB = SimWebConfig(hosts=14, seed=8, mean_pages_per_host=25, robots_crawl_delay=0.0, include_trap=False)
FETCH_VERSIONS = 16  # the table's default: histories longer than this are cut


class Crawled:
    """A finished crawl with what the server logged (the log is complete: the server was stopped)."""

    def __init__(self, web: SimWeb, directory: Path, log: list[LogEntry], processes: int) -> None:
        self.web = web
        self.directory = directory
        self.processes = processes
        self.requests: dict[str, list[LogEntry]] = collections.defaultdict(list)
        for entry in sorted(log, key=lambda entry: entry.arrived):
            host = entry.host.rsplit(":", 1)[0].lower()
            self.requests[web.origin(host) + unescape_unreserved(entry.path)].append(entry)

    def __repr__(self) -> str:
        return f"<Crawled {self.directory} processes={self.processes} urls={len(self.requests)}>"


def crawl(web: SimWeb, root: Path, processes: int, *extra: str) -> Crawled:
    with serve_in_background(web, root / "server", seeds=3) as server:
        command = crawl_command(server, root / "crawl", "--processes", str(processes), *extra)
        done = subprocess.run(command, capture_output=True, text=True, timeout=180, env=environment())
        assert done.returncode == 0, done.stderr[-2000:]
    return Crawled(web, root / "crawl", read_log(server.log_path), processes)


@pytest.fixture(scope="module")
def web() -> SimWeb:
    return SimWeb.generate(WEB)


@pytest.fixture(scope="module", params=[1, 2], ids=["one-process", "two-processes"])
def crawled(request: pytest.FixtureRequest, web: SimWeb, tmp_path_factory: pytest.TempPathFactory) -> Crawled:
    processes = int(request.param)
    return crawl(web, tmp_path_factory.mktemp(f"reader{processes}"), processes)


@pytest.fixture
def reader(crawled: Crawled) -> Iterator[CrawlReader]:
    with CrawlReader(crawled.directory) as opened:
        yield opened


def test_the_crawl_is_the_shape_it_claims(crawled: Crawled) -> None:
    assert len(table_shards(crawled.directory)) == crawled.processes and len(crawled.requests) > 150


def test_pages_cover_every_fetched_url_exactly_once(crawled: Crawled, reader: CrawlReader) -> None:
    urls = [page.url for page in reader.pages()]
    assert len(urls) == len(set(urls))
    assert set(urls) == set(crawled.requests)


def test_fetch_histories_are_typed_newest_first_and_match_the_log(crawled: Crawled, reader: CrawlReader) -> None:
    for page in reader.pages():
        history = reader.fetch_history(page.url)
        requests = crawled.requests[page.url]
        assert history[0] == page.fetch
        assert len(history) == min(len(requests), FETCH_VERSIONS), page.url
        assert [fetch.fetched for fetch in history] == sorted((fetch.fetched for fetch in history), reverse=True)
        assert [fetch.fetches for fetch in history] == list(range(len(requests), len(requests) - len(history), -1))
        if all(fetch.status for fetch in history):  # each fetch got the response the server logged
            assert [fetch.status for fetch in history] == [entry.status for entry in reversed(requests)][: len(history)]


def expected_edges(web: SimWeb, source: str) -> list[Edge]:
    """What `edges()` must give for one page: its links in body order, one per distinct target (the first
    non-empty anchor text; nofollow when every link to the target is), self-links and mailto: left out."""
    found: dict[str, tuple[str, bool]] = {}
    for link in web.links(source):
        if link.target is None or link.target == source:
            continue
        text = " ".join(link.anchor_text.split())
        known = found.get(link.target)
        if known is None:
            found[link.target] = (text, link.nofollow)
        else:
            found[link.target] = (known[0] or text, known[1] and link.nofollow)
    return [Edge(source, target, text, nofollow) for target, (text, nofollow) in found.items()]


def parsed_pages(reader: CrawlReader) -> list[StoredPage]:
    """The pages whose links the crawl stored: HTML 200s that are not an exact duplicate of another URL."""
    return [
        page
        for page in reader.pages()
        if page.fetch.status == 200 and not page.fetch.duplicate_of and not page.url.endswith("/robots.txt")
    ]


def test_edges_match_the_links_of_the_web(crawled: Crawled, reader: CrawlReader) -> None:
    pages = parsed_pages(reader)
    by_source: dict[str, list[Edge]] = collections.defaultdict(list)
    for edge in reader.edges():
        by_source[edge.source].append(edge)
    nofollow = 0
    for page in pages:
        expected = expected_edges(crawled.web, page.url)
        assert page.outlinks == expected == by_source[page.url], page.url
        nofollow += sum(edge.nofollow for edge in expected)
    assert len(pages) > 150 and nofollow > 0
    assert set(by_source) <= {page.url for page in reader.pages()}


def test_every_edge_is_an_anchor_on_its_targets_row(reader: CrawlReader) -> None:
    """Across shards: the anchor of a link to another partition's host is in the linking partition's shard."""
    anchors = {
        (anchor.source, row.url, anchor.text) for row in reader.table.scan(family="anchor") for anchor in row.anchors
    }
    assert {(edge.source, edge.target, edge.text) for edge in reader.edges()} == anchors


def warcio_captures(directory: Path) -> dict[str, list[tuple[str, int, str, str]]]:
    """Per URL, its response and revisit records as warcio reads them: (file, offset, record id, date), oldest first."""
    found: dict[str, list[tuple[str, int, str, str]]] = collections.defaultdict(list)
    for path in sorted((directory / "warc").glob("*.warc.gz")):
        with open(path, "rb") as handle:
            iterator = ArchiveIterator(handle)
            for record in iterator:
                if record.rec_type in ("response", "revisit"):
                    headers = record.rec_headers
                    found[headers.get_header("WARC-Target-URI")].append(
                        (
                            path.name,
                            iterator.get_record_offset(),
                            headers.get_header("WARC-Record-ID"),
                            headers.get_header("WARC-Date"),
                        )
                    )
    for captures in found.values():
        captures.sort(key=lambda capture: capture[3])
    return found


def test_records_and_pointers_name_the_records_warcio_reads(crawled: Crawled, reader: CrawlReader) -> None:
    captures = warcio_captures(crawled.directory)
    checked = 0
    for page in reader.pages():
        expected = captures.get(page.url, [])
        if page.capture is None:
            assert not expected, page.url
            continue
        newest = expected[-1]
        assert (page.capture.filename, page.capture.offset, page.capture.record_id) == newest[:3], page.url
        found = list(reader.records(page.url))
        assert [(r.entry.filename, r.entry.offset) for r in found] == [capture[:2] for capture in reversed(expected)]
        assert [r.record.headers["warc-record-id"] for r in found] == [capture[2] for capture in reversed(expected)]
        assert reader.record(page.capture).headers["warc-target-uri"] == page.url
        checked += 1
    assert checked > 150 and checked == len(captures)


def test_partitions_read_every_page_once(reader: CrawlReader) -> None:
    parts = reader.partitions(4)
    assert 2 <= len(parts) <= 4
    assert [page.url for part in parts for page in reader.pages(part)] == [page.url for page in reader.pages()]
    assert [edge for part in parts for edge in reader.edges(part)] == list(reader.edges())


def test_text_comes_back_from_the_warc(reader: CrawlReader) -> None:
    pages = [page for page in reader.pages(text=True) if page.fetch.status == 200 and not page.fetch.duplicate_of]
    html = [page for page in pages if (page.fetch.content_type or "").startswith("text/html")]
    assert len(html) > 150 and all(page.text and page.title for page in html)
    plain = {page.url: page for page in reader.pages()}
    assert all(page.title == plain[page.url].title for page in html)  # the title of the parse is the stored one


def test_two_crawl_directories_read_as_one(web: SimWeb, crawled: Crawled, tmp_path: Path) -> None:
    """A second crawl of the same web read together with the first (as the nodes of one crawl are): every
    URL once, its fetches from both directories newest first, each WARC pointer resolved in its own."""
    again = crawl(web, tmp_path, 1, "--max-pages", "60")
    later_files = {path.name for path in (again.directory / "warc").glob("*.warc.gz")}
    with CrawlReader([crawled.directory, again.directory]) as both, CrawlReader(again.directory) as alone:
        pages = {page.url: page for page in both.pages(text=True)}
        assert set(pages) == set(crawled.requests) | set(again.requests)
        for url in again.requests:
            history = both.fetch_history(url)
            assert len(history) == min(len(crawled.requests.get(url, [])) + len(again.requests[url]), FETCH_VERSIONS)
            assert [fetch.fetched for fetch in history] == sorted((fetch.fetched for fetch in history), reverse=True)
            assert history[0] == alone.fetch_history(url)[0] == pages[url].fetch  # the later crawl's is the newest
            capture = pages[url].capture
            if capture is not None:
                assert capture.filename in later_files and both.record(capture).headers["warc-target-uri"] == url
                records = [record.entry.filename for record in both.records(url)]
                assert records[0] in later_files and len(records) == len(history)
