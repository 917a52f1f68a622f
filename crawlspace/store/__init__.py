"""What a crawl leaves behind: WARC files of every exchange (and, later, the crawl table).

Filled by the engine after each fetch; read by the batch jobs, the indexer and any WARC tool.
"""

from crawlspace.store.warc import WarcWriter

__all__ = ["WarcWriter"]
