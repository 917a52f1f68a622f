"""Shared fixtures: a small simulated web served from a subprocess, and a helper to run the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from crawlspace.simweb import RunningServer, SimWeb, SimWebConfig, serve_in_background

REPO = Path(__file__).resolve().parents[1]


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run(
        [sys.executable, "-m", "crawlspace", *args], capture_output=True, text=True, timeout=timeout, env=env
    )


SMALL_WEB = SimWebConfig(
    hosts=40, seed=11, mean_pages_per_host=8.0, max_pages_per_host=80, robots_crawl_delay=0.1, include_trap=False
)


@pytest.fixture(scope="module")
def small_web() -> SimWeb:
    return SimWeb.generate(SMALL_WEB)


@pytest.fixture
def served_small_web(small_web: SimWeb, tmp_path: Path) -> Iterator[RunningServer]:
    with serve_in_background(small_web, tmp_path / "simweb", seeds=5) as running:
        yield running
