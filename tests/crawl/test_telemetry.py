"""Telemetry: every field declares how partitions merge, sinks get every Snapshot, and the crawl's
progress reads the same in one process and in several (progress.jsonl, log lines, the live table,
`Crawler.stats`, stats.json)."""

from __future__ import annotations

import dataclasses
import io
import json
import typing
from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import msgspec
import pytest

from crawlspace import CrawlConfig, Crawler
from crawlspace.crawl.telemetry import (
    PROGRESS_FILE,
    CrawlStats,
    Gauges,
    LogSink,
    Merge,
    MergeRuleError,
    Snapshot,
    Telemetry,
    TerminalSink,
    display_sink,
    merge,
    merge_rules,
    mergeable,
)
from crawlspace.simweb import RunningServer

# what a progress.jsonl line held before Snapshots existed, in order ("workers" was the coordinator's),
# with the status and outcome counts the dashboard shows of a running crawl
LINE_KEYS = [
    "time", "elapsed", "pages", "pages_per_second_recent", "pages_per_second_average", "bytes",
    "robots_excluded", "duplicate_content", "errors", "errors_by_kind", "responses_by_status", "outcomes",
    "duplicate_urls", "filtered", "frontier", "in_flight",
    "active_hosts", "parked_hosts", "known_hosts", "awaiting_address", "front_queues", "urls_seen",
    "urls_buffered", "robots_cached", "dns_cached", "dns_cache_hits", "dns_cache_misses", "robots_cache_hits",
    "robots_cache_misses", "workers",
]  # fmt: skip


class RecordingSink:
    """A fake TelemetrySink: keeps what it is given, and the pages `Crawler.stats` counted at that moment."""

    def __init__(self) -> None:
        self.snapshots: list[Snapshot] = []
        self.live_pages: list[int | None] = []
        self.crawler: Crawler | None = None
        self.closed = 0

    def publish(self, snapshot: Snapshot) -> None:
        assert not self.closed, "published after close"
        self.snapshots.append(snapshot)
        if self.crawler is not None:
            stats = self.crawler.stats
            self.live_pages.append(None if stats is None else stats.pages_fetched)

    def close(self) -> None:
        self.closed += 1

    def __repr__(self) -> str:
        return f"<RecordingSink {len(self.snapshots)} snapshots, closed {self.closed}>"


class BrokenSink(RecordingSink):
    def publish(self, snapshot: Snapshot) -> None:
        super().publish(snapshot)
        raise OSError("the dashboard went away")


@dataclasses.dataclass
class Unruled:
    pages: int = 0


def partition(pages: int, **stats: Any) -> Snapshot:
    counters = CrawlStats(pages_fetched=pages, **stats)
    return Snapshot(counters, Gauges(frontier=pages, front_queues=[pages, 1]), 100.0 + pages, float(pages))


# -- merge rules ----------------------------------------------------------------------------------


def test_every_field_of_every_telemetry_struct_has_one_merge_rule() -> None:
    for cls in (Snapshot, CrawlStats, Gauges):
        rules = merge_rules(cls)
        assert set(rules) == {item.name for item in dataclasses.fields(cls)}
    hints = typing.get_type_hints(Snapshot, include_extras=True)
    nested = {name for name, rule in merge_rules(Snapshot).items() if rule is Merge.FIELDS}
    assert {typing.get_args(hints[name])[0] for name in nested} == {CrawlStats, Gauges}


def test_a_field_without_a_rule_is_refused_where_it_is_declared() -> None:
    with pytest.raises(MergeRuleError, match=r"Counts\.pages_stored needs exactly one merge rule"):

        @mergeable
        @dataclasses.dataclass
        class Counts:
            pages: Annotated[int, Merge.SUM] = 0
            pages_stored: int = 0  # a new counter, its rule forgotten

    with pytest.raises(MergeRuleError, match="it has 2"):

        @mergeable
        @dataclasses.dataclass
        class Twice:
            pages: Annotated[int, Merge.SUM, Merge.MAX] = 0

    with pytest.raises(MergeRuleError, match=r"Unruled\.pages"):  # a nested struct needs rules too

        @mergeable
        @dataclasses.dataclass
        class Outer:
            inner: Annotated[Unruled, Merge.FIELDS]


def test_merging_a_struct_without_rules_is_an_error_not_a_silent_drop() -> None:
    with pytest.raises(MergeRuleError):
        merge([Unruled(1), Unruled(2)])
    with pytest.raises(ValueError):
        merge([])


def test_each_rule_of_crawl_stats_holds_for_every_field() -> None:
    """Generic over the fields, so that a counter added later is checked too."""
    first, second = CrawlStats(), CrawlStats()
    for number, item in enumerate(dataclasses.fields(CrawlStats), start=1):
        value = getattr(first, item.name)
        if isinstance(value, Counter):
            key: Any = 200 if item.name == "responses_by_status" else "k"
            setattr(first, item.name, Counter({key: number, "only-first": 1}))
            setattr(second, item.name, Counter({key: 2 * number}))
        elif isinstance(value, str):
            setattr(first, item.name, "first")
            setattr(second, item.name, "second")
        elif isinstance(value, dict):
            setattr(first, item.name, {"dns": {"lookups": 3, "hit_rate": 0.5, "mode": "a"}})
            setattr(second, item.name, {"dns": {"lookups": 4, "hit_rate": 0.7, "mode": "b"}, "fetch": {"n": 1}})
        else:
            setattr(first, item.name, type(value or 0)(number))
            setattr(second, item.name, type(value or 0)(3 * number))
    merged = merge([first, second])
    for name, rule in merge_rules(CrawlStats).items():
        a, b, got = getattr(first, name), getattr(second, name), getattr(merged, name)
        assert got == expected_merge(rule, a, b), (name, rule, got)


def expected_merge(rule: Merge, a: Any, b: Any) -> Any:
    match rule:
        case Merge.SUM | Merge.COUNTS:
            return a + b
        case Merge.MAX:
            return max(a, b)
        case Merge.MIN:
            return min(a, b)
        case Merge.FIRST:
            return a
        case Merge.COMBINE:  # counts add, fractions average, other values are the first's, tables key by key
            return {"dns": {"lookups": 7, "hit_rate": pytest.approx(0.6), "mode": "a"}, "fetch": {"n": 1}}
    raise AssertionError(f"no expectation for {rule}: add one")


def test_merged_snapshots_sum_counts_and_gauges_and_keep_the_longest_run() -> None:
    merged = merge([partition(3, errors=Counter(timeout=1), runs=2), partition(5, errors=Counter(timeout=2, dns=1))])
    assert merged.stats.pages_fetched == 8 and merged.stats.errors == Counter(timeout=3, dns=1)
    assert merged.stats.runs == 2
    assert merged.gauges.frontier == 8 and merged.gauges.front_queues == [8, 2]
    assert merged.gauges.processing is None  # not measured in any partition: stays absent
    assert merged.elapsed == 5.0 and merged.time == 105.0 and merged.partitions == 2
    assert merged.stats.finished_at is None  # a crawl has finished when every partition has
    assert merge([partition(1, finished_at=7.0), partition(2, finished_at=9.0)]).stats.finished_at == 9.0


def test_a_snapshot_survives_msgpack_and_json() -> None:
    snapshot = partition(4, responses_by_status=Counter({200: 3, 404: 1}), sections={"recovery": {"runs": [1, 2]}})
    through_msgpack = Snapshot.from_builtins(msgspec.msgpack.decode(msgspec.msgpack.encode(snapshot.to_builtins())))
    through_json = Snapshot.from_builtins(json.loads(msgspec.json.encode(snapshot)))
    assert through_msgpack == snapshot and through_json == snapshot
    assert through_json.stats.responses_by_status[200] == 3  # keys back to ints


# -- sinks --------------------------------------------------------------------------------------


def test_telemetry_gives_every_sink_every_snapshot_with_its_recent_rate() -> None:
    first, second = RecordingSink(), RecordingSink()
    telemetry = Telemetry([first, second])
    telemetry.publish(partition(10))
    final = telemetry.close(partition(30))
    assert (
        [s.stats.pages_fetched for s in first.snapshots]
        == [10, 30]
        == [s.stats.pages_fetched for s in second.snapshots]
    )
    assert first.snapshots[-1] is final is telemetry.latest
    assert final is not None and final.pages_per_second_recent > 0
    assert first.closed == second.closed == 1
    assert telemetry.close(partition(40)) is final and first.closed == 1  # closed once


def test_a_failing_sink_stops_neither_the_crawl_nor_the_other_sinks(caplog: pytest.LogCaptureFixture) -> None:
    broken, working = BrokenSink(), RecordingSink()
    telemetry = Telemetry([broken, working])
    telemetry.publish(partition(1))
    telemetry.close(partition(2))
    assert len(working.snapshots) == 2 and broken.closed == working.closed == 1
    assert telemetry.failures == {0: 2}
    warnings = [record for record in caplog.records if "telemetry sink" in record.getMessage()]
    assert len(warnings) == 1 and "went away" in caplog.text  # logged once, with the reason


def test_log_lines_read_as_before_with_the_workers_of_a_multi_process_crawl() -> None:
    stream = io.StringIO()
    sink = LogSink(stream)
    one = dataclasses.replace(partition(12), gauges=Gauges(frontier=40, in_flight=3, active_hosts=5))
    sink.publish(one)
    sink.publish(merge([one, one]))
    lines = stream.getvalue().splitlines()
    assert lines[0] == "[   12.0s] pages 12 (0.0/s), frontier 40, in flight 3, hosts 5, errors 0"
    assert lines[1] == "[   12.0s] pages 24 (0.0/s), frontier 80, in flight 6, hosts 10, errors 0, workers 2"


def test_the_live_table_shows_the_progress_line() -> None:
    stream = io.StringIO()
    sink = display_sink(True, stream)
    assert isinstance(sink, TerminalSink)
    sink.publish(partition(7))
    sink.close()
    text = stream.getvalue()
    assert "pages per second average" in text and "front queues" in text and "[7, 1]" in text
    assert isinstance(display_sink(None, io.StringIO()), LogSink)  # not a terminal: log lines


def test_a_progress_line_has_the_same_fields_in_one_partition_and_merged() -> None:
    one = partition(3).progress_line()
    assert list(one) == LINE_KEYS
    assert list(merge([partition(3), partition(4)]).progress_line()) == LINE_KEYS
    with_processors = dataclasses.replace(partition(3), gauges=Gauges(processing=2, items=9)).progress_line()
    assert list(with_processors) == [*LINE_KEYS[:-1], "processing", "items", "workers"]


# -- crawls -------------------------------------------------------------------------------------


def crawl(server: RunningServer, out: Path, processes: int) -> tuple[Crawler, RecordingSink]:
    config = CrawlConfig(
        hosts_file=str(server.hosts_file), allow_private_addresses=True, min_delay=0.2, concurrency=8,
        processes=processes, progress_interval=0.3,
    )  # fmt: skip
    sink = RecordingSink()
    crawler = sink.crawler = Crawler(config, out=out, seeds=server.seeds, progress=False, telemetry=[sink])
    assert crawler.stats is None
    crawler.run()
    return crawler, sink


def progress_lines(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / PROGRESS_FILE).read_text().splitlines()]


@pytest.mark.parametrize("processes", [1, 2])
def test_a_crawl_publishes_at_its_cadence_and_ends_with_its_stats(
    served_small_web: RunningServer, tmp_path: Path, processes: int
) -> None:
    out = tmp_path / "crawl"
    crawler, sink = crawl(served_small_web, out, processes)
    snapshots = sink.snapshots
    assert len(snapshots) >= 3, sink
    assert sink.closed == 1
    pages = [snapshot.stats.pages_fetched for snapshot in snapshots]
    assert pages == sorted(pages) and pages[-1] > pages[0]
    # Crawler.stats is live in every mode: at each Snapshot it already says what the sink got
    assert sink.live_pages == pages
    final = snapshots[-1]
    assert final.partitions == processes
    document = json.loads((out / "stats.json").read_text())
    assert final.stats.to_dict() == document == crawler.stats.to_dict()  # type: ignore[union-attr]
    assert document["termination"] == "frontier-empty"
    if processes > 1:
        assert len(document["workers"]) == processes
        assert "worker-stats-missing" not in document["errors"]
    lines = progress_lines(out)
    assert [line["pages"] for line in lines] == pages
    assert all(list(line) == LINE_KEYS for line in lines)
    assert lines[-1]["workers"] == processes
