"""`crawlspace simweb ...`: serve a simulated web, dump its ground truth, export it for nginx.

The `simweb` click group is wired into the `crawlspace` CLI and also runs on its own as
`python -m crawlspace.simweb`. `serve` writes the hosts file, the seeds file and then the ready
file (in that order: a ready file means everything else is there), serves until SIGINT or
SIGTERM and flushes the request log on the way out; SIGUSR1 flushes the log at once.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from crawlspace.simweb.config import SimWebConfig, SimWebConfigError
from crawlspace.simweb.export import export_static
from crawlspace.simweb.generator import SimWeb
from crawlspace.simweb.server import SimServer, default_port, new_event_loop, write_atomically

F = TypeVar("F", bound=Callable[..., Any])

_KNOBS: list[tuple[str, str, type, str]] = [
    ("--hosts", "hosts", int, "Number of hosts."),
    ("--seed", "seed", int, "Random seed: same seed, same web."),
    ("--mean-pages", "mean_pages_per_host", float, "Mean pages per host (heavy-tailed)."),
    ("--max-pages-per-host", "max_pages_per_host", int, "Cap of pages on one host."),
    ("--mean-links", "mean_out_links", float, "Mean links per page."),
    ("--intra-host-fraction", "intra_host_link_fraction", float, "Share of links that stay on their host."),
    ("--duplicate-fraction", "duplicate_fraction", float, "Share of pages with exact copies."),
    ("--near-duplicate-fraction", "near_duplicate_fraction", float, "Share of pages with a near-copy."),
    ("--crawl-delay", "robots_crawl_delay", float, "Crawl-delay of the hosts whose robots.txt has one."),
    ("--latency", "latency", float, "Mean added latency per response, seconds."),
    ("--bandwidth", "bandwidth", float, "Mean bandwidth per host, bytes/s (0: unlimited)."),
    ("--shared-ip-hosts", "shared_ip_hosts", int, "That many hosts share one IP address."),
    ("--port", "port", int, "Port of every host [default: 80 when it can be bound, else 8080]."),
    ("--time-scale", "time_scale", float, "With --changing: simulated seconds of change per real second."),
    (
        "--change-epoch",
        "change_epoch",
        float,
        "With --changing: Unix time of every page's first version [default: now].",
    ),
]


def config_options(function: F) -> F:
    """The generator's knobs as options; unset ones keep SimWebConfig's defaults."""
    for flag, name, kind, text in reversed(_KNOBS):
        function = click.option(flag, name, type=kind, default=None, help=text)(function)
    function = click.option("--trap/--no-trap", "include_trap", default=None, help="Include the spider trap.")(function)
    function = click.option(
        "--changing/--static", "changing", default=None,
        help="Pages change over time (Poisson, heavy-tailed rates), with Last-Modified, ETag and 304s.",
    )(function)  # fmt: skip
    return click.option(
        "--config-file",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        help="A SimWebConfig as JSON (serve_in_background passes one); knobs given too override it.",
    )(function)


def build_config(config_file: Path | None, knobs: dict[str, Any], *, pick_port: bool) -> SimWebConfig:
    """Config from the JSON file (if any) with the given knobs on top; a bad value is a usage error."""
    values: dict[str, Any] = json.loads(config_file.read_text()) if config_file is not None else {}
    values.update({name: value for name, value in knobs.items() if value is not None})
    if pick_port and "port" not in values:
        values["port"] = default_port()
    if knobs.get("changing") and not values.get("change_epoch"):  # --changing: the web starts changing now
        values["change_epoch"] = float(int(time.time()))  # (a config file's epoch is kept: the judge has it)
    try:
        return SimWebConfig.from_dict(values)
    except (SimWebConfigError, TypeError, ValueError) as exc:
        raise click.UsageError(str(exc)) from None


def _knob_values(options: dict[str, Any]) -> dict[str, Any]:
    names = {name for _, name, _, _ in _KNOBS} | {"include_trap", "changing"}
    return {name: options.pop(name) for name in list(options) if name in names}


@click.group("simweb")
def simweb() -> None:
    """The simulated web: a deterministic web on loopback for tests, demos and benchmarks."""


@simweb.command()
@config_options
@click.option("--log", "log_path", type=click.Path(dir_okay=False, path_type=Path), help="Request log (TSV).")
@click.option("--hosts-file", type=click.Path(dir_okay=False, path_type=Path), help="Write `IP name` lines here.")
@click.option("--seeds-file", type=click.Path(dir_okay=False, path_type=Path), help="Write seed URLs here.")
@click.option("--seeds", "n_seeds", type=click.IntRange(min=1), default=10, show_default=True, help="Seed URLs.")
@click.option("--ready-file", type=click.Path(dir_okay=False, path_type=Path), help="Written (JSON) once serving.")
@click.option("--octet", type=click.IntRange(1, 254), help="Second octet R of 127.R.x.y [default: a free one].")
def serve(
    config_file: Path | None,
    log_path: Path | None,
    hosts_file: Path | None,
    seeds_file: Path | None,
    n_seeds: int,
    ready_file: Path | None,
    octet: int | None,
    **options: Any,
) -> None:
    """Serve a simulated web on 127.R.x.y until interrupted."""
    config = build_config(config_file, _knob_values(options), pick_port=True)
    web = SimWeb.generate(config)
    server = SimServer(web, log_path=log_path, hosts_file=hosts_file, octet=octet)
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        runner.run(_serve(server, seeds_file, n_seeds, ready_file))


async def _serve(server: SimServer, seeds_file: Path | None, n_seeds: int, ready_file: Path | None) -> None:
    web = server.web
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    loop.add_signal_handler(signal.SIGUSR1, server.log.flush)
    await server.start()
    seeds = web.seeds(n_seeds)
    if seeds_file is not None:
        write_atomically(seeds_file, "".join(seed + "\n" for seed in seeds))
    if ready_file is not None:
        info = {
            "pid": os.getpid(),
            "octet": server.octet,
            "port": server.port,
            "hosts": len(web.hosts),
            "fingerprint": web.fingerprint(),
            "seeds": seeds,
        }
        write_atomically(ready_file, json.dumps(info))
    click.echo(
        f"simweb: {len(web.hosts)} hosts, {web.data.pages} pages on 127.{server.octet}.x.y:{server.port}",
        err=True,
    )
    try:
        await stop.wait()
    finally:
        await server.stop()
        click.echo(f"simweb: stopped after {server.requests} requests", err=True)


@simweb.command()
@config_options
@click.option("--seeds", "n_seeds", type=click.IntRange(min=1), default=10, show_default=True)
@click.option("--agent", default="crawlspace", show_default=True, help="Robots product token.")
@click.option(
    "--urls",
    "urls_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write one JSON line per URL (status, robots, duplicates, PageRank, expected).",
)
def truth(config_file: Path | None, n_seeds: int, agent: str, urls_file: Path | None, **options: Any) -> None:
    """Print a JSON summary of the ground truth of a simulated web."""
    config = build_config(config_file, _knob_values(options), pick_port=False)
    web = SimWeb.generate(config)
    seeds = web.seeds(n_seeds)
    urls = web.all_urls()
    expected = web.expected_fetches(seeds, agent=agent)
    ranks = web.pagerank()
    allowed = sum(web.robots_allowed(url, agent) for url in urls)
    summary = {
        "config": config.to_dict(),
        "fingerprint": web.fingerprint(),
        "hosts": len(web.hosts),
        "pages": web.data.pages,
        "urls": len(urls),
        "status": dict(sorted(collections.Counter(urls.values()).items())),
        "robots_kinds": {
            kind.name: count
            for kind, count in sorted(collections.Counter(web.robots_kind(host) for host in web.hosts).items())
        },
        "robots_allowed_urls": allowed,
        "duplicate_clusters": len(web.duplicate_clusters()),
        "near_duplicates": sum(web.near_duplicate_of(url) is not None for url in urls),
        "trap_host": web.trap_host,
        "seeds": seeds,
        "expected_fetches": len(expected),
        "top_pagerank": [[url, round(rank, 6)] for url, rank in sorted(ranks.items(), key=lambda x: -x[1])[:10]],
    }
    if urls_file is not None:
        with open(urls_file, "w", encoding="utf-8") as handle:
            for url, status in urls.items():
                record = {
                    "url": url,
                    "status": status,
                    "robots_allowed": web.robots_allowed(url, agent),
                    "duplicate_cluster": web.duplicate_cluster(url),
                    "near_duplicate_of": web.near_duplicate_of(url),
                    "redirect_target": web.redirect_target(url),
                    "pagerank": ranks[url],
                    "expected": url in expected,
                }
                handle.write(json.dumps(record) + "\n")
    json.dump(summary, sys.stdout, indent=2)
    sys.stdout.write("\n")


@simweb.command("export")
@config_options
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--octet", type=click.IntRange(1, 254), default=1, show_default=True, help="R of 127.R.x.y.")
def export(config_file: Path | None, directory: Path, octet: int, **options: Any) -> None:
    """Write the web as static files and an nginx config (for throughput benchmarks)."""
    config = build_config(config_file, _knob_values(options), pick_port=True)
    path = export_static(SimWeb.generate(config), directory, octet)
    click.echo(f"nginx -c {path}  (hosts file: {directory / 'hosts.txt'})")
