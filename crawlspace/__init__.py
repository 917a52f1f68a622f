"""crawlspace: the crawler of IIR ch. 20 and Mercator, polite, fast and resumable.

The crawl loop (DESIGN.md §2) maps onto the subpackages: frontier -> robots -> dns -> fetch ->
parse -> seen (content) -> urls (filter, normalize) -> seen (URLs) -> frontier, with store
writing WARC files and crawl wiring the loop together.
"""

from crawlspace.config import ConfigError, CrawlConfig

__all__ = ["ConfigError", "CrawlConfig"]
__version__ = "0.1.0"
