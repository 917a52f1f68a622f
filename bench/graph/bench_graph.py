"""crawlspace.graph on cnr-2000: bits per link, build time, decoding and query speed, side by side with a numpy CSR
baseline (64- and 32-bit ids) and with WebGraph's own figures from the `.properties` files.

    .venv/bin/python bench/graph/bench_graph.py [--data DIR] [--queries 20000] [--pure-python-nodes 20000] [--json]

One core (numba's kernels and numpy's sorts are single-threaded). Compilation is timed apart (the first run
after an install compiles; later runs load numba's cache). `--pure-python-nodes N` also runs the same kernels
with NUMBA_DISABLE_JIT=1 (plain Python) on the subgraph of cnr-2000's first N nodes, in a child process: the
measurement behind using numba at all.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from crawlspace.graph import BVGraph, CsrGraph, write_bvgraph
from crawlspace.graph.properties import read_properties

DATA = Path("/work/shared/conformance/webgraph")


def best_of(repeat: int, work: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def latencies_us(query: Callable[[Any], object], arguments: list[Any]) -> tuple[float, float]:
    """p50 and p99 of one call per argument, in µs."""
    times = []
    for argument in arguments:
        start = time.perf_counter_ns()
        query(argument)
        times.append(time.perf_counter_ns() - start)
    times.sort()
    return times[len(times) // 2] / 1000, times[int(len(times) * 0.99)] / 1000


def compile_seconds() -> float:
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as directory:
        graph = CsrGraph.from_lists([[1, 2, 3, 4, 5], [0, 2, 3, 4, 5], [], [1]] * 10)
        write_bvgraph(Path(directory) / "warm", graph)
        loaded = BVGraph.load(Path(directory) / "warm")
        loaded.successors(5)
        loaded.to_csr()
    return time.perf_counter() - start


def measure(data: Path, queries: int) -> dict[str, object]:
    results: dict[str, object] = {"compile_or_cache_load_s": round(compile_seconds(), 2)}
    successors = BVGraph.load(data / "cnr-2000")
    csr = successors.to_csr()
    predecessors_csr = BVGraph.load(data / "cnr-2000-t").to_csr()
    nodes, arcs = csr.num_nodes, csr.num_arcs
    results["nodes"], results["arcs"] = nodes, arcs

    with tempfile.TemporaryDirectory() as directory:
        out = Path(directory)
        # the build a crawl's job does: arcs in no order -> sorted CSR -> transpose -> two BV graphs on disk
        order = np.random.default_rng(0).permutation(arcs)
        sources = np.repeat(np.arange(nodes, dtype=np.int64), csr.outdegrees())[order]
        targets = csr.successors.astype(np.int64)[order]
        stages: dict[str, float] = {}
        start = time.perf_counter()
        built = CsrGraph.from_arcs(nodes, sources, targets)
        stages["arcs_to_csr_s"] = time.perf_counter() - start
        start = time.perf_counter()
        transposed = built.transpose()
        stages["transpose_s"] = time.perf_counter() - start
        compression = read_properties(data / "cnr-2000.properties").compression
        start = time.perf_counter()
        ours = write_bvgraph(out / "cnr-2000", built, compression)
        stages["encode_graph_s"] = time.perf_counter() - start
        start = time.perf_counter()
        ours_t = write_bvgraph(out / "cnr-2000-t", transposed, compression)
        stages["encode_transpose_s"] = time.perf_counter() - start
        stages["build_total_s"] = sum(stages.values())
        results["build"] = {key: round(value, 3) for key, value in stages.items()}
        assert built == csr and transposed == predecessors_csr

        sizes = {}
        for name, written in (("cnr-2000", ours), ("cnr-2000-t", ours_t)):
            webgraph = read_properties(data / f"{name}.properties").values
            sizes[name] = {
                "crawlspace_bits_per_link": float(written["bitsperlink"]),
                "webgraph_bits_per_link": float(webgraph["bitsperlink"]),
                "crawlspace_graph_bytes": (out / f"{name}.graph").stat().st_size,
                "webgraph_graph_bytes": (data / f"{name}.graph").stat().st_size,
                "crawlspace_offsets_bytes": (out / f"{name}.offsets").stat().st_size,
            }
        loaded = BVGraph.load(out / "cnr-2000")
        sizes["in_memory_bytes[bv graph + elias-fano offsets]"] = loaded.words.nbytes + loaded.offsets.nbytes
        sizes["in_memory_bytes[csr int64 pointers + int32 ids]"] = csr.pointers.nbytes + csr.successors.nbytes
        sizes["csr_64_bits_per_link"] = round(64 * (nodes + 1 + arcs) / arcs, 3)
        sizes["csr_32_bits_per_link"] = round(32 * (nodes + 1 + arcs) / arcs, 3)
        results["size"] = sizes
        encode_seconds = best_of(3, lambda: write_bvgraph(out / "again", csr, compression))
        results["encode_ns_per_arc"] = round(encode_seconds / arcs * 1e9, 1)

    for name in ("cnr-2000", "cnr-2000-t"):
        graph = BVGraph.load(data / name) if name == "cnr-2000-t" else successors
        seconds = best_of(3, graph.to_csr)
        results[f"sequential_decode_ns_per_arc[{name}]"] = round(seconds / arcs * 1e9, 1)
    results["load_with_verification_s"] = round(best_of(3, lambda: BVGraph.load(data / "cnr-2000")), 3)
    results["load_trusting_offsets_s"] = round(best_of(3, lambda: BVGraph.load(data / "cnr-2000", verify=False)), 3)

    rng = np.random.default_rng(1)
    uniform = rng.integers(0, nodes, queries).tolist()
    degrees = csr.outdegrees()
    mean = degrees.mean()
    average = np.flatnonzero(np.abs(degrees - mean) <= 1)
    typical = rng.choice(average, queries).tolist()
    successors.successors(0)
    p50, p99 = latencies_us(successors.successors, uniform)
    results["random_access_us[uniform nodes] p50/p99"] = [round(p50, 2), round(p99, 2)]
    p50, p99 = latencies_us(successors.successors, typical)
    results[f"random_access_us[outdegree {mean:.1f} +- 1] p50/p99"] = [round(p50, 2), round(p99, 2)]
    p50, p99 = latencies_us(csr.successors_of, typical)
    results["csr_random_access_us[same nodes] p50/p99"] = [round(p50, 2), round(p99, 2)]
    return results


PURE_PYTHON_CHILD = """
import json, sys, time
from pathlib import Path
from crawlspace.graph import BVGraph, CsrGraph, write_bvgraph
directory, nodes = Path(sys.argv[1]), int(sys.argv[2])
graph = BVGraph.load(directory / "sub", verify=False)
csr = graph.to_csr()  # the first calls load the compiled code from numba's cache: not timed
write_bvgraph(directory / "again", csr)
graph.successors(0)
start = time.perf_counter(); csr = graph.to_csr(); decode = time.perf_counter() - start
start = time.perf_counter(); write_bvgraph(directory / "again", csr); encode = time.perf_counter() - start
sample = list(range(0, nodes, max(1, nodes // 500)))
start = time.perf_counter()
for node in sample: graph.successors(node)
access = (time.perf_counter() - start) / len(sample)
print(json.dumps({"arcs": csr.num_arcs, "decode_ns_per_arc": decode / csr.num_arcs * 1e9,
                  "encode_ns_per_arc": encode / csr.num_arcs * 1e9, "random_access_us": access * 1e6}))
"""


def pure_python(data: Path, nodes: int) -> dict[str, object]:
    """The same kernels as plain Python on cnr-2000's first `nodes` nodes, against the compiled ones."""
    csr = BVGraph.load(data / "cnr-2000").to_csr()
    end = int(csr.pointers[nodes])
    keep = csr.successors[:end] < nodes
    sources = np.repeat(np.arange(nodes), csr.outdegrees()[:nodes])[keep]
    sub = CsrGraph.from_arcs(nodes, sources, csr.successors[:end][keep])
    figures: dict[str, object] = {"nodes": nodes}
    with tempfile.TemporaryDirectory() as directory:
        write_bvgraph(Path(directory) / "sub", sub)
        for mode, disable in (("compiled", "0"), ("pure_python", "1")):
            child = subprocess.run(
                [sys.executable, "-c", PURE_PYTHON_CHILD, directory, str(nodes)],
                capture_output=True, text=True, check=True, env=dict(os.environ, NUMBA_DISABLE_JIT=disable),
            )  # fmt: skip
            figures[mode] = {key: round(value, 1) for key, value in json.loads(child.stdout).items()}
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--queries", type=int, default=20000)
    parser.add_argument("--pure-python-nodes", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    arguments = parser.parse_args()
    results = measure(arguments.data, arguments.queries)
    if arguments.pure_python_nodes:
        results["pure_python_vs_compiled"] = pure_python(arguments.data, arguments.pure_python_nodes)
    report(results, arguments.json)


def report(results: dict[str, object], as_json: bool) -> None:
    if as_json:
        print(json.dumps(results, indent=2))
        return
    for key, value in results.items():
        if isinstance(value, dict):
            print(f"{key}:")
            for inner, figure in value.items():
                print(f"    {inner}: {figure}")
        else:
            print(f"{key}: {value}")


if __name__ == "__main__":
    main()
