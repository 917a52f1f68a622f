"""The read side over a fake table: `CrawlReader` needs nothing of a table but the `TableReader` protocol;
pages, edges and fetch histories are typed and streamed; partitions cover every row once; several crawl
directories read as one."""

from __future__ import annotations

import pickle
from collections.abc import Iterator, Sequence
from pathlib import Path

import msgspec
import pytest

from crawlspace.store.crawltable import Cell, CrawlTable, CrawlTableError, FetchInfo, Row
from crawlspace.store.export import page_records
from crawlspace.store.pagestore import PageStore, StoreOptions
from crawlspace.store.reader import CrawlReader, Edge, KeyRange, StoredPage, TableReader
from crawlspace.store.rowkey import row_key
from crawlspace.store.warc import Capture
from tests.store.builders import fetch_result, html_page, parsed

A = "http://a.test/"
B = "http://b.test/page"
C = "http://c.test/"


class MemoryTable:
    """A TableReader over rows held in memory (cells newest first per column, as the protocol asks),
    counting the rows its scans hand out so that a test can tell a stream from a load."""

    def __init__(self, rows: Sequence[Row], cuts: Sequence[str] = ()) -> None:
        self.rows = {row.key: row for row in rows}
        self.cuts = list(cuts)
        self.rows_read = 0
        self.closed = False

    def __repr__(self) -> str:
        return f"<MemoryTable rows={len(self.rows)} read={self.rows_read} closed={self.closed}>"

    @classmethod
    def copy_of(cls, path: Path, cuts: Sequence[str] = ()) -> MemoryTable:
        with CrawlTable(path, readonly=True) as table:
            return cls(list(table.scan(versions=None)), cuts)

    def _selected(self, row: Row, family: str | Sequence[str] | None, versions: int | None) -> Row | None:
        families = None if family is None else {family} if isinstance(family, str) else set(family)
        kept, count = [], dict[tuple[str, str], int]()
        for cell in row.cells:
            column = (cell.family, cell.qualifier)
            count[column] = count.get(column, 0) + 1
            if (families is None or cell.family in families) and (versions is None or count[column] <= versions):
                kept.append(cell)
        return Row(row.key, kept) if kept else None

    def get(self, url: str, family: str | Sequence[str] | None = None, versions: int | None = 1) -> Row | None:
        row = self.rows.get(row_key(url) if "://" in url else url)
        return None if row is None else self._selected(row, family, versions)

    def scan(
        self,
        prefix: str = "",
        *,
        start: str = "",
        stop: str | None = None,
        family: str | Sequence[str] | None = None,
        versions: int | None = 1,
        limit: int | None = None,
    ) -> Iterator[Row]:
        count = 0
        for key in sorted(self.rows):
            if not key.startswith(prefix) or key < start or (stop is not None and key >= stop):
                continue
            row = self._selected(self.rows[key], family, versions)
            if row is None:
                continue
            if limit is not None and count >= limit:
                return
            count += 1
            self.rows_read += 1
            yield row

    def split_keys(self, parts: int) -> list[str]:
        return self.cuts[: parts - 1]

    def close(self) -> None:
        self.closed = True


def record(store: PageStore, url: str, title: str, links: list[tuple[str, str]], started: float) -> None:
    body = html_page(title, f"The text of {title}.", links)
    store.record(fetch_result(url, body, started=started), page=parsed(title, f"The text of {title}.", links))


def make_crawl(directory: Path, pages: dict[str, list[tuple[str, str]]], *, started: float = 1e9) -> None:
    with PageStore(directory, StoreOptions()) as store:
        for number, (url, links) in enumerate(pages.items()):
            record(store, url, f"Title {number}", links, started + number)


def test_both_tables_are_table_readers(tmp_path: Path) -> None:
    make_crawl(tmp_path, {A: []})
    readers: list[TableReader] = [CrawlTable(tmp_path / "table", readonly=True), MemoryTable([])]
    for reader in readers:
        reader.close()


def test_pages_edges_and_histories_come_typed_from_any_table_reader(tmp_path: Path) -> None:
    fetch = {"status": 200, "outcome": "ok", "fetched": 20.0, "fetches": 2, "changes": 1, "first_fetched": 10.0}
    first_crawl_cell = {"status": 503, "outcome": "server-error", "fetched": 10.0, "truncated": True}
    pointer = Capture("f.warc.gz", 10, 99, "<urn:uuid:1>", "2001-01-01T00:00:00Z", "sha1:X").to_list()
    rows = [
        Row(
            row_key(A),
            [
                Cell("title", "", 20.0, "Page A"),
                Cell("content", "outlinks", 20.0, [[B, "to B", False], [C, "to C", True]]),
                Cell("content", "warc", 20.0, pointer),
                Cell("fetch", "", 20.0, {**fetch, "depth": 0, "fingerprint": 7}),
                Cell("fetch", "", 10.0, first_crawl_cell),
            ],
        ),
        Row(row_key(B), [Cell("anchor", A, 20.0, "to B")]),  # linked, never fetched: not a page
        Row(row_key(C), [Cell("content", "outlinks", 5.0, [[A, "old form"]]), Cell("fetch", "", 5.0, fetch)]),
    ]
    table = MemoryTable(rows)
    with CrawlReader([], table=table) as reader:
        pages = list(reader.pages())
        assert [page.url for page in pages] == [A, C]
        page = pages[0]
        assert page.fetch == msgspec.convert({**fetch, "depth": 0, "fingerprint": 7}, FetchInfo)
        assert page.title == "Page A" and page.text is None and page.capture == Capture.from_list(pointer)
        assert page.outlinks == [Edge(A, B, "to B", False), Edge(A, C, "to C", True)]
        assert list(reader.edges()) == [*page.outlinks, Edge(C, A, "old form", False)]
        history = reader.fetch_history(A)
        assert [(f.status, f.fetched, f.fetches, f.truncated) for f in history] == [
            (200, 20.0, 2, None),
            (503, 10.0, 1, "length"),  # a cell of the first crawls, upgraded
        ]
        assert reader.fetch_history(B) == [] and reader.page(B) is None
        assert reader.page(C) == pages[1]
    assert table.closed


def test_pages_stream(tmp_path: Path) -> None:
    urls = [f"http://h{number}.test/" for number in range(50)]
    make_crawl(tmp_path, {url: [] for url in urls})
    table = MemoryTable.copy_of(tmp_path / "table")
    with CrawlReader(tmp_path, table=table) as reader:
        first = next(reader.pages())
        assert first.url == sorted(urls, key=row_key)[0] and table.rows_read == 1


def test_partitions_cover_every_page_once(tmp_path: Path) -> None:
    urls = sorted((f"http://h{number:02}.test/p" for number in range(30)), key=row_key)
    make_crawl(tmp_path, {url: [(urls[0], "first")] for url in urls})
    cuts = [row_key(urls[7]), row_key(urls[8]) + "~", row_key(urls[20])]  # on a row, between rows
    with CrawlReader(tmp_path, table=MemoryTable.copy_of(tmp_path / "table", cuts)) as reader:
        assert reader.partitions(1) == [KeyRange()]
        parts = reader.partitions(4)
        assert parts == [
            KeyRange("", cuts[0]),
            KeyRange(cuts[0], cuts[1]),
            KeyRange(cuts[1], cuts[2]),
            KeyRange(cuts[2], None),
        ]
        assert row_key(urls[7]) in parts[1] and row_key(urls[7]) not in parts[0]
        by_part = [[page.url for page in reader.pages(part)] for part in parts]
        assert [len(urls) for urls in by_part] == [7, 2, 11, 10]
        assert [url for part in by_part for url in part] == [page.url for page in reader.pages()] == urls
        edges = [edge for part in parts for edge in reader.edges(part)]
        assert edges == list(reader.edges()) and len(edges) == len(urls) - 1  # the first page's self-link left out
        with pytest.raises(ValueError, match="parts"):
            reader.partitions(0)
    assert pickle.loads(pickle.dumps(parts)) == parts  # what a task in another process receives


def test_a_stored_page_travels_to_another_process(tmp_path: Path) -> None:
    make_crawl(tmp_path, {A: [(B, "b")]})
    with CrawlReader(tmp_path) as reader:
        (page,) = reader.pages()
    assert isinstance(page, StoredPage) and pickle.loads(pickle.dumps(page)) == page


def test_text_is_parsed_again_from_the_warc_and_records_are_found(tmp_path: Path) -> None:
    make_crawl(tmp_path, {A: [(B, "to B")], B: []})
    with CrawlReader(tmp_path) as reader:
        page = reader.page(A)
        assert page is not None and page.text is None and page.capture is not None  # store_text is off
        assert [p.text for p in reader.pages(text=True)] == ["The text of Title 0. to B", "The text of Title 1."]
        parsed_again = reader.parse(page)
        assert parsed_again is not None and [link.url for link in parsed_again.links] == [B]
        assert reader.record(page.capture).headers["warc-record-id"] == page.capture.record_id
        (found,) = reader.records(A)
        assert (found.entry.filename, found.entry.offset) == (page.capture.filename, page.capture.offset)
        assert found.record.type == "response" and found.entry.status == 200
        assert list(reader.records("http://never.test/")) == []


def test_several_crawl_directories_read_as_one(tmp_path: Path) -> None:
    """Two nodes, each fetching its own hosts: the anchors of links to the other node's pages are in the
    linking node's table, and each page's WARC record in its own node's directory."""
    make_crawl(tmp_path / "node0", {A: [(B, "to B")], C: []}, started=1e9)
    make_crawl(tmp_path / "node1", {B: [(A, "to A")], C: []}, started=2e9)  # C fetched again on the other node
    with CrawlReader([tmp_path / "node0", tmp_path / "node1"]) as reader:
        pages = list(reader.pages(text=True))
        assert [page.url for page in pages] == [A, B, C]
        assert [page.text for page in pages] == [
            "The text of Title 0. to B",  # from node0's WARC files
            "The text of Title 0. to A",  # from node1's
            "The text of Title 1.",
        ]
        assert [fetch.fetched for fetch in reader.fetch_history(C)] == [2e9 + 1, 1e9 + 1]  # newest first, both nodes
        assert pages[2].fetch.fetched == 2e9 + 1
        assert [record.entry.filename[:10] for record in reader.records(C)] == ["crawlspace"] * 2
        b_row = reader.table.get(B, family="anchor")
        assert b_row is not None and [(anchor.source, anchor.text) for anchor in b_row.anchors] == [(A, "to B")]
        assert {(edge.source, edge.target) for edge in reader.edges()} == {(A, B), (B, A)}


def test_a_crawl_written_before_reads_typed_and_continues(tmp_path: Path) -> None:
    """Cells as the first crawls wrote them (no change counters, a boolean `truncated`, outlinks without
    nofollow): read typed, and a refetch by today's store carries the history on."""
    with CrawlTable(tmp_path / "table") as table:
        old_fetch = {"status": 200, "outcome": "2xx", "fetched": 1e9, "fingerprint": 4, "truncated": True}
        table.put(A, "fetch", old_fetch, timestamp=1e9)
        table.put(A, "content", [[B, "to B"]], qualifier="outlinks", timestamp=1e9)
        table.put(A, "title", "Old", timestamp=1e9)
    with CrawlReader(tmp_path) as reader:
        (page,) = reader.pages()
        assert (page.fetch.fetches, page.fetch.first_fetched, page.fetch.truncated) == (1, 1e9, "length")
        assert page.outlinks == [Edge(A, B, "to B", False)]
    with PageStore(tmp_path, StoreOptions()) as store:
        record(store, A, "New", [(C, "to C")], 2e9)
    with CrawlReader(tmp_path) as reader:
        newest, oldest = reader.fetch_history(A)
        assert (newest.fetches, newest.first_fetched, newest.changed, newest.changes) == (2, 1e9, True, 1)
        assert oldest.truncated == "length" and reader.page(A) is not None
        assert list(reader.edges()) == [Edge(A, C, "to C", False)]


def test_a_directory_without_a_table_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(CrawlTableError, match="no crawl table in"):
        CrawlReader(tmp_path)
    with pytest.raises(CrawlTableError, match="no crawl directory given"):
        CrawlReader([])


def test_the_export_reads_what_the_reader_reads(tmp_path: Path) -> None:
    make_crawl(tmp_path, {A: [(B, "to B"), (C, "")], B: []})
    with CrawlReader(tmp_path) as reader:
        pages = list(reader.pages(text=True))
    records = list(page_records(tmp_path))
    assert [(r.url, r.status, r.title, r.text, r.outlinks) for r in records] == [
        (p.url, p.fetch.status, p.title, p.text, [edge.target for edge in p.outlinks]) for p in pages
    ]
