"""CPU a crawl spends per second when politeness leaves it nothing to fetch: the cost that grows with time.

    .venv/bin/python bench/throughput/idle.py [--processes 2] [--compare-with /path/to/other/checkout] [--rounds 2]

Serves a small heavy web (20 hosts) with nginx, crawls it at `--min-delay 60`: every host's first page is
fetched in the first seconds, then nothing is due for a minute. From `--settle` seconds after the start, for
`--window` seconds, the CPU of every process of the crawl is read from /proc; printed per process (the
coordinator first) and in all, in ms of CPU per second of crawl. What a crawl pays per second is paid per
page when politeness holds it to a few pages a second (issue 17: "CPU per page must not rise when
politeness slows the crawl"): at one page a second, each ms/s here is a ms on every page. With
`--compare-with`, another checkout (its own `.venv`) is measured too, alternating over `--rounds`.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from statistics import median

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import OUT, REPO, Nginx, descendants, prepare_web, process_table


def measure(python: str, checkout: Path, args: argparse.Namespace, seeds: Path, hosts: Path) -> list[float]:
    """ms of CPU per second of each process of one crawl, over the window."""
    out = OUT / "idle-crawl"
    subprocess.run(["rm", "-rf", str(out)], check=True)
    command = [
        python, "-m", "crawlspace", "crawl", str(seeds), "--out", str(out), "--hosts-file", str(hosts),
        "--allow-private-addresses", "--min-delay", "60", "--max-pages", "1000", "--no-progress",
        "--processes", str(args.processes),
    ]  # fmt: skip
    crawl = subprocess.Popen(command, cwd=checkout, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(args.settle)
        before = process_table()
        members = descendants(crawl.pid, before)
        time.sleep(args.window)
        after = process_table()
    finally:
        crawl.send_signal(signal.SIGINT)  # a clean stop: the checkpoint is written, nothing else measured
        crawl.wait(60)
    tick = os.sysconf("SC_CLK_TCK")
    return [1000 * (after.get(pid, before[pid])[1] - before[pid][1]) / tick / args.window for pid in members]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--settle", type=float, default=15.0, help="seconds before the window opens")
    parser.add_argument("--window", type=float, default=35.0, help="seconds measured")
    parser.add_argument("--compare-with", type=Path, help="another checkout of crawlspace (with its own .venv)")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    web_args = argparse.Namespace(hosts=20, seed=1, pages_per_host=40.0, crawl_delay=0.2, web="heavy")
    web, config = prepare_web(web_args)
    seeds = OUT / "idle-seeds.txt"
    seeds.write_text("\n".join(web.seeds(20)) + "\n")
    contenders = [("crawlspace", sys.executable, REPO)]
    if args.compare_with is not None:
        other = args.compare_with.resolve()
        contenders.append(("baseline", str(other / ".venv" / "bin" / "python"), other))
    nginx = Nginx(config)
    nginx.start(OUT / "idle-access.log")
    totals: dict[str, list[float]] = {label: [] for label, _, _ in contenders}
    try:
        for round_number in range(args.rounds):
            for label, python, checkout in contenders if round_number % 2 == 0 else contenders[::-1]:
                per_process = measure(python, checkout, args, seeds, config.parent / "hosts.txt")
                totals[label].append(sum(per_process))
                shown = "  ".join(f"{value:.1f}" for value in per_process)
                print(f"{label:12} round {round_number + 1}: {sum(per_process):5.1f} ms/s  (per process: {shown})")
    finally:
        nginx.stop()
    for label, values in totals.items():
        print(f"{label:12} median {median(values):.1f} ms of CPU per second with nothing to fetch")


if __name__ == "__main__":
    main()
