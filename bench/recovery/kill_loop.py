"""Kill -9 a crawl of the simulated web N times at random moments, resume after each, and report what it cost.

    .venv/bin/python bench/recovery/kill_loop.py [--kills 10] [--hosts 120] [--seed 3]

Prints the pages of the finished crawl, the fetches made more than once (the price of the kills:
pages in flight when the process died), and the time lost per recovery: from the kill to the
resumed process's first request, as the server saw it (interpreter start, checkpoint load, journal
replay). Judged from the server's request log against the ground truth.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from crawlspace.simweb import SimWeb, SimWebConfig, judge_crawl, serve_in_background  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--hosts", type=int, default=120)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--min-delay", type=float, default=0.05)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--checkpoint-interval", type=float, default=30.0)
    args = parser.parse_args()
    web = SimWeb.generate(
        SimWebConfig(
            hosts=args.hosts, seed=args.seed, mean_pages_per_host=12.0, include_trap=False, robots_crawl_delay=0.1
        )
    )
    rng = random.Random(args.seed)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    with (
        tempfile.TemporaryDirectory(prefix="crawlspace-kills-") as tmp,
        serve_in_background(web, Path(tmp) / "web") as served,
    ):
        out = Path(tmp) / "crawl"
        config = Path(tmp) / "crawl.toml"
        config.write_text(f"checkpoint_interval = {args.checkpoint_interval}\n")
        base = [sys.executable, "-m", "crawlspace", "crawl"]
        first = [
            str(served.seeds_file), "--out", str(out), "--config", str(config), "--hosts-file", str(served.hosts_file),
            "--allow-private-addresses", "--min-delay", str(args.min_delay), "--concurrency", str(args.concurrency),
        ]  # fmt: skip
        kill_times: list[float] = []
        started = time.time()
        process = subprocess.Popen(
            [*base, *first, "--no-progress"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        while len(kill_times) < args.kills:
            time.sleep(rng.uniform(1.5, 3.0))
            if process.poll() is not None:
                break
            process.send_signal(signal.SIGKILL)
            process.wait()
            kill_times.append(time.time())
            process = subprocess.Popen(
                [*base, "--resume", str(out), "--no-progress"],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        process.wait()
        wall = time.time() - started
        served.stop()
        log = served.read_log()
        verdict = judge_crawl(web, log, served.seeds, min_delay=args.min_delay)
        stats = json.loads((out / "stats.json").read_text())
    arrivals = sorted(entry.arrived for entry in log)
    lost = []
    for killed in kill_times:
        after = [t for t in arrivals if t > killed]
        if after:
            lost.append(after[0] - killed)
    extra = sum(count - 1 for count in verdict.refetched.values())
    print(f"kills: {len(kill_times)}, wall time {wall:.1f} s, runs recorded {stats['runs']}")
    print(
        f"pages expected {len(verdict.expected)}, missing {len(verdict.missing)}, unexpected {len(verdict.unexpected)}"
    )
    print(f"robots violations {len(verdict.disallowed)}, overlapping requests {len(verdict.host_overlaps)}")
    print(f"extra fetches (pages in flight at the kills): {extra} ({extra / max(len(kill_times), 1):.1f} per kill)")
    if lost:
        print(
            f"time lost per recovery (kill -> first request of the resumed run): "
            f"median {sorted(lost)[len(lost) // 2]:.2f} s, max {max(lost):.2f} s, total {sum(lost):.1f} s"
        )
    print(
        f"stats.json pages_fetched {stats['pages_fetched']}, requests in the server log "
        f"{sum(1 for entry in log if entry.path != '/robots.txt')}"
    )


if __name__ == "__main__":
    main()
