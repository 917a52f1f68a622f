"""Throughput benchmark: crawlspace against Scrapy on the same simulated web, served by nginx, in one run.

    .venv/bin/python bench/throughput/run.py [--hosts 2000] [--pages-per-host 50] [--fetch 20000]

Generates the simulated web (static files, cached under bench/out/), serves it with nginx (started here,
stopped at the end), crawls a fixed number of pages with crawlspace, then with Scrapy (its own virtualenv,
bench/.venv-scrapy, created on first use), and prints for each: pages/s, CPU ms per page (user+sys of the
crawler's whole process tree), peak RSS (sum over the tree), and from nginx's access log: robots.txt
violations, URLs fetched more than once and overlapping requests to one host. Then the ratios.

`--profile` runs crawlspace under py-spy (sampling every process of the crawl; installed on first use) and
prints where its time goes, by stage of the crawl loop. Sampling costs CPU: take figures from a run without it.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from crawlspace.simweb import SimWeb, SimWebConfig, judge_crawl, read_nginx_log  # noqa: E402
from crawlspace.simweb.export import export_static  # noqa: E402

OUT = REPO / "bench" / "out" / "throughput"
SCRAPY_VENV = REPO / "bench" / ".venv-scrapy"
OCTET = 251  # outside the range the simulated web's own server picks, so tests can run meanwhile


@dataclass
class Run:
    name: str
    pages: int
    wall_seconds: float
    cpu_seconds: float
    peak_rss_mb: float
    peak_pss_mb: float
    robots_violations: int
    duplicate_fetches: int
    host_overlaps: int

    @property
    def pages_per_second(self) -> float:
        return self.pages / self.wall_seconds if self.wall_seconds else 0.0

    @property
    def cpu_ms_per_page(self) -> float:
        return 1000 * self.cpu_seconds / self.pages if self.pages else float("nan")


def tree_memory_bytes(root: int) -> tuple[int, int]:
    """Memory of `root` and all its descendants, from /proc: summed RSS, and summed PSS (each shared
    page divided among the processes sharing it: forked workers share their parent's pages, which
    summed RSS counts once per process)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as handle:
                    fields = handle.read().rsplit(b")", 1)[1].split()
                parents[int(entry)] = int(fields[1])
            except (OSError, IndexError, ValueError):
                continue
    members = {root}
    changed = True
    while changed:
        changed = False
        for pid, parent in parents.items():
            if parent in members and pid not in members:
                members.add(pid)
                changed = True
    rss = pss = 0
    for pid in members:
        try:
            with open(f"/proc/{pid}/statm") as handle:
                rss += int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
            with open(f"/proc/{pid}/smaps_rollup") as handle:
                pss += next(int(line.split()[1]) * 1024 for line in handle if line.startswith("Pss:"))
        except (OSError, IndexError, ValueError, StopIteration):
            continue
    return rss, pss


def measure(command: list[str], log: Path) -> tuple[float, float, float, float]:
    """Run `command`; return wall seconds, CPU seconds of its tree, peak RSS and peak PSS of its tree in MB."""
    started = time.monotonic()
    with log.open("wb") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
    peak_rss = peak_pss = 0
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            break
        rss, pss = tree_memory_bytes(process.pid)
        peak_rss, peak_pss = max(peak_rss, rss), max(peak_pss, pss)
        time.sleep(0.2)
    wall = time.monotonic() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{command[0]} failed ({os.waitstatus_to_exitcode(status)}); see {log}")
    return wall, usage.ru_utime + usage.ru_stime, peak_rss / 2**20, peak_pss / 2**20


class Nginx:
    def __init__(self, config: Path) -> None:
        self.config = config
        self.binary = os.environ.get("CRAWLSPACE_NGINX") or shutil.which("nginx") or "/usr/sbin/nginx"
        if not Path(self.binary).exists():
            raise SystemExit("nginx is needed: apt-get install nginx-light (or set CRAWLSPACE_NGINX)")
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, access_log: Path) -> None:
        current = self.config.parent / "access.log"
        current.unlink(missing_ok=True)
        directives = "daemon off; user root;" if os.geteuid() == 0 else "daemon off;"
        self.process = subprocess.Popen(
            [self.binary, "-c", str(self.config), "-p", str(self.config.parent), "-g", directives]
        )
        self.access_log = access_log
        time.sleep(1.0)
        if self.process.poll() is not None:
            raise SystemExit(f"nginx did not start; see {self.config.parent / 'error.log'}")

    def stop(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGQUIT)
            self.process.wait(30)
            self.process = None
            shutil.move(self.config.parent / "access.log", self.access_log)


def prepare_web(args: argparse.Namespace) -> tuple[SimWeb, Path]:
    port = 80 if os.geteuid() == 0 else 18080
    web = SimWeb.generate(
        SimWebConfig(
            hosts=args.hosts,
            seed=args.seed,
            mean_pages_per_host=args.pages_per_host,
            # heavy-tailed sites, capped so that a 100,000-page crawl is not one big site's Crawl-delay tail
            max_pages_per_host=5 * int(args.pages_per_host),
            page_bytes=(20_000, 30_000),
            mean_page_bytes=25_000,
            robots_crawl_delay=args.crawl_delay,
            include_trap=False,
            port=port,
        )
    )
    directory = OUT / f"web-{web.fingerprint()}"
    config = directory / "nginx.conf"
    if not config.exists():
        print(f"exporting {len(web.all_urls())} URLs on {args.hosts} hosts to {directory} ...", flush=True)
        tmp = directory.with_suffix(".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        export_static(web, tmp, octet=OCTET)
        # the export wrote absolute paths of the temporary directory into its config
        text = (tmp / "nginx.conf").read_text().replace(str(tmp.resolve()), str(directory.resolve()))
        (tmp / "nginx.conf").write_text(text)
        tmp.rename(directory)
    return web, config


def judge(
    name: str, agent: str, web: SimWeb, seeds: list[str], log: Path, wall: float, cpu: float, rss: float, pss: float
) -> Run:
    """Figures of one crawl from nginx's log; robots.txt is judged for the crawler's own product token."""
    entries = read_nginx_log(log)
    verdict = judge_crawl(web, entries, seeds, agent=agent, min_delay=0.0)
    pages = sum(1 for entry in entries if entry.path != "/robots.txt")
    return Run(
        name, pages, wall, cpu, rss, pss, len(verdict.disallowed), sum(n - 1 for n in verdict.refetched.values()),
        len(verdict.host_overlaps),
    )  # fmt: skip


# stages of the crawl loop: a sample counts for the first stage here with a mark that begins one of its frames
STAGES = (
    ("near-duplicate check", ("ContentSeen.check_near",)),
    ("exact duplicate check", ("ContentSeen.check", "SocketMesh.claim_first")),
    ("WARC write", ("WarcWriter.",)),
    ("crawl table", ("PageStore._write_row", "PageStore.commit", "PageStore._previous", "CrawlTable.")),
    ("journal", ("CrawlEngine._flush_journal", "Journal.record")),
    ("parse (links, text)", ("parse_html", "CrawlEngine._parse")),
    ("URL pipeline (join, filter, robots, seen)", ("CrawlEngine._follow", "CrawlEngine._submit", "UrlSet.")),
    (
        "host splitter (batches to other processes)",
        ("CrawlEngine._send_batches", "CrawlEngine.receive_urls", "SocketMesh.", "Channel."),
    ),
    ("fetch (aiohttp, sockets)", ("Fetcher.", "CrawlEngine._fetch_page", "CrawlEngine._fetch_robots")),
    ("frontier", ("Frontier.", "DiskQueue.")),
    ("event loop and other", ("",)),
)


def ensure_py_spy() -> Path:
    py_spy = Path(sys.executable).with_name("py-spy")
    if not py_spy.exists():
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "py-spy"], check=True)
    return py_spy


def profile_by_stage(raw: Path) -> list[tuple[str, float]]:
    """Share of py-spy's samples (raw format: `frame;frame;... count`) per stage of the crawl loop."""
    counts: collections.Counter[str] = collections.Counter()
    for line in raw.read_text().splitlines():
        stack, _, number = line.rpartition(" ")
        if not number.isdigit():
            continue
        frames = [frame.split(" (", 1)[0] for frame in reversed(stack.split(";"))]
        if "CrawlEngine." not in stack:
            stage = "start-up, imports, coordinator"
        else:
            stage = next(
                name for name, marks in STAGES if any(frame.startswith(mark) for frame in frames for mark in marks)
            )
        counts[stage] += int(number)
    total = sum(counts.values()) or 1
    return [(stage, count / total) for stage, count in counts.most_common()]


def ensure_scrapy() -> Path:
    python = SCRAPY_VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(SCRAPY_VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "scrapy"], check=True)
    return python


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, default=2000)
    parser.add_argument("--pages-per-host", type=float, default=50.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--fetch", type=int, default=20_000, help="pages each crawler fetches")
    parser.add_argument("--seeds", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--crawl-delay", type=float, default=0.2, help="of the hosts whose robots.txt has one")
    parser.add_argument("--crawlspace-args", default="", help="extra arguments for `crawlspace crawl`")
    parser.add_argument("--skip-scrapy", action="store_true")
    parser.add_argument("--profile", action="store_true", help="sample crawlspace with py-spy (costs CPU)")
    args = parser.parse_args()

    web, config = prepare_web(args)
    run_dir = OUT / time.strftime("run-%Y%m%d-%H%M%S")
    run_dir.mkdir(parents=True)
    seeds = web.seeds(args.seeds)
    seeds_file = run_dir / "seeds.txt"
    seeds_file.write_text("\n".join(seeds) + "\n")
    hosts_file = config.parent / "hosts.txt"
    nginx = Nginx(config)
    runs: list[Run] = []

    crawlspace_command = [
        sys.executable, "-m", "crawlspace", "crawl", str(seeds_file), "--out", str(run_dir / "crawlspace"),
        "--hosts-file", str(hosts_file), "--allow-private-addresses", "--min-delay", "0",
        "--max-pages", str(args.fetch), "--concurrency", str(args.concurrency), "--no-progress",
        *args.crawlspace_args.split(),
    ]  # fmt: skip
    profile = run_dir / "crawlspace-profile.txt"
    if args.profile:
        crawlspace_command = [
            str(ensure_py_spy()), "record", "--subprocesses", "--rate", "200", "--format", "raw",
            "--output", str(profile), "--", *crawlspace_command,
        ]  # fmt: skip
    nginx.start(run_dir / "crawlspace-access.log")
    try:
        print("crawlspace ...", flush=True)
        wall, cpu, rss, pss = measure(crawlspace_command, run_dir / "crawlspace.out")
    finally:
        nginx.stop()
    runs.append(judge("crawlspace", "crawlspace", web, seeds, run_dir / "crawlspace-access.log", wall, cpu, rss, pss))

    if not args.skip_scrapy:
        python = ensure_scrapy()
        scrapy_command = [
            str(python), str(Path(__file__).with_name("scrapy_crawl.py")), "--seeds", str(seeds_file),
            "--hosts-file", str(hosts_file), "--pages", str(args.fetch), "--concurrency", str(args.concurrency),
        ]  # fmt: skip
        nginx.start(run_dir / "scrapy-access.log")
        try:
            print("scrapy ...", flush=True)
            wall, cpu, rss, pss = measure(scrapy_command, run_dir / "scrapy.out")
        finally:
            nginx.stop()
        runs.append(judge("scrapy", "scrapy-bench", web, seeds, run_dir / "scrapy-access.log", wall, cpu, rss, pss))

    print(f"\nweb: {args.hosts} hosts, {len(web.all_urls())} URLs; each crawler asked for {args.fetch} pages")
    header = f"{'':12}{'pages':>8}{'pages/s':>10}{'CPU ms/page':>13}{'peak RSS MB':>13}{'peak PSS MB':>13}"
    header += f"{'robots viol.':>14}"
    print(header + f"{'dup fetches':>13}{'overlaps':>10}")
    for run in runs:
        print(
            f"{run.name:12}{run.pages:>8}{run.pages_per_second:>10.1f}{run.cpu_ms_per_page:>13.2f}"
            f"{run.peak_rss_mb:>13.0f}{run.peak_pss_mb:>13.0f}{run.robots_violations:>14}{run.duplicate_fetches:>13}{run.host_overlaps:>10}"
        )
    if len(runs) == 2:
        ours, theirs = runs
        print(
            f"\nScrapy / crawlspace: CPU per page {theirs.cpu_ms_per_page / ours.cpu_ms_per_page:.1f}x, "
            f"pages/s {ours.pages_per_second / theirs.pages_per_second:.2f}x (crawlspace faster when > 1), "
            f"peak RSS {theirs.peak_rss_mb / ours.peak_rss_mb:.2f}x, "
            f"peak PSS {theirs.peak_pss_mb / ours.peak_pss_mb:.2f}x"
        )
    if args.profile:
        print(f"\nwhere crawlspace's time goes (py-spy samples of all its processes, {profile}):")
        for stage, share in profile_by_stage(profile):
            print(f"  {100 * share:5.1f}%  {stage}")
    (run_dir / "results.json").write_text(json.dumps([asdict(run) for run in runs], indent=2))
    print(f"\nresults: {run_dir / 'results.json'}")


if __name__ == "__main__":
    main()
