"""The cost of the Redis transport: one simulated web crawled by 1 process, by `--processes 2`, and by 2 and
3 cluster nodes over a local redis-server, side by side.

One web is served for the whole run (a separate process: its CPU is not counted). Each configuration
crawls it from a fresh directory, in rounds that take turns so that load changes on a shared machine hit
them alike. Figures per configuration (the median over rounds):

- pages/s: pages fetched over the crawl's wall time (start of the first process to the end of the last);
- CPU ms/page: user + system of every crawl process (each reaped with wait4, so a coordinator's workers
  count) plus redis-server's (from /proc, for the cluster runs) per page;
- messages, entries, bytes per page: the messages the nodes sent, the stream entries (XADDs) they went in
  (one per receiver and write) and their bytes (stats.json's transport section);
- batch p50/p99 ms: the latency of a batch from transmit to acknowledgement (the worst node's);
- round trips/page: the streams' reader's and writer's and the control poll's pipelines and commands
  (stats.json's transport section; the termination rounds, the budget and the status are not counted);
- commands/page: the commands redis-server ran (`INFO commandstats`, the set-up's own before the crawl
  subtracted) per page, and the commands that make most of them. Unlike CPU this count is steady on a
  shared machine, and the transport's cost is per command (bench/README.md's profile).

The target of issue 16: the Redis transport costs at most 0.1 CPU-ms per page more than the socketpair mesh
(cluster-2 against processes-2), printed as the difference of the medians and as each round's difference
(median and range: the two ran in the same round, under the same load). `unix-2` is cluster-2 with the
nodes reaching redis-server over its Unix socket instead of TCP on the loopback: one machine's deployment,
and the mesh's own kind of socket.

Usage: python bench/distributed/bench.py [--hosts 150] [--pages-per-host 20] [--rounds 3] [--only NAMES]
[--startup] [--against DIR]

`--startup` separates a crawl's fixed cost (a node is a whole interpreter start, the mesh forks its
workers from a warm coordinator) from its cost per page; `--against DIR` runs every configuration with
another checkout's code too, in the same rounds, so that a change and the code before it see the same load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from crawlspace.distributed.redislink import DEFAULT_CRAWL_ID, Keys  # noqa: E402
from crawlspace.simweb import RunningServer, SimWeb, SimWebConfig, serve_in_background  # noqa: E402
from tests.distributed.redis_server import RedisServer  # noqa: E402

CONFIGURATIONS = ("processes-1", "processes-2", "cluster-2", "unix-2", "cluster-3")
COMMAND = "command:"  # a run's per-command figures: calls of that command per page
KIND = "kind:"  # and per kind of message: the messages of that type the nodes sent, per page
TOP_COMMANDS = 8
AGAINST = "@against"  # a configuration run with --against's code
TICKS = os.sysconf("SC_CLK_TCK")


def process_cpu(pid: int) -> float:
    """Seconds of user + system CPU of a running process (its own, not its children's)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def command_calls(url: str) -> Counter[str]:
    """Calls of each command redis-server ran so far (INFO commandstats), `info` itself left out."""
    import redis

    client = redis.Redis.from_url(url, socket_timeout=5)
    try:
        stats = client.info("commandstats")
    finally:
        client.close()
    calls = Counter({name.removeprefix("cmdstat_"): int(value["calls"]) for name, value in stats.items()})
    del calls["info"]
    return calls


def wait_for_the_crawl(url: str, timeout: float = 60.0) -> int:
    """Until the first node has published the crawl: a node started before would find no configuration to
    take (the defaults, which the crawl's then refuses). A fixed pause lost that race on a loaded machine.
    The EXISTS commands it sent (not the crawl's)."""
    import redis

    client = redis.Redis.from_url(url, socket_timeout=5)
    deadline = time.monotonic() + timeout
    asked = 0
    try:
        while not client.exists(Keys(DEFAULT_CRAWL_ID).meta):
            asked += 1
            if time.monotonic() > deadline:
                raise SystemExit(f"the first node published no crawl in {timeout:.0f} s")
            time.sleep(0.05)
        return asked + 1
    finally:
        client.close()


def reap(process: subprocess.Popen[bytes]) -> float:
    """Wait for a crawl process; its CPU seconds and those of the children it reaped (its workers)."""
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"a crawl process exited with {process.returncode}")
    return usage.ru_utime + usage.ru_stime


def crawl_command(running: RunningServer, out: Path) -> list[str]:
    return [
        sys.executable, "-m", "crawlspace", "crawl", "--out", str(out), "--hosts-file", str(running.hosts_file),
        "--no-progress", "--max-seconds", "600",
    ]  # fmt: skip


def run_local(running: RunningServer, base: Path, processes: int, code: Path | None = None) -> dict[str, float]:
    out = base / f"local-{processes}"
    command = [*crawl_command(running, out), str(running.seeds_file), "--allow-private-addresses", "--min-delay", "0"]
    started = time.monotonic()
    process = subprocess.Popen([*command, "--processes", str(processes)], stdout=subprocess.DEVNULL, cwd=code)
    cpu = reap(process)
    wall = time.monotonic() - started
    pages = int(json.loads((out / "stats.json").read_text())["pages_fetched"])
    return {
        "pages": pages, "pages_per_second": pages / wall, "cpu_ms": cpu * 1000,
        "cpu_ms_per_page": cpu * 1000 / max(pages, 1),
    }  # fmt: skip


def run_cluster(
    running: RunningServer, base: Path, nodes: int, code: Path | None = None, *, unix: bool = False
) -> dict[str, float]:
    """`unix`: the nodes reach redis-server over its Unix socket (`unix-N`), as the mesh's workers reach one
    another over socketpairs, instead of TCP on the loopback (`cluster-N`)."""
    server = RedisServer(base / f"redis-{nodes}", unix_socket=unix)
    server.start()
    url = server.unix_url if unix else server.url
    try:
        redis_cpu_before = process_cpu(server.process.pid) if server.process else 0.0
        calls_before = command_calls(url)
        processes = []
        started = time.monotonic()
        for node in range(nodes):
            command = crawl_command(running, base / f"node-{nodes}-{node}")
            command += ["--cluster", url, "--node", str(node), "--nodes", str(nodes)]
            if node == 0:
                command += [str(running.seeds_file), "--allow-private-addresses", "--min-delay", "0"]
            processes.append(subprocess.Popen(command, stdout=subprocess.DEVNULL, cwd=code))
            if node == 0:
                calls_before["exists"] += wait_for_the_crawl(url)
        cpu = sum(reap(process) for process in processes)
        wall = time.monotonic() - started
        redis_cpu = (process_cpu(server.process.pid) if server.process else 0.0) - redis_cpu_before
        calls = command_calls(url) - calls_before
    finally:
        server.kill()
    stats = [json.loads((base / f"node-{nodes}-{node}" / "stats.json").read_text()) for node in range(nodes)]
    pages = sum(int(s["pages_fetched"]) for s in stats)
    transport = [s["transport"] for s in stats]
    kinds = sum((Counter(t.get("messages_out_by_kind", {})) for t in transport), Counter())
    return {
        "pages": pages,
        "pages_per_second": pages / wall,
        "cpu_ms": (cpu + redis_cpu) * 1000,
        "cpu_ms_per_page": (cpu + redis_cpu) * 1000 / max(pages, 1),
        "redis_cpu_ms_per_page": redis_cpu * 1000 / max(pages, 1),
        "messages_per_page": sum(t["messages_out"] for t in transport) / max(pages, 1),
        "entries_per_page": sum(t["entries_out"] for t in transport) / max(pages, 1),
        "bytes_per_page": sum(t["bytes_out"] for t in transport) / max(pages, 1),
        "batch_p50_ms": max(t["batch_latency_ms_p50"] or 0 for t in transport),
        "batch_p99_ms": max(t["batch_latency_ms_p99"] or 0 for t in transport),
        "commands_per_page": calls.total() / max(pages, 1),
        "round_trips_per_page": sum(t.get("round_trips", 0) for t in transport) / max(pages, 1),
        **{f"{COMMAND}{name}": count / max(pages, 1) for name, count in calls.items()},
        **{f"{KIND}{name}": count / max(pages, 1) for name, count in kinds.items()},
    }


def top(runs: list[dict[str, float]], prefix: str) -> str:
    """The largest per-page figures whose names start with `prefix` (median over the runs), as text."""
    names = {key for run in runs for key in run if key.startswith(prefix)}
    medians = {key: statistics.median(run.get(key, 0.0) for run in runs) for key in names}
    largest = sorted(medians.items(), key=lambda item: -item[1])[:TOP_COMMANDS]
    return ", ".join(f"{key.removeprefix(prefix)} {value:.3f}" for key, value in largest)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=150)
    parser.add_argument("--pages-per-host", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default=",".join(CONFIGURATIONS), help="Comma-separated configurations to run.")
    parser.add_argument(
        "--startup", action="store_true",
        help="Also crawl a web of 2 hosts with each configuration, each round: its CPU is the fixed cost of a "
        "crawl (start-up imports, joining, termination, shutdown), and the big web's CPU net of it, per page "
        "beyond the small web's, the cost that grows with the crawl.",
    )  # fmt: skip
    parser.add_argument(
        "--against", type=Path, metavar="DIR",
        help="Also run each configuration with the crawlspace of another checkout (`python -m crawlspace` from "
        "DIR), in the same rounds: a change measured against the code before it, both under the same load.",
    )  # fmt: skip
    args = parser.parse_args()
    chosen = [name for name in CONFIGURATIONS if name in args.only.split(",")]
    if args.against is not None:
        if not (args.against / "crawlspace" / "__main__.py").is_file():
            raise SystemExit(f"--against {args.against}: no crawlspace package there")
        chosen = [f"{name}{suffix}" for name in chosen for suffix in ("", AGAINST)]
    web = SimWeb.generate(
        SimWebConfig(
            hosts=args.hosts, seed=5, mean_pages_per_host=args.pages_per_host, robots_crawl_delay=0.0,
            include_trap=False, shared_ip_hosts=max(2, args.hosts // 20),
        )
    )  # fmt: skip
    small = SimWeb.generate(
        SimWebConfig(hosts=2, seed=5, mean_pages_per_host=3, robots_crawl_delay=0.0, include_trap=False)
    )
    results: dict[str, list[dict[str, float]]] = {name: [] for name in chosen}
    with tempfile.TemporaryDirectory(prefix="bench-distributed-") as temporary:
        base = Path(temporary)
        with (
            serve_in_background(web, base / "web", seeds=20) as running,
            serve_in_background(small, base / "small-web", seeds=2) as running_small,
        ):
            for number in range(args.rounds):
                for name in chosen:
                    kind, count = name.removesuffix(AGAINST).split("-")
                    code = args.against if name.endswith(AGAINST) else None
                    where = base / f"round-{number}" / name
                    where.mkdir(parents=True)
                    run = {
                        "processes": run_local, "cluster": run_cluster, "unix": partial(run_cluster, unix=True)
                    }[kind]  # fmt: skip
                    result = run(running, where, int(count), code)
                    if args.startup:
                        (where / "small").mkdir()
                        fixed = run(running_small, where / "small", int(count), code)
                        result["startup_cpu_ms"] = fixed["cpu_ms"]
                        result["net_cpu_ms_per_page"] = (result["cpu_ms"] - fixed["cpu_ms"]) / max(
                            1, result["pages"] - fixed["pages"]
                        )
                    results[name].append(result)
                    shown = {k: round(v, 3) for k, v in result.items() if ":" not in k}
                    print(f"round {number + 1} {name}: {shown}", file=sys.stderr)
    columns = ["pages", "pages_per_second", "cpu_ms_per_page", "redis_cpu_ms_per_page", "messages_per_page",
               "entries_per_page", "bytes_per_page", "batch_p50_ms", "batch_p99_ms", "commands_per_page",
               "round_trips_per_page",
               *(["startup_cpu_ms", "net_cpu_ms_per_page"] if args.startup else [])]  # fmt: skip
    print("| configuration | " + " | ".join(columns) + " |")
    print("|---" * (len(columns) + 1) + "|")
    medians: dict[str, dict[str, float]] = {}
    for name in chosen:
        medians[name] = {c: statistics.median(r[c] for r in results[name]) for c in columns if c in results[name][0]}
        cells = [f"{medians[name][c]:.2f}" if c in medians[name] else "" for c in columns]
        print(f"| {name} | " + " | ".join(cells) + " |")
    for name in chosen:
        if "commands_per_page" not in medians[name]:
            continue
        commands = medians[name]["commands_per_page"]
        print(f"\n{name}: {commands:.3f} Redis commands/page; most: {top(results[name], COMMAND)}")
        print(f"{name}: messages/page by kind: {top(results[name], KIND)}")
    for suffix in ("", AGAINST) if args.against is not None else ("",):
        mesh_name = f"processes-2{suffix}"
        for transport in ("cluster-2", "unix-2"):
            name = f"{transport}{suffix}"
            if name not in results or mesh_name not in results:
                continue
            extra = medians[name]["cpu_ms_per_page"] - medians[mesh_name]["cpu_ms_per_page"]
            rounds = [
                cluster["cpu_ms_per_page"] - mesh["cpu_ms_per_page"]
                for cluster, mesh in zip(results[name], results[mesh_name], strict=True)
            ]  # the same round: the same load
            print(
                f"\nRedis transport ({name}) - socketpair mesh ({mesh_name}): {extra:+.3f} CPU-ms per page "
                f"(target <= 0.1); per round: median {statistics.median(rounds):+.3f}, range "
                f"{min(rounds):+.3f} to {max(rounds):+.3f} ({', '.join(f'{r:+.3f}' for r in rounds)})"
            )
        cluster, mesh = medians.get(f"cluster-2{suffix}"), medians.get(mesh_name)
        if cluster is None or mesh is None:
            continue
        if args.startup:
            net = cluster["net_cpu_ms_per_page"] - mesh["net_cpu_ms_per_page"]
            fixed = cluster["startup_cpu_ms"] - mesh["startup_cpu_ms"]
            print(f"net of the fixed cost ({fixed:+.0f} CPU-ms a crawl): {net:+.3f} CPU-ms per page")


if __name__ == "__main__":
    main()
