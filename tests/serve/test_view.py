"""The dashboard's model: progress tailing, the outcome table, table figures, the crawl's state."""

from __future__ import annotations

import json
from pathlib import Path

from crawlspace.serve.view import SIZE_BUCKETS, CostRuled, CrawlView, ProgressTail, outcome_rows, summarize
from crawlspace.store.crawltable import FetchInfo


def test_the_tail_reads_only_complete_new_lines(tmp_path: Path) -> None:
    path = tmp_path / "progress.jsonl"
    tail = ProgressTail(path, keep=3)
    tail.read()
    assert tail.latest is None
    path.write_text('{"pages": 1}\n{"pages": 2}\n{"pag')
    tail.read()
    assert [line["pages"] for line in tail.lines] == [1, 2]
    with path.open("a") as handle:
        handle.write('es": 3}\nnot json\n{"pages": 4}\n{"pages": 5}\n')
    tail.read()
    assert [line["pages"] for line in tail.lines] == [3, 4, 5]  # the torn line completed; bad one skipped
    path.write_text('{"pages": 9}\n')  # replaced by a shorter file
    tail.read()
    assert [line["pages"] for line in tail.lines] == [9]


def test_outcomes_are_shares_of_download_attempts_most_frequent_first() -> None:
    rows = outcome_rows(
        {
            "responses_by_status": {"200": 80, "404": 6, "302": 3},
            "errors": {"timeout": 2, "dns-failure": 1},
            "robots_excluded": 8,
            "duplicate_content": 5,
            "duplicate_urls": 400,
            "filtered": {"scheme": 7},
        }
    )
    attempts = [row for row in rows if row.share is not None]
    assert [row.outcome for row in attempts] == [
        "200 OK", "excluded by robots.txt", "404 Not Found", "302 Found", "timeout", "dns-failure"
    ]  # fmt: skip
    assert attempts[0].share == 0.8 and sum(row.share for row in attempts if row.share) == 1.0
    assert [(row.outcome, row.count, row.kind) for row in rows[len(attempts) :]] == [
        ("duplicate content (exact)", 5, "event"),
        ("duplicate URLs", 400, "event"),
        ("filtered: scheme", 7, "event"),
    ]
    assert outcome_rows({}) == []


def _fetch(status: int, length: int, duration: float, content_type: str | None = "text/html") -> FetchInfo:
    return FetchInfo(
        status=status, outcome="x", fetched=1.0, fetches=1, changes=0, first_fetched=1.0,
        duration=duration, length=length, content_type=content_type,
    )  # fmt: skip


def test_table_figures_per_host_and_histograms() -> None:
    figures = summarize(
        [
            ("http://a.test/1", _fetch(200, 500, 0.004, "text/html; charset=utf-8")),
            ("http://a.test/2", _fetch(404, 2000, 0.2)),
            ("http://b.test:8080/", _fetch(0, 0, 10.0, None)),
        ]
    )
    a, b = figures.hosts["a.test"], figures.hosts["b.test:8080"]
    assert (a.pages, a.ok, a.client_errors, a.bytes) == (2, 1, 1, 2500)
    assert (b.pages, b.failures, b.to_dict()["errors"]) == (1, 1, 1)
    assert figures.content_types == {"text/html": 2}  # the failure has no response, no type
    assert figures.size_counts[0] == 1 and figures.size_counts[1] == 1 and sum(figures.size_counts) == 2
    assert len(figures.size_counts) == len(SIZE_BUCKETS)
    assert figures.duration_counts[0] == 1 and sum(figures.duration_counts) == 2


def test_the_state_of_a_crawl_from_its_files(tmp_path: Path) -> None:
    now = [1000.0]
    view = CrawlView(tmp_path, clock=lambda: now[0])
    view.refresh()
    assert view.state() == "starting"
    progress = tmp_path / "progress.jsonl"
    progress.write_text(json.dumps({"time": 999.0, "pages": 5}) + "\n")
    view.refresh()
    assert view.state() == "running" and view.counts()["pages"] == 5
    with progress.open("a") as handle:
        handle.write(json.dumps({"time": 1000.5, "pages": 6, "paused": 1}) + "\n")
    view.refresh()
    assert view.state() == "paused"
    with progress.open("a") as handle:  # two partitions, one of which has not yet heard the pause
        handle.write(json.dumps({"time": 1000.6, "pages": 7, "paused": 1, "workers": 2}) + "\n")
    view.refresh()
    assert view.state() == "running"
    with progress.open("a") as handle:
        handle.write(json.dumps({"time": 1000.7, "pages": 7, "paused": 2, "workers": 2}) + "\n")
    view.refresh()
    assert view.state() == "paused"
    now[0] = 1100.0
    assert view.state() == "not reporting"  # killed: no report for a while and no stats.json
    (tmp_path / "stats.json").write_text(json.dumps({"finished_at": 1000.0, "pages_fetched": 7, "termination": "x"}))
    view.refresh()
    assert view.state() == "finished" and view.counts()["pages"] == 7
    assert view.hosts().rows == [] and view.page("http://a.test/") is None  # no table: nothing, not an error


def _progress(path: Path, *lines: dict[str, object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_each_partition_has_its_row_and_its_own_state(tmp_path: Path) -> None:
    view = CrawlView(tmp_path, clock=lambda: 1000.0)
    _progress(tmp_path / "progress.jsonl", {"time": 999.0, "pages": 30})
    _progress(tmp_path / "workers/0/progress.jsonl", {"time": 999.5, "pages": 20, "frontier": 7, "paused": 1})
    _progress(tmp_path / "workers/1/progress.jsonl", {"time": 990.0, "pages": 10, "pages_per_second_recent": 2.5})
    (tmp_path / "workers/1/stats.json").write_text(json.dumps({"finished_at": 990.5, "pages_fetched": 10}))
    view.refresh()
    rows = view.overview()["partitions"]
    assert [(row["partition"], row["state"], row["pages"]) for row in rows] == [(0, "paused", 20), (1, "finished", 10)]
    assert rows[0]["frontier"] == 7 and rows[1]["pages_per_second_recent"] == 2.5


def test_the_caches_hit_rates_come_from_the_latest_report(tmp_path: Path) -> None:
    view = CrawlView(tmp_path, clock=lambda: 1000.0)
    line = {"time": 999.0, "dns_cache_hits": 30, "dns_cache_misses": 10, "robots_cache_hits": 0}
    _progress(tmp_path / "progress.jsonl", line)
    view.refresh()
    caches = view.overview()["caches"]
    assert caches["dns"] == {"hits": 30, "misses": 10, "hit_rate": 0.75}
    assert caches["robots"] == {"hits": 0, "misses": 0, "hit_rate": None}  # nothing asked: no rate, not 0%


def test_the_partitions_host_reports_are_merged_into_the_hosts(tmp_path: Path) -> None:
    report = {"format": 1, "time": 1000.0, "hosts": 3, "listed": 1, "back_queued": 9, "front_queued": 4}
    row = {"host": "a.test", "queued": 9, "next_contact_in": 2.5, "delay": 2.5, "delay_cause": "crawl-delay"}
    (tmp_path / "workers/0").mkdir(parents=True)
    (tmp_path / "workers/0/hosts.json").write_text(
        json.dumps(report | {"rows": [row], "by_cause": {"crawl-delay": 1}, "partition": 0})
    )
    (tmp_path / "workers/1").mkdir(parents=True)
    other = {"host": "b.test", "queued": 1, "delay_cause": "backoff", "next_contact_in": 30}
    (tmp_path / "workers/1/hosts.json").write_text(
        json.dumps(report | {"time": 990.0, "rows": [other], "by_cause": {"backoff": 1, "crawl-delay": 2}})
    )
    (tmp_path / "hosts.json").write_text('{"format": 1, "rows": [')  # torn: skipped, not fatal
    view = CrawlView(tmp_path)
    hosts = {host["host"]: host for host in view.hosts().rows}  # no crawl table yet: the live rows alone
    assert hosts["a.test"]["pages"] == 0 and hosts["a.test"]["live"]["next_contact"] == 1002.5
    assert hosts["a.test"]["live"]["partition"] == 0 and hosts["b.test"]["live"]["delay_cause"] == "backoff"
    summary = view.host_files().summary()
    assert summary["by_cause"] == {"crawl-delay": 3, "backoff": 1}
    assert (summary["hosts"], summary["back_queued"], summary["front_queued"], summary["time"]) == (6, 18, 8, 990.0)


class FakeNodes:
    def __init__(self, status: dict[str, object]) -> None:
        self.status = status
        self.reads = 0

    def read(self) -> dict[str, object]:
        self.reads += 1
        return self.status


def test_a_cluster_nodes_rows_and_a_lost_redis(tmp_path: Path) -> None:
    nodes = FakeNodes(
        {
            "nodes": [
                {"node": 0, "state": "running", "pages": 12, "pages/s": 3.0, "redis": "ok"},
                {"node": 1, "state": "not-seen"},
            ]
        }
    )
    view = CrawlView(tmp_path, nodes=nodes)
    view.refresh()
    overview = view.overview()
    assert [(row["node"], row["state"], row["pages"]) for row in overview["nodes"]] == [
        (0, "running", 12),
        (1, "not-seen", 0),
    ]
    assert overview["nodes"][0]["pages_per_second_recent"] == 3.0 and overview["nodes_error"] is None
    nodes.status = {"nodes": [], "error": "redis://:***@127.0.0.1:1/0: cannot reach Redis"}
    assert view.overview()["nodes_error"].endswith("cannot reach Redis")
    assert CrawlView(tmp_path).overview()["nodes"] == []  # not a cluster crawl


def test_the_host_file_is_written_no_sooner_than_its_cost_allows(tmp_path: Path) -> None:
    from crawlspace.crawl.hostfile import HostFile, read_host_files
    from crawlspace.frontier import Frontier, FrontierEntry

    frontier = Frontier()
    frontier.add_many(FrontierEntry(f"http://h{n}.test/", 0) for n in range(5))
    frontier.acquire()
    now = [0.0]
    writer = HostFile(tmp_path / "hosts.json", frontier, limit=3, monotonic=lambda: now[0], clock=lambda: 50.0)
    assert writer.maybe_write() and not writer.maybe_write()  # within the minimum interval
    now[0] = 1.0
    assert writer.maybe_write() and writer.writes == 2
    (report,) = read_host_files(tmp_path).reports
    assert (report["time"], report["hosts"], report["listed"], report["back_queued"]) == (50.0, 5, 3, 4)


def test_a_read_is_kept_for_good_when_finished_and_a_hundred_times_its_cost_when_live() -> None:
    now = [0.0]
    reads: list[float] = []
    kept: CostRuled[int] = CostRuled(lambda: now[0], keep=2)

    def read() -> int:
        reads.append(now[0])
        now[0] += 0.05  # the read takes 50 ms: kept 5 s on a live crawl
        return len(reads)

    assert kept.get("a", read, live=True) == 1
    now[0] = 4.0
    assert kept.get("a", read, live=True) == 1
    now[0] = 5.1
    assert kept.get("a", read, live=True) == 2 and reads == [0.0, 5.1]
    now[0] = 1000.0
    assert kept.get("a", read, live=False) == 2  # finished: nothing changes any more
    kept.get("b", read, live=False)
    kept.get("c", read, live=False)  # the oldest one used, a, is dropped
    assert kept.get("a", read, live=False) == 5 and len(reads) == 5
