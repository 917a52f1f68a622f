"""What the extension points cost: CPU per page of one crawl with and without them, side by side.

One simulated web is served for the whole run (a separate process: its CPU is not counted). Each
configuration crawls it in a fresh crawler process, in rounds that take turns so that load changes
on a shared machine hit them alike; the figure is the crawl's CPU (user + system of the crawler
process from the start of the crawl to its end, plus its worker processes) per fetched page, and
its ratio to the crawl without extensions.

- none:     no extension (the CLI's crawl)
- filter:   two URL filters (a regex and a set lookup) on every link
- sync:     the filters, a sync processor (an item per page: URL, title, counts; next to no work of its
            own, so that the machinery is what is measured) and a JSONL sink
- async:    the same processor as `async def`, awaited in tasks
- process:  the same processor in a pool of 2 worker processes (run_in_process)

Usage: python bench/api/bench.py [--hosts 300] [--pages 3000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from crawlspace import CrawlConfig, Crawler  # noqa: E402
from crawlspace.hooks import FrontierEntry, JsonlSink, Page, run_in_process  # noqa: E402
from crawlspace.simweb import SimWeb, SimWebConfig, serve_in_background  # noqa: E402

CONFIGURATIONS = ("none", "filter", "sync", "async", "process")
CALENDAR = re.compile(r"/cal/\d+/\d+/")
BLOCKED = frozenset(f"blocked{number}.test" for number in range(1000))


def no_calendars(entry: FrontierEntry) -> bool | str:
    return "calendar" if CALENDAR.search(entry.url) else True


def not_blocked(entry: FrontierEntry) -> bool:
    return entry.url.split("/", 3)[2] not in BLOCKED


def summary(page: Page) -> dict[str, object] | None:
    """Next to no work of its own: what is measured is the machinery around it."""
    if not page.ok:
        return None
    return {"url": page.url, "title": page.title, "links": len(page.links), "bytes": len(page.body)}


async def async_summary(page: Page) -> dict[str, object] | None:
    return summary(page)


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def crawl_once(name: str, seeds_file: Path, hosts_file: Path, out: Path, pages: int) -> dict[str, float]:
    """One crawl in this process (started fresh by the driver); its figures."""
    filters = [no_calendars, not_blocked] if name != "none" else []
    processors = {
        "sync": [summary],
        "async": [async_summary],
        "process": [run_in_process(summary, workers=2)],
    }.get(name, [])
    sinks = [JsonlSink(out / "items.jsonl")] if processors else []
    config = CrawlConfig(
        hosts_file=str(hosts_file),
        allow_private_addresses=True,
        min_delay=0.0,
        delay_factor=0.0,
        concurrency=64,
        max_pages=pages,
        progress_interval=30,
        store_sync=False,
    )
    crawler = Crawler(
        config, out=out / "crawl", seeds_file=seeds_file, filters=filters, processors=processors, sinks=sinks,
        progress=False,
    )  # fmt: skip
    before, started = _cpu(resource.RUSAGE_SELF), time.monotonic()
    stats = crawler.run()
    wall = time.monotonic() - started
    cpu = _cpu(resource.RUSAGE_SELF) - before + _cpu(resource.RUSAGE_CHILDREN)  # the pool's workers included
    items = len((out / "items.jsonl").read_text().splitlines()) if sinks else 0
    return {"pages": stats.pages_fetched, "wall": wall, "cpu": cpu, "items": items}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, default=300)
    parser.add_argument("--pages", type=int, default=3000, help="fetches per crawl")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--one", choices=CONFIGURATIONS, help=argparse.SUPPRESS)
    parser.add_argument("--files", nargs=3, type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        seeds_file, hosts_file, out = args.files
        print(json.dumps(crawl_once(args.one, seeds_file, hosts_file, out, args.pages)))
        return

    web = SimWeb.generate(SimWebConfig(hosts=args.hosts, seed=3, robots_crawl_delay=0.0, include_trap=False))
    results: dict[str, list[dict[str, float]]] = {name: [] for name in CONFIGURATIONS}
    with tempfile.TemporaryDirectory() as folder, serve_in_background(web, Path(folder) / "simweb", seeds=30) as server:
        for round_number in range(args.rounds):
            turn = round_number % len(CONFIGURATIONS)
            order = CONFIGURATIONS[turn:] + CONFIGURATIONS[:turn]
            for name in order:
                out = Path(folder) / f"{name}-{round_number}"
                done = subprocess.run(
                    [sys.executable, __file__, "--one", name, "--pages", str(args.pages), "--files",
                     str(server.seeds_file), str(server.hosts_file), str(out)],
                    capture_output=True, text=True, check=True,
                )  # fmt: skip
                results[name].append(json.loads(done.stdout.splitlines()[-1]))
    baseline = statistics.median(run["cpu"] / run["pages"] for run in results["none"])
    print(f"{args.hosts} hosts, {args.pages} fetches per crawl, {args.rounds} rounds; medians")
    print(f"{'configuration':<14}{'pages':>7}{'items':>7}{'pages/s':>9}{'CPU ms/page':>13}{'vs none':>9}")
    for name, runs in results.items():
        per_page = statistics.median(run["cpu"] / run["pages"] for run in runs)
        rate = statistics.median(run["pages"] / run["wall"] for run in runs)
        pages = statistics.median(run["pages"] for run in runs)
        items = statistics.median(run["items"] for run in runs)
        print(f"{name:<14}{pages:>7.0f}{items:>7.0f}{rate:>9.1f}{1000 * per_page:>13.2f}{per_page / baseline:>9.2f}")


if __name__ == "__main__":
    main()
