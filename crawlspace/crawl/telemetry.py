"""Telemetry (IIR §20.2.1, housekeeping): the crawl's statistics and progress as one `Snapshot`.

Who fills it and who drains it. The engine counts as it crawls, in a `CrawlStats`. Every
`progress_interval` seconds it takes a `Snapshot` (a copy of the counters, and the `Gauges`: what
is queued, in flight and cached at that moment) and publishes it through `Telemetry` to its sinks:
DIR/progress.jsonl always, then the terminal (a live table, or plain log lines when stderr is not
a terminal). A partition of a multi-process crawl publishes to the coordinator instead of the
terminal (crawl/workers.py); the coordinator merges the partitions' latest Snapshots into one,
publishes that to its own sinks at the same cadence, and keeps it for `Crawler.stats`. The last
Snapshot a sink receives, after the final checkpoint, holds what stats.json says.

Merging is declared, not listed. Every field of CrawlStats, Gauges and Snapshot says how the
partitions' values combine, in its type: `pages_fetched: Annotated[int, Merge.SUM]`. `merge`
reads nothing else, and `@mergeable` refuses a struct with a field that has no rule when the
module is imported, so a counter added without one fails at once instead of vanishing from a
multi-process crawl's figures.

What a sink must do is in `TelemetrySink`: the JSON lines, terminal and log sinks are here; a
dashboard's HTTP sink or a cluster's Redis sink implements the same two methods.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import itertools
import json
import logging
import sys
import time
import typing
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, Protocol, TextIO, TypeVar

import msgspec
from rich.console import Console
from rich.live import Live
from rich.table import Table

PROGRESS_FILE = "progress.jsonl"

log = logging.getLogger(__name__)

_NOT_CHECKPOINTED = frozenset({"started_at", "finished_at", "sections", "termination"})


class Merge(enum.Enum):
    """How the values of one field in several partitions become the crawl's value."""

    SUM = "sum"  # counts of disjoint partitions add up; None (not measured there) is left out
    MAX = "max"  # the latest time, the longest run, the most runs; None (not yet known) in one: None
    MIN = "min"  # the earliest start; None in one: None
    FIRST = "first"  # the first partition's: one value stands for all (how the crawl ended)
    COUNTS = "counts"  # Counters, added key by key
    ELEMENTWISE = "elementwise"  # lists of counts, added position by position (the front queues' sizes)
    COMBINE = "combine"  # free-form tables: counts add, fractions average, tables key by key, else the first
    FIELDS = "fields"  # a struct with rules of its own, merged field by field


class MergeRuleError(TypeError):
    """A telemetry struct with a field that has no merge rule, or more than one."""


T = TypeVar("T")


_MERGE_RULES: dict[type[Any], dict[str, Merge]] = {}


def merge_rules(cls: type[Any]) -> dict[str, Merge]:
    """The merge rule of every field of the dataclass `cls`, read from its `Annotated` metadata. Read once
    per class: resolving the annotations (typing.get_type_hints) was a tenth of the coordinator's CPU in a
    crawl that politeness holds to a page a second (it merges the partitions' reports every few seconds)."""
    known = _MERGE_RULES.get(cls)
    if known is not None:
        return known
    hints = typing.get_type_hints(cls, include_extras=True)
    rules = {}
    for item in dataclasses.fields(cls):
        found = [meta for meta in getattr(hints[item.name], "__metadata__", ()) if isinstance(meta, Merge)]
        if len(found) != 1:
            raise MergeRuleError(
                f"{cls.__name__}.{item.name} needs exactly one merge rule, e.g. Annotated[int, Merge.SUM]; "
                f"it has {len(found)}: a field without one would be dropped when partitions are merged"
            )
        rules[item.name] = found[0]
        if found[0] is Merge.FIELDS:
            merge_rules(typing.get_args(hints[item.name])[0])  # the nested struct's own rules
    _MERGE_RULES[cls] = rules
    return rules


def mergeable(cls: type[T]) -> type[T]:
    """Class decorator: check the rules when the struct is defined, not at the first merge."""
    merge_rules(cls)
    return cls


def merge(parts: Sequence[T]) -> T:
    """One value of a telemetry struct from the partitions' values, field by field by the declared rules."""
    if not parts:
        raise ValueError("merge of no partitions")
    cls = type(parts[0])
    values = {name: _merged(rule, [getattr(part, name) for part in parts]) for name, rule in merge_rules(cls).items()}
    return cls(**values)


def _merged(rule: Merge, values: list[Any]) -> Any:
    present = [value for value in values if value is not None]
    match rule:
        case Merge.SUM:
            return sum(present) if present else None
        case Merge.MAX:
            return max(values) if len(present) == len(values) else None  # finished when all partitions are
        case Merge.MIN:
            return min(values) if len(present) == len(values) else None
        case Merge.FIRST:
            return values[0]
        case Merge.COUNTS:
            total: Counter[Any] = Counter()
            for value in values:
                total.update(value)
            return total
        case Merge.ELEMENTWISE:
            return [sum(column) for column in itertools.zip_longest(*values, fillvalue=0)]
        case Merge.COMBINE:
            return combine(values)
        case Merge.FIELDS:
            return merge(values)
    typing.assert_never(rule)


def combine(values: list[Any]) -> Any:
    """The partitions' values of one free-form entry (a stats.json section) as one: counts add up,
    rates and other fractions are averaged, tables combine key by key, anything else keeps the first
    partition's value."""
    if all(isinstance(value, dict) for value in values):
        keys = {key: None for value in values for key in value}
        return {key: combine([value[key] for value in values if key in value]) for key in keys}
    if all(isinstance(value, int) and not isinstance(value, bool) for value in values):
        return sum(values)
    if all(isinstance(value, int | float) and not isinstance(value, bool) for value in values):
        return sum(values) / len(values)
    return values[0]


# -- what is measured ---------------------------------------------------------------------------


@mergeable
@dataclasses.dataclass
class CrawlStats:
    """The crawl's counters, moved by the engine as it crawls; checkpointed, and written to stats.json."""

    started_at: Annotated[float, Merge.MIN] = dataclasses.field(default_factory=time.time)
    finished_at: Annotated[float | None, Merge.MAX] = None
    pages_fetched: Annotated[int, Merge.SUM] = 0  # fetch attempts of frontier URLs (robots.txt not included)
    bytes_downloaded: Annotated[int, Merge.SUM] = 0
    responses_by_status: Annotated[Counter[int], Merge.COUNTS] = dataclasses.field(default_factory=Counter)
    outcomes: Annotated[Counter[str], Merge.COUNTS] = dataclasses.field(default_factory=Counter)
    errors: Annotated[Counter[str], Merge.COUNTS] = dataclasses.field(default_factory=Counter)
    robots_fetches: Annotated[int, Merge.SUM] = 0
    robots_excluded: Annotated[int, Merge.SUM] = 0
    robots_unreachable: Annotated[int, Merge.SUM] = 0  # URLs dropped after their host's robots.txt stayed unreachable
    robots_waiting: Annotated[int, Merge.SUM] = 0  # URLs still queued at the end, waiting for an unreachable robots.txt
    sitemaps_fetched: Annotated[int, Merge.SUM] = 0
    sitemap_urls: Annotated[int, Merge.SUM] = 0
    duplicate_urls: Annotated[int, Merge.SUM] = 0
    duplicate_content: Annotated[int, Merge.SUM] = 0
    near_duplicate_content: Annotated[int, Merge.SUM] = 0
    # near-duplicate questions to other partitions owning a page's band keys (one answer each comes back)
    near_duplicate_questions: Annotated[int, Merge.SUM] = 0
    # near-duplicate questions an owner of band keys did not answer in time: the page was taken as new there
    near_duplicate_unanswered: Annotated[int, Merge.SUM] = 0
    # outdated notices sent to other partitions (resends included), and entries they removed here (distributed.outdated)
    outdated_notices_sent: Annotated[int, Merge.SUM] = 0
    outdated_entries_removed: Annotated[int, Merge.SUM] = 0
    links_extracted: Annotated[int, Merge.SUM] = 0
    links_dropped: Annotated[int, Merge.SUM] = 0  # beyond max_links_per_page
    nofollow_links: Annotated[int, Merge.SUM] = 0
    noindex_pages: Annotated[int, Merge.SUM] = 0
    canonical_elsewhere: Annotated[int, Merge.SUM] = 0  # pages whose canonical URL is another one
    urls_discovered: Annotated[int, Merge.SUM] = 0
    filtered: Annotated[Counter[str], Merge.COUNTS] = dataclasses.field(default_factory=Counter)
    invalid_seeds: Annotated[int, Merge.SUM] = 0
    retries: Annotated[int, Merge.SUM] = 0  # attempts put back into the frontier after a transient failure
    handed_over: Annotated[int, Merge.SUM] = 0  # URLs sent to the partition owning their host's IP address
    termination: Annotated[str, Merge.FIRST] = ""
    # per-component reports: dns, guard, fetch, frontier, policy, recovery
    sections: Annotated[dict[str, Any], Merge.COMBINE] = dataclasses.field(default_factory=dict)
    runs: Annotated[int, Merge.MAX] = 1  # this run and the ones it resumed
    # crawling time of the runs this one resumed (to their last checkpoint)
    crawl_seconds_before: Annotated[float, Merge.MAX] = 0.0

    @property
    def elapsed(self) -> float:
        """Seconds spent crawling, over every run of this crawl."""
        return self.crawl_seconds_before + (self.finished_at or time.time()) - self.started_at

    def snapshot(self) -> dict[str, Any]:
        """The counters as plain data, for a checkpoint; `resumed` turns them back into stats."""
        data: dict[str, Any] = {}
        for item in dataclasses.fields(self):
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
            "near_duplicate_questions": self.near_duplicate_questions,
            "near_duplicate_unanswered": self.near_duplicate_unanswered,
            "outdated_notices_sent": self.outdated_notices_sent,
            "outdated_entries_removed": self.outdated_entries_removed,
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


@mergeable
@dataclasses.dataclass(frozen=True, slots=True)
class Gauges:
    """What a crawl holds at one moment (unlike the counters, these go down as well as up)."""

    frontier: Annotated[int, Merge.SUM] = 0  # URLs queued, not counting those in flight
    in_flight: Annotated[int, Merge.SUM] = 0
    active_hosts: Annotated[int, Merge.SUM] = 0  # hosts holding a back queue
    parked_hosts: Annotated[int, Merge.SUM] = 0  # set aside until their contact time (errors, long delays)
    known_hosts: Annotated[int, Merge.SUM] = 0
    awaiting_address: Annotated[int, Merge.SUM] = 0  # hosts with a back queue waiting for DNS
    front_queues: Annotated[list[int], Merge.ELEMENTWISE] = dataclasses.field(default_factory=list)
    urls_seen: Annotated[int, Merge.SUM] = 0
    urls_buffered: Annotated[int, Merge.SUM] = 0  # waiting in the URL-seen buffer for the next batched test
    robots_cached: Annotated[int, Merge.SUM] = 0
    dns_cached: Annotated[int, Merge.SUM] = 0
    # the caches' counters of this run (they only go up; a resumed run counts from 0 again)
    dns_cache_hits: Annotated[int, Merge.SUM] = 0  # names answered from the cache, failures included
    dns_cache_misses: Annotated[int, Merge.SUM] = 0  # lookups sent to DNS
    robots_cache_hits: Annotated[int, Merge.SUM] = 0  # URLs checked against a fresh cached robots.txt
    robots_cache_misses: Annotated[int, Merge.SUM] = 0  # URLs whose robots.txt had to be fetched first
    processing: Annotated[int | None, Merge.SUM] = None  # pages in the page processors (None: there are none)
    items: Annotated[int | None, Merge.SUM] = None  # items the processors emitted
    transport_down: Annotated[int | None, Merge.SUM] = None  # cluster nodes cut off from Redis (None: no cluster)
    paused: Annotated[int | None, Merge.SUM] = None  # partitions paused by the operator (None: none is)


@mergeable
@dataclasses.dataclass(frozen=True, slots=True)
class Snapshot:
    """The crawl (or one partition of it) at one moment: a value, never changed once published."""

    stats: Annotated[CrawlStats, Merge.FIELDS]
    gauges: Annotated[Gauges, Merge.FIELDS]
    time: Annotated[float, Merge.MAX]  # when it was taken (time.time())
    elapsed: Annotated[float, Merge.MAX]  # seconds crawled over every run: a crawl's is its longest partition's
    pages_per_second_recent: Annotated[float, Merge.SUM] = 0.0  # since the publisher's previous Snapshot
    partitions: Annotated[int, Merge.SUM] = 1  # how many partitions it covers

    @classmethod
    def take(cls, stats: CrawlStats, gauges: Gauges) -> Snapshot:
        """A Snapshot of counters that go on moving: they are copied."""
        return cls(copy.deepcopy(stats), gauges, time.time(), stats.elapsed)

    def progress_line(self) -> dict[str, Any]:
        """One line of progress.jsonl (and the rows of the live table)."""
        stats = self.stats
        elapsed = self.elapsed
        gauges = {item.name: getattr(self.gauges, item.name) for item in dataclasses.fields(self.gauges)}
        return {
            "time": round(self.time, 3),
            "elapsed": round(elapsed, 2),
            "pages": stats.pages_fetched,
            "pages_per_second_recent": round(self.pages_per_second_recent, 1),
            "pages_per_second_average": round(stats.pages_fetched / elapsed, 1) if elapsed > 0 else 0.0,
            "bytes": stats.bytes_downloaded,
            "robots_excluded": stats.robots_excluded,
            "duplicate_content": stats.duplicate_content,
            "errors": sum(stats.errors.values()),
            "errors_by_kind": dict(stats.errors),
            "responses_by_status": {str(code): count for code, count in sorted(stats.responses_by_status.items())},
            "outcomes": dict(stats.outcomes),
            "duplicate_urls": stats.duplicate_urls,
            "filtered": dict(stats.filtered),
            **{name: value for name, value in gauges.items() if value is not None},
            "workers": self.partitions,
        }

    def to_builtins(self) -> Any:
        """Plain data (dicts, lists, numbers, strings) to send or store; `from_builtins` reads it back."""
        return msgspec.to_builtins(self)

    @classmethod
    def from_builtins(cls, data: Any) -> Snapshot:
        """A Snapshot from `to_builtins` data, also after a JSON round trip (keys as strings)."""
        return msgspec.convert(data, cls, dec_hook=_counter)


def _counter(kind: type, value: Any) -> Any:
    """msgspec's hook for the Counter fields: their keys converted to the declared type."""
    if typing.get_origin(kind) is Counter and isinstance(value, dict):
        (key,) = typing.get_args(kind)
        return Counter({key(k): v for k, v in value.items()})
    raise NotImplementedError(f"cannot decode {kind}")


# -- where it goes ------------------------------------------------------------------------------


class TelemetrySink(Protocol):
    """Where Snapshots go. For the implementer of a new one (a dashboard over HTTP, a cluster's Redis):

    - `publish` is called with every Snapshot, at the reporting cadence (`progress_interval`), and
      with a last one after the crawl's final checkpoint, whose `stats` are those of stats.json.
      It is called on the thread that runs the crawl: the engine's event loop in one process; the
      coordinator's thread with several (under `await Crawler.crawl()`, a thread of its own, not
      the application's loop). Return quickly: hand slow work (a network write) to a thread or a
      buffer of your own, or the crawl waits for it.
    - A Snapshot is a value nothing changes once it is published: keep it as long as you like.
      `snapshot.to_builtins()` gives plain data for JSON or msgpack, `Snapshot.from_builtins` reads
      it back on the other side, and `merge` combines the Snapshots of several partitions (or
      nodes) into the crawl's.
    - `close` is called once, after the last `publish`: release what the sink holds.
    - An exception does not stop the crawl nor the other sinks: `Telemetry` logs it (the first
      time for each sink) and counts it in `Telemetry.failures`; the sink misses that Snapshot.
      A sink that can fail often (a lost connection) had better count and retry on its own.
    """

    def publish(self, snapshot: Snapshot) -> None: ...

    def close(self) -> None: ...


class Telemetry:
    """Publishes Snapshots to sinks, each with the page rate since the one before, and keeps the latest."""

    def __init__(self, sinks: Sequence[TelemetrySink]) -> None:
        self.sinks = list(sinks)
        self.latest: Snapshot | None = None
        self.failures: Counter[int] = Counter()  # exceptions raised by each sink, by its place in `sinks`
        self._last_pages = 0
        self._last_time = time.monotonic()
        self._closed = False

    def publish(self, snapshot: Snapshot) -> Snapshot:
        """Hand `snapshot` (with its recent rate filled in) to every sink; returns what they got."""
        now = time.monotonic()
        pages = snapshot.stats.pages_fetched
        recent = (pages - self._last_pages) / max(now - self._last_time, 1e-9)
        self._last_pages, self._last_time = pages, now
        published = dataclasses.replace(snapshot, pages_per_second_recent=recent)
        self.latest = published
        for number, sink in enumerate(self.sinks):
            self._call(number, sink.publish, published)
        return published

    def close(self, final: Snapshot | None = None) -> Snapshot | None:
        """Publish the last Snapshot (if any), then close every sink; later calls do nothing."""
        if self._closed:
            return self.latest
        self._closed = True
        if final is not None:
            self.publish(final)
        for number, sink in enumerate(self.sinks):
            self._call(number, sink.close)
        return self.latest

    def _call(self, number: int, method: Callable[..., None], *args: Any) -> None:
        """A sink's failure is its own: the crawl and the other sinks go on (progress is not worth a crawl)."""
        try:
            method(*args)
        except Exception:
            if not self.failures[number]:
                log.warning("telemetry sink %r failed (logged once, counted after)", self.sinks[number], exc_info=True)
            self.failures[number] += 1


class JsonLinesSink:
    """progress.jsonl: one JSON object per Snapshot (`Snapshot.progress_line`), so a run can be plotted."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: TextIO | None = None  # opened at the first Snapshot: a crawl that never ran writes nothing

    def publish(self, snapshot: Snapshot) -> None:
        if self._file is None:
            self._file = self.path.open("a", encoding="utf-8")
        self._file.write(json.dumps(snapshot.progress_line()) + "\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()

    def __repr__(self) -> str:
        return f"JsonLinesSink({str(self.path)!r})"


class LogSink:
    """One plain line per Snapshot (for a log file or a terminal that is not watched live)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr

    def publish(self, snapshot: Snapshot) -> None:
        line = snapshot.progress_line()
        workers = f", workers {snapshot.partitions}" if snapshot.partitions > 1 else ""
        if snapshot.gauges.transport_down:
            workers += ", CLUSTER LINK DOWN: crawling own hosts, batches wait in the journal"
        self.stream.write(
            f"[{line['elapsed']:>7.1f}s] pages {line['pages']} ({line['pages_per_second_recent']}/s), "
            f"frontier {snapshot.gauges.frontier}, in flight {snapshot.gauges.in_flight}, "
            f"hosts {snapshot.gauges.active_hosts}, errors {line['errors']}{workers}\n"
        )
        self.stream.flush()

    def close(self) -> None:
        """The stream is not ours to close."""


class TerminalSink:
    """A live table on a terminal (rich), redrawn with each Snapshot."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._console = Console(file=stream or sys.stderr)
        self._live: Live | None = None  # started at the first Snapshot

    def publish(self, snapshot: Snapshot) -> None:
        if self._live is None:
            self._live = Live(console=self._console, refresh_per_second=4, transient=False)
            self._live.start()
        self._live.update(progress_table(snapshot))

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()


def progress_table(snapshot: Snapshot) -> Table:
    table = Table(title="crawlspace", show_header=False, box=None)
    for key, value in snapshot.progress_line().items():
        if key != "time":
            table.add_row(key.replace("_", " "), str(value))
    return table


def display_sink(live: bool | None, stream: TextIO | None = None) -> TelemetrySink:
    """The terminal's sink: the live table when `live` (None: when the stream is a terminal), else log lines."""
    stream = stream or sys.stderr
    if stream.isatty() if live is None else live:
        return TerminalSink(stream)
    return LogSink(stream)
