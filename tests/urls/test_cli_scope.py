"""The crawl command's scope options reach the configuration (config.json of the crawl directory)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_scope_options_end_up_in_the_config(tmp_path: Path) -> None:
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(f"http://site.test:{_closed_port()}/\n")
    config = tmp_path / "crawl.toml"
    config.write_text("robots_max_retries = 0\nexclude = ['from-file']\n")
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    result = subprocess.run(
        [
            sys.executable, "-m", "crawlspace", "crawl", str(seeds), "--out", str(out), "--config", str(config),
            "--resolve", "site.test=127.0.0.1", "--allow-private-addresses", "--no-progress", "--max-seconds", "20",
            "--scope", "domain", "--include", "/docs/", "--include", r"\.html$", "--exclude", "/private/",
            "--max-depth", "3", "--allowed-domain", "site.test",
        ],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    written = json.loads((out / "config.json").read_text())
    assert written["scope"] == "domain"
    assert written["include"] == ["/docs/", r"\.html$"]
    assert written["exclude"] == ["/private/"]  # the command line replaces the file's list
    assert written["max_depth"] == 3 and written["allowed_domains"] == ["site.test"]
    stats = json.loads((out / "stats.json").read_text())
    assert stats["robots_unreachable"] == 1 and stats["pages_fetched"] == 0


def test_bad_scope_is_a_one_line_error(tmp_path: Path) -> None:
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://site.test/\n")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    result = subprocess.run(
        [sys.executable, "-m", "crawlspace", "crawl", str(seeds), "--out", str(tmp_path / "o"), "--include", "a("],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert result.returncode != 0
    assert "include: invalid regular expression" in result.stderr and len(result.stderr.strip().splitlines()) == 1
