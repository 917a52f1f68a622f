"""Extension points of the crawl loop: URL filters, prioritizers, page processors, item sinks, protocol handlers.

Where each one plugs into the loop of DESIGN.md §2 (and IIR fig. 20.1):

    frontier --> [ProtocolHandler by scheme | built-in HTTP fetch] --> parse --> PageProcessor(page)
       ^                                                                      |  items --> ItemSink
       |                                                                      |  Follow(url)
       +-- Prioritizer.priority <-- URL seen? <-- UrlFilter <-- built-in filters <-- links, redirects

Everything is passed as objects to `crawlspace.Crawler` (`filters=`, `prioritizer=`, `processors=`,
`sinks=`, `handlers=`); a function is enough for filters, processors and sinks. The protocols live
in `protocols.py` with what an implementer must know; `runtime.py` is how the engine runs them
(isolation of failures, counting, bounded concurrency). The Prioritizer protocol is the
frontier's own (`crawlspace.frontier.Prioritizer`), re-exported here.
"""

from crawlspace.hooks.handlers import FileHandler
from crawlspace.hooks.pools import run_in_process, run_in_thread
from crawlspace.hooks.protocols import (
    Follow,
    FrontierEntry,
    Item,
    ItemSink,
    Page,
    PageProcessor,
    Prioritizer,
    ProtocolHandler,
    UrlFilter,
)
from crawlspace.hooks.sinks import FunctionSink, ItemsLost, JsonlSink, ParquetSink

__all__ = [
    "FileHandler",
    "Follow",
    "FrontierEntry",
    "FunctionSink",
    "Item",
    "ItemSink",
    "ItemsLost",
    "JsonlSink",
    "Page",
    "PageProcessor",
    "ParquetSink",
    "Prioritizer",
    "ProtocolHandler",
    "UrlFilter",
    "run_in_process",
    "run_in_thread",
]
