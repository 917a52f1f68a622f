"""The dashboard's model: progress tailing, the outcome table, table figures, the crawl's state."""

from __future__ import annotations

import json
from pathlib import Path

from crawlspace.serve.view import SIZE_BUCKETS, CrawlView, ProgressTail, outcome_rows, summarize
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
    now[0] = 1100.0
    assert view.state() == "not reporting"  # killed: no report for a while and no stats.json
    (tmp_path / "stats.json").write_text(json.dumps({"finished_at": 1000.0, "pages_fetched": 7, "termination": "x"}))
    view.refresh()
    assert view.state() == "finished" and view.counts()["pages"] == 7
    assert view.hosts() == [] and view.page("http://a.test/") is None  # no table: nothing, not an error
