"""`crawlspace evaluate-refresh` end to end, short: every policy spends the same budget on the same web,
and the figures, the curve and the files are there and consistent."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from tests.conftest import run_cli

pytestmark = pytest.mark.slow


def test_the_evaluation_runs_each_policy_at_one_budget_and_writes_its_figures(tmp_path: Path) -> None:
    out = tmp_path / "eval"
    run = run_cli(
        "evaluate-refresh", "--out", str(out), "--policies", "optimal,uniform", "--seconds", "14", "--warmup", "6",
        "--hosts", "12", "--max-rate", "10", timeout=240,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    rows = {row["policy"]: row for row in summary["table"]}
    assert set(rows) == {"optimal", "uniform"}
    fetches = [rows[name]["fetches"] for name in rows]
    assert min(fetches) > 0.8 * max(fetches)  # the same budget, spent by both (work-conserving feed)
    assert max(fetches) <= 10 * 8 * 1.2  # max_rate x the measured window, at most
    for row in rows.values():
        assert 0 < row["freshness"] <= 1 and row["age_s"] >= 0 and row["pages"] > 0
    assert set(summary["margins"]) == {"optimal - uniform"}
    assert summary["margins"]["optimal - uniform"] == pytest.approx(
        rows["optimal"]["freshness"] - rows["uniform"]["freshness"], abs=1e-3
    )
    with (out / "table.csv").open() as handle:
        assert [row["policy"] for row in csv.DictReader(handle)] == ["optimal", "uniform"]
    assert (out / "freshness.png").stat().st_size > 10_000
    assert "optimal - uniform:" in run.stdout
