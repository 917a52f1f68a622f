"""The read side of a crawl: one model of what a crawl left behind, for everyone who reads it.

Who fills it: nobody here; `PageStore` writes the crawl table and the WARC files during a crawl.
Who drains it: `export`, the `crawlspace table` commands, and every later consumer (batch jobs on
Dask, the search index, the link-graph server, the dashboard) through `CrawlReader`, never through
the table's or the WARC files' own layout. A crawl directory is one of three shapes, all read alike:

    DIR/table + DIR/warc                  one crawl process
    DIR/workers/<k>/table + DIR/warc      `--processes N`: a table shard per partition, one WARC directory
    several such DIRs                     several nodes, each with its own directory

`CrawlReader(dirs)` merges the tables of all of them into one key-ordered view (`TableReader`,
implemented by `crawltable.CrawlTable` and `shards.ShardedTable`) and finds each WARC pointer's file
in whichever directory holds it. What it gives, each as typed msgspec Structs and each streaming
(rows are decoded one at a time, never a whole crawl in memory):

    pages(part)          one `StoredPage` per fetched URL (its newest fetch, title, text if stored,
                         WARC pointer, outlinks), in row-key order (hosts reversed: a site's pages
                         are contiguous)
    edges(part)          one `Edge` (source, target, anchor text, nofollow) per link of each page's
                         newest parse
    fetches(part)        (URL, newest `FetchInfo`) of each page, the fetch cells only (cheap to count)
    fetch_history(url)   every kept fetch of a URL (`FetchInfo`), newest first: the change history
    versions(url)        the kept versions of a URL's content (`PageVersion`: time, title, text), newest first
    records(url)         the WARC records of a URL, found through the CDXJ indexes, newest first
    parse(page)          a page parsed again from its WARC response (its text when the crawl kept
                         only pointers, `store_text = false`)
    body(page)           the decoded body of a page's newest 200 capture, a revisit record followed
                         to the response it refers to (`PageBody`: what a duplicate finder hashes)

Parallel jobs: `partitions(n)` cuts the row-key space into at most n `KeyRange`s of about equal
size (from the table's own file boundaries, without reading it); `pages(part)` and `edges(part)`
over the ranges together see every row exactly once. A range is a small picklable value: a Dask
job maps one task per range, and each task opens its own `CrawlReader` on the same directories
(tables are opened read-only, by any number of processes at once, also while a crawl writes).

Invariants: a row appears in one range only, and within a range rows come in ascending key
order, each once, its cells merged from every shard and directory; a `fetch` cell always reads
back as a `FetchInfo` (cells of older crawls are upgraded on reading, `crawltable.fetch_info`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Protocol

import msgspec

from crawlspace.config import CrawlConfig
from crawlspace.fetch.decode import DecodeError, decode_body
from crawlspace.parse import ParsedPage, parse_html
from crawlspace.robots.persist import LOG_NAME, newest_entries
from crawlspace.store.cdxj import CdxjEntry, CdxjIndex
from crawlspace.store.crawltable import Anchor, CrawlTable, CrawlTableError, FetchInfo, Row
from crawlspace.store.pagestore import TABLE_DIR, WARC_DIR
from crawlspace.store.shards import ShardedTable, table_shards
from crawlspace.store.warc import Capture, StoredRecord, WarcFormatError, parse_http_response, read_record

__all__ = [
    "CaptureRecord",
    "CrawlReader",
    "Edge",
    "FetchInfo",
    "KeyRange",
    "PageBody",
    "PageVersion",
    "StoredPage",
    "TableReader",
    "open_table",
]

PAGE_FAMILIES = ("title", "content", "fetch")
"""The families a page's own cells live in (its anchors, written by other pages, are not read)."""
_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml", ""})
DEFAULT_MAX_BODY_BYTES = CrawlConfig().max_body_bytes


class TableReader(Protocol):
    """Read access to a crawl table: what `CrawlReader` needs, and all it uses.

    For the implementer of another reader (a remote store such as BigTable or HBase, a table
    served over HTTP, a fake in tests): a table holds rows keyed by row key (`rowkey.row_key`: the
    URL with its host reversed), each with cells (family, qualifier, timestamp, value). Families are
    `title`, `content` (qualifiers `text`, `warc`, `outlinks`), `fetch` and `anchor` (qualifier: the
    linking page's URL). Values are what the crawl wrote, as plain data: `fetch` a dict of
    `FetchInfo`'s fields, `content:warc` the list of `Capture.to_list`, `content:outlinks` a list of
    [target, anchor text, nofollow] (or [target, text] from older crawls), the others strings.

    Contract:
    - `get` returns the row of `url` (a URL as the crawl stored it, or a row key) with the cells
      of the given families only (None: all), at most `versions` newest versions of each
      (family, qualifier) (None: all kept), or None when the row has no such cell. Within one
      (family, qualifier) the cells come newest first; `Row.latest` takes the first.
    - `scan` yields the rows whose key starts with `prefix` and lies in [start, stop) (stop None:
      no bound), in ascending row-key order (Python's str order, which is UTF-8 byte order), each
      row once with all its cells of the given families merged, rows without such cells left out;
      `limit` caps the rows. It must stream: a caller may stop after any row.
    - `split_keys(parts)` returns at most parts - 1 distinct, non-empty row keys in ascending
      order that cut the table into ranges of roughly equal size. It should be cheap (a store
      knows its own tablets, regions or files); returning [] is allowed and means one range.
    - `close` releases the table; calling it twice is harmless.
    A reader may see the table as it was when it was opened (RocksDB's read-only mode does).
    """

    def get(self, url: str, family: str | Sequence[str] | None = None, versions: int | None = 1) -> Row | None: ...

    def scan(
        self,
        prefix: str = "",
        *,
        start: str = "",
        stop: str | None = None,
        family: str | Sequence[str] | None = None,
        versions: int | None = 1,
        limit: int | None = None,
    ) -> Iterator[Row]: ...

    def split_keys(self, parts: int) -> list[str]: ...

    def close(self) -> None: ...


class KeyRange(msgspec.Struct, frozen=True):
    """The rows whose key k has start <= k < stop (stop None: to the end): one independent piece
    of a scan, small and picklable, to hand to a task in another process."""

    start: str = ""
    stop: str | None = None

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.start <= key and (self.stop is None or key < self.stop)


class Edge(msgspec.Struct, frozen=True):
    """A link of the link graph: `source` links to `target` (both normalized URLs) with this anchor
    text. `nofollow`: every link from source to target was rel=nofollow (or the page said nofollow);
    always False in crawls written before it was recorded."""

    source: str
    target: str
    text: str
    nofollow: bool = False


class StoredPage(msgspec.Struct, frozen=True, kw_only=True):
    """One fetched URL as the crawl stored it: what an indexer or a batch job needs of a page.

    Each part is the newest version of its cell, so after a refetch that failed (no response) or
    was not parsed (a duplicate), `capture`, `title` and `outlinks` are those of the last fetch
    that had them while `fetch` is the newest fetch.
    """

    url: str
    fetch: FetchInfo
    """The newest fetch: status, time (`fetched`), content fingerprint, `duplicate_of` (an exact
    duplicate of that URL's body), depth (hops from a seed), content type, validators."""
    title: str | None = None
    text: str | None = None
    """The page's text: stored when the crawl had `store_text`, or parsed again from the WARC with
    `pages(text=True)` or `CrawlReader.parse`; None otherwise and for pages without text."""
    capture: Capture | None = None
    """Where the response (or revisit record) is in the WARC files (`CrawlReader.record` reads it)."""
    outlinks: list[Edge] = []
    """The distinct links of the newest parse, in page order (no self-links)."""


@dataclass(frozen=True, slots=True)
class PageVersion:
    """One stored version of a page: when it was fetched (the table cell's time), its title and text."""

    fetched: float
    title: str
    text: str


@dataclass(frozen=True, slots=True)
class RobotsFile:
    """A robots.txt as the crawl fetched it: the origin's final status, when, and the raw body."""

    origin: str
    status: int
    fetched: float
    body: bytes


@dataclass(frozen=True, slots=True)
class CaptureRecord:
    """A WARC record found through a CDXJ index: the index line (file, offset, length, time, status,
    media type, payload digest) and the record read at that offset (headers, block)."""

    entry: CdxjEntry
    record: StoredRecord


@dataclass(frozen=True, slots=True)
class PageBody:
    """The body a page was served with, decoded (Content-Encoding undone, cut at `max_body_bytes`).

    An exact duplicate is stored as a revisit record without a payload, so its body is read from the
    response the revisit refers to: `stored_as` names that response's URL (the page's own for a
    response record). `payload_digest` is the page's own record's digest (of the bytes it was sent)
    and `stored_digest` the digest of the payload actually read: they differ only if a revisit
    claims a body it did not have, which is what a duplicate job checks.
    """

    url: str
    content: bytes
    content_type: str
    payload_digest: str
    stored_as: str
    stored_digest: str
    revisit: bool
    """The page's own record is a revisit (an exact duplicate, or its own earlier body unchanged)."""


def open_table(dirs: Sequence[Path]) -> TableReader:
    """The crawl tables of crawl directories as one read-only table (shards of every directory
    merged); a directory that is a table itself (it holds RocksDB's CURRENT file) is opened as one."""
    shards: list[Path] = []
    for directory in dirs:
        found = table_shards(directory)
        if not found:
            if not (directory / "CURRENT").exists():
                raise CrawlTableError(f"no crawl table in {directory} (expected {directory / TABLE_DIR})")
            found = [directory]
        shards.extend(found)
    if not shards:
        raise CrawlTableError("no crawl directory given")
    if len(shards) == 1:
        return CrawlTable(shards[0], readonly=True)
    return ShardedTable(shards)


class CrawlReader:
    """The pages, links, fetch histories and WARC records of one or several crawl directories.

    `dirs`: a crawl directory or several (the nodes of one crawl, or crawls to read as one). `table`:
    read this table instead of the directories' tables (a remote store, or a fake in tests); the
    directories then only supply WARC files. `max_body_bytes`: bodies decoded again from the WARC
    are cut there (the crawl's `max_body_bytes` is the natural value). Use it as a context manager,
    or call `close`.
    """

    def __init__(
        self,
        dirs: str | Path | Sequence[str | Path],
        *,
        table: TableReader | None = None,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    ) -> None:
        self.dirs = [Path(dirs)] if isinstance(dirs, str | Path) else [Path(directory) for directory in dirs]
        self.table: TableReader = table if table is not None else open_table(self.dirs)
        self.warc_dirs = [path for path in map(_warc_dir_of, self.dirs) if path is not None]
        self.max_body_bytes = max_body_bytes
        self._warc_files: dict[str, Path] = {}

    def __enter__(self) -> CrawlReader:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<CrawlReader {', '.join(map(str, self.dirs))} table={self.table!r}>"

    def close(self) -> None:
        self.table.close()

    # -- partitions --------------------------------------------------------------------------

    def partitions(self, parts: int) -> list[KeyRange]:
        """At most `parts` contiguous key ranges covering every row, of about equal size on disk.

        Give `pages` or `edges` one range per task; the ranges need no table handle, so a task in
        another process opens its own reader: `CrawlReader(dirs).pages(part)`. A small table can
        come back as fewer ranges than asked for.
        """
        if parts < 1:
            raise ValueError(f"parts must be >= 1, got {parts}")
        cuts = self.table.split_keys(parts) if parts > 1 else []
        stops: list[str | None] = [*cuts, None]
        return [KeyRange(start, stop) for start, stop in zip(["", *cuts], stops, strict=True)]

    def _rows(self, part: KeyRange | None, families: str | Sequence[str]) -> Iterator[Row]:
        whole = part if part is not None else KeyRange()
        return self.table.scan(start=whole.start, stop=whole.stop, family=families)

    # -- pages and links ---------------------------------------------------------------------

    def pages(self, part: KeyRange | None = None, *, text: bool = False) -> Iterator[StoredPage]:
        """Every fetched URL once (rows of anchors only, URLs never fetched, are left out), in
        row-key order, within `part` if given.

        `text`: give every page its text, parsing it again from the WARC response when the crawl
        did not store it (the 200 responses that are not duplicates of another URL's body), with
        the title of that parse; this reads and parses each such body again, so ask only if needed.
        """
        for row in self._rows(part, PAGE_FAMILIES):
            page = _page_of(row)
            if page is None:
                continue
            if text and page.text is None and page.capture is not None and _has_own_body(page.fetch):
                parsed = self.parse(page)
                page = msgspec.structs.replace(
                    page, title=None if parsed is None else parsed.title, text=None if parsed is None else parsed.text
                )
            yield page

    def fetches(self, part: KeyRange | None = None) -> Iterator[tuple[str, FetchInfo]]:
        """(URL, newest fetch) of every fetched URL, as `pages` gives them but reading the fetch cells
        only: what a job needs to number or count the pages without decoding their content."""
        for row in self._rows(part, "fetch"):
            fetch = row.fetch
            if fetch is not None:
                yield row.url, fetch

    def page(self, url: str) -> StoredPage | None:
        """The page of one URL (as the crawl stored it: normalized), or None if it was never fetched."""
        row = self.table.get(url, family=PAGE_FAMILIES)
        return None if row is None else _page_of(row)

    def edges(self, part: KeyRange | None = None) -> Iterator[Edge]:
        """The links of every page's newest parse, nofollow ones included (see `Edge.nofollow`), by
        source in row-key order, within `part` if given."""
        for row in self._rows(part, "content"):
            yield from _edges_of(row)

    def fetch_history(self, url: str) -> list[FetchInfo]:
        """Every kept fetch of `url`, newest first ([] if never fetched); as many as the crawl's
        `table_fetch_versions`, while `fetches` and `changes` of the newest count them all."""
        row = self.table.get(url, family="fetch", versions=None)
        return [] if row is None else row.fetches

    def versions(self, url: str) -> list[PageVersion]:
        """The page's stored versions that differ from each other, newest first: the texts of the
        `content` cells the table keeps (`table_content_versions`, 3 by default), parsed again from
        their WARC responses when the crawl kept only pointers. A refetch that found the page as it
        was (a 304, an identical body: a revisit record) adds no version; a version whose record is
        missing or does not parse is left out. What a job needs to see how a page's changes changed
        it (the user-experience refresh policy scores each version against the logged queries)."""
        row = self.table.get(url, family=("title", "content"), versions=None)
        if row is None:
            return []
        titles = {cell.timestamp: str(cell.value) for cell in row.versions("title") if cell.value is not None}
        texts = row.versions("content", "text")
        if texts:
            return [PageVersion(c.timestamp, titles.get(c.timestamp, ""), str(c.value or "")) for c in texts]
        found: list[PageVersion] = []
        for cell in row.versions("content", "warc"):
            try:
                capture = Capture.from_list(cell.value)
            except (TypeError, ValueError):
                continue
            parsed = self._parse_capture(capture)
            if parsed is not None:
                found.append(PageVersion(cell.timestamp, parsed.title or "", parsed.text or ""))
        return found

    def anchors(self, url: str) -> list[Anchor]:
        """The newest anchor text of each page linking to `url` (as the crawl stored it)."""
        row = self.table.get(url, family="anchor")
        return [] if row is None else row.anchors

    def robots_files(self) -> dict[str, RobotsFile]:
        """The newest robots.txt the crawl kept of each origin (a 2xx: its rules; any other status:
        "unavailable", no restrictions), from every directory and partition; transient failures
        (5xx, network) are never kept, so their origins are missing."""
        found: dict[str, RobotsFile] = {}
        for directory in self.dirs:
            for log_path in [directory / "robots" / LOG_NAME, *sorted(directory.glob(f"workers/*/robots/{LOG_NAME}"))]:
                for origin, (status, at, body, _raw) in newest_entries(log_path).items():
                    if origin not in found or found[origin].fetched < at:
                        found[origin] = RobotsFile(origin, status, at, body)
        return found

    # -- WARC records ------------------------------------------------------------------------

    def records(self, url: str) -> Iterator[CaptureRecord]:
        """The WARC records (responses, revisits, resources) of `url`, newest first, found through
        the CDXJ indexes of every directory's WARC files and read at their offsets.

        The indexes match as replay tools do (by SURT key: `http`/`https` and a leading `www.` are
        one URL). A WARC file still being written has no index yet: its records come only after
        the crawl closes it; `parse` and `record` read through the table's pointers instead.
        """
        found = [(entry, directory) for directory in self.warc_dirs for entry in CdxjIndex(directory).captures(url)]
        found.sort(key=lambda pair: (pair[0].timestamp, pair[0].filename, pair[0].offset), reverse=True)
        for entry, directory in found:
            yield CaptureRecord(entry, read_record(directory / entry.filename, entry.offset, entry.length))

    def record(self, capture: Capture) -> StoredRecord:
        """The WARC record a table pointer names (`StoredPage.capture`); FileNotFoundError if no
        directory holds its file, WarcFormatError if the bytes there are not a whole record."""
        return read_record(self._warc_path(capture.filename), capture.offset, capture.length)

    def parse(self, page: StoredPage) -> ParsedPage | None:
        """The page's HTML response parsed again from the WARC (title, text, links with nofollow,
        canonical, the robots directives of its meta tags and X-Robots-Tag header for every agent),
        or None when there is nothing to parse: no pointer, a revisit record, a body that is not
        HTML or does not decode, a file missing or damaged."""
        return None if page.capture is None else self._parse_capture(page.capture)

    def _parse_capture(self, capture: Capture) -> ParsedPage | None:
        try:
            record = self.record(capture)
            if record.type != "response":
                return None
            _, headers, body = parse_http_response(record.block)
        except (OSError, WarcFormatError):
            return None
        content_type = headers.get("content-type", "").split(";")[0].strip().lower()
        if content_type not in _HTML_TYPES:
            return None
        try:
            content = decode_body(body, headers.get("content-encoding"), self.max_body_bytes)
        except DecodeError:
            return None
        url = record.headers.get("warc-target-uri", "")
        return parse_html(content, url, headers.get("content-type"), headers.get("x-robots-tag"))

    def body(self, page: StoredPage) -> PageBody | None:
        """The decoded body of the page's newest capture when its fetch was a 200 (None otherwise, or
        when the record or the response a revisit names is missing, damaged or does not decode).

        A revisit is followed to the response it refers to by URL and date: first through that URL's
        table pointer (also while its WARC file is still open), else through the CDXJ indexes.
        """
        if page.capture is None or page.fetch.status != 200:
            return None
        try:
            record = self.record(page.capture)
        except (OSError, WarcFormatError):
            return None
        own_digest = record.headers.get("warc-payload-digest", "")
        stored_as = page.url
        revisit = record.type == "revisit"
        if revisit:
            referred = self._referred_response(record)
            if referred is None:
                return None
            stored_as, record = referred
        elif record.type != "response":
            return None
        try:
            _, headers, raw = parse_http_response(record.block)
            content = decode_body(raw, headers.get("content-encoding"), self.max_body_bytes)
        except (WarcFormatError, DecodeError):
            return None
        return PageBody(
            url=page.url,
            content=content,
            content_type=headers.get("content-type", "").split(";")[0].strip().lower(),
            payload_digest=own_digest,
            stored_as=stored_as,
            stored_digest=record.headers.get("warc-payload-digest", ""),
            revisit=revisit,
        )

    def _referred_response(self, revisit: StoredRecord) -> tuple[str, StoredRecord] | None:
        url = revisit.headers.get("warc-refers-to-target-uri", "")
        date = revisit.headers.get("warc-refers-to-date", "")
        if not url or not date:
            return None
        original = self.page(url)
        if original is not None and original.capture is not None and original.capture.date == date:
            try:
                record = self.record(original.capture)
            except (OSError, WarcFormatError):
                record = None
            if record is not None and record.type == "response":
                return url, record
        try:
            for found in self.records(url):
                if found.record.type == "response" and found.record.headers.get("warc-date") == date:
                    return url, found.record
        except (OSError, WarcFormatError):
            return None
        return None

    def _warc_path(self, filename: str) -> Path:
        """The file of that name in the first WARC directory that holds it (names are unique across
        processes and machines: they carry a time, a serial, the process id and the host name)."""
        path = self._warc_files.get(filename)
        if path is None:
            for directory in self.warc_dirs:
                candidate = directory / filename
                if candidate.exists():
                    self._warc_files[filename] = path = candidate
                    break
            else:
                raise FileNotFoundError(f"no WARC file {filename} in {', '.join(map(str, self.warc_dirs)) or '-'}")
        return path


def _warc_dir_of(directory: Path) -> Path | None:
    """DIR/warc of a crawl directory; beside a table directory given directly, its crawl's."""
    for candidate in (directory / WARC_DIR, directory.parent / WARC_DIR):
        if candidate.is_dir():
            return candidate
    return None


def _has_own_body(fetch: FetchInfo) -> bool:
    """A 200 response whose body is not another URL's (a duplicate's text is its original's)."""
    return fetch.status == 200 and not fetch.duplicate_of


def _page_of(row: Row) -> StoredPage | None:
    fetch = row.fetch
    if fetch is None:
        return None
    pointer = row.latest("content", "warc")
    return StoredPage(
        url=row.url,
        fetch=fetch,
        title=row.title,
        text=row.text,
        capture=Capture.from_list(pointer) if pointer else None,
        outlinks=_edges_of(row),
    )


def _edges_of(row: Row) -> list[Edge]:
    source = row.url
    return [Edge(source, target, text, nofollow) for target, text, nofollow in row.outlinks]
