"""crawlspace: the crawler of IIR ch. 20 and Mercator, polite, fast and resumable.

The crawl loop (DESIGN.md §2) maps onto the subpackages: frontier -> robots -> dns -> fetch ->
parse -> seen (content) -> urls (filter, normalize) -> seen (URLs) -> frontier, with store
writing WARC files and crawl wiring the loop together. `Crawler` (crawlspace.api) is the way in
from Python, with the extension points of crawlspace.hooks; the CLI is a thin layer over it.

`Crawler` and `CrawlStats` are imported on first use (PEP 562), so that `import crawlspace.simweb`
or `crawlspace.config` does not pay for the engine's imports (the HTTP client, lexbor, the store).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from crawlspace.config import ConfigError, CrawlConfig

if TYPE_CHECKING:
    from crawlspace.api import Crawler, CrawlError
    from crawlspace.crawl.telemetry import CrawlStats

__all__ = ["ConfigError", "CrawlConfig", "CrawlError", "CrawlStats", "Crawler"]
__version__ = "0.1.0"

_LAZY = {"Crawler": "crawlspace.api", "CrawlError": "crawlspace.api", "CrawlStats": "crawlspace.crawl.telemetry"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'crawlspace' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
