"""What a crawl leaves behind: WARC files of every exchange and the crawl table of every page.

Filled by the engine through `PageStore` after each fetch: the exchange goes at once to the
current WARC file (`warc.WarcWriter`, rolling by size, a CDXJ index written beside each file when
it is closed), and the page's cells (title, content, fetch) plus an anchor cell on the row of
every link target are buffered and committed to the crawl table (`crawltable.CrawlTable`,
BigTable's webtable on RocksDB) in batches, after the WARC bytes they point to are on disk.
Drained by users and batch jobs: WARC tools read the files, `CdxjIndex` finds a capture by URL
and time, the table answers `get`/`scan` by reversed-host row key, `export` writes JSONL/Parquet.
Invariants: a WARC file with a CDXJ index beside it is closed and valid; a file without one is
repaired by `WarcWriter.recover` before a crawl writes into the directory again.
"""

from crawlspace.store.cdxj import CdxjEntry, CdxjIndex
from crawlspace.store.crawltable import Anchor, Cell, CrawlTable, CrawlTableError, Row
from crawlspace.store.pagestore import PageStore, StoreOptions
from crawlspace.store.rowkey import row_key, url_of
from crawlspace.store.warc import Capture, RecoveredFile, WarcWriter

__all__ = [
    "Anchor",
    "Capture",
    "CdxjEntry",
    "CdxjIndex",
    "Cell",
    "CrawlTable",
    "CrawlTableError",
    "PageStore",
    "RecoveredFile",
    "Row",
    "StoreOptions",
    "WarcWriter",
    "row_key",
    "url_of",
]
