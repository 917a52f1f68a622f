"""The engine's one handle on storage: each fetch becomes WARC records and crawl-table cells.

Per fetch with a response: request, response and metadata records (or a revisit record for a
payload stored before, at this URL or another, which it names by URL and date), then on the
page's row a `fetch` cell (status, fingerprint, validators, times, change counters), the `title`, the `content`
cells (WARC pointer, outlinks, and the text if `store_text`) and, on the row of each link's
target, an `anchor` cell whose qualifier is this page. A fetch without a response (DNS error, timeout...) gets a `fetch`
cell only. WARC records go to disk at once (one write per exchange); table cells are buffered
and committed as one batch every `flush_pages` pages or `flush_seconds` seconds, after an fsync
of the WARC file, so a committed pointer never points at bytes a crash could lose.

The text is left in the WARC by default: measured on 25 KB pages (bench/store), compressing the
extracted text for the table took about a quarter of the store's CPU per page (zstd is at its
floor there, ~400 MB/s, like ISA-L's deflate of the body) and would have put the store under
3,000 pages per CPU-second; `export` parses it again from the response record instead.

Refetches keep the table's version limits exact: the page's previous row is read anyway (for
the change history), so its cells are trimmed to their limits there, anchor cells of links that
disappeared are deleted, and those of links still present are trimmed before the new version.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from crawlspace.fetch import FetchResult
from crawlspace.parse import ParsedPage
from crawlspace.store.crawltable import DEFAULT_MAX_VERSIONS, CrawlTable, FetchInfo, fetch_info
from crawlspace.store.rowkey import row_key
from crawlspace.store.warc import Capture, RecoveredFile, WarcWriter, fetch_metadata, warc_date
from crawlspace.urls import InvalidURL, Normalizer

WARC_DIR = "warc"  # keep in step with warc.warc_directory
TABLE_DIR = "table"


@dataclass(frozen=True, slots=True)
class StoreOptions:
    warc_max_bytes: int = 1 << 30
    warc_prefix: str = "crawlspace"
    warc_compression_level: int = 1
    store_text: bool = False
    max_versions: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_MAX_VERSIONS))
    flush_pages: int = 500
    flush_seconds: float = 1.0
    sync: bool = True


@dataclass(slots=True)
class StoreStats:
    pages: int = 0
    revisits: int = 0
    failures: int = 0
    anchors: int = 0
    commits: int = 0
    recovered: list[RecoveredFile] = field(default_factory=list)


@dataclass(slots=True)
class _Previous:
    """What the table (or the uncommitted batch) knew about a page before this fetch."""

    fetch: FetchInfo | None = None
    outlinks: list[str] = field(default_factory=list)
    capture: Capture | None = None
    in_table: bool = False


_SERIALIZED = Normalizer().serialized


def _normal_form(url: str) -> str:
    """`normalize(url)` for a URL that parse_html produced, without parsing it again.

    parse_html resolves every href with ada (WHATWG), whose output is already in normal form
    except for a fragment and percent-escapes, and a WHATWG serialization is a fixed point of the
    WHATWG parser: so `Normalizer.serialized` (what the link pipeline applies to the same hrefs)
    gives what `normalize` would, without its second parse, and a resolved http(s) URL with
    neither `#` nor `%` is returned as it is (3x faster per link; tests/store check the
    equivalence on every link of the simulated web).
    """
    if "#" not in url and "%" not in url and url.startswith(("http://", "https://")):
        return url
    return _SERIALIZED(url)


def page_outlinks(page: ParsedPage, source: str) -> list[tuple[str, str, bool]]:
    """Normalized (target, anchor text, nofollow) per distinct target of a page, self-links left out.

    The first non-empty anchor text of a target is kept; a target is nofollow when every link to
    it is (the crawl follows it if any one link allows it). A third of a page's links repeat an
    earlier href (menus, footers), so each href is normalized once, and a text is collapsed only
    where it is kept.
    """
    found: dict[str, tuple[str, bool]] = {}
    targets: dict[str, str] = {}  # href -> its normal form ("" when it has none)
    for link in page.links:
        url = link.url
        target = targets.get(url)
        if target is None:
            try:
                target = _normal_form(url)
            except InvalidURL:
                target = ""
            targets[url] = target
        if not target or target == source:
            continue
        known = found.get(target)
        if known is None:
            found[target] = (" ".join(link.anchor_text.split()), link.nofollow)
        elif not known[0] or (known[1] and not link.nofollow):
            text = known[0] or " ".join(link.anchor_text.split())
            found[target] = (text, known[1] and link.nofollow)
    return [(target, text, nofollow) for target, (text, nofollow) in found.items()]


class PageStore:
    """WARC files and the crawl table of one crawl directory, written together."""

    def __init__(
        self,
        out_dir: str | Path,
        options: StoreOptions | None = None,
        *,
        warcinfo: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        warc_dir: str | Path | None = None,
        recover: bool = True,
    ) -> None:
        """`warc_dir` (default: OUT_DIR/warc) may be shared by the partitions of one crawl; then the
        crawl recovers it once before they start, and each store is told not to (`recover=False`)."""
        self.options = options or StoreOptions()
        self.out_dir = Path(out_dir)
        self.warc_dir = Path(warc_dir) if warc_dir is not None else self.out_dir / WARC_DIR
        self.stats = StoreStats()
        self.stats.recovered = WarcWriter.recover(self.warc_dir) if recover else []
        self.warc = WarcWriter(
            self.warc_dir,
            max_file_bytes=self.options.warc_max_bytes,
            prefix=self.options.warc_prefix,
            compression_level=self.options.warc_compression_level,
            info=warcinfo,
        )
        self.table = CrawlTable(
            self.out_dir / TABLE_DIR, max_versions=self.options.max_versions, sync=self.options.sync
        )
        self._clock = clock
        self._last_flush = clock()
        self._unflushed_pages = 0
        self._pending: dict[str, _Previous] = {}
        self._closed = False

    def __enter__(self) -> PageStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<PageStore {self.out_dir} pages={self.stats.pages} unflushed={self._unflushed_pages}>"

    # -- recording ---------------------------------------------------------------------------

    def record(
        self,
        result: FetchResult,
        *,
        page: ParsedPage | None = None,
        fingerprint: int | None = None,
        depth: int | None = None,
    ) -> Capture | None:
        """Store one fetch; `page` is its parse (HTML pages), which adds title, text, outlinks, anchors."""
        url = result.url
        previous = self._previous(url)
        outlinks = page_outlinks(page, url) if page is not None else []
        capture: Capture | None = None
        if result.status:
            metadata = fetch_metadata(result, outlinks=[target for target, _, _ in outlinks], extra=_extra(depth))
            capture = self.warc.write_exchange(result, metadata=metadata)
        else:
            self.stats.failures += 1
        self._write_row(url, result, previous, capture, fingerprint, depth, page, outlinks)
        return capture

    def record_duplicate(
        self,
        result: FetchResult,
        original_url: str,
        original_time: float,
        *,
        fingerprint: int | None = None,
        depth: int | None = None,
    ) -> Capture:
        """Store a fetch whose payload is the one `original_url` was fetched with at `original_time`
        (its wall-clock fetch start: the original response's WARC-Date): a revisit record referring
        to that response by URL and date, and a row that says duplicate-of.

        URL and date are all the revisit needs, so the original's row need not be in this store
        (another partition of the crawl may have fetched it). When it is, and its capture is that
        fetch, the record names it by id too, and a payload digest that differs from the original's
        (a 64-bit fingerprint collision) gets a full response instead. The page's own last body
        (`original_url` is the page, UNCHANGED) is referred to only through its capture here: without
        one (its record was lost with a crash) the page is stored in full again.
        """
        url = result.url
        previous = self._previous(url)
        original = (previous if original_url == url else self._previous(original_url)).capture
        date = warc_date(original_time)
        if original is not None and original_url == url:
            date = original.date
        elif original is not None and original.date != date:
            original = None  # the original page's last capture is a later fetch: refer to the one named
        metadata = fetch_metadata(result, extra=[*_extra(depth), ("duplicate-of", original_url)])
        capture: Capture | None = None
        if original is not None or original_url != url:
            try:
                capture = self.warc.write_revisit(result, original_url, date, original=original, metadata=metadata)
                self.stats.revisits += 1
            except ValueError:
                capture = None
        if capture is None:
            capture = self.warc.write_exchange(result, metadata=metadata)
        self._write_row(url, result, previous, capture, fingerprint, depth, None, [], duplicate_of=original_url)
        return capture

    def record_not_modified(self, result: FetchResult, *, depth: int | None = None) -> Capture | None:
        """Store a 304 to a conditional GET: a revisit record (server-not-modified) referring to the
        page's stored response, and a `fetch` cell saying the stored copy is current (the status and
        fingerprint of that copy, outcome "not-modified", unchanged); the page's content cells stay.
        Without a stored response to refer to (lost with a crash), the 304 is stored as it came."""
        url = result.url
        previous = self._previous(url)
        original, before = previous.capture, previous.fetch
        if original is None or before is None or before.status != 200:
            return self.record(result, depth=depth)
        metadata = fetch_metadata(result, extra=_extra(depth))
        capture = self.warc.write_revisit(result, url, original.date, original=original, metadata=metadata)
        self.stats.revisits += 1
        now = result.started or time.time()
        info = msgspec.structs.replace(
            before,
            outcome="not-modified",
            fetched=now,
            duration=round(result.duration, 6),
            fetches=before.fetches + 1,
            changed=False,
            etag=result.header("etag") or before.etag,
            last_modified=result.header("last-modified") or before.last_modified,
            address=result.address,
            error=None,
        )
        key = row_key(url)
        if previous.in_table:
            self.table.trim(key, "fetch", qualifier="", keep=self.table.max_versions["fetch"] - 1)
        self.table.put_cells(key, [("fetch", "", info)], now)
        self._pending[url] = _Previous(fetch=info, outlinks=previous.outlinks, capture=original, in_table=True)
        self.stats.pages += 1
        self._unflushed_pages += 1
        self.maybe_flush()
        return capture

    def _previous(self, url: str) -> _Previous:
        pending = self._pending.get(url)
        if pending is not None:
            return pending
        fetch = self.table.latest(url, [("fetch", "")]).get(("fetch", ""))
        if fetch is None:  # never fetched (the whole first crawl): one seek
            return _Previous()
        cells = self.table.latest(url, [("content", "warc"), ("content", "outlinks")])
        pointer = cells.get(("content", "warc"))
        outlinks = cells.get(("content", "outlinks"))
        return _Previous(
            fetch=fetch_info(fetch.value),
            outlinks=[str(pair[0]) for pair in outlinks.value] if outlinks else [],
            capture=Capture.from_list(pointer.value) if pointer else None,
            in_table=True,
        )

    def _write_row(
        self,
        url: str,
        result: FetchResult,
        previous: _Previous,
        capture: Capture | None,
        fingerprint: int | None,
        depth: int | None,
        page: ParsedPage | None,
        outlinks: list[tuple[str, str, bool]],
        *,
        duplicate_of: str | None = None,
    ) -> None:
        now = result.started or time.time()
        info = _fetch_info(result, fingerprint, depth, duplicate_of, previous.fetch, now)
        key = row_key(url)
        cells: list[tuple[str, str, Any]] = [("fetch", "", info)]
        if capture is not None:
            cells.append(("content", "warc", capture.to_list()))
        if page is not None:
            cells.append(("title", "", page.title))
            if self.options.store_text:
                cells.append(("content", "text", page.text))
            cells.append(("content", "outlinks", outlinks))  # (target, text, nofollow): msgpack arrays, as lists are
        if previous.in_table:
            for family, qualifier, _ in cells:
                self.table.trim(key, family, qualifier=qualifier, keep=self.table.max_versions[family] - 1)
        self.table.put_cells(key, cells, now)
        if page is not None:
            self._write_anchors(url, key, outlinks, previous, now)
        self._pending[url] = _Previous(
            fetch=info,
            outlinks=[target for target, _, _ in outlinks] if page is not None else previous.outlinks,
            capture=capture or previous.capture,
            in_table=True,
        )
        self.stats.pages += 1
        self._unflushed_pages += 1
        self.maybe_flush()

    def _write_anchors(
        self, source: str, source_key: str, outlinks: list[tuple[str, str, bool]], previous: _Previous, now: float
    ) -> None:
        table = self.table
        keys = [row_key(target) for target, _, _ in outlinks]
        linked_before = set(previous.outlinks)
        if linked_before:
            still = {target for target, _, _ in outlinks}
            for gone in linked_before - still:
                table.delete(gone, "anchor", qualifier=source)
            again = [key for key, (target, _, _) in zip(keys, outlinks, strict=True) if target in linked_before]
            table.trim_anchors(source_key, again, table.max_versions["anchor"] - 1)
        table.put_anchors(source_key, [(key, text) for key, (_, text, _) in zip(keys, outlinks, strict=True)], now)
        self.stats.anchors += len(outlinks)

    # -- durability --------------------------------------------------------------------------

    def maybe_flush(self) -> bool:
        """Commit the buffered table writes if the batch is full or old enough."""
        if self._unflushed_pages >= self.options.flush_pages or (
            self._unflushed_pages and self._clock() - self._last_flush >= self.options.flush_seconds
        ):
            self.flush()
            return True
        return False

    def commit_unsynced(self) -> None:
        """Commit the table cells buffered so far without fsync: the engine calls this before it
        journals the fetches they belong to, so a killed process never has a journaled page without
        its row (the WARC bytes they point to were written already; power loss is what `flush` covers)."""
        if self.table.commit(sync=False):
            self.stats.commits += 1

    def flush(self) -> None:
        """WARC bytes to disk first, then the table batch that points into them."""
        if self.options.sync:
            self.warc.sync()
        if self.table.commit():
            self.stats.commits += 1
        self._pending.clear()
        self._unflushed_pages = 0
        self._last_flush = self._clock()

    def close(self) -> None:
        """Flush, close the WARC file (writing its CDXJ index) and the table."""
        if self._closed:
            return
        self._closed = True
        self.flush()
        self.warc.close()
        self.table.close()


def _extra(depth: int | None) -> list[tuple[str, str]]:
    return [] if depth is None else [("hops-from-seed", str(depth))]


def _fetch_info(
    result: FetchResult,
    fingerprint: int | None,
    depth: int | None,
    duplicate_of: str | None,
    previous: FetchInfo | None,
    now: float,
) -> FetchInfo:
    info = FetchInfo(
        status=result.status,
        outcome=str(result.outcome),
        fetched=now,
        duration=round(result.duration, 6),
        fingerprint=fingerprint,
        etag=result.header("etag") if result.status else None,
        last_modified=result.header("last-modified") if result.status else None,
        content_type=result.content_type or None if result.status else None,
        length=len(result.body),
        truncated=result.truncated or None,
        address=result.address,
        location=result.header("location") if 300 <= result.status < 400 else None,
        error=result.error or None,
        depth=depth,
        duplicate_of=duplicate_of,
        fetches=1,
        changes=0,
        first_fetched=now,
    )
    if previous is not None:
        info.fetches = previous.fetches + 1
        info.first_fetched = previous.first_fetched
        if result.status:
            info.changed = (previous.status, previous.fingerprint) != (result.status, fingerprint)
        info.changes = previous.changes + (1 if info.changed else 0)
    return info
