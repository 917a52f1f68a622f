"""The crawl loop itself: the engine wires frontier, robots, DNS, fetch, parse, seen sets and store.

The engine's dispatcher takes leases from the frontier while fetch slots are free; each lease is
processed by one task (robots check, fetch, store, parse, link pipeline) and released with the
fetch's duration so the frontier can schedule the host's next contact. Telemetry (telemetry.py)
keeps the statistics and publishes them, with the gauges, as one Snapshot per progress report.
"""

from crawlspace.crawl.engine import CrawlEngine
from crawlspace.crawl.telemetry import CrawlStats

__all__ = ["CrawlEngine", "CrawlStats"]
