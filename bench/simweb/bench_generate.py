"""How long the simulated web takes to generate, and to render one page, at a given number of hosts.

    .venv/bin/python bench/simweb/bench_generate.py [--hosts 10000] [--pages 2000]

The generator's promise (a 10,000-host web in seconds, a page in well under a millisecond, nothing
stored per page but arrays) used to be a timed unit test; timings belong here, where a shared
machine's noise shows as spread over rounds instead of as a failed suite.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from crawlspace.simweb import SimWeb, SimWebConfig


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--pages", type=int, default=2_000, help="pages rendered to time a response")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    generation = []
    for round_ in range(args.rounds):
        started = time.perf_counter()
        web = SimWeb.generate(SimWebConfig(hosts=args.hosts, seed=1 + round_))
        generation.append(time.perf_counter() - started)
    rng = np.random.default_rng(0)
    urls = list(web.all_urls())
    sample = [urls[int(i)] for i in rng.integers(0, len(urls), args.pages)]
    rendering = []
    for url in sample:
        started = time.perf_counter()
        web.body(url)
        rendering.append(time.perf_counter() - started)
    print(f"{args.hosts} hosts, {web.data.pages} pages")
    median = statistics.median(generation)
    print(f"generate: median {median:.2f} s over {args.rounds} rounds (max {max(generation):.2f})")
    quantiles = np.percentile(np.array(rendering) * 1000, [50, 95, 99])
    print("render one page: p50 {:.3f} ms, p95 {:.3f} ms, p99 {:.3f} ms".format(*quantiles))


if __name__ == "__main__":
    main()
