"""Command-line entry points: parse arguments, build the config, call the API. Nothing else lives here."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any, NoReturn

import click

from crawlspace.config import ConfigError, CrawlConfig, reference_markdown
from crawlspace.crawl.engine import CrawlEngine, read_seeds


def fail(message: str, code: int = 2) -> NoReturn:
    click.echo(f"crawlspace: error: {message}", err=True)
    sys.exit(code)


def install_event_loop_policy() -> None:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on POSIX
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


def _parse_resolve(values: tuple[str, ...]) -> dict[str, str]:
    mapping: dict[str, str] = {}
    for value in values:
        host, sep, address = value.partition("=")
        if not sep or not host or not address:
            fail(f"--resolve expects HOST=IP, got {value!r}")
        mapping[host.strip().lower()] = address.strip()
    return mapping


def check_output_dir(out: Path) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".write-test"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        fail(f"output directory {out} is not writable: {exc.strerror or exc}")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="crawlspace")
def main() -> None:
    """crawlspace: a polite, fast, resumable web crawler."""


@main.command()
@click.argument("seeds_file", type=click.Path(path_type=Path))
@click.option("--out", "out", required=True, type=click.Path(path_type=Path), help="Crawl directory.")
@click.option("--config", "config_file", type=click.Path(path_type=Path), help="TOML configuration file.")
@click.option("--max-pages", type=int, help="Stop after this many fetches.")
@click.option("--max-seconds", type=float, help="Stop after this many seconds.")
@click.option("--user-agent", help="User-Agent header (sets --robots-agent to its product token too).")
@click.option("--robots-agent", help="Product token matched against robots.txt groups.")
@click.option("--min-delay", type=float, help="Least seconds between two requests to one host.")
@click.option("--concurrency", type=int, help="Fetches in flight at once.")
@click.option("--resolve", "resolve", multiple=True, metavar="HOST=IP", help="Fixed address for a host name.")
@click.option("--hosts-file", type=click.Path(path_type=Path), help="Hosts file consulted before /etc/hosts.")
@click.option("--allow-private-addresses", is_flag=True, default=None, help="Allow loopback and private addresses.")
@click.option("--progress/--no-progress", "live", default=None, help="Force the live display on or off.")
def crawl(
    seeds_file: Path,
    out: Path,
    config_file: Path | None,
    user_agent: str | None,
    robots_agent: str | None,
    resolve: tuple[str, ...],
    hosts_file: Path | None,
    live: bool | None,
    **options: Any,
) -> None:
    """Crawl from the URLs in SEEDS_FILE into the directory --out."""
    if not seeds_file.is_file():
        fail(f"seeds file {seeds_file} does not exist")
    if hosts_file is not None and not hosts_file.is_file():
        fail(f"hosts file {hosts_file} does not exist")
    if config_file is not None and not config_file.is_file():
        fail(f"config file {config_file} does not exist")
    overrides: dict[str, Any] = dict(options)
    if user_agent:
        overrides["user_agent"] = user_agent
        overrides["robots_agent"] = robots_agent or user_agent.split("/", 1)[0].split()[0]
    elif robots_agent:
        overrides["robots_agent"] = robots_agent
    if resolve:
        overrides["resolve"] = _parse_resolve(resolve)
    if hosts_file is not None:
        overrides["hosts_file"] = str(hosts_file)
    try:
        config = CrawlConfig.load(config_file, **overrides)
    except ConfigError as exc:
        fail(str(exc))
    check_output_dir(out)
    seeds, problems = read_seeds(seeds_file)
    for problem in problems:
        click.echo(f"crawlspace: warning: {seeds_file}:{problem.line}: {problem.reason}; skipped", err=True)
    if not seeds:
        fail(f"no valid seed URL in {seeds_file}")
    stats = run_crawl(config, out, seeds, invalid_seeds=len(problems), live=live)
    click.echo(json.dumps(stats, indent=2))


def run_crawl(
    config: CrawlConfig, out: Path, seeds: list[str], *, invalid_seeds: int = 0, live: bool | None = None
) -> dict[str, Any]:
    install_event_loop_policy()
    (out / "config.json").write_text(json.dumps(config.to_dict(), indent=2) + "\n")

    async def go() -> dict[str, Any]:
        engine = CrawlEngine(config, out, live_progress=live)
        engine.stats.invalid_seeds = invalid_seeds
        engine.add_seeds(seeds)
        return (await engine.run()).to_dict()

    return asyncio.run(go())


def _register_optional_commands() -> None:
    from crawlspace.demo import demo
    from crawlspace.simweb.cli import simweb

    main.add_command(simweb)
    main.add_command(demo)


if os.environ.get("CRAWLSPACE_MINIMAL_CLI") != "1":
    try:
        _register_optional_commands()
    except ImportError:  # pragma: no cover - during bootstrap only
        pass


@main.command("config-reference")
def config_reference() -> None:
    """Print the configuration reference (Markdown), generated from CrawlConfig."""
    click.echo(reference_markdown(), nl=False)
