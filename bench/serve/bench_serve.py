"""The cost of the dashboard to the crawl it watches: pages/s with and without `--serve`, side by side.

Each round crawls the same simulated web three times, the order rotated from round to round: as
`crawlspace crawl` does by default ("without"); as `crawlspace crawl --serve` does with nobody looking
("--serve": the dashboard in a child process of the crawl, progress every 0.5 s, DIR/hosts.json
as often as its cost rule allows); and the same with a client polling it the way an open overview page
does ("--serve + client": /api/overview every `--poll` seconds, 0.5 as the page's script does, plus the
hosts page and a Prometheus scrape every 5 s). Pages/s is the crawl's own figure (stats.json); CPU is
the crawl process tree's (user + system: the crawl's process and the dashboard's, which `--serve` starts
as a child; with `--processes 1` the dashboard's share is printed apart), the polling client's (a
process of its own, as a browser is) left out. Each configuration is compared with "without" of
the same round (the machine's load moves between rounds more than within one), and the per-round
ratios' median and range are printed. Target: the dashboard costs at most 5% of pages/s.

    .venv/bin/python bench/serve/bench_serve.py [--hosts 1000 --pages 10000 --rounds 5 --processes 1
        --delay-factor 0 --poll 0.5]
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


def _cpu() -> tuple[float, float]:
    """CPU seconds (user + system) of this process and of its children that ended."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


POLLER = """
import resource, sys, time, urllib.request
url, poll, answered, tick = sys.argv[1].rstrip("/"), float(sys.argv[2]), 0, 0
every = max(1, round(5.0 / poll))
try:
    while True:
        time.sleep(poll)
        for path in ["/api/overview"] + (["/hosts", "/metrics"] if tick % every == 0 else []):
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
def polling(url: str, poll: float) -> Iterator[dict[str, float]]:
    """A client like an open overview page (every `poll` s), a hosts page reloaded and a Prometheus scrape
    (every 5 s), in a process of its own as a browser is; gives the requests answered (checked after: a
    dashboard that answered nothing measured nothing) and the client's CPU, left out of the crawl's."""
    client = subprocess.Popen([sys.executable, "-c", POLLER, url, str(poll)], stdout=subprocess.PIPE, text=True)
    result: dict[str, float] = {}
    try:
        yield result
    finally:
        client.send_signal(signal.SIGINT)
        answered, cpu = (client.communicate(timeout=30)[0].split() or ["0", "0"])[:2]
        result.update(answered=int(answered), cpu=float(cpu))


CONFIGURATIONS = ("without", "--serve", "--serve + client")


def crawl_once(web: RunningServer, out: Path, args: argparse.Namespace, configuration: str) -> dict[str, float]:
    shutil.rmtree(out, ignore_errors=True)
    config = CrawlConfig(
        allow_private_addresses=True,
        hosts_file=str(web.hosts_file),
        min_delay=args.min_delay,
        delay_factor=args.delay_factor,
        max_pages=args.pages,
        processes=args.processes,
    )
    serve, polled = configuration != "without", configuration == "--serve + client"
    if serve:
        config = config.replace(progress_interval=ATTACHED_PROGRESS_INTERVAL)
    crawler = Crawler(config, out=out, seeds=web.seeds, progress=False)
    began = _cpu()
    client = {"answered": 0, "cpu": 0.0}
    with contextlib.ExitStack() as stack:
        if serve:
            address = stack.enter_context(attached(out, 0))
            if polled:
                client = stack.enter_context(polling(address.url, args.poll))
        stats = crawler.run()
    ended = _cpu()
    own, children = ended[0] - began[0], ended[1] - began[1] - client["cpu"]
    cpu = own + children
    answered = client["answered"]
    assert answered > 0 or not polled, "the dashboard answered no request"
    return {
        "pages": stats.pages_fetched,
        "pages_per_second": stats.pages_fetched / stats.elapsed,
        "cpu_ms_per_page": 1000 * cpu / max(stats.pages_fetched, 1),
        # with one crawl process, its children are the dashboard's process alone (the client's left out)
        "dashboard_cpu_ms_per_page": 1000 * children / max(stats.pages_fetched, 1) if args.processes == 1 else 0.0,
        "requests_answered": answered,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--pages", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--min-delay", type=float, default=0.0)
    parser.add_argument("--poll", type=float, default=0.5, help="seconds between the client's overview requests")
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
    results: dict[str, list[dict[str, float]]] = {name: [] for name in CONFIGURATIONS}
    with (
        tempfile.TemporaryDirectory(prefix="bench-serve-") as tmp,
        serve_in_background(web, Path(tmp) / "web") as running,
    ):
        for number in range(args.rounds + 1):  # round 0 warms the server and the page cache up
            shift = number % len(CONFIGURATIONS)
            for configuration in CONFIGURATIONS[shift:] + CONFIGURATIONS[:shift]:
                result = crawl_once(running, Path(tmp) / "crawl", args, configuration)
                warm_up = " (warm-up, not counted)" if number == 0 else ""
                print(
                    f"round {number} {configuration:>16}: {result['pages']:.0f} pages, "
                    f"{result['pages_per_second']:.1f} pages/s, {result['cpu_ms_per_page']:.3f} CPU ms/page "
                    f"(dashboard {result['dashboard_cpu_ms_per_page']:.3f}), "
                    f"{result['requests_answered']:.0f} dashboard requests{warm_up}",
                    flush=True,
                )
                if number:
                    results[configuration].append(result)
    report(results)


def report(results: dict[str, list[dict[str, float]]]) -> None:
    """Medians of each configuration, and its ratios to "without" round by round (median, range)."""
    print(f"\n{'':>16} {'pages/s median':>15} {'(range)':>15} {'CPU ms/page median':>19} {'(range)':>13}")
    for name, rows in results.items():
        rates = [row["pages_per_second"] for row in rows]
        cpus = [row["cpu_ms_per_page"] for row in rows]
        print(
            f"{name:>16} {statistics.median(rates):>15.1f} {f'{min(rates):.0f}-{max(rates):.0f}':>15} "
            f"{statistics.median(cpus):>19.3f} {f'{min(cpus):.2f}-{max(cpus):.2f}':>13}"
        )
    print("\nround by round, against 'without' of the same round:")
    base = results["without"]
    for name in CONFIGURATIONS[1:]:
        rate = [row["pages_per_second"] / b["pages_per_second"] for row, b in zip(results[name], base, strict=True)]
        cpu = [row["cpu_ms_per_page"] / b["cpu_ms_per_page"] for row, b in zip(results[name], base, strict=True)]
        verdict = "met" if statistics.median(rate) >= 0.95 else "NOT met"
        print(
            f"{name:>16}: pages/s x{statistics.median(rate):.3f} (rounds {', '.join(f'{r:.3f}' for r in rate)}; "
            f"target >= 0.95: {verdict}), CPU/page x{statistics.median(cpu):.3f} "
            f"(rounds {', '.join(f'{c:.3f}' for c in cpu)})"
        )


if __name__ == "__main__":
    main()
