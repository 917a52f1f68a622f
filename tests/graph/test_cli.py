"""`crawlspace graph`: a Graphviz digraph whose labels survive hostile URLs; the group costs other commands nothing."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
from click.testing import CliRunner

from crawlspace.cli import main
from crawlspace.graph import write_link_graph
from crawlspace.graph.cli import dot_label

HOSTILE = 'http://a.test/q"uote\\back\nline];n0->n1;"'


def test_labels_are_escaped() -> None:
    assert dot_label('http://a.test/"x"') == 'http://a.test/\\"x\\"'
    assert dot_label("http://a.test/\\N") == "http://a.test/\\\\N"  # not DOT's node-name escape
    assert dot_label("http://a.test/\n\x1b") == "http://a.test/\\\\x0a\\\\x1b"


def test_a_neighbourhood_as_dot(tmp_path: Path) -> None:
    urls = ["http://a.test/", HOSTILE, "http://a.test/far", "http://b.test/"]
    write_link_graph(tmp_path, urls, np.array([0, 1, 2, 3]), np.array([1, 2, 3, 0]))  # a cycle 0 1 2 3
    result = CliRunner().invoke(main, ["graph", str(tmp_path), "--hops", "2", "http://a.test/", "--dot"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "digraph links {" and lines[-1] == "}"
    labels = [line for line in lines if "label=" in line]
    assert len(labels) == 3  # the start, one hop, two hops; b.test is three away
    for line in labels:  # every quote but the two delimiters is escaped, so each label is one string
        assert re.fullmatch(r'  n\d+ \[label="(?:[^"\\]|\\.)*"\];', line), line
    assert '\\"uote\\\\back\\\\x0aline];n0->n1;\\"' in result.output
    arcs = [line for line in lines if "->" in line and "label" not in line]
    assert len(arcs) == 2  # 0 -> 1 and 1 -> 2; not 2 -> 3, which leaves the neighbourhood


def test_other_commands_do_not_load_numba_or_dask(tmp_path: Path) -> None:
    """The graph group is registered in every `crawlspace` run; its imports wait for its commands, and a query
    needs numba but not Dask."""
    code = "import sys, crawlspace.cli; print(sorted(m for m in ('numba', 'dask') if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
    write_link_graph(tmp_path, ["http://a.test/", "http://b.test/"], np.array([0]), np.array([1]))
    query = (
        "import sys; from click.testing import CliRunner; from crawlspace.cli import main; "
        f"result = CliRunner().invoke(main, ['graph', {str(tmp_path)!r}, '--in', 'http://b.test/']); "
        "print(result.output.strip(), sorted(m for m in ('numba', 'dask') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", query], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "http://a.test/ ['numba']"
    result = subprocess.run([sys.executable, "-m", "crawlspace", "graph", "--help"], capture_output=True, text=True)
    assert result.returncode == 0 and "build" in result.stdout and "query" in result.stdout


def test_a_neighbourhood_stops_at_its_limit(tmp_path: Path) -> None:
    urls = [f"http://a.test/{i}" for i in range(5)]
    write_link_graph(tmp_path, urls, np.array([0, 0, 0, 0]), np.array([1, 2, 3, 4]))
    result = CliRunner().invoke(main, ["graph", str(tmp_path), "--hops", "1", "http://a.test/0", "--limit", "3"])
    assert result.exit_code == 0
    assert len(result.stdout.splitlines()) == 3 and "stopped at --limit 3 pages" in result.stderr
