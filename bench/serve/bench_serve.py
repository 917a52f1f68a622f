"""The cost of the dashboard to the crawl it watches: pages/s with and without `--serve`, side by side.

Each round crawls the same simulated web twice, in alternating order: once as `crawlspace crawl` does
by default, once as `crawlspace crawl --serve` does (the dashboard on its own thread in the crawl's
process, progress every 0.5 s) with a client polling it the way an open overview page does
(/api/overview every 0.5 s) plus the hosts page every 5 s and a Prometheus scrape every 5 s. Pages/s
is the crawl's own figure (stats.json); CPU is the crawl process tree's (user + system), the polling
client's (a process of its own, as a browser is) left out. Target: the
dashboard costs at most 5% of pages/s.

    .venv/bin/python bench/serve/bench_serve.py [--hosts 1000 --pages 10000 --rounds 3 --processes 1 --delay-factor 0]
"""

from __future__ import annotations

import argparse
import contextlib
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from crawlspace.api import Crawler
from crawlspace.config import CrawlConfig
from crawlspace.serve.server import ATTACHED_PROGRESS_INTERVAL, attached
from crawlspace.simweb import RunningServer, SimWeb, SimWebConfig, serve_in_background


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


POLLER = """
import resource, sys, time, urllib.request
url, answered, tick = sys.argv[1].rstrip("/"), 0, 0
try:
    while True:
        time.sleep(0.5)
        for path in ["/api/overview"] + (["/api/hosts", "/metrics"] if tick % 10 == 0 else []):
            try:
                with urllib.request.urlopen(url + path, timeout=10) as response:
                    response.read()
                    answered += 1
            except OSError:
                pass
        tick += 1
except KeyboardInterrupt:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(answered, usage.ru_utime + usage.ru_stime, flush=True)
"""


@contextlib.contextmanager
def polling(url: str) -> Iterator[dict[str, float]]:
    """A client like an open overview page (every 0.5 s), a hosts page reloaded and a Prometheus scrape
    (every 5 s), in a process of its own as a browser is; gives the requests answered (checked after: a
    dashboard that answered nothing measured nothing) and the client's CPU, left out of the crawl's."""
    client = subprocess.Popen([sys.executable, "-c", POLLER, url], stdout=subprocess.PIPE, text=True)
    result: dict[str, float] = {}
    try:
        yield result
    finally:
        client.send_signal(signal.SIGINT)
        answered, cpu = (client.communicate(timeout=30)[0].split() or ["0", "0"])[:2]
        result.update(answered=int(answered), cpu=float(cpu))


def crawl_once(web: RunningServer, out: Path, args: argparse.Namespace, *, serve: bool) -> dict[str, float]:
    shutil.rmtree(out, ignore_errors=True)
    config = CrawlConfig(
        allow_private_addresses=True,
        hosts_file=str(web.hosts_file),
        min_delay=args.min_delay,
        delay_factor=args.delay_factor,
        max_pages=args.pages,
        processes=args.processes,
    )
    if serve:
        config = config.replace(progress_interval=ATTACHED_PROGRESS_INTERVAL)
    crawler = Crawler(config, out=out, seeds=web.seeds, progress=False)
    began = _cpu()
    client = {"answered": 0, "cpu": 0.0}
    if serve:
        with attached(out, 0) as address, polling(address.url) as client:
            stats = crawler.run()
    else:
        stats = crawler.run()
    cpu = _cpu() - began - client["cpu"]
    answered = client["answered"]
    assert answered > 0 or not serve, "the dashboard answered no request"
    return {
        "pages": stats.pages_fetched,
        "pages_per_second": stats.pages_fetched / stats.elapsed,
        "cpu_ms_per_page": 1000 * cpu / max(stats.pages_fetched, 1),
        "requests_answered": answered,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--pages", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--min-delay", type=float, default=0.0)
    parser.add_argument(
        "--delay-factor",
        type=float,
        default=0.0,
        help="Mercator's k: 0 makes the crawl CPU-bound, as the cost shows best",
    )
    args = parser.parse_args()
    web = SimWeb.generate(
        SimWebConfig(hosts=args.hosts, seed=7, mean_pages_per_host=40, max_pages_per_host=400, include_trap=False)
    )
    results: dict[str, list[dict[str, float]]] = {"without": [], "with --serve": []}
    with (
        tempfile.TemporaryDirectory(prefix="bench-serve-") as tmp,
        serve_in_background(web, Path(tmp) / "web") as running,
    ):
        for number in range(args.rounds + 1):  # round 0 warms the server and the page cache up
            order = [False, True] if number % 2 == 0 else [True, False]
            for serve in order:
                name = "with --serve" if serve else "without"
                result = crawl_once(running, Path(tmp) / "crawl", args, serve=serve)
                results[name].append(result)
                warm_up = " (warm-up, not counted)" if number == 0 else ""
                print(
                    f"round {number} {name:>13}: {result['pages']:.0f} pages, {result['pages_per_second']:.1f} "
                    f"pages/s, {result['cpu_ms_per_page']:.2f} CPU ms/page, "
                    f"{result['requests_answered']:.0f} dashboard requests{warm_up}",
                    flush=True,
                )
                if number == 0:
                    results[name].pop()
    print(f"\n{'':>14} {'pages/s (median)':>18} {'CPU ms/page (median)':>22}")
    medians, cpu_medians = {}, {}
    for name, rows in results.items():
        rate = statistics.median(row["pages_per_second"] for row in rows)
        cpu = statistics.median(row["cpu_ms_per_page"] for row in rows)
        medians[name], cpu_medians[name] = rate, cpu
        print(f"{name:>14} {rate:>18.1f} {cpu:>22.2f}")
    cpu_ratio = cpu_medians["with --serve"] / cpu_medians["without"]
    ratio = medians["with --serve"] / medians["without"]
    verdict = "met" if ratio >= 0.95 else "NOT met"
    print(f"\nwith / without: {ratio:.3f} of the pages/s (target >= 0.95: {verdict}); CPU per page x{cpu_ratio:.3f}")


if __name__ == "__main__":
    main()
