"""Housekeeping (IIR §20.2.1): crawl statistics, progress reports and the final stats.json.

Progress goes to three places: a live display when stdout is a terminal, plain log lines
otherwise, and always JSON lines in DIR/progress.jsonl, so that a run can be plotted afterwards.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console
from rich.live import Live
from rich.table import Table

_NOT_CHECKPOINTED = frozenset({"started_at", "finished_at", "sections", "termination"})


@dataclass
class CrawlStats:
    started_at: float = field(default_factory=time.time)
    finished_at: float | None = None
    pages_fetched: int = 0  # fetch attempts of frontier URLs (robots.txt not included)
    bytes_downloaded: int = 0
    responses_by_status: Counter[int] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    robots_fetches: int = 0
    robots_excluded: int = 0
    robots_unreachable: int = 0  # URLs dropped after their host's robots.txt stayed unreachable
    robots_waiting: int = 0  # URLs still queued at the end, waiting for an unreachable robots.txt
    sitemaps_fetched: int = 0
    sitemap_urls: int = 0
    duplicate_urls: int = 0
    duplicate_content: int = 0
    near_duplicate_content: int = 0
    links_extracted: int = 0
    links_dropped: int = 0  # beyond max_links_per_page
    nofollow_links: int = 0
    noindex_pages: int = 0
    canonical_elsewhere: int = 0  # pages whose canonical URL is another one
    urls_discovered: int = 0
    filtered: Counter[str] = field(default_factory=Counter)
    invalid_seeds: int = 0
    retries: int = 0  # attempts put back into the frontier after a transient failure
    handed_over: int = 0  # URLs sent to the partition owning their host's IP address (several processes)
    termination: str = ""
    sections: dict[str, Any] = field(default_factory=dict)  # per-component reports: dns, guard, fetch
    runs: int = 1  # this run and the ones it resumed
    crawl_seconds_before: float = 0.0  # crawling time of the runs this one resumed (to their last checkpoint)

    @property
    def elapsed(self) -> float:
        """Seconds spent crawling, over every run of this crawl."""
        return self.crawl_seconds_before + (self.finished_at or time.time()) - self.started_at

    def snapshot(self) -> dict[str, Any]:
        """The counters as plain data, for a checkpoint; `resumed` turns them back into stats."""
        data: dict[str, Any] = {}
        for item in fields(self):
            if item.name in _NOT_CHECKPOINTED:
                continue
            value = getattr(self, item.name)
            data[item.name] = {str(k): v for k, v in value.items()} if isinstance(value, Counter) else value
        data["crawl_seconds_before"] = self.elapsed
        return data

    @classmethod
    def resumed(cls, snapshot: dict[str, Any]) -> CrawlStats:
        """Statistics continuing those of a checkpoint, in a new run."""
        stats = cls()
        for name, value in snapshot.items():
            if name in _NOT_CHECKPOINTED or not hasattr(stats, name):
                continue
            if isinstance(getattr(stats, name), Counter):
                keys = int if name == "responses_by_status" else str
                setattr(stats, name, Counter({keys(k): v for k, v in value.items()}))
            else:
                setattr(stats, name, value)
        stats.runs += 1
        return stats

    def count_fetch(self, status: int, outcome: str, size: int) -> None:
        """The counters one fetch attempt moves (also replayed from the journal after a crash)."""
        self.pages_fetched += 1
        self.outcomes[outcome] += 1
        if status:
            self.responses_by_status[status] += 1
            self.bytes_downloaded += size
        else:
            self.errors[outcome] += 1

    def to_dict(self) -> dict[str, Any]:
        elapsed = self.elapsed
        return {
            "pages_fetched": self.pages_fetched,
            "pages_per_second": round(self.pages_fetched / elapsed, 2) if elapsed > 0 else 0.0,
            "bytes_downloaded": self.bytes_downloaded,
            "duration_seconds": round(elapsed, 3),
            "responses_by_status": {str(k): v for k, v in sorted(self.responses_by_status.items())},
            "outcomes": dict(sorted(self.outcomes.items())),
            "errors": dict(sorted(self.errors.items())),
            "robots_fetches": self.robots_fetches,
            "robots_excluded": self.robots_excluded,
            "robots_unreachable": self.robots_unreachable,
            "robots_waiting": self.robots_waiting,
            "sitemaps_fetched": self.sitemaps_fetched,
            "sitemap_urls": self.sitemap_urls,
            "duplicate_urls": self.duplicate_urls,
            "duplicate_content": self.duplicate_content,
            "near_duplicate_content": self.near_duplicate_content,
            "links_extracted": self.links_extracted,
            "links_dropped": self.links_dropped,
            "nofollow_links": self.nofollow_links,
            "noindex_pages": self.noindex_pages,
            "canonical_elsewhere": self.canonical_elsewhere,
            "urls_discovered": self.urls_discovered,
            "filtered": dict(sorted(self.filtered.items())),
            "invalid_seeds": self.invalid_seeds,
            "retries": self.retries,
            "handed_over": self.handed_over,
            "termination": self.termination,
            "runs": self.runs,
            **self.sections,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
        }

    def write(self, path: Path) -> None:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.to_dict(), indent=2) + "\n")
        tmp.replace(path)


class ProgressReporter:
    """Samples the crawl every `interval` seconds; `snapshot` supplies the live gauges."""

    def __init__(
        self,
        stats: CrawlStats,
        snapshot: Callable[[], dict[str, Any]],
        jsonl_path: Path,
        *,
        stream: TextIO | None = None,
        live: bool | None = None,
        quiet: bool = False,
    ) -> None:
        """`quiet`: progress.jsonl only (a partition of a crawl: its coordinator shows the progress)."""
        self.stats = stats
        self.snapshot = snapshot
        self._jsonl = jsonl_path.open("a", encoding="utf-8")
        self._stream = stream or sys.stderr
        self._quiet = quiet
        use_live = (self._stream.isatty() if live is None else live) and not quiet
        self._console = Console(file=self._stream)
        self._live = Live(console=self._console, refresh_per_second=4, transient=False) if use_live else None
        self._last_pages = 0
        self._last_time = time.monotonic()

    def __enter__(self) -> ProgressReporter:
        if self._live is not None:
            self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.report()
        if self._live is not None:
            self._live.stop()
        self._jsonl.close()

    def report(self) -> dict[str, Any]:
        now = time.monotonic()
        pages = self.stats.pages_fetched
        recent = (pages - self._last_pages) / max(now - self._last_time, 1e-9)
        self._last_pages, self._last_time = pages, now
        elapsed = self.stats.elapsed
        line: dict[str, Any] = {
            "time": round(time.time(), 3),
            "elapsed": round(elapsed, 2),
            "pages": pages,
            "pages_per_second_recent": round(recent, 1),
            "pages_per_second_average": round(pages / elapsed, 1) if elapsed > 0 else 0.0,
            "bytes": self.stats.bytes_downloaded,
            "robots_excluded": self.stats.robots_excluded,
            "duplicate_content": self.stats.duplicate_content,
            "errors": sum(self.stats.errors.values()),
            "errors_by_kind": dict(self.stats.errors),
            **self.snapshot(),
        }
        self._jsonl.write(json.dumps(line) + "\n")
        self._jsonl.flush()
        if self._quiet:
            pass
        elif self._live is not None:
            self._live.update(_table(line))
        else:
            self._console.print(
                f"[{line['elapsed']:>7.1f}s] pages {pages} ({line['pages_per_second_recent']}/s), "
                f"frontier {line.get('frontier', 0)}, in flight {line.get('in_flight', 0)}, "
                f"hosts {line.get('active_hosts', 0)}, errors {line['errors']}",
                highlight=False,
            )
        return line


def _table(line: dict[str, Any]) -> Table:
    table = Table(title="crawlspace", show_header=False, box=None)
    for key, value in line.items():
        if key != "time":
            table.add_row(key.replace("_", " "), str(value))
    return table
