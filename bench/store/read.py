"""What reading a crawl costs: the streams of `CrawlReader` over one crawl of the simulated web.

Crawls a simulated web once into bench/out/read/ (or reads the crawl directory given with --dir),
then times each way of reading it, in rounds that take turns (medians of CPU seconds of this
process, and the rate per CPU second):

- table scan:        `CrawlTable.scan` of the page families (rows decoded, nothing else): the floor
- pages():           one typed `StoredPage` per fetched URL
- pages() by parts:  the same over `partitions(4)`, one range after another
- edges():           one `Edge` per link
- pages(text=True):  with each page's text parsed again from its WARC response (what export reads)
- export JSONL:      `export.export` to a JSON Lines file in a temporary directory

Usage: python bench/store/read.py [--hosts 200 --pages-per-host 50 --processes 1 --rounds 3] [--dir CRAWL]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from crawlspace.simweb import SimWeb, SimWebConfig, serve_in_background  # noqa: E402
from crawlspace.store.export import export  # noqa: E402
from crawlspace.store.reader import PAGE_FAMILIES, CrawlReader  # noqa: E402


def crawl(out: Path, hosts: int, pages_per_host: int, processes: int) -> Path:
    config = SimWebConfig(hosts=hosts, seed=3, mean_pages_per_host=pages_per_host, robots_crawl_delay=0.0)
    web = SimWeb.generate(config.replace(include_trap=False))
    shutil.rmtree(out, ignore_errors=True)
    with serve_in_background(web, out / "server", seeds=10) as server:
        command = [
            sys.executable, "-m", "crawlspace", "crawl", str(server.seeds_file), "--out", str(out / "crawl"),
            "--hosts-file", str(server.hosts_file), "--allow-private-addresses", "--min-delay", "0",
            "--no-progress", "--concurrency", "64", "--processes", str(processes),
        ]  # fmt: skip
        subprocess.run(command, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    return out / "crawl"


def count(items: Iterable[object]) -> int:
    return sum(1 for _ in items)


def ways(directory: Path) -> dict[str, Callable[[], int]]:
    def table_scan() -> int:
        with CrawlReader(directory) as reader:
            return count(reader.table.scan(family=PAGE_FAMILIES))

    def pages() -> int:
        with CrawlReader(directory) as reader:
            return count(reader.pages())

    def pages_by_parts() -> int:
        with CrawlReader(directory) as reader:
            return sum(count(reader.pages(part)) for part in reader.partitions(4))

    def edges() -> int:
        with CrawlReader(directory) as reader:
            return count(reader.edges())

    def pages_with_text() -> int:
        with CrawlReader(directory) as reader:
            return count(reader.pages(text=True))

    def export_jsonl() -> int:
        with tempfile.TemporaryDirectory() as scratch:
            return export(directory, "jsonl", Path(scratch) / "pages.jsonl")[0]

    return {
        "table scan": table_scan,
        "pages()": pages,
        "pages() by 4 parts": pages_by_parts,
        "edges()": edges,
        "pages(text=True)": pages_with_text,
        "export JSONL": export_jsonl,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, help="A crawl directory to read (default: crawl a simulated web first).")
    parser.add_argument("--hosts", type=int, default=200)
    parser.add_argument("--pages-per-host", type=float, default=50)
    parser.add_argument("--processes", type=int, default=1, help="Crawl processes (table shards) of the crawl.")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    directory = args.dir or crawl(ROOT / "bench" / "out" / "read", args.hosts, int(args.pages_per_host), args.processes)
    timings: dict[str, list[float]] = {}
    items: dict[str, int] = {}
    for _ in range(args.rounds):
        for name, run in ways(directory).items():
            started = time.process_time()
            items[name] = run()
            timings.setdefault(name, []).append(time.process_time() - started)
    print(f"{directory}: medians of {args.rounds} rounds, CPU seconds of this process")
    print(f"{'':<22}{'items':>9}{'CPU s':>9}{'items/CPU s':>14}")
    for name, seconds in timings.items():
        median = statistics.median(seconds)
        print(f"{name:<22}{items[name]:>9}{median:>9.3f}{items[name] / median:>14,.0f}")


if __name__ == "__main__":
    main()
