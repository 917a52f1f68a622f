"""The crawl as an OpenSearch / Elasticsearch bulk request, for users who run their own search server.

    crawlspace export DIR --format opensearch [-o FILE] [--index-name NAME]
    curl -H 'Content-Type: application/x-ndjson' --data-binary @DIR/export.opensearch.ndjson \\
         'http://localhost:9200/_bulk'

The `_bulk` API's NDJSON: per page an action line `{"index": {"_index": NAME, "_id": ID}}` and the
document on the next line, every line ending in a newline (the last one too, as the API requires).
The pages are those the search index holds (`crawlspace.jobs.index`: a 200 response with its own
body, not an exact duplicate of another URL's, with a title or text), read through `CrawlReader`
(text parsed again from the WARC when the crawl did not store it). Each document has its url,
title, text, the anchor texts of the links pointing to it (the graph job's `anchors`), its
PageRank (the pagerank job's `ranks`; null when that job has not run), its fetch time and media
type. `_id` is the xxh3-128 of the URL in hex: the same page gets the same id in every export, so
loading a newer export replaces each page's document instead of adding a second one. JSON is
written by msgspec: quotes, backslashes, control characters and line breaks in a page are escaped,
so a hostile page can neither break a line nor forge an action.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import msgspec
import xxhash

from crawlspace.jobs.context import is_robots_txt
from crawlspace.jobs.output import JobOutputError, read_table
from crawlspace.store.crawltable import CrawlTableError
from crawlspace.store.export import ExportError, write_atomically
from crawlspace.store.reader import CrawlReader

__all__ = ["DEFAULT_INDEX_NAME", "bulk_lines", "document_id", "export_opensearch"]

DEFAULT_INDEX_NAME = "crawlspace"
_ENCODER = msgspec.json.Encoder()
_SURROGATE = re.compile("[\ud800-\udfff]")
_FORBIDDEN = ' "*\\<|,>/?#:'


def document_id(url: str) -> str:
    """A page's `_id`: stable across exports and machines, and short (OpenSearch allows 512 bytes)."""
    return xxhash.xxh3_128_hexdigest(url.encode("utf-8", "surrogatepass"))


def bulk_lines(document: dict[str, Any], index_name: str) -> bytes:
    """The action line and the document line of one page (`document` has its "url")."""
    action = {"index": {"_index": index_name, "_id": document_id(document["url"])}}
    try:
        encoded = _ENCODER.encode(document)
    except UnicodeEncodeError:  # a lone surrogate (from a URL or an entity) is not UTF-8: U+FFFD instead
        encoded = _ENCODER.encode(_without_surrogates(document))
    return _ENCODER.encode(action) + b"\n" + encoded + b"\n"


def _without_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_without_surrogates(item) for item in value]
    if isinstance(value, dict):
        return {key: _without_surrogates(item) for key, item in value.items()}
    return value


def _job_lookups(crawl_dir: Path) -> tuple[dict[str, list[str]], dict[str, float] | None]:
    try:
        anchors = read_table(crawl_dir, "graph", "anchors", columns=["target", "texts"])
        pairs = zip(anchors["target"], anchors["texts"], strict=True)
        texts = {str(target): [str(text) for text in values] for target, values in pairs}
    except JobOutputError:
        texts = {}
    try:
        ranks = read_table(crawl_dir, "pagerank", "ranks", columns=["url", "pagerank"])
        pagerank: dict[str, float] | None = dict(
            zip(map(str, ranks["url"]), map(float, ranks["pagerank"]), strict=True)
        )
    except JobOutputError:
        pagerank = None
    return texts, pagerank


def documents(crawl_dir: Path) -> Iterator[dict[str, Any]]:
    """The pages the search index holds, as bulk documents."""
    anchors, pagerank = _job_lookups(crawl_dir)
    try:
        reader = CrawlReader(crawl_dir)
    except CrawlTableError as exc:
        raise ExportError(str(exc)) from None
    with reader:
        for page in reader.pages(text=True):
            fetch = page.fetch
            copy = fetch.duplicate_of and fetch.duplicate_of != page.url
            if is_robots_txt(page.url) or fetch.status != 200 or copy:
                continue
            if not page.text and not page.title:
                continue
            yield {
                "url": page.url,
                "title": page.title or "",
                "text": page.text or "",
                "anchors": anchors.get(page.url, []),
                "pagerank": None if pagerank is None else pagerank.get(page.url, 0.0),
                "fetch_time": datetime.fromtimestamp(fetch.fetched, UTC).isoformat().replace("+00:00", "Z"),
                "content_type": fetch.content_type,
            }


def export_opensearch(
    crawl_dir: str | Path, output: str | Path | None = None, *, index_name: str = DEFAULT_INDEX_NAME
) -> tuple[int, str]:
    """Writes the bulk file (`output` '-': stdout); returns (pages written, where)."""
    if (
        not index_name
        or index_name != index_name.lower()
        or index_name.startswith(("_", "-", "+"))
        or any(c in index_name for c in _FORBIDDEN)
    ):
        raise ExportError(f"index name {index_name!r}: lowercase, not starting with _ - +, none of {_FORBIDDEN!r}")
    crawl_dir = Path(crawl_dir)
    target = str(output) if output is not None else str(crawl_dir / "export.opensearch.ndjson")

    def write(handle: IO[bytes]) -> int:
        count = 0
        for document in documents(crawl_dir):
            handle.write(bulk_lines(document, index_name))
            count += 1
        handle.flush()
        return count

    if target == "-":
        return write(sys.stdout.buffer), "stdout"
    return write_atomically(target, write), target
