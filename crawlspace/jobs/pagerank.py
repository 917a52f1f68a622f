"""PageRank by power iteration, each round a Dask map-reduce over the partitioned edge list.

Input: the link graph job's `edges` (followed links and redirects; nofollow links carry no rank)
over its `nodes`. Setup, one map-reduce: each edge partition's out-degree counts, summed. Then per
round, with the rank vector r (N floats, the one array of N held by the driver):

    map     per edge partition: contributions c_p = bincount(dst, weights=r[src] / outdeg[src])
    reduce  c = sum of the c_p (a tree of pairwise sums)
    update  r' = (1 - d) v + d (c + (mass of dangling pages) w)

with damping d (0.85), teleport vector v uniform (or, personalized / topic-sensitive PageRank,
uniform over a seed set), and the rank of dangling pages (no followed out-link) spread by w = v:
uniformly for plain PageRank, as NetworkX and Haveliwala's topic-sensitive PageRank do. Stops when
the L1 change of r is below `tolerance` (1e-9) or after `max_rounds`. Edge partitions are read from
disk in each round (a compact .npy copy of each, memory-mapped: never all in one process).

Outputs: `ranks` (id, url, pagerank, indegree, outdegree) sorted by id; the summary gives rounds,
the last change, whether it converged, and the top pages.
"""

from __future__ import annotations

import functools
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import dask
import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from crawlspace.jobs import graph
from crawlspace.jobs.context import JobContext
from crawlspace.jobs.output import PendingOutput, output_path, parquet_files, read_summary, read_table

NAME = "pagerank"
DAMPING = 0.85
TOLERANCE = 1e-9
MAX_ROUNDS = 200
FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def followed_edges(path: str) -> tuple[IntArray, IntArray]:
    """The (src, dst) ids of one edge partition's links that carry rank."""
    table = pq.read_table(path, columns=["src", "dst", "nofollow"])
    keep = ~table.column("nofollow").to_numpy(zero_copy_only=False)
    src = table.column("src").to_numpy()[keep].astype(np.int64)
    dst = table.column("dst").to_numpy()[keep].astype(np.int64)
    return src, dst


def prepare(path: str, compact: str, nodes: int) -> tuple[IntArray, IntArray]:
    """Setup map of one edge partition: its followed (src, dst) pairs as one .npy array that every round
    maps from disk (never held), and its out- and in-degree counts."""
    src, dst = followed_edges(path)
    np.save(compact, np.stack([src, dst]))
    return np.bincount(src, minlength=nodes), np.bincount(dst, minlength=nodes)


def contributions(compact: str, share: FloatArray) -> FloatArray:
    """The map of one round: rank flowing along this partition's edges, by destination."""
    pairs = np.load(compact, mmap_mode="r")
    return np.bincount(pairs[1], weights=share[pairs[0]], minlength=share.size).astype(np.float64)


def _add(left: Any, right: Any) -> Any:
    return left + right


def tree_sum(parts: list[Any]) -> Any:
    """Pairwise sums of delayed arrays: depth log2(n), no task holding more than two partial vectors."""
    add = dask.delayed(_add)
    while len(parts) > 1:
        parts = [add(parts[i], parts[i + 1]) if i + 1 < len(parts) else parts[i] for i in range(0, len(parts), 2)]
    return parts[0]


def power_iteration(
    ctx: JobContext,
    paths: Sequence[str],
    nodes: int,
    scratch: Path,
    *,
    damping: float = DAMPING,
    teleport: FloatArray | None = None,
    tolerance: float = TOLERANCE,
    max_rounds: int = MAX_ROUNDS,
) -> tuple[FloatArray, IntArray, IntArray, int, float]:
    """The job as Dask rounds over edge partitions (Parquet files of src, dst, nofollow), with the rounds'
    compact copies of them in `scratch` (a directory every worker sees); (rank, outdegree, indegree,
    rounds, last L1 change)."""
    if nodes == 0:
        empty = np.zeros(0, np.int64)
        return np.zeros(0), empty, empty, 0, 0.0
    scratch.mkdir(parents=True, exist_ok=True)
    compact = [str(scratch / f"edges-{index}.npy") for index in range(len(paths))]
    setup = [dask.delayed(prepare)(path, target, nodes) for path, target in zip(paths, compact, strict=True)]
    (pairs,) = ctx.compute(setup)
    outdegree = functools.reduce(np.add, (pair[0] for pair in pairs), np.zeros(nodes, np.int64))
    indegree = functools.reduce(np.add, (pair[1] for pair in pairs), np.zeros(nodes, np.int64))
    v = np.full(nodes, 1.0 / nodes) if teleport is None else teleport / teleport.sum()
    dangling = outdegree == 0
    rank = v.copy()
    delta = float("inf")
    rounds = 0
    while rounds < max_rounds and delta >= tolerance:
        share = np.divide(rank, outdegree, out=np.zeros(nodes), where=~dangling)
        shared: Any = share
        if ctx.distributed:
            shared = ctx.scheduler.scatter(share, broadcast=True)
        (flow,) = ctx.compute(tree_sum([dask.delayed(contributions)(path, shared) for path in compact]))
        new = (1.0 - damping) * v + damping * (flow + rank[dangling].sum() * v)
        new /= new.sum()
        delta = float(np.abs(new - rank).sum())
        rank = new
        rounds += 1
    return rank, outdegree, indegree, rounds, delta


RANK_META = pd.DataFrame(
    {
        "id": pd.Series(dtype="int64"),
        "url": pd.Series(dtype=object),
        "pagerank": pd.Series(dtype="float64"),
        "indegree": pd.Series(dtype="int64"),
        "outdegree": pd.Series(dtype="int64"),
    }
)


RANK_SCHEMA = pa.schema(
    [("id", pa.int64()), ("url", pa.string()), ("pagerank", pa.float64()), ("indegree", pa.int64()),
     ("outdegree", pa.int64())]
)  # fmt: skip


def with_ranks(nodes: pd.DataFrame, rank: FloatArray, indegree: IntArray, outdegree: IntArray) -> pd.DataFrame:
    ids = nodes["id"].to_numpy()
    return pd.DataFrame(
        {"id": ids, "url": nodes["url"].to_numpy(), "pagerank": rank[ids], "indegree": indegree[ids],
         "outdegree": outdegree[ids]}
    )  # fmt: skip


def run(
    ctx: JobContext,
    pending: PendingOutput,
    *,
    damping: float = DAMPING,
    seeds: Sequence[str] = (),
    tolerance: float = TOLERANCE,
    max_rounds: int = MAX_ROUNDS,
) -> dict[str, Any]:
    nodes = int(read_summary(ctx.out, graph.NAME)["nodes"])
    paths = [str(path) for path in parquet_files(ctx.out, graph.NAME, "edges")]
    teleport = None
    if seeds:
        found = read_table(ctx.out, graph.NAME, "nodes", columns=["id", "url"], filters=[("url", "in", list(seeds))])
        if found.empty:
            raise ValueError(f"none of the {len(seeds)} seed URLs was fetched")
        teleport = np.zeros(nodes)
        teleport[found["id"].to_numpy()] = 1.0
    scratch = pending.path / "rounds"
    rank, outdegree, indegree, rounds, delta = power_iteration(
        ctx, paths, nodes, scratch, damping=damping, teleport=teleport, tolerance=tolerance, max_rounds=max_rounds
    )
    shutil.rmtree(scratch)
    nodes_frame = ctx.read_parquet(output_path(ctx.out, graph.NAME) / "nodes", columns=["id", "url"])
    ranks = nodes_frame.map_partitions(with_ranks, rank, indegree, outdegree, meta=RANK_META)
    (top_ids,) = ctx.compute(
        ranks.to_parquet(pending.table("ranks"), write_index=False, compute=False, schema=RANK_SCHEMA)
    )
    del top_ids
    best = np.lexsort((np.arange(nodes), -rank))[:10]
    top_urls = read_table(ctx.out, graph.NAME, "nodes", columns=["id", "url"], filters=[("id", "in", best.tolist())])
    url_of = dict(zip(top_urls["id"], top_urls["url"], strict=True))
    return {
        "nodes": nodes,
        "damping": damping,
        "personalized_seeds": sorted(seeds),
        "rounds": rounds,
        "last_l1_change": delta,
        "converged": delta < tolerance,
        "dangling_nodes": int((outdegree == 0).sum()),
        "top": [{"url": url_of[int(node)], "pagerank": float(rank[node])} for node in best],
    }
