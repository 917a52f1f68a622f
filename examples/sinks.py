"""Item sinks: your own (SQLite, batched), and a plain function.

    python examples/sinks.py [OUT]              # default OUT: ./sinks

A sink has two methods: `write(item)`, called on the event loop for every item (so it buffers and
writes in batches), and `close()`, called once at the end. A plain function is a sink too. Every
sink is offered every item; a failing write loses that item for that sink only, and is counted.
"""

import json
import sqlite3
import sys
from collections import Counter
from pathlib import Path

from crawlspace import CrawlConfig, Crawler, CrawlStats
from crawlspace.hooks import Item, Page
from crawlspace.simweb import SimWeb, SimWebConfig, serve_in_background

WEB = SimWebConfig(
    hosts=20, seed=6, mean_pages_per_host=8, max_pages_per_host=40, robots_crawl_delay=0.05, include_trap=False
)


class SqliteSink:
    """Rows of a `pages` table, committed every `batch` items (one transaction each)."""

    def __init__(self, path: Path, batch: int = 100) -> None:
        self.connection = sqlite3.connect(path)
        self.connection.execute(
            "CREATE TABLE IF NOT EXISTS pages (url TEXT PRIMARY KEY, status INTEGER, title TEXT, bytes INTEGER)"
        )
        self.batch = batch
        self.rows: list[tuple[str, int, str, int]] = []
        self.items = 0  # reported in stats.json as what this sink wrote

    def write(self, item: Item) -> None:
        self.rows.append((item["url"], item["status"], item["title"], item["bytes"]))
        if len(self.rows) >= self.batch:
            self.flush()

    def flush(self) -> None:
        with self.connection:  # one transaction
            self.connection.executemany("INSERT OR REPLACE INTO pages VALUES (?, ?, ?, ?)", self.rows)
        self.items += len(self.rows)
        self.rows = []

    def close(self) -> None:
        self.flush()
        self.connection.close()


def summary(page: Page) -> Item:
    return {"url": page.url, "status": page.status, "title": page.title, "bytes": len(page.body)}


def main(out: Path) -> tuple[CrawlStats, Counter[str]]:
    out.mkdir(parents=True, exist_ok=True)
    statuses: Counter[str] = Counter()

    def count_statuses(item: Item) -> None:  # a function is a sink
        statuses[str(item["status"])] += 1

    with serve_in_background(SimWeb.generate(WEB), out / "simweb", seeds=5) as web:
        config = CrawlConfig(hosts_file=str(web.hosts_file), allow_private_addresses=True, min_delay=0.05)
        crawler = Crawler(
            config,
            out=out / "crawl",
            seeds=web.seeds,
            processors=[summary],
            sinks=[SqliteSink(out / "pages.sqlite"), count_statuses],
        )
        stats = crawler.run()
    (out / "statuses.json").write_text(json.dumps(statuses, indent=2, sort_keys=True) + "\n")
    return stats, statuses


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "sinks")
    stats, statuses = main(out)
    print(f"{stats.pages_fetched} pages fetched; items by status: {dict(sorted(statuses.items()))}")
