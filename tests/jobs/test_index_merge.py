"""The index job's merges on a crawl: a kill -9 in the middle of a merge leaves the previous index whole
and searchable, the merge run again leaves one segment per shard ranking exactly as a rebuild, and
`crawlspace jobs` hands its index options (--tier-cutoff) to the index job."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from crawlspace.index import Index
from crawlspace.index.layout import Manifest
from crawlspace.jobs import run
from crawlspace.simweb import SimWeb
from tests.conftest import REPO, run_cli
from tests.jobs.test_incremental_index import queries_of

pytestmark = pytest.mark.slow

KILLED_IN_A_MERGE = """
import os, signal, sys
from crawlspace.index import merge
from crawlspace.jobs import run

original = merge.merge_segments

def merge_then_die(*args, **kwargs):
    result = original(*args, **kwargs)  # one merged segment written: killed before the output is swapped in
    os.kill(os.getpid(), signal.SIGKILL)
    return result

merge.merge_segments = merge_then_die
run(sys.argv[1], only=["index"], options={"index": {"shards": 2, "segment_docs": 1000, "merge": True}})
"""


def results(index: Index, queries: list[str]) -> list[list[tuple[str, float]]]:
    return [[(hit.url, hit.score) for hit in index.search(query, 20).hits] for query in queries]


def same(mine: list[list[tuple[str, float]]], theirs: list[list[tuple[str, float]]]) -> None:
    assert [[url for url, _ in hits] for hits in mine] == [[url for url, _ in hits] for hits in theirs]
    for a, b in zip(mine, theirs, strict=True):
        for (_, x), (_, y) in zip(a, b, strict=True):
            assert x == pytest.approx(y, rel=1e-9, abs=1e-9)


def test_a_merge_killed_leaves_the_index_and_a_merge_ranks_as_a_rebuild(tmp_path: Path) -> None:
    from tests.jobs.test_jobs_e2e import crawl
    from tests.store.test_duplicates_e2e import WEB

    directory, _ = crawl(SimWeb.generate(WEB.replace(hosts=6)), tmp_path, 1)
    built = run(directory, only=["index"], options={"index": {"shards": 2, "segment_docs": 10}})["index"]
    output = directory / "jobs" / "index"
    assert built["segments"] > 4
    with Index(output) as index:
        queries = queries_of(index)
        before = results(index, queries)
    generation = Manifest.read(output).generation

    env = dict(os.environ, PYTHONPATH=str(REPO))
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_IN_A_MERGE, str(directory)], env=env, capture_output=True, timeout=300
    )
    assert killed.returncode == -9, killed.stderr
    abandoned = [p for p in (directory / "jobs").iterdir() if p.name.startswith(".index.") and p.is_dir()]
    assert abandoned and any(abandoned[0].rglob("*.seg"))  # the merge had begun writing
    with Index(output) as index:  # the previous output, untouched
        assert Manifest.read(output).generation == generation
        assert len(index.segments) == built["segments"]
        same(results(index, queries), before)

    done = run_cli("index", str(directory), "--shards", "2", "--merge", timeout=300)
    assert done.returncode == 0, done.stderr
    merged: dict[str, Any] = json.loads(done.stdout)["index"]
    assert merged["mode"] == "incremental" and merged["written"] == 0
    assert merged["segments"] == 2 and merged["merged_segments"] == built["segments"]
    assert merged["masked_on_disk"] == 0 and merged["documents"] == built["documents"]
    assert not any(p.exists() for p in abandoned)  # the killed run's directory was cleared
    rebuilt = run(directory, out=tmp_path / "rebuilt", only=["index"], options={"index": {"shards": 2}})["index"]
    with Index(output) as index, Index(tmp_path / "rebuilt" / "jobs" / "index") as full:
        mine = results(index, queries)
        same(mine, before)
        same(mine, results(full, queries))
        assert dict(index.stats.items()) == dict(full.stats.items())
    assert rebuilt["documents"] == merged["documents"]

    tiered = run_cli(
        "jobs", str(directory), "--only", "graph,pagerank,index", "--shards", "2", "--tier-cutoff", "1.0", timeout=300
    )
    assert tiered.returncode == 0, tiered.stderr
    summary = json.loads(tiered.stdout)["index"]
    assert summary["tier_cutoff"] == 1.0 and len(summary["tiers"]) == 2
    assert summary["mode"] == "the previous index has tier cutoff None, not 1.0"
