"""What a crawl leaves behind: WARC files of every exchange and the crawl table of every page.

Filled by the engine through `PageStore` after each fetch: the exchange goes at once to the
current WARC file (`warc.WarcWriter`, rolling by size, a CDXJ index written beside each file when
it is closed), and the page's cells (title, content, fetch) plus an anchor cell on the row of
every link target are buffered and committed to the crawl table (`crawltable.CrawlTable`,
BigTable's webtable on RocksDB) in batches, after the WARC bytes they point to are on disk.
Drained by users and batch jobs through one read side, `reader.CrawlReader` over one or several
crawl directories: typed pages, links, fetch histories and WARC records, streamed and partitioned
by key range for parallel jobs; `export` (JSONL/Parquet) and the `table` commands read through it.
Underneath, the table answers `get`/`scan` by reversed-host row key (`reader.TableReader`, the
protocol another store would implement), `CdxjIndex` finds a capture by URL and time, and WARC
tools read the files directly.
Invariants: a WARC file with a CDXJ index beside it is closed and valid; a file without one is
repaired by `WarcWriter.recover` before a crawl writes into the directory again.
"""

from crawlspace.store.cdxj import CdxjEntry, CdxjIndex
from crawlspace.store.crawltable import Anchor, Cell, CrawlTable, CrawlTableError, FetchInfo, Row
from crawlspace.store.pagestore import PageStore, StoreOptions
from crawlspace.store.reader import CaptureRecord, CrawlReader, Edge, KeyRange, StoredPage, TableReader
from crawlspace.store.rowkey import row_key, url_of
from crawlspace.store.warc import Capture, RecoveredFile, WarcWriter

__all__ = [
    "Anchor",
    "Capture",
    "CaptureRecord",
    "CdxjEntry",
    "CdxjIndex",
    "Cell",
    "CrawlReader",
    "CrawlTable",
    "CrawlTableError",
    "Edge",
    "FetchInfo",
    "KeyRange",
    "PageStore",
    "RecoveredFile",
    "Row",
    "StoreOptions",
    "StoredPage",
    "TableReader",
    "WarcWriter",
    "row_key",
    "url_of",
]
