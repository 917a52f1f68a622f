"""Throughput benchmark: crawlspace against Scrapy on the same simulated web, served by nginx, in one run.

    .venv/bin/python bench/throughput/run.py [--hosts 2000] [--pages-per-host 50] [--fetch 20000]

Generates the simulated web (static files, cached under bench/out/), serves it with nginx (started here,
stopped at the end), crawls a fixed number of pages with crawlspace, then with Scrapy (its own virtualenv,
bench/.venv-scrapy, created on first use), and prints for each: pages/s, CPU ms per page (user+sys of the
crawler's whole process tree), peak RSS (sum over the tree), and from nginx's access log: robots.txt
violations, URLs fetched more than once and overlapping requests to one host. Then the ratios.

`--profile` runs crawlspace under py-spy (sampling every process of the crawl; installed on first use) and
prints where its time goes, by stage of the crawl loop. `--by-code SECONDS` samples the crawl's worker
processes with native stacks for that long once they are past start-up, and prints where their CPU goes by
kind of code: the interpreter running Python, CPython's built-in types and modules, the C libraries (each
named), system calls. Sampling costs CPU (native stacks much more): take figures from a run without it.
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
from statistics import median

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
    steady_cpu_ms_per_request: float = float("nan")
    steady_requests_per_second: float = float("nan")

    @property
    def pages_per_second(self) -> float:
        return self.pages / self.wall_seconds if self.wall_seconds else 0.0

    @property
    def cpu_ms_per_page(self) -> float:
        return 1000 * self.cpu_seconds / self.pages if self.pages else float("nan")


@dataclass
class Sample:
    """One look at the crawler's process tree while it runs."""

    seconds: float  # since the start
    cpu_seconds: float  # of the live tree (and the children its members reaped)
    requests: int  # lines nginx has logged so far (buffered: up to a second late)


def process_table() -> dict[int, tuple[int, int, int]]:
    """Every process, from /proc: pid -> (parent pid, its own CPU ticks, the ticks of the children it reaped)."""
    table: dict[int, tuple[int, int, int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as handle:
                    fields = handle.read().rsplit(b")", 1)[1].split()
                table[int(entry)] = (
                    int(fields[1]),
                    int(fields[11]) + int(fields[12]),
                    int(fields[13]) + int(fields[14]),
                )
            except (OSError, IndexError, ValueError):
                continue
    return table


def descendants(root: int, table: dict[int, tuple[int, int, int]]) -> list[int]:
    """`root` and every process below it in `table`, parents first."""
    children: dict[int, list[int]] = {}
    for pid, (parent, _, _) in table.items():
        children.setdefault(parent, []).append(pid)
    members = [root]
    for member in members:
        members.extend(sorted(children.get(member, [])))
    return members


def tree_usage(root: int) -> tuple[int, int, float]:
    """Memory and CPU of `root` and all its descendants, from /proc: summed RSS, summed PSS (each shared
    page divided among the processes sharing it: forked workers share their parent's pages, which
    summed RSS counts once per process), and CPU seconds (user + system, reaped children included)."""
    table = process_table()
    members = descendants(root, table)
    rss = pss = 0
    for pid in members:
        try:
            with open(f"/proc/{pid}/statm") as handle:
                rss += int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
            with open(f"/proc/{pid}/smaps_rollup") as handle:
                pss += next(int(line.split()[1]) * 1024 for line in handle if line.startswith("Pss:"))
        except (OSError, IndexError, ValueError, StopIteration):
            continue
    cpu = sum(sum(table[pid][1:]) for pid in members if pid in table) / os.sysconf("SC_CLK_TCK")
    return rss, pss, cpu


class LogCounter:
    """Counts the lines of a growing access log, reading only what was added since the last call."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.lines = 0

    def __call__(self) -> int:
        try:
            with self.path.open("rb") as handle:
                handle.seek(self.offset)
                added = handle.read()
        except OSError:
            return self.lines
        self.offset += len(added)
        self.lines += added.count(b"\n")
        return self.lines


Measured = tuple[float, float, float, float, list[Sample]]


@dataclass
class NativeSampling:
    """py-spy with native stacks on each worker of a crawl (the processes below the one started), for
    `seconds` from `after` seconds into the crawl, each into `{output}-PID.txt`."""

    seconds: float
    output: Path
    after: float = 8.0
    samplers: list[subprocess.Popen[bytes]] | None = None

    def start_if_due(self, root: int, elapsed: float) -> None:
        if self.samplers is not None or elapsed < self.after:
            return
        workers = descendants(root, process_table())[1:]
        self.samplers = []
        for pid in workers:
            command = [
                str(ensure_py_spy()), "record", "--native", "--rate", "40", "--duration", str(int(self.seconds)),
                "--format", "raw", "--output", f"{self.output}-{pid}.txt", "--pid", str(pid),
            ]  # fmt: skip
            self.samplers.append(subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

    def wait(self) -> list[Path]:
        for sampler in self.samplers or []:
            sampler.wait()
        return sorted(self.output.parent.glob(f"{self.output.name}-*.txt"))


def measure(
    command: list[str], log: Path, requests: LogCounter, cwd: Path, native: NativeSampling | None = None
) -> Measured:
    """Run `command`; return wall seconds, CPU seconds of its tree, peak RSS and peak PSS of its tree in MB,
    and samples of its CPU and of the requests served while it ran (for the steady-state rate)."""
    started = time.monotonic()
    with log.open("wb") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, cwd=cwd)
    peak_rss = peak_pss = 0
    samples: list[Sample] = []
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            break
        if native is not None:
            native.start_if_due(process.pid, time.monotonic() - started)
        rss, pss, cpu = tree_usage(process.pid)
        peak_rss, peak_pss = max(peak_rss, rss), max(peak_pss, pss)
        samples.append(Sample(time.monotonic() - started, cpu, requests()))
        time.sleep(0.2)
    wall = time.monotonic() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{command[0]} failed ({os.waitstatus_to_exitcode(status)}); see {log}")
    return wall, usage.ru_utime + usage.ru_stime, peak_rss / 2**20, peak_pss / 2**20, samples


def steady_state(samples: list[Sample], total: int) -> tuple[float, float]:
    """(CPU ms per request, requests/s) between 20% and 90% of the crawl's requests: without the
    start-up (imports, seeds, robots.txt of the first hosts) and the end (draining, closing stores)."""
    low = next((sample for sample in samples if sample.requests >= 0.2 * total), None)
    high = next((sample for sample in samples if sample.requests >= 0.9 * total), None)
    if low is None or high is None or high.requests <= low.requests or high.seconds <= low.seconds:
        return float("nan"), float("nan")
    served = high.requests - low.requests
    return 1000 * (high.cpu_seconds - low.cpu_seconds) / served, served / (high.seconds - low.seconds)


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


WEB_PROFILES = {
    # the web of the issue-10 figures: text paragraphs with about 10 links each, 20-30 KB
    "plain": {"page_bytes": (20_000, 30_000), "mean_page_bytes": 25_000},
    # closer to real pages (bench/README.md, "The benchmark's web"): a site template of metadata,
    # scripts, styles, navigation and footer around the text, 30-100 links a page, some to 404s,
    # 5-200 KB (median near python3-doc's), robots.txt files padded with other crawlers' groups
    "heavy": {
        "page_bytes": (500, 160_000),
        "mean_page_bytes": 16_000,
        "mean_out_links": 55.0,
        "broken_link_fraction": 0.2,
        "page_style": "realistic",
    },
}


def prepare_web(args: argparse.Namespace) -> tuple[SimWeb, Path]:
    port = 80 if os.geteuid() == 0 else 18080
    web = SimWeb.generate(
        SimWebConfig(
            hosts=args.hosts,
            seed=args.seed,
            mean_pages_per_host=args.pages_per_host,
            # heavy-tailed sites, capped so that a 100,000-page crawl is not one big site's Crawl-delay tail
            max_pages_per_host=5 * int(args.pages_per_host),
            robots_crawl_delay=args.crawl_delay,
            include_trap=False,
            port=port,
            **WEB_PROFILES[args.web],  # type: ignore[arg-type]
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


def judge(name: str, agent: str, web: SimWeb, seeds: list[str], log: Path, measured: Measured) -> Run:
    """Figures of one crawl from nginx's log; robots.txt is judged for the crawler's own product token."""
    wall, cpu, rss, pss, samples = measured
    entries = read_nginx_log(log)
    verdict = judge_crawl(web, entries, seeds, agent=agent, min_delay=0.0)
    pages = sum(1 for entry in entries if entry.path != "/robots.txt")
    steady_cpu, steady_rate = steady_state(samples, len(entries))
    return Run(
        name, pages, wall, cpu, rss, pss, len(verdict.disallowed), sum(n - 1 for n in verdict.refetched.values()),
        len(verdict.host_overlaps), steady_cpu, steady_rate,
    )  # fmt: skip


# stages of the crawl loop: a sample counts for the first stage here with a mark that begins one of its frames
STAGES = (
    (
        "near-duplicate check (shingling, LSH bands, questions to the band owners)",
        (
            "ContentSeen.check_near",
            "Shingler.",
            "PartitionInbox.near_match",
            "PartitionInbox.answer_near",
            "SocketMesh._answer_near",
        ),
    ),
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
    (
        "fetch (HTTP client, sockets)",
        (
            "Fetcher.",
            "CrawlEngine._fetch_page",
            "CrawlEngine._fetch_robots",
            "Connection.data_received",  # crawlspace.fetch.http1's protocol, called by the event loop
            "Connection.connection_",
            "Connection.eof_received",
            "Connection._check_read_timeout",
            "ConnectionPool.",
        ),
    ),
    ("frontier", ("Frontier.", "DiskQueue.")),
    ("event loop and other", ("",)),
)


def ensure_py_spy() -> Path:
    py_spy = Path(sys.executable).with_name("py-spy")
    if not py_spy.exists():
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "py-spy"], check=True)
    return py_spy


def stage_of(stack: str) -> str:
    """The stage of the crawl loop of a sample: the first whose marks one of its frames starts with."""
    frames = [frame.split(" (", 1)[0] for frame in reversed(stack.split(";"))]
    return next(name for name, marks in STAGES if any(frame.startswith(mark) for frame in frames for mark in marks))


def profile_by_stage(raw: Path) -> list[tuple[str, float]]:
    """Share of py-spy's samples (raw format: `frame;frame;... count`) per stage of the crawl loop."""
    counts: collections.Counter[str] = collections.Counter()
    for line in raw.read_text().splitlines():
        stack, _, number = line.rpartition(" ")
        if not number.isdigit():
            continue
        stage = stage_of(stack)
        if stage == STAGES[-1][0] and ("_worker_main" not in stack or "_find_and_load" in stack):
            stage = "start-up, imports, coordinator"
        counts[stage] += int(number)
    total = sum(counts.values()) or 1
    return [(stage, count / total) for stage, count in counts.most_common()]


LIBC = "system calls and libc (I/O, memory, locks)"
BUILTINS = "CPython built-ins (str, bytes, dict, list, asyncio's C module, ...)"
INTERPRETER = "interpreter running Python code"
INTERPRETED_KINDS = frozenset({LIBC, BUILTINS, INTERPRETER})
"""The Python side of a sample: bytecode, the built-ins it calls, and libc (its allocator, its copies, its I/O)."""

CODE_KINDS = (
    # (kind, marks in the leaf frame's location), first match wins; a leaf that is a Python frame is the
    # interpreter running that function's bytecode (py-spy shows the Python frame where the C stack is
    # the evaluation loop)
    ("lexbor (selectolax): HTML tree, queries, text", ("selectolax/",)),
    ("RocksDB (rocksdict): crawl table, content set", ("rocksdict/",)),
    ("ISA-L (isal): WARC compression", ("isal/",)),
    ("OpenSSL (libcrypto): SHA-1 digests, TLS", ("libcrypto", "libssl")),
    ("numpy", ("numpy/",)),
    ("uvloop and libuv: the event loop", ("uvloop/",)),
    ("crawlspace's C: MinHash signatures", ("crawlspace/seen/_minhash",)),
    ("llhttp (httptools)", ("httptools/",)),
    ("ada (ada-url, through cffi): URL parsing", ("ada_url/", "_cffi_backend", "ada.cpp")),
    ("xxhash", ("xxhash", "_xxhash")),
    ("msgspec", ("msgspec/",)),
    (LIBC, ("libc.so", "libm.so", "ld-linux")),
    (BUILTINS, ("libpython", "(python3", ".c:", ".h:")),
    ("other compiled extensions", (".so)", ".so.")),
    (INTERPRETER, (".py:", "<string>:", "<frozen ")),
)


def code_kind(stack: str) -> str:
    leaf = stack.rsplit(";", 1)[-1]
    where = leaf[leaf.rfind(" (") :]
    return next((kind for kind, marks in CODE_KINDS if any(mark in where for mark in marks)), "unknown")


def python_function_of(stack: str) -> str:
    """The innermost Python function of a native stack (where the interpreter was, or what called the built-in)."""
    frames = [frame for frame in stack.split(";") if ".py:" in frame or "<string>:" in frame]
    return frames[-1].split(" (", 1)[0] if frames else "(no Python frame)"


@dataclass
class CodeProfile:
    """Shares of native samples: per kind of code of the stack's leaf (CODE_KINDS); per stage of the crawl
    loop (STAGES), its Python (INTERPRETED_KINDS) and compiled shares; per Python function, its Python share."""

    kinds: list[tuple[str, float]]
    stages: list[tuple[str, float, float]]
    python_functions: list[tuple[str, float]]


def profile_by_code(raws: list[Path]) -> CodeProfile:
    kinds: collections.Counter[str] = collections.Counter()
    interpreted: collections.Counter[str] = collections.Counter()
    compiled: collections.Counter[str] = collections.Counter()
    functions: collections.Counter[str] = collections.Counter()
    for raw in raws:
        for line in raw.read_text().splitlines():
            stack, _, number = line.rpartition(" ")
            if not number.isdigit():
                continue
            kind = code_kind(stack)
            kinds[kind] += int(number)
            if kind in INTERPRETED_KINDS:
                interpreted[stage_of(stack)] += int(number)
                functions[python_function_of(stack)] += int(number)
            else:
                compiled[stage_of(stack)] += int(number)
    total = sum(kinds.values()) or 1
    by_stage = [(stage, interpreted[stage] / total, compiled[stage] / total) for stage, _ in STAGES]
    by_stage.sort(key=lambda row: -(row[1] + row[2]))
    return CodeProfile(
        [(kind, count / total) for kind, count in kinds.most_common()],
        by_stage,
        [(function, count / total) for function, count in functions.most_common()],
    )


def ensure_scrapy() -> Path:
    python = SCRAPY_VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(SCRAPY_VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "scrapy"], check=True)
    return python


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--web", choices=sorted(WEB_PROFILES), default="heavy", help="shape of the pages")
    parser.add_argument("--hosts", type=int, default=2000)
    parser.add_argument("--pages-per-host", type=float, default=50.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--fetch", type=int, default=20_000, help="pages each crawler fetches")
    parser.add_argument("--seeds", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--crawl-delay", type=float, default=0.2, help="of the hosts whose robots.txt has one")
    parser.add_argument("--min-delay", type=float, default=0.0, help="crawlspace's --min-delay (per-host politeness)")
    parser.add_argument("--crawlspace-args", default="", help="extra arguments for `crawlspace crawl`")
    parser.add_argument(
        "--compare-with",
        type=Path,
        help="another checkout of crawlspace (with its own .venv): crawled too, alternating with this one",
    )
    parser.add_argument("--rounds", type=int, default=1, help="crawls of each crawlspace, alternating")
    parser.add_argument("--skip-scrapy", action="store_true")
    parser.add_argument("--profile", action="store_true", help="sample crawlspace with py-spy (costs CPU)")
    parser.add_argument(
        "--by-code",
        type=float,
        metavar="SECONDS",
        help="sample crawlspace's workers with native stacks for SECONDS: CPU by kind of code (costs CPU)",
    )
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

    native: NativeSampling | None = None

    def crawl(name: str, agent: str, command: list[str], cwd: Path = REPO) -> Run:
        nonlocal native
        access_log = run_dir / f"{name}-access.log"
        sampling = None
        if args.by_code and native is None and agent == "crawlspace":
            sampling = native = NativeSampling(args.by_code, run_dir / "crawlspace-native")
        nginx.start(access_log)
        try:
            print(f"{name} ...", flush=True)
            counter = LogCounter(config.parent / "access.log")
            measured = measure(command, run_dir / f"{name}.out", counter, cwd, sampling)
        finally:
            nginx.stop()
        return judge(name, agent, web, seeds, access_log, measured)

    def crawlspace_command(python: str, out: Path) -> list[str]:
        return [
            python, "-m", "crawlspace", "crawl", str(seeds_file), "--out", str(out),
            "--hosts-file", str(hosts_file), "--allow-private-addresses", "--min-delay", str(args.min_delay),
            "--max-pages", str(args.fetch), "--concurrency", str(args.concurrency), "--no-progress",
            *args.crawlspace_args.split(),
        ]  # fmt: skip

    profile = run_dir / "crawlspace-profile.txt"
    contenders = [("crawlspace", sys.executable, REPO)]
    if args.compare_with is not None:
        other = args.compare_with.resolve()
        contenders.append(("baseline", str(other / ".venv" / "bin" / "python"), other))
    for round_number in range(args.rounds):
        for label, python, checkout in contenders if round_number % 2 == 0 else contenders[::-1]:
            name = label if args.rounds == 1 else f"{label}-{round_number + 1}"
            command = crawlspace_command(python, run_dir / name)
            if args.profile and label == "crawlspace":
                command = [
                    str(ensure_py_spy()), "record", "--subprocesses", "--rate", "200", "--format", "raw",
                    "--output", str(profile), "--", *command,
                ]  # fmt: skip
            runs.append(crawl(name, "crawlspace", command, cwd=checkout))  # `-m` imports from the cwd first

    if not args.skip_scrapy:
        scrapy_python = ensure_scrapy()
        scrapy_command = [
            str(scrapy_python), str(Path(__file__).with_name("scrapy_crawl.py")), "--seeds", str(seeds_file),
            "--hosts-file", str(hosts_file), "--pages", str(args.fetch), "--concurrency", str(args.concurrency),
        ]  # fmt: skip
        runs.append(crawl("scrapy", "scrapy-bench", scrapy_command))

    print(
        f"\nweb ({args.web}): {args.hosts} hosts, {len(web.all_urls())} URLs; each crawler asked for {args.fetch} pages"
    )
    header = f"{'':14}{'pages':>8}{'pages/s':>10}{'CPU ms/page':>13}{'steady ms/req':>15}{'steady req/s':>14}"
    header += f"{'peak RSS MB':>13}{'peak PSS MB':>13}{'robots viol.':>14}"
    print(header + f"{'dup fetches':>13}{'overlaps':>10}")
    for run in runs:
        print(
            f"{run.name:14}{run.pages:>8}{run.pages_per_second:>10.1f}{run.cpu_ms_per_page:>13.2f}"
            f"{run.steady_cpu_ms_per_request:>15.2f}{run.steady_requests_per_second:>14.1f}"
            f"{run.peak_rss_mb:>13.0f}{run.peak_pss_mb:>13.0f}{run.robots_violations:>14}{run.duplicate_fetches:>13}"
            f"{run.host_overlaps:>10}"
        )
    ours = [run for run in runs if run.name.startswith("crawlspace")]
    baseline = [run for run in runs if run.name.startswith("baseline")]
    scrapy = [run for run in runs if run.name == "scrapy"]
    if baseline:
        ratio = median(b.cpu_ms_per_page for b in baseline) / median(o.cpu_ms_per_page for o in ours)
        rate = median(o.pages_per_second for o in ours) / median(b.pages_per_second for b in baseline)
        print(
            f"\nbaseline / crawlspace (medians): CPU per page {ratio:.2f}x, pages/s {rate:.2f}x "
            "(crawlspace better when > 1)"
        )
    if scrapy:
        theirs, best = scrapy[0], ours[0]
        print(
            f"\nScrapy / crawlspace: CPU per page {theirs.cpu_ms_per_page / best.cpu_ms_per_page:.1f}x, "
            f"pages/s {best.pages_per_second / theirs.pages_per_second:.2f}x (crawlspace faster when > 1), "
            f"peak RSS {theirs.peak_rss_mb / best.peak_rss_mb:.2f}x, "
            f"peak PSS {theirs.peak_pss_mb / best.peak_pss_mb:.2f}x"
        )
    if args.profile:
        print(f"\nwhere crawlspace's time goes (py-spy samples of all its processes, {profile}):")
        for stage, share in profile_by_stage(profile):
            print(f"  {100 * share:5.1f}%  {stage}")
    if native is not None:
        raws = native.wait()
        print(f"\nwhere crawlspace's workers spend their CPU, by kind of code ({len(raws)} workers sampled with")
        print(f"native stacks for {args.by_code:.0f} s; {native.output}-PID.txt):")
        code = profile_by_code(raws)
        for kind, share in code.kinds:
            print(f"  {100 * share:5.1f}%  {kind}")
        print(f"\n  {'Python':>7} {'compiled':>9}  stage (Python: the interpreter, built-ins and libc)")
        for stage, python_share, compiled_share in code.stages:
            print(f"  {100 * python_share:6.1f}% {100 * compiled_share:8.1f}%  {stage}")
        top = code.python_functions[:10]
        print(f"\n  the Python's 10 largest functions ({100 * sum(share for _, share in top):.1f}% together):")
        for function, share in top:
            print(f"  {100 * share:5.1f}%  {function}")
    (run_dir / "results.json").write_text(json.dumps([asdict(run) for run in runs], indent=2))
    print(f"\nresults: {run_dir / 'results.json'}")


if __name__ == "__main__":
    main()
