"""What the dashboard shows of a crawl directory, read and never written: the model behind every page.

Sources, all of them files a crawl writes anyway: DIR/progress.jsonl (one line per progress
report, tailed from where the last read stopped), DIR/workers/<k>/progress.jsonl and stats.json (a
`--processes` crawl's partitions), DIR/stats.json (the final figures), DIR/config.json (the robots
agent), DIR/hosts.json and DIR/workers/<k>/hosts.json (the frontier's hosts: queued URLs, delays and
their causes, through crawl/hostfile.py's reader), a cluster's node statuses in its Redis when given
one (`NodeStatus`), and the crawl table, WARC files and robots.txt log through `CrawlReader`. A
running crawl's table is read as RocksDB's read-only mode sees it when opened, so the reader is
opened again when the crawl has moved on; the table-wide figures (hosts, content types, sizes,
fetch durations) come from one scan that is cached and repeated no sooner than `SCAN_COST_FACTOR`
times the last scan took, so a dashboard left open on a large crawl costs the crawl a bounded share
of the machine. The hosts table's orders are kept in `hosttable.HostTable` until the scan or the
frontier's report changes; one host's rows and one page's row are read under the same cost rule
(`CostRuled`), since a host can have 100,000 URLs and a page as many anchors.

Nothing here knows HTTP: `app.py` serves it, `metrics.py` exports it; every method returns plain
data. Calls are not thread-safe: the server makes them on one thread of its own.
"""

from __future__ import annotations

import heapq
import itertools
import json
import math
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from crawlspace.config import ConfigError, CrawlConfig
from crawlspace.crawl.control import CONTROL_FILE, read_command
from crawlspace.crawl.hostfile import HostFiles, read_host_files
from crawlspace.linetail import LineTail
from crawlspace.robots import parse as parse_robots
from crawlspace.serve.hosttable import HostFigures, HostPage, HostQuery, HostTable
from crawlspace.store.crawltable import CrawlTableError, FetchInfo
from crawlspace.store.reader import CrawlReader, KeyRange
from crawlspace.store.rowkey import RowKeyError, row_key
from crawlspace.urls.normalize import host_of

PROGRESS_FILE = "progress.jsonl"
STATS_FILE = "stats.json"
SERIES_POINTS = 1800
"""Progress lines kept for the pages/s chart (an hour at the default 2 s cadence)."""
SCAN_COST_FACTOR = 100.0
"""A table scan is repeated no sooner than this many times its own duration after the last: at most
1% of one core (a core the crawl may need: the dashboard's process runs beside it)."""
MIN_SCAN_INTERVAL = 5.0
RECENT_FETCHES = 100
LINKS_SHOWN = 200
"""Anchors, out-links, in-links and duplicates a page's view lists at the most, each with its count:
a site's home page has an anchor from each of its pages, 100,000 of them on a large site."""
STALE_AFTER = 15.0
"""Seconds without a progress line after which a crawl that did not finish is 'not reporting'."""
HOST_FILES_EVERY = 1.0
"""The frontier's host reports are read again no sooner than this (the engine writes them about as often)."""

SIZE_BUCKETS: tuple[float, ...] = (1024, 4096, 16384, 65536, 262144, 1048576, 4194304, float("inf"))
DURATION_BUCKETS: tuple[float, ...] = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, float("inf"))

_REASONS = {
    200: "OK", 201: "Created", 204: "No Content", 206: "Partial Content", 301: "Moved Permanently", 302: "Found",
    303: "See Other", 304: "Not Modified", 307: "Temporary Redirect", 308: "Permanent Redirect",
    400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
    410: "Gone", 429: "Too Many Requests", 451: "Unavailable For Legal Reasons", 500: "Internal Server Error",
    502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout",
}  # fmt: skip


class ProgressTail:
    """The lines of a progress.jsonl, read incrementally: each `read` parses only what was appended
    since the last (a torn last line waits for its end; a file cut shorter or replaced is read again)."""

    def __init__(self, path: Path, keep: int = SERIES_POINTS) -> None:
        self.path = path
        self.lines: deque[dict[str, Any]] = deque(maxlen=keep)
        self._tail = LineTail(path)

    @property
    def latest(self) -> dict[str, Any] | None:
        return self.lines[-1] if self.lines else None

    def read(self) -> None:
        try:
            appended = self._tail.read()
        except OSError:
            return  # not written yet, or being replaced: read at the next refresh
        if appended.restarted:
            self.lines.clear()
        for chunk in appended.lines:
            try:
                line = json.loads(chunk)
            except ValueError:
                continue  # a damaged line is skipped, not fatal
            if isinstance(line, dict):
                self.lines.append(line)


class StatsFile:
    """A stats.json, read again only when its modification time changes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.data: dict[str, Any] | None = None
        self._mtime: int | None = None

    def read(self) -> None:
        try:
            mtime = self.path.stat().st_mtime_ns
        except OSError:
            return
        if mtime != self._mtime:
            try:
                data = json.loads(self.path.read_text())
            except (OSError, ValueError):
                return  # being replaced: read at the next refresh
            if isinstance(data, dict):
                self.data, self._mtime = data, mtime


def crawl_state(latest: dict[str, Any] | None, stats: dict[str, Any] | None, now: float) -> str:
    """'starting' (nothing reported yet), 'running', 'paused' (every partition), 'finished', or 'not
    reporting' (no report for STALE_AFTER seconds and no stats.json after them: killed, or hung), of a
    crawl or of one of its partitions, from its latest progress line and its stats.json."""
    if (
        stats is not None
        and stats.get("finished_at")
        and (latest is None or stats["finished_at"] + 2.0 >= latest.get("time", 0.0))
    ):
        return "finished"
    if latest is None:
        return "starting"
    if now - latest.get("time", 0.0) > STALE_AFTER:
        return "not reporting"
    # a --processes crawl is paused once every partition has heard the pause: until then some still fetch
    return "paused" if (latest.get("paused") or 0) >= (latest.get("workers") or 1) else "running"


@dataclass(slots=True)
class PartitionFiles:
    """What one partition of a `--processes` crawl writes in DIR/workers/<k>/."""

    progress: ProgressTail
    stats: StatsFile

    def read(self) -> None:
        self.progress.read()
        self.stats.read()


def cache_rates(line: dict[str, Any]) -> dict[str, Any]:
    """The DNS and robots.txt caches' hits, misses and hit rates (None: nothing asked yet) of a
    progress line (the engine's counters of this run)."""
    caches: dict[str, Any] = {}
    for name in ("dns", "robots"):
        hits, misses = int(line.get(f"{name}_cache_hits") or 0), int(line.get(f"{name}_cache_misses") or 0)
        caches[name] = {"hits": hits, "misses": misses, "hit_rate": hits / (hits + misses) if hits + misses else None}
    return caches


class NodeStatus(Protocol):
    """Where a cluster crawl's nodes' statuses come from (for the implementer: a Redis reader in
    serve/nodes.py, a fake in the tests). `read` returns `crawlspace.api.cluster_status`'s document
    ({"nodes": [row, ...], "summary": {...}}) or {"error": reason}; it is called on the view's
    thread at each overview, so it caches what it reads (a second or two)."""

    def read(self) -> dict[str, Any]: ...


@dataclass(slots=True)
class TableFigures:
    """The table-wide figures of one scan."""

    hosts: dict[str, HostFigures] = field(default_factory=dict)
    content_types: Counter[str] = field(default_factory=Counter)
    size_counts: list[int] = field(default_factory=lambda: [0] * len(SIZE_BUCKETS))
    duration_counts: list[int] = field(default_factory=lambda: [0] * len(DURATION_BUCKETS))
    duration_sum: float = 0.0
    size_sum: int = 0
    pages: int = 0
    crawl_delays: dict[str, float | None] = field(default_factory=dict)
    """Each host's robots.txt Crawl-delay for the crawl's agent (hosts without one kept are missing)."""
    scanned_at: float = 0.0
    scan_seconds: float = 0.0


def _bucket(value: float, bounds: tuple[float, ...]) -> int:
    for place, bound in enumerate(bounds):
        if value <= bound:
            return place
    return len(bounds) - 1


def summarize(fetches: Iterable[tuple[str, FetchInfo]]) -> TableFigures:
    """Per-host counts, content types and the size and duration histograms of (URL, newest fetch)
    pairs; durations only of attempts that got a response (a timeout's is the timeout)."""
    figures = TableFigures()
    for url, fetch in fetches:
        host = host_of(url)
        figures.hosts.setdefault(host, HostFigures(host)).add(fetch)
        figures.pages += 1
        if fetch.status:
            kind = (fetch.content_type or "").split(";")[0].strip().lower() or "(none)"
            figures.content_types[kind] += 1
            figures.size_counts[_bucket(fetch.length, SIZE_BUCKETS)] += 1
            figures.size_sum += fetch.length
            figures.duration_counts[_bucket(fetch.duration, DURATION_BUCKETS)] += 1
            figures.duration_sum += fetch.duration
    return figures


@dataclass(frozen=True, slots=True)
class OutcomeRow:
    outcome: str
    count: int
    share: float | None
    """Of all download attempts (fetches plus robots.txt exclusions), as in Najork and Heydon's table;
    None for an event that is not an attempt's outcome (a duplicate URL is never fetched)."""
    kind: str
    """'status', 'error', 'robots' (a download attempt's outcome) or 'event' (duplicates, filtered)."""


def outcome_rows(counts: dict[str, Any]) -> list[OutcomeRow]:
    """The outcomes of download attempts in the shape of Najork & Heydon's table ("High-performance
    web crawling", 2001): every status with its reason phrase, every kind of failure, the robots.txt
    exclusions, most frequent first, each with its share of the attempts; then the URLs and pages
    the crawl set aside (duplicates, filtered), counted but without a share.

    `counts`: stats.json's fields or a progress line's (`responses_by_status`, `errors` or
    `errors_by_kind`, `robots_excluded`, `duplicate_content`, `duplicate_urls`, `filtered`)."""
    statuses = {int(code): int(n) for code, n in (counts.get("responses_by_status") or {}).items()}
    errors = counts.get("errors") if isinstance(counts.get("errors"), dict) else counts.get("errors_by_kind")
    errors = {str(kind): int(n) for kind, n in (errors or {}).items()}
    robots = int(counts.get("robots_excluded") or 0)
    attempts = sum(statuses.values()) + sum(errors.values()) + robots
    total = max(attempts, 1)
    rows = [
        OutcomeRow(f"{code} {_REASONS.get(code, '')}".strip(), n, n / total, "status") for code, n in statuses.items()
    ]
    rows += [OutcomeRow(kind, n, n / total, "error") for kind, n in errors.items()]
    if robots:
        rows.append(OutcomeRow("excluded by robots.txt", robots, robots / total, "robots"))
    rows.sort(key=lambda row: (-row.count, row.outcome))
    events = [
        ("duplicate content (exact)", int(counts.get("duplicate_content") or 0)),
        ("duplicate URLs", int(counts.get("duplicate_urls") or 0)),
        *((f"filtered: {reason}", int(n)) for reason, n in sorted((counts.get("filtered") or {}).items())),
    ]
    rows += [OutcomeRow(name, n, None, "event") for name, n in events if n]
    return rows


def status_classes(statuses: dict[str, int]) -> dict[str, int]:
    """Responses by class (2xx ... 5xx)."""
    classes: Counter[str] = Counter()
    for code, n in statuses.items():
        classes[f"{str(code)[0]}xx"] += int(n)
    return dict(sorted(classes.items()))


_COUNTERS: tuple[tuple[str, str, str, Any], ...] = (
    # the dashboard's name, stats.json's, a progress line's, the value when missing
    ("pages", "pages_fetched", "pages", 0),
    ("bytes", "bytes_downloaded", "bytes", 0),
    ("responses_by_status", "responses_by_status", "responses_by_status", {}),
    ("errors", "errors", "errors_by_kind", {}),
    ("outcomes", "outcomes", "outcomes", {}),
    ("robots_excluded", "robots_excluded", "robots_excluded", 0),
    ("duplicate_content", "duplicate_content", "duplicate_content", 0),
    ("duplicate_urls", "duplicate_urls", "duplicate_urls", 0),
    ("filtered", "filtered", "filtered", {}),
    ("elapsed", "duration_seconds", "elapsed", 0.0),
)


_NO_HOSTS: dict[str, HostFigures] = {}
READS_KEPT = 16
"""Host and page reads kept (an operator going back and forth between a few)."""
T = TypeVar("T")


class CostRuled(Generic[T]):
    """Reads of one host's or one page's rows, kept: on a finished crawl for good, on a live one until
    SCAN_COST_FACTOR times the read's own duration (and at least HOST_FILES_EVERY) has passed, the
    rule of the table-wide scan. A host of 100,000 URLs takes a second to read; a page that 100,000
    pages link to as long (its anchors): a dashboard left open on either costs the crawl 1% of a core."""

    def __init__(self, monotonic: Callable[[], float], keep: int = READS_KEPT) -> None:
        self._monotonic = monotonic
        self._keep = keep
        self._kept: OrderedDict[str, tuple[T, float]] = OrderedDict()
        """key -> (its read, when it may be read again)"""

    def get(self, key: str, read: Callable[[], T], *, live: bool) -> T:
        """The kept read of `key`, or a new one by `read()`."""
        now = self._monotonic()
        kept = self._kept.get(key)
        if kept is not None and not (live and now >= kept[1]):
            self._kept.move_to_end(key)
            return kept[0]
        value = read()
        took = self._monotonic() - now
        self._kept[key] = (value, now + took + max(HOST_FILES_EVERY, SCAN_COST_FACTOR * took))
        self._kept.move_to_end(key)
        while len(self._kept) > self._keep:
            self._kept.popitem(last=False)
        return value


@dataclass(slots=True)
class HostScan:
    """What a host's page shows of the crawl table and the robots.txt log, as one scan found it."""

    figures: HostFigures
    recent: list[dict[str, Any]]
    robots: list[dict[str, Any]]
    scanned_at: float


class CrawlView:
    """The dashboard's read-only model of one crawl directory (see the module docstring)."""

    def __init__(
        self,
        directory: Path,
        *,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        nodes: NodeStatus | None = None,
    ) -> None:
        """`nodes`: the statuses of a cluster crawl's nodes (this directory is one node's)."""
        self.directory = directory
        self._clock = clock
        self._monotonic = monotonic
        self.nodes = nodes
        self.progress = ProgressTail(directory / PROGRESS_FILE)
        self.partitions: dict[int, PartitionFiles] = {}
        self._stats_file = StatsFile(directory / STATS_FILE)
        self._host_files: HostFiles | None = None
        self._host_files_read = -math.inf
        self._reader: CrawlReader | None = None
        self._reader_progress: float | None = None
        self._figures: TableFigures | None = None
        self._next_scan = 0.0
        self._host_table = HostTable()
        self._host_reads: CostRuled[HostScan | None] = CostRuled(monotonic)
        self._page_reads: CostRuled[dict[str, Any] | None] = CostRuled(monotonic)

    @property
    def robots_agent(self) -> str:
        """The product token the crawl matched robots.txt groups with (its config.json's; read each
        time: a crawl attached to its dashboard writes the file after the dashboard starts)."""
        try:
            values = json.loads((self.directory / "config.json").read_text())
            return CrawlConfig.from_mapping(values, source="config.json").robots_agent
        except (OSError, ValueError, ConfigError):
            return CrawlConfig().robots_agent

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    # -- progress and state ------------------------------------------------------------------

    def refresh(self) -> None:
        """Read what the crawl appended to its progress files and a new stats.json."""
        self.progress.read()
        for path in sorted(self.directory.glob(f"workers/*/{PROGRESS_FILE}")):
            if path.parent.name.isdigit():
                partition = self.partitions.get(int(path.parent.name))
                if partition is None:
                    partition = PartitionFiles(ProgressTail(path, keep=2), StatsFile(path.parent / STATS_FILE))
                    self.partitions[int(path.parent.name)] = partition
                partition.read()
        self._stats_file.read()

    @property
    def stats(self) -> dict[str, Any] | None:
        return self._stats_file.data

    def state(self) -> str:
        """The crawl's state (`crawl_state`)."""
        return crawl_state(self.progress.latest, self.stats, self._clock())

    def host_files(self) -> HostFiles:
        """The frontier's host reports of the crawl (every partition's), read at most every
        HOST_FILES_EVERY seconds."""
        now = self._monotonic()
        if self._host_files is None or now - self._host_files_read >= HOST_FILES_EVERY:
            self._host_files = read_host_files(self.directory)
            self._host_files_read = now
        return self._host_files

    @property
    def live(self) -> bool:
        return self.state() in ("running", "paused", "starting")

    def counts(self) -> dict[str, Any]:
        """The crawl's counters: stats.json's once it finished, else the latest progress line's."""
        if self.stats is not None and self.state() == "finished":
            source, column = self.stats, 1
        else:
            source, column = self.progress.latest or {}, 2
        return {names[0]: source.get(names[column]) or type(default)() for *names, default in _COUNTERS}

    def overview(self, series_since: float | None = None) -> dict[str, Any]:
        """Everything the overview page shows, as plain data (the /api/overview document).
        `series_since`: only the chart's points after that time (a page polling twice a second
        has the others: the whole series of an hour's crawl was most of each answer's cost)."""
        latest = self.progress.latest or {}
        counts = self.counts()
        stats = self.stats or {}
        lines: Iterable[dict[str, Any]] = self.progress.lines
        if series_since is not None:
            newer = itertools.takewhile(lambda line: line.get("time", 0) > series_since, reversed(self.progress.lines))
            lines = reversed(list(newer))
        series = [[line.get("time"), line.get("pages"), line.get("pages_per_second_recent")] for line in lines]
        command = read_command(self.directory / CONTROL_FILE)
        figures = self._figures
        now = self._clock()
        host_summary = self.host_files().summary()
        return {
            "directory": str(self.directory),
            "state": self.state(),
            "termination": stats.get("termination") if self.state() == "finished" else None,
            "last_command": None if command is None else {"command": command.command, "at": command.at},
            "pages": counts["pages"],
            "bytes": counts["bytes"],
            "elapsed": counts["elapsed"],
            "pages_per_second_recent": latest.get("pages_per_second_recent", 0.0),
            "pages_per_second_average": (
                stats.get("pages_per_second", 0.0)
                if self.state() == "finished"
                else latest.get("pages_per_second_average", 0.0)
            ),
            "frontier": latest.get("frontier", 0),
            "in_flight": latest.get("in_flight", 0),
            "hosts": {
                "known": latest.get("known_hosts", 0),
                "active": latest.get("active_hosts", 0),
                "parked": latest.get("parked_hosts", 0),
                "awaiting_address": latest.get("awaiting_address", 0),
            },
            "caches": {
                "robots_cached": latest.get("robots_cached", 0),
                "dns_cached": latest.get("dns_cached", 0),
                **cache_rates(latest),
            },
            "host_delays": host_summary,
            "status_classes": status_classes(counts["responses_by_status"]),
            "outcomes": [asdict(row) for row in outcome_rows(counts)],
            "table_scanned_at": None if figures is None else figures.scanned_at,
            "content_types": None if figures is None else dict(figures.content_types.most_common(12)),
            "page_sizes": None if figures is None else _histogram(figures.size_counts, SIZE_BUCKETS),
            "series": series,
            "partitions": [
                {
                    "partition": index,
                    "state": crawl_state(files.progress.latest, files.stats.data, now),
                    **_partition_row(files.progress.latest),
                }
                for index, files in sorted(self.partitions.items())
                if files.progress.latest is not None
            ],
            **self._nodes(),
        }

    def _nodes(self) -> dict[str, Any]:
        """A cluster crawl's nodes, one row each (as `crawlspace status --cluster` shows them)."""
        if self.nodes is None:
            return {"nodes": [], "nodes_error": None}
        status = self.nodes.read()
        rows = [
            {
                "node": row.get("node"),
                "state": row.get("state"),
                "pages": row.get("pages", 0),
                "pages_per_second_recent": row.get("pages/s", 0),
                "frontier": row.get("frontier", 0),
                "in_flight": row.get("in flight", 0),
                "errors": row.get("errors", 0),
                "redis": row.get("redis", ""),
                "updated_seconds_ago": row.get("updated_seconds_ago"),
            }
            for row in status.get("nodes") or []
            if isinstance(row, dict)
        ]
        return {"nodes": rows, "nodes_error": status.get("error")}

    # -- the crawl table ---------------------------------------------------------------------

    def reader(self) -> CrawlReader | None:
        """A reader of the table as it is now: opened again when the crawl has reported since it was
        opened (RocksDB's read-only view is the table at open time); None while there is no table."""
        latest = self.progress.latest
        mark = None if latest is None else latest.get("time")
        if self._reader is not None and (mark == self._reader_progress or not self.live):
            return self._reader
        self.close()
        try:
            self._reader = CrawlReader([self.directory])
        except CrawlTableError:
            return None
        self._reader_progress = mark
        return self._reader

    def figures(self) -> TableFigures | None:
        """The table-wide figures, scanned again when the last scan is old enough (module docstring)."""
        now = self._monotonic()
        cached = self._figures
        if cached is not None and cached.pages and (now < self._next_scan or not self.live):
            return cached  # (an empty scan is always repeated: a page of nothing helps nobody, and costs nothing)
        began = self._monotonic()  # the reader's reopening counts: RocksDB replays the crawl's log then
        reader = self.reader()
        if reader is None:
            return self._figures
        figures = summarize(reader.fetches())
        agent = self.robots_agent
        for origin, kept in reader.robots_files().items():  # part of the scan: same cadence, same cost rule
            if 200 <= kept.status < 300:
                figures.crawl_delays[host_of(origin + "/")] = parse_robots(kept.body).crawl_delay(agent)
        figures.scan_seconds = self._monotonic() - began
        figures.scanned_at = self._clock()
        self._figures = figures
        self._next_scan = self._monotonic() + max(MIN_SCAN_INTERVAL, SCAN_COST_FACTOR * figures.scan_seconds)
        return figures

    def hosts(self, query: HostQuery | None = None) -> HostPage:
        """One page of the hosts table (serve/hosttable.py): each host's figures from the last table
        scan with the Crawl-delay its robots.txt asks of the crawl's agent (None: none asked, or no
        robots.txt kept) and, for the hosts the frontier's report lists (those with most URLs queued),
        what the frontier holds of them now (`live`: queued URLs, next contact, current delay and its
        cause); hosts listed there but not yet fetched are rows too, with no fetch. The orders are
        kept between calls until the scan or the report changes."""
        figures = self.figures()
        if figures is None:
            self._host_table.update(_NO_HOSTS, {}, self.host_files().rows())
        else:
            self._host_table.update(figures.hosts, figures.crawl_delays, self.host_files().rows())
        return self._host_table.page(query or HostQuery())

    def host(self, host: str) -> dict[str, Any] | None:
        """One host: its figures, its newest fetches (RECENT_FETCHES), each of its origins' robots.txt
        as fetched with the rules that apply to the crawl's agent, and the frontier's row of it now.

        The table's part is one scan of the host's rows, whose cost grows with its URLs (a second for
        100,000 of them): kept, and done again under the cost rule of the table-wide scan (module
        docstring), its time given as `scanned_at`; memory holds RECENT_FETCHES fetches, not all."""
        reader = self.reader()
        if reader is None:
            return None
        kept = self._host_reads.get(host, lambda: self._scan_host(reader, host), live=self.live)
        live = self.host_files().rows().get(host)
        if kept is None:
            if live is None:
                return None
            kept = HostScan(HostFigures(host), [], [], self._clock())
        return {
            **kept.figures.to_dict(),
            "live": live,
            "recent": kept.recent,
            "robots": kept.robots,
            "scanned_at": kept.scanned_at,
        }

    def _scan_host(self, reader: CrawlReader, host: str) -> HostScan | None:
        try:
            prefix = row_key(f"http://{host}/").split("/", 1)[0]
        except RowKeyError:
            return None
        figures = HostFigures(host)

        def own() -> Iterator[tuple[str, FetchInfo]]:
            for url, fetch in reader.fetches(KeyRange(prefix + "/", prefix + "0")):
                if host_of(url) == host:  # the range also holds the host's other ports
                    figures.add(fetch)
                    yield url, fetch

        recent = heapq.nlargest(RECENT_FETCHES, own(), key=lambda pair: pair[1].fetched)
        robots = []
        for origin, kept in sorted(reader.robots_files().items()):
            if host_of(origin + "/") != host:
                continue
            rules = parse_robots(kept.body) if 200 <= kept.status < 300 else None
            robots.append(
                {
                    "origin": origin,
                    "status": kept.status,
                    "fetched": kept.fetched,
                    "body": kept.body.decode("utf-8", "replace"),
                    "agent": self.robots_agent,
                    "crawl_delay": None if rules is None else rules.crawl_delay(self.robots_agent),
                    "rules": []
                    if rules is None
                    else [
                        {"allow": rule.allow, "pattern": rule.pattern} for rule in rules.rules_for(self.robots_agent)
                    ],
                }
            )
        if not figures.pages and not robots:
            return None
        return HostScan(figures, [_fetch_row(url, fetch) for url, fetch in recent], robots, self._clock())

    def page(self, url: str) -> dict[str, Any] | None:
        """A crawl-table row: its fetches (versions, newest first), title, the anchors of the pages
        linking to it, its out-links, in-links and duplicates (LINKS_SHOWN of each at the most, with
        their counts), where its WARC record is; kept as `CostRuled` says (`read_at`: when read)."""
        reader = self.reader()
        if reader is None:
            return None
        return self._page_reads.get(url, lambda: self._read_page(reader, url), live=self.live)

    def _read_page(self, reader: CrawlReader, url: str) -> dict[str, Any] | None:
        try:
            page = reader.page(url)
        except RowKeyError:
            return None
        if page is None:
            return None
        capture = page.capture
        anchors = reader.anchors(page.url)
        inlinks, inlinks_total = self._inlinks(page.url)
        return {
            "url": page.url,
            "host": host_of(page.url),
            "title": page.title,
            "fetch": _fetch_row(page.url, page.fetch),
            "history": [_fetch_row(page.url, fetch) for fetch in reader.fetch_history(page.url)],
            "duplicate_of": page.fetch.duplicate_of,
            "anchors": [{"source": anchor.source, "text": anchor.text} for anchor in anchors[:LINKS_SHOWN]],
            "anchors_total": len(anchors),
            "outlinks": [
                {"target": edge.target, "text": edge.text, "nofollow": edge.nofollow}
                for edge in page.outlinks[:LINKS_SHOWN]
            ],
            "outlinks_total": len(page.outlinks),
            "capture": None
            if capture is None
            else {"filename": capture.filename, "offset": capture.offset, "length": capture.length},
            "inlinks": inlinks,
            "inlinks_total": inlinks_total,
            "duplicates": self._duplicates(page.url),
            "read_at": self._clock(),
        }

    def _inlinks(self, url: str) -> tuple[list[dict[str, Any]] | None, int]:
        """The first LINKS_SHOWN links to `url` in the link graph of `crawlspace jobs`, and how many
        there are (None, 0: the graph job has not run)."""
        if not (self.directory / "jobs" / "graph").is_dir():
            return None, 0
        from crawlspace.jobs import JobOutputError, read_table

        try:
            edges = read_table(
                self.directory, "graph", "edges", columns=["source", "text", "nofollow", "redirect"],
                filters=[("target", "==", url)],
            )  # fmt: skip
        except (JobOutputError, OSError, ValueError):
            return None, 0
        shown = edges.head(LINKS_SHOWN)
        rows = zip(shown["source"], shown["text"], shown["nofollow"], shown["redirect"], strict=True)
        return [
            {"source": source, "text": text, "nofollow": bool(nofollow), "redirect": bool(redirect)}
            for source, text, nofollow, redirect in rows
        ], len(edges)

    def _duplicates(self, url: str) -> dict[str, Any] | None:
        """Its exact and near-duplicate clusters from the dedup and near jobs (None: not run)."""
        if not (self.directory / "jobs" / "dedup").is_dir():
            return None
        from crawlspace.jobs import JobOutputError
        from crawlspace.jobs.lookup import NotFetched, duplicates_of

        try:
            found = duplicates_of(self.directory, url)
        except (JobOutputError, NotFetched, OSError, ValueError):
            return None
        return {
            "exact": found.exact[:LINKS_SHOWN], "near": found.near[:LINKS_SHOWN],
            "exact_total": len(found.exact), "near_total": len(found.near),
        }  # fmt: skip

    def record(self, url: str) -> str | None:
        """The page's newest WARC record as text (headers, then the block, undecoded bytes shown as
        replacement characters), or None when it has none or its file is missing or damaged."""
        reader = self.reader()
        if reader is None:
            return None
        try:
            page = reader.page(url)
            if page is None or page.capture is None:
                return None
            stored = reader.record(page.capture)
        except (RowKeyError, OSError, ValueError):
            return None
        headers = "".join(f"{name}: {value}\r\n" for name, value in stored.headers.items())
        return f"WARC/1.1\r\n{headers}\r\n" + stored.block.decode("utf-8", "replace")

    def search(self, query: str, top: int = 10) -> dict[str, Any]:
        """The query over the index `crawlspace jobs` built (DIR/jobs/index) with snippets; without
        an index, how to build one."""
        from crawlspace.index import Index, IndexFormatError, parse_query
        from crawlspace.index.snippets import make_snippet

        index_dir = self.directory / "jobs" / "index"
        if not index_dir.is_dir():
            return {"query": query, "hits": [], "missing": f"crawlspace jobs {self.directory} --only index"}
        parsed = parse_query(query)
        try:
            with Index(index_dir) as index:
                result = index.search(parsed, top)
                idf = {term: index.scorer.idf(index.stats.document_frequency(term)) for term in parsed.terms}
        except IndexFormatError as exc:
            return {"query": query, "hits": [], "error": str(exc), "missing": f"crawlspace jobs {self.directory}"}
        reader = self.reader()
        hits = []
        for hit in result.hits:
            page = None if reader is None else reader.page(hit.url)
            text = (page.text or "") if page is not None else ""
            if page is not None and not text and reader is not None:
                reparsed = reader.parse(page)
                text = reparsed.text if reparsed is not None else ""
            snippet = make_snippet(text, parsed.terms, weights=idf)
            pieces, at = [], 0
            for start, end in snippet.highlights:
                pieces += [[snippet.text[at:start], False], [snippet.text[start:end], True]]
                at = end
            pieces.append([snippet.text[at:], False])
            hits.append(
                {"url": hit.url, "title": hit.title, "score": hit.score, "similar": hit.similar, "snippet": pieces}
            )
        return {"query": query, "hits": hits}


def _histogram(counts: list[int], bounds: tuple[float, ...]) -> list[dict[str, Any]]:
    return [
        {"le": None if bound == float("inf") else bound, "count": n} for bound, n in zip(bounds, counts, strict=True)
    ]


def _partition_row(line: dict[str, Any] | None) -> dict[str, Any]:
    line = line or {}
    return {
        key: line.get(key, 0)
        for key in ("pages", "pages_per_second_recent", "bytes", "frontier", "in_flight", "active_hosts", "errors")
    } | {"paused": bool(line.get("paused"))}


def _fetch_row(url: str, fetch: FetchInfo) -> dict[str, Any]:
    return {
        "url": url,
        "status": fetch.status,
        "outcome": fetch.outcome,
        "fetched": fetch.fetched,
        "duration": round(fetch.duration, 4),
        "length": fetch.length,
        "content_type": fetch.content_type,
        "changed": fetch.changed,
        "fingerprint": None if fetch.fingerprint is None else f"{fetch.fingerprint:016x}",
        "location": fetch.location,
        "error": fetch.error,
        "depth": fetch.depth,
    }
