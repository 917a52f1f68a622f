"""The CLI contract of issue 2: clear one-line errors for bad input, exit codes, invalid seeds reported."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import run_cli as run_crawlspace


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_crawlspace(*args, timeout=60)


def test_missing_seeds_file(tmp_path: Path) -> None:
    result = run_cli("crawl", str(tmp_path / "nope.txt"), "--out", str(tmp_path / "out"))
    assert result.returncode != 0
    assert "seeds file" in result.stderr and "does not exist" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_unknown_config_key_names_closest(tmp_path: Path) -> None:
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://example.test/\n")
    config = tmp_path / "crawl.toml"
    config.write_text("min_dealy = 0.5\n")
    result = run_cli("crawl", str(seeds), "--out", str(tmp_path / "out"), "--config", str(config))
    assert result.returncode != 0
    assert "unknown key 'min_dealy'" in result.stderr
    assert "did you mean 'min_delay'" in result.stderr


@pytest.mark.parametrize(
    ("content", "expected"),
    [("max_pages = 'ten'\n", "max_pages"), ("min_delay = -1\n", "min_delay"), ("not toml [\n", "invalid TOML")],
)
def test_invalid_config_values(tmp_path: Path, content: str, expected: str) -> None:
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://example.test/\n")
    config = tmp_path / "crawl.toml"
    config.write_text(content)
    result = run_cli("crawl", str(seeds), "--out", str(tmp_path / "out"), "--config", str(config))
    assert result.returncode != 0
    assert expected in result.stderr


def test_unreadable_config(tmp_path: Path) -> None:
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://example.test/\n")
    result = run_cli("crawl", str(seeds), "--out", str(tmp_path / "o"), "--config", str(tmp_path / "missing.toml"))
    assert result.returncode != 0
    assert "config file" in result.stderr


def test_output_dir_is_a_file(tmp_path: Path) -> None:
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://example.test/\n")
    blocker = tmp_path / "file"
    blocker.write_text("x")
    result = run_cli("crawl", str(seeds), "--out", str(blocker / "out"))
    assert result.returncode != 0
    assert "not writable" in result.stderr


def test_invalid_seed_lines_reported_with_line_numbers(tmp_path: Path) -> None:
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("# comment\nhttp://[bad\n\nftp://example.test/\n")
    result = run_cli("crawl", str(seeds), "--out", str(tmp_path / "out"))
    assert result.returncode != 0  # nothing valid left
    assert f"{seeds}:2:" in result.stderr
    assert f"{seeds}:4:" in result.stderr
    assert "no valid seed URL" in result.stderr


def test_bad_resolve_flag(tmp_path: Path) -> None:
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://example.test/\n")
    result = run_cli("crawl", str(seeds), "--out", str(tmp_path / "out"), "--resolve", "nonsense")
    assert result.returncode != 0
    assert "--resolve expects HOST=IP" in result.stderr


def test_demo_crawls_the_simulated_web_and_reports_the_servers_view(tmp_path: Path) -> None:
    """`crawlspace demo`, the README's first command, on a small web: everything reachable and allowed is
    fetched, politely, and the report's figures are the crawl's own (stats.json) and the server's."""
    import json
    import re

    out = tmp_path / "demo"
    result = run_crawlspace("demo", "--hosts", "25", "--seed", "7", "--out", str(out), "--no-progress", timeout=150)
    assert result.returncode == 0, result.stderr[-2000:]
    summary = json.loads((out / "demo-summary.json").read_text())
    stats = json.loads((out / "stats.json").read_text())
    view = summary["server_view"]
    assert view["expected_urls"] > 50
    assert view["fetched_expected"] == view["expected_urls"] and view["missing"] == 0
    assert view["robots_violations"] == view["fetched_twice"] == view["overlapping_requests"] == 0
    assert view["delay_violations"] == 0
    assert summary["pages"] == stats["pages_fetched"] >= view["expected_urls"]
    report = re.search(r"crawled (\d+) pages in ([\d.]+) s \(([\d.]+) pages/s\)", result.stdout)
    assert report is not None, result.stdout
    assert int(report[1]) == stats["pages_fetched"]
    assert abs(float(report[2]) - (stats["finished_at"] - stats["started_at"])) < 0.1
    assert (out / "warc").is_dir() and any((out / "warc").glob("*.warc.gz"))
    jobs = summary["jobs"]  # the batch jobs after the crawl, judged against the web's truth
    assert jobs["exact_clusters_matching_truth"] == jobs["exact_clusters_true"] == jobs["exact_clusters_found"]
    assert jobs["revisits_agree_with_bodies"]
    assert jobs["near_copies_clustered_with_original"] == jobs["near_copies_fetched"]
    assert len(jobs["top_pages"]) == 5 and jobs["top_pages"][0]["url"] in result.stdout
    graph = summary["graph"]  # the connectivity server over the same pages and edges as the link graph job
    assert (graph["nodes"], graph["arcs"]) == (jobs["graph_nodes"], jobs["graph_edges"])
    most = graph["most_linked"]
    assert len(most) == 5 and most[0]["in_links"] >= most[-1]["in_links"] > 0
    assert len(graph["in_links_of_most_linked"]) == min(5, most[0]["in_links"])
    assert graph["in_links_not_shown"] == most[0]["in_links"] - len(graph["in_links_of_most_linked"])
    assert f"links to {most[0]['url']}" in result.stdout and graph["in_links_of_most_linked"][0] in result.stdout
    searches = summary["search"]  # three queries on the index, from a top page's title
    assert len(searches) == 3 and all(search["results"] for search in searches)
    assert all(search["page_rank"] is not None for search in searches)  # each query matches the page it came from
    assert all(f"search {search['query']}:" in result.stdout for search in searches)
