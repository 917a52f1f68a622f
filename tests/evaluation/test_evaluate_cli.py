"""`crawlspace evaluate` from the command line: options reach the evaluation, outputs are written."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from tests.conftest import run_cli


def test_evaluate_command_writes_table_csv_and_plots(tmp_path: Path) -> None:
    out = tmp_path / "eval"
    result = run_cli(
        "evaluate", "--out", str(out), "--policies", "bfs,opic", "--hosts", "30", "--seed", "5",
        "--concurrency", "2", "--back-queues", "2", "--topic", "alpha,beta gamma",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "ranking at 20% crawled:" in result.stdout
    assert result.stdout.splitlines()[1].split()[0] == "bfs"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["topic"] == ["alpha", "beta", "gamma"]
    assert summary["setup"]["web"]["hosts"] == 30 and summary["setup"]["back_queues"] == 2
    assert summary["crawl"]["opic"]["back_queues"] == 2
    assert {row["policy"] for row in csv.DictReader((out / "curves.csv").open())} == {"bfs", "opic"}
    assert (out / "pagerank.png").stat().st_size > 10_000
    assert (out / "harvest.png").exists()


def test_evaluate_rejects_unknown_policies(tmp_path: Path) -> None:
    result = run_cli("evaluate", "--out", str(tmp_path), "--policies", "bfs,pagerenk")
    assert result.returncode == 2
    assert "pagerenk" in result.stderr
