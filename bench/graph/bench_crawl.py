"""The connectivity server on a crawl of the simulated web: build time, bits per link and per URL, query latencies,
side by side with a numpy CSR (64- and 32-bit ids) and the plain and zstd-compressed URL list.

    .venv/bin/python bench/graph/bench_crawl.py [--pages 100000] [--queries 20000] [--json]

The crawl is bench/jobs' (`make_crawl`: hosts = pages / 20, seed 3, into bench/out/jobs/<pages>/, made once and
reused). Then, in this process, Dask's synchronous scheduler: the link graph job (`graph`), then the
`connectivity` job (URL map, graph, transpose), each timed; the connectivity job's own split (reading the
graph job's tables, building and writing) is in its summary. WebGraph's encoder would write this graph at the
same bits per link: ours writes its bit stream exactly (cnr-2000, `bench_graph.py`); the same graph with its ids
shuffled shows what the row-key numbering gains. Latencies: one call from
Python each, on uniform random nodes (p50/p99, µs).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import zstandard

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def _bench_jobs() -> ModuleType:
    """bench/jobs/bench_jobs.py, whose crawl this benchmark shares (a script, not a package: loaded by path)."""
    spec = importlib.util.spec_from_file_location("bench_jobs", ROOT / "bench" / "jobs" / "bench_jobs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench_jobs = _bench_jobs()
OUT, make_crawl = bench_jobs.OUT, bench_jobs.make_crawl

from bench_graph import latencies_us, report  # noqa: E402

import crawlspace.graph  # noqa: E402
from crawlspace.graph import CsrGraph, write_bvgraph  # noqa: E402
from crawlspace.jobs import run  # noqa: E402


def rounded(figures: tuple[float, float]) -> list[float]:
    return [round(figure, 2) for figure in figures]


def random_order_bits_per_link(links: crawlspace.graph.LinkGraph) -> float:
    """The same graph BV-encoded with its ids shuffled: what numbering URLs by row key (IIR 20.4) gains."""
    csr = links.out_links.to_csr()
    shuffled = np.random.default_rng(9).permutation(csr.num_nodes)
    sources = np.repeat(np.arange(csr.num_nodes), csr.outdegrees())
    graph = CsrGraph.from_arcs(csr.num_nodes, shuffled[sources], shuffled[csr.successors])
    with tempfile.TemporaryDirectory() as directory:
        return float(write_bvgraph(Path(directory) / "shuffled", graph)["bitsperlink"])


def measure(pages: int, queries: int) -> dict[str, Any]:
    crawl = make_crawl(pages)
    out = OUT / str(pages) / "out-graph"
    started = time.perf_counter()
    graph_job = run(crawl, only=["graph"], out=out)["graph"]
    graph_seconds = time.perf_counter() - started
    started = time.perf_counter()
    built = run(crawl, only=["connectivity"], out=out)["connectivity"]
    connectivity_seconds = time.perf_counter() - started
    links = crawlspace.graph.open(out)
    nodes, arcs = links.num_nodes, links.num_arcs
    urls = list(links.urls)
    plain = "\n".join(urls).encode()
    results: dict[str, Any] = {
        "crawl": str(crawl),
        "nodes": nodes,
        "arcs": arcs,
        "links_to_unfetched_urls": built["links_to_unfetched_urls"],
        "seconds": {
            "graph_job": round(graph_seconds, 2),
            "connectivity_job": round(connectivity_seconds, 2),
            "connectivity_read_tables": built["read_seconds"],
            "connectivity_build_and_write": built["build_seconds"],
        },
        "bits_per_link": {
            "bv_successors": built["bits_per_link"],
            "bv_predecessors": built["bits_per_link_transpose"],
            "csr_64": round(64 * (nodes + 1 + arcs) / arcs, 2),
            "csr_32": round(32 * (nodes + 1 + arcs) / arcs, 2),
        },
        "bits_per_url": {
            "url_map[front coding + zstd dictionary, random access]": built["bits_per_url"],
            "plain_urls": round(8 * len(plain) / nodes, 2),
            "zstd_19_whole_list_no_random_access": round(
                8 * len(zstandard.ZstdCompressor(level=19).compress(plain)) / nodes, 2
            ),
        },
    }
    results["bits_per_link"]["bv_successors_ids_in_random_order"] = random_order_bits_per_link(links)
    rng = np.random.default_rng(5)
    sample = rng.integers(0, nodes, queries).tolist()
    sample_urls = [urls[node] for node in sample]
    links.successors(0)
    results["latency_us p50/p99"] = {
        "id_of": rounded(latencies_us(links.id_of, sample_urls)),
        "url_of": rounded(latencies_us(links.url_of, sample)),
        "successors(id)": rounded(latencies_us(links.successors, sample)),
        "predecessors(id)": rounded(latencies_us(links.predecessors, sample)),
        "successor_urls(url)": rounded(latencies_us(links.successor_urls, sample_urls)),
        "predecessor_urls(url)": rounded(latencies_us(links.predecessor_urls, sample_urls)),
    }
    results["mean_outdegree"] = round(arcs / nodes, 1)
    results["graph_job"] = {key: graph_job[key] for key in ("nodes", "links", "edges")}
    links.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=20_000)
    parser.add_argument("--json", action="store_true")
    arguments = parser.parse_args()
    results = measure(arguments.pages, arguments.queries)
    report(results, arguments.json)


if __name__ == "__main__":
    main()
