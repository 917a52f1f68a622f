"""Command-line entry points: parse arguments, build the config, call the API (crawlspace.api). Nothing else here."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from crawlspace.api import (
    Crawler,
    CrawlError,
    SeedProblem,
    SeedsError,
    cluster_node,
    cluster_status,
    published_cluster_config,
    saved_config,
)
from crawlspace.cliutil import fail, open_reader
from crawlspace.config import (
    CRAWL_REFRESH_POLICY_NAMES,
    POLICY_NAMES,
    REFRESH_POLICY_NAMES,
    ConfigError,
    CrawlConfig,
    reference_markdown,
)
from crawlspace.index.cli import tier_cutoff_option


def _parse_resolve(values: tuple[str, ...]) -> dict[str, str]:
    mapping: dict[str, str] = {}
    for value in values:
        host, sep, address = value.partition("=")
        if not sep or not host or not address:
            fail(f"--resolve expects HOST=IP, got {value!r}")
        mapping[host.strip().lower()] = address.strip()
    return mapping


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="crawlspace")
def main() -> None:
    """crawlspace: a polite, fast, resumable web crawler."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("crawlspace: %(levelname)s: %(message)s"))
    root = logging.getLogger("crawlspace")
    if not root.handlers:
        root.addHandler(handler)
        root.setLevel(logging.INFO)


@main.command()
@click.argument("seeds_file", required=False, type=click.Path(path_type=Path))
@click.option("--out", "out", type=click.Path(path_type=Path), help="Crawl directory.")
@click.option(
    "--resume",
    "resume_dir",
    type=click.Path(path_type=Path),
    help="Continue the crawl in this directory from its last checkpoint, with its saved configuration "
    "(options given change it; the changes are reported).",
)
@click.option("--config", "config_file", type=click.Path(path_type=Path), help="TOML configuration file.")
@click.option("--max-pages", type=int, help="Stop after this many fetches.")
@click.option("--max-seconds", type=float, help="Stop after this many seconds.")
@click.option("--user-agent", help="User-Agent header (sets --robots-agent to its product token too).")
@click.option("--robots-agent", help="Product token matched against robots.txt groups.")
@click.option("--min-delay", type=float, help="Least seconds between two requests to one host.")
@click.option("--delay-factor", type=float, help="Wait this many times the last fetch's duration (Mercator's k).")
@click.option("--max-delay", type=float, help="Upper bound of the delay between requests to one host.")
@click.option("--max-conn-per-host", type=int, help="Requests in flight at once to one host.")
@click.option("--per-ip/--no-per-ip", "per_ip", default=None, help="Hosts on one IP address share its politeness.")
@click.option("--concurrency", type=int, help="Fetches in flight at once (per process).")
@click.option(
    "--processes", type=int, help="Crawl processes, each owning a partition of the hosts (default: one per core)."
)
@click.option("--resolve", "resolve", multiple=True, metavar="HOST=IP", help="Fixed address for a host name.")
@click.option("--hosts-file", type=click.Path(path_type=Path), help="Hosts file consulted before /etc/hosts.")
@click.option("--allow-private-addresses", is_flag=True, default=None, help="Allow loopback and private addresses.")
@click.option(
    "--allow-network", "allow_network", multiple=True, metavar="CIDR", help="Allow this non-public network only."
)
@click.option("--progress/--no-progress", "live", default=None, help="Force the live display on or off.")
@click.option(
    "--scope",
    type=click.Choice(["any", "host", "domain", "prefix"]),
    help="Stay on the seeds' hosts, registered domains or URL prefixes (default: any).",
)
@click.option("--allowed-domain", "allowed_domains", multiple=True, help="Only crawl this domain (repeatable).")
@click.option("--include", multiple=True, metavar="REGEX", help="Only crawl URLs matching a pattern (repeatable).")
@click.option("--exclude", multiple=True, metavar="REGEX", help="Never crawl URLs matching it (repeatable).")
@click.option("--max-depth", type=int, help="Follow links at most this many hops from a seed.")
@click.option("--policy", type=click.Choice(POLICY_NAMES), help="Crawl ordering (default: bfs).")
@click.option(
    "--continuous", "refresh", is_flag=True, default=None,
    help="Keep every page fresh: refetch each as its change rate and the refresh policy say (needs --max-rate).",
)  # fmt: skip
@click.option("--max-rate", type=float, help="Fetches per second of the whole crawl: its bandwidth budget.")
@click.option(
    "--refresh-policy", type=click.Choice(CRAWL_REFRESH_POLICY_NAMES),
    help="How refetches share the refresh budget (default: optimal; user-experience needs refresh_query_log).",
)  # fmt: skip
@click.option("--topic", help="Topic keywords of the focused policy (space or comma separated).")
@click.option(
    "--cluster",
    "cluster_url",
    metavar="URL",
    envvar="CRAWLSPACE_CLUSTER",
    help="Crawl as one node of a cluster joined through Redis: redis://[:PASSWORD@]HOST:PORT/DB, rediss:// for TLS "
    "(or the environment variable CRAWLSPACE_CLUSTER, which keeps the password out of the process list).",
)
@click.option("--node", type=int, help="This node's index in the cluster, 0 to --nodes - 1.")
@click.option("--nodes", type=int, help="How many nodes the cluster crawl has.")
@click.option("--crawl-id", help="The cluster crawl's name in Redis (default: crawl).")
@click.option(
    "--serve", "serve_port", type=click.IntRange(0, 65535), metavar="PORT",
    help="Serve this crawl's dashboard on 127.0.0.1:PORT while it runs (0: any free port; the URL is printed); "
    "its searches are appended to refresh_query_log, if set.",
)  # fmt: skip
def crawl(
    seeds_file: Path | None,
    out: Path | None,
    resume_dir: Path | None,
    cluster_url: str | None,
    node: int | None,
    nodes: int | None,
    crawl_id: str | None,
    config_file: Path | None,
    user_agent: str | None,
    robots_agent: str | None,
    resolve: tuple[str, ...],
    hosts_file: Path | None,
    allow_network: tuple[str, ...],
    live: bool | None,
    allowed_domains: tuple[str, ...],
    include: tuple[str, ...],
    exclude: tuple[str, ...],
    topic: str | None,
    serve_port: int | None,
    **options: Any,
) -> None:
    """Crawl from the URLs in SEEDS_FILE into the directory --out, or continue a crawl (--resume DIR).

    With --cluster, this process is one node of a crawl across machines: the first node is given
    SEEDS_FILE, the others only --out (they take the configuration and seeds from Redis)."""
    if resume_dir is not None:
        if out is not None and out != resume_dir:
            fail("--resume names the crawl directory; --out is not needed")
        out = resume_dir
    elif out is None or (seeds_file is None and cluster_url is None):
        fail("give SEEDS_FILE and --out DIR for a new crawl, or --resume DIR to continue one")
    if cluster_url is None and (node is not None or nodes is not None or crawl_id is not None):
        fail("--node, --nodes and --crawl-id are options of a cluster crawl (--cluster URL)")
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
    if allow_network:
        overrides["allow_networks"] = list(allow_network)
    for key, values in (("allowed_domains", allowed_domains), ("include", include), ("exclude", exclude)):
        if values:
            overrides[key] = list(values)
    if topic:
        overrides["focused_keywords"] = topic.replace(",", " ").split()
    try:
        cluster = None
        if cluster_url is not None:
            cluster = cluster_node(cluster_url, node=node, nodes=nodes, crawl_id=crawl_id, resume_dir=resume_dir)
        base: CrawlConfig | None = None
        if resume_dir is not None:
            base = saved_config(out)
        elif cluster is not None and seeds_file is None:  # a node joining: the crawl's configuration
            base = published_cluster_config(cluster)
        config = CrawlConfig.load(config_file, base=base, **overrides)
        if serve_port is not None:
            from crawlspace.serve.server import ATTACHED_PROGRESS_INTERVAL

            config = config.replace(progress_interval=min(config.progress_interval, ATTACHED_PROGRESS_INTERVAL))
        crawler = Crawler(
            config, out=out, seeds_file=seeds_file, progress=live, resume=resume_dir is not None, cluster=cluster
        )
    except ConfigError as exc:
        fail(str(exc))
    except SeedsError as exc:
        _warn_seeds(exc.problems)
        fail(str(exc))
    except CrawlError as exc:
        fail(str(exc))
    _warn_seeds(crawler.seed_problems)
    for key, (before, now) in crawler.config_changes.items():
        click.echo(f"crawlspace: resuming with {key} = {json.dumps(now)} (was {json.dumps(before)})", err=True)
    try:
        if serve_port is None:
            stats = crawler.run()
        else:
            from crawlspace.serve.server import ServeError, attached

            try:
                query_log = Path(config.refresh_query_log) if config.refresh_query_log else None
                with attached(out, serve_port, cluster_url=cluster_url, query_log=query_log):
                    stats = crawler.run()
            except ServeError as exc:
                fail(str(exc))
    except (CrawlError, ConfigError) as exc:  # another crawl holds the directory's table; an unreadable topic
        fail(str(exc))
    click.echo(json.dumps(stats.to_dict(), indent=2))
    if stats.termination == "disk-full":
        fail("disk full: the crawl stopped with its state intact; free space, then continue with --resume", code=75)
    if stats.termination == "worker-failed":
        fail(
            "worker-failed: a crawl process died (its error is above); the others stopped with their state "
            "intact, and --resume continues the crawl once the cause is fixed",
            code=70,
        )
    if stats.termination in ("journal-failed", "checkpoint-failed"):
        fail(
            f"{stats.termination}: an I/O error stopped the crawl; its last checkpoint and journal stand, and "
            "--resume fetches again what they do not cover once the disk is sound",
            code=74,
        )


@main.command()
@click.option("--cluster", "cluster_url", required=True, metavar="URL", envvar="CRAWLSPACE_CLUSTER",
              help="The cluster's Redis (as given to crawl --cluster).")  # fmt: skip
@click.option("--crawl-id", default=None, help="The cluster crawl's name in Redis (default: crawl).")
@click.option("--json", "as_json", is_flag=True, help="Print every node's status and the summary as JSON.")
def status(cluster_url: str, crawl_id: str | None, as_json: bool) -> None:
    """Every node's progress in a cluster crawl, one row each, and the crawl's merged summary."""
    try:
        report = cluster_status(cluster_url, crawl_id=crawl_id)
    except CrawlError as exc:
        fail(str(exc))
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    columns = ["node", "state", "pages", "pages/s", "frontier", "in flight", "errors", "unacked", "redis", "ended"]
    click.echo(" ".join(f"{column:>10}" for column in columns))
    for row in report["nodes"]:
        click.echo(" ".join(f"{_printable(row.get(column, '')):>10}" for column in columns))
    summary = report["summary"]
    click.echo(
        f"crawl {_printable(report['crawl_id'])}: {summary['nodes_reporting']} of {summary['nodes']} nodes reporting, "
        f"{summary['pages']} pages, {summary['pages_per_second']} pages/s now, frontier {summary['frontier']}, "
        f"{summary['errors']} errors" + (f"; stopped: {_printable(summary['stopped'])}" if summary["stopped"] else "")
    )


def _printable(value: object) -> str:
    """A value from Redis, which anyone with its password can write: no control characters reach the terminal."""
    return "".join(ch if ch.isprintable() else "?" for ch in str(value))


def _warn_seeds(problems: list[SeedProblem]) -> None:
    for problem in problems:
        click.echo(f"crawlspace: warning: {problem}; skipped", err=True)


@main.group(name="warc")
def warc_group() -> None:
    """WARC files of a crawl: indexes and lookups."""


@warc_group.command(name="index")
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--repair", is_flag=True, help="First cut off torn records of files a dead crawl left open.")
def warc_index(directory: Path, repair: bool) -> None:
    """Rebuild the CDXJ index beside each WARC file in DIRECTORY (a crawl or its warc/ directory)."""
    from crawlspace.store.warc import rebuild_indexes, warc_directory

    try:
        results = rebuild_indexes(warc_directory(directory), repair=repair)
    except FileNotFoundError as exc:
        fail(str(exc))
    for item in results:
        note = f"  ({item.problem})" if item.problem else ""
        click.echo(f"{item.path.name}: {item.captures} captures, {item.records} records{note}")
    click.echo(f"{len(results)} WARC files indexed")
    if any(item.problem and not item.problem.startswith("skipped") for item in results):
        sys.exit(1)


@warc_group.command(name="find")
@click.argument("directory", type=click.Path(path_type=Path))
@click.argument("url")
def warc_find(directory: Path, url: str) -> None:
    """List the captures of URL (CDXJ lines, oldest first)."""
    from crawlspace.store import CdxjIndex
    from crawlspace.store.warc import warc_directory

    captures = CdxjIndex(warc_directory(directory)).captures(url)
    for entry in captures:
        click.echo(entry.line())
    if not captures:
        fail(f"no capture of {url}", code=1)


@main.group(name="table")
def table_group() -> None:
    """The crawl table: rows by reversed-host URL, families title, content, fetch, anchor."""


@table_group.command(name="get")
@click.argument("directory", type=click.Path(path_type=Path))
@click.argument("url")
@click.option("--versions", type=click.IntRange(min=1), default=1, show_default=True, help="Versions per cell.")
@click.option("--family", "families", multiple=True, help="Only these column families.")
@click.option("--json", "as_json", is_flag=True, help="Print the row as JSON, values in full.")
def table_get(directory: Path, url: str, versions: int, families: tuple[str, ...], as_json: bool) -> None:
    """Print the row of URL (or of a row key such as com.example.www/http/)."""
    from crawlspace.store.crawltable import format_row
    from crawlspace.urls import InvalidURL, normalize

    with open_reader(directory) as reader:
        try:
            key = normalize(url) if "://" in url else url
            row = reader.table.get(key, family=families or None, versions=versions)
        except (InvalidURL, ValueError) as exc:
            fail(str(exc))
        if row is None:
            fail(f"no row for {url}", code=1)
        if as_json:
            click.echo(json.dumps(row.to_dict(), indent=2, ensure_ascii=False))
        else:
            click.echo("\n".join(format_row(row, width=240)))


@table_group.command(name="scan")
@click.argument("directory", type=click.Path(path_type=Path))
@click.argument("prefix", default="")
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True, help="Rows to print.")
@click.option("--family", "families", multiple=True, help="Only these column families.")
@click.option("--keys", "keys_only", is_flag=True, help="Print row keys only.")
@click.option("--anchors", type=click.IntRange(min=0), default=5, show_default=True, help="Anchor cells shown per row.")
def table_scan(
    directory: Path, prefix: str, limit: int, families: tuple[str, ...], keys_only: bool, anchors: int
) -> None:
    """Print the rows whose key starts with PREFIX (e.g. com.example), in row-key order."""
    from crawlspace.store.crawltable import format_row

    with open_reader(directory) as reader:
        try:
            for row in reader.table.scan(prefix, family=families or None, limit=limit):
                click.echo(row.key if keys_only else "\n".join(format_row(row, width=60, max_anchors=anchors)))
        except ValueError as exc:
            fail(str(exc))


@main.command(name="export")
@click.argument("directory", type=click.Path(path_type=Path))
@click.option(
    "--format", "fmt", type=click.Choice(["jsonl", "parquet", "opensearch"]), required=True, help="Output format."
)
@click.option("--output", "-o", help="Output file ('-': stdout, not Parquet). Default: DIRECTORY/export.FORMAT")
@click.option("--index-name", default="crawlspace", show_default=True, help="OpenSearch: the _index of every page.")
def export_command(directory: Path, fmt: str, output: str | None, index_name: str) -> None:
    """Export the fetched pages (url, status, fetch time, title, text, outlinks) for DuckDB, pandas, Spark;
    or, --format opensearch, the indexed pages as an OpenSearch/Elasticsearch _bulk request (NDJSON)."""
    from crawlspace.store.export import ExportError, export

    try:
        if fmt == "opensearch":
            from crawlspace.index.opensearch import export_opensearch

            count, where = export_opensearch(directory, output, index_name=index_name)
        else:
            count, where = export(directory, fmt, output)
    except ExportError as exc:
        fail(str(exc))
    click.echo(f"{count} pages written to {where}", err=True)


@main.command()
@click.option("--out", required=True, type=click.Path(path_type=Path), help="Directory for the CSV, PNG and crawls.")
@click.option(
    "--policies",
    default=",".join(POLICY_NAMES),
    show_default=True,
    help="Comma-separated policies to crawl with, one crawl each.",
)
@click.option("--hosts", type=click.IntRange(10, 20_000), default=400, show_default=True, help="Hosts of the web.")
@click.option("--seed", type=int, default=3, show_default=True, help="Seed of the simulated web.")
@click.option("--seeds", "seed_count", type=click.IntRange(1, 1000), default=5, show_default=True, help="Seed URLs.")
@click.option("--concurrency", type=click.IntRange(1, 1000), default=2, show_default=True)
@click.option("--back-queues", type=click.IntRange(1, 10_000), default=2, show_default=True, help="B, if settable.")
@click.option("--pagerank-interval", type=click.IntRange(1), default=50, show_default=True, help="k of pagerank.")
@click.option("--topic", help="Focused crawl topic keywords (default: 20 words of the web's title vocabulary).")
@click.option("--threshold", type=click.FloatRange(0, 1), default=0.08, show_default=True, help="Relevance cut.")
def evaluate(
    out: Path,
    policies: str,
    hosts: int,
    seed: int,
    seed_count: int,
    concurrency: int,
    back_queues: int,
    pagerank_interval: int,
    topic: str | None,
    threshold: float,
) -> None:
    """Crawl a simulated web with each policy; plot PageRank collected (and harvest rate) against pages crawled."""
    from crawlspace.evaluation import EVALUATION_WEB, EvaluationSetup
    from crawlspace.evaluation import evaluate as run_evaluation  # the command's own name is `evaluate`

    names = _policy_list(policies, POLICY_NAMES)
    _make_output_dir(out)
    setup = EvaluationSetup(
        web=EVALUATION_WEB.replace(hosts=hosts, seed=seed),
        seeds=seed_count,
        concurrency=concurrency,
        back_queues=back_queues,
        pagerank_interval=pagerank_interval,
        topic=tuple(topic.replace(",", " ").split()) if topic else (),
        relevance_threshold=threshold,
    )
    result = run_evaluation(names, out, setup, progress=lambda line: click.echo(line, err=True))
    table = result.table()
    columns = ["policy", "pagerank@10%", "pagerank@20%", "pagerank@50%", "hot@20%", "harvest@20%"]
    click.echo(" ".join(f"{column:>13}" for column in columns))
    for row in table:
        click.echo(" ".join(f"{row.get(column, ''):>13}" for column in columns))
    click.echo(f"ranking at 20% crawled: {' > '.join(result.ranking(0.2))}")
    click.echo(f"wrote {out / 'pagerank.png'}, {out / 'curves.csv'}, {out / 'table.csv'}, {out / 'summary.json'}")


def _policy_list(policies: str, valid: Sequence[str]) -> list[str]:
    """The comma-separated --policies of an evaluation, each one of `valid` (a usage error otherwise)."""
    names = [name.strip() for name in policies.split(",") if name.strip()]
    unknown = [name for name in names if name not in valid]
    if unknown or not names:
        fail(f"--policies: unknown {', '.join(unknown) or 'nothing'}; choose from {', '.join(valid)}")
    return names


def _make_output_dir(out: Path) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        fail(f"output directory {out}: {exc.strerror or exc}")


@main.command("evaluate-refresh")
@click.option(
    "--out", type=click.Path(path_type=Path), required=True, help="Directory for freshness.png and the tables."
)
@click.option("--policies", default=",".join(REFRESH_POLICY_NAMES), show_default=True, help="Comma-separated policies.")
@click.option("--seconds", type=click.FloatRange(10), default=300.0, show_default=True, help="Each policy's crawl.")
@click.option(
    "--warmup", type=click.FloatRange(0), default=150.0, show_default=True,
    help="Left out of the averages (the first pass and the first refetches).",
)  # fmt: skip
@click.option("--max-rate", type=click.FloatRange(0.1), default=15.0, show_default=True, help="The fetch budget.")
@click.option("--time-scale", type=click.FloatRange(1), default=20000.0, show_default=True, help="The web's clock.")
@click.option("--hosts", type=click.IntRange(2, 5000), default=40, show_default=True, help="Hosts of the web.")
def evaluate_refresh(
    out: Path, policies: str, seconds: float, warmup: float, max_rate: float, time_scale: float, hosts: int
) -> None:
    """Crawl a changing simulated web continuously with each refresh policy at one fetch budget; plot and
    tabulate the freshness and age each keeps (Cho & Garcia-Molina's comparison)."""
    from crawlspace.evaluation.refresh import REFRESH_WEB, RefreshSetup
    from crawlspace.evaluation.refresh import evaluate_refresh as run_evaluation

    names = _policy_list(policies, REFRESH_POLICY_NAMES)
    if warmup >= seconds:
        fail(f"--warmup ({warmup:g} s) must be shorter than --seconds ({seconds:g} s)")
    _make_output_dir(out)
    setup = RefreshSetup(
        web=REFRESH_WEB.replace(hosts=hosts, time_scale=time_scale), seconds=seconds, warmup=warmup, max_rate=max_rate
    )
    result = run_evaluation(names, out, setup, progress=lambda line: click.echo(line, err=True))
    columns = ["policy", "freshness", "age_s", "pages", "fetches", "not_modified"]
    click.echo(" ".join(f"{column:>13}" for column in columns))
    for row in result.table():
        click.echo(" ".join(f"{row[column]:>13}" for column in columns))
    for name, margin in result.margins().items():
        click.echo(f"{name}: {margin:+.3f}")
    click.echo(f"wrote {out / 'freshness.png'}, {out / 'table.csv'}, {out / 'summary.json'}")


def _job_directory(directory: Path) -> Path:
    if not directory.is_dir():
        fail(f"no crawl directory {directory}")
    return directory


@main.command(name="jobs")
@click.argument("directories", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--scheduler",
    default="synchronous",
    show_default=True,
    help="synchronous or threads (in this process), or a Dask scheduler address tcp://HOST:8786.",
)
@click.option(
    "--only", help="Comma-separated jobs to run (dedup, near, graph, pagerank, connectivity, index); default: all."
)
@click.option("--shards", type=click.IntRange(1, 4096), default=4, show_default=True, help="Shards of the index job.")
@tier_cutoff_option
@click.option("--rebuild-index", is_flag=True, help="The index job writes every page again (no incremental update).")
@click.option("--merge-index", is_flag=True, help="The index job merges each shard's segments as far as it can.")
@click.option("--out", type=click.Path(path_type=Path), help="Where jobs/ is written (default: the first directory).")
@click.option("--partitions", type=click.IntRange(1, 100_000), default=None, help="Key ranges of the crawl table.")
@click.option("--damping", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.85, show_default=True)
@click.option("--personalize", "seed_urls", multiple=True, metavar="URL", help="Personalized PageRank from URL.")
@click.option(
    "--representative",
    type=click.Choice(["shortest", "inlinks"]),
    default="shortest",
    show_default=True,
    help="A duplicate cluster's representative: its shortest URL, or the one with most in-links (runs graph).",
)
def jobs_command(
    directories: tuple[Path, ...],
    scheduler: str,
    only: str | None,
    out: Path | None,
    partitions: int | None,
    damping: float,
    seed_urls: tuple[str, ...],
    representative: str,
    shards: int,
    tier_cutoff: float | None,
    rebuild_index: bool,
    merge_index: bool,
) -> None:
    """Batch jobs over the crawl in DIRECTORIES (one crawl, or its nodes' directories): exact and
    near-duplicate clusters, the link graph, PageRank, the search index; outputs in DIR/jobs/<name>/."""
    from crawlspace.jobs import JobError, JobOutputError, run
    from crawlspace.store import CrawlTableError
    from crawlspace.urls import InvalidURL, normalize

    for directory in directories:
        _job_directory(directory)
    try:
        seeds = [normalize(url) for url in seed_urls]
        summaries = run(
            list(directories),
            only=only.split(",") if only else None,
            scheduler=scheduler,
            out=out,
            partitions=partitions or 0,
            options={
                "pagerank": {"damping": damping, "seeds": seeds},
                "dedup": {"representative": representative},
                "index": {"shards": shards, "tier_cutoff": tier_cutoff, "rebuild": rebuild_index, "merge": merge_index},
            },
            progress=lambda line: click.echo(f"crawlspace: {line}", err=True),
        )
    except (JobError, JobOutputError, CrawlTableError, InvalidURL, ValueError, OSError) as exc:
        fail(str(exc))
    click.echo(json.dumps(summaries, indent=2, ensure_ascii=False))


@main.command(name="dups")
@click.argument("directory", type=click.Path(path_type=Path))
@click.argument("url")
@click.option("--json", "as_json", is_flag=True, help="Print {url, exact, near} as JSON.")
def dups_command(directory: Path, url: str, as_json: bool) -> None:
    """The exact and near-duplicates of URL found by `crawlspace jobs`."""
    from crawlspace.jobs import JobOutputError
    from crawlspace.jobs.lookup import NotFetched, duplicates_of
    from crawlspace.store import CrawlTableError
    from crawlspace.urls import InvalidURL, normalize

    try:
        found = duplicates_of(_job_directory(directory), normalize(url))
    except NotFetched as exc:
        fail(str(exc), code=1)
    except (JobOutputError, InvalidURL, CrawlTableError) as exc:
        fail(str(exc))
    if as_json:
        click.echo(json.dumps(found.to_dict(), ensure_ascii=False))
        return
    click.echo(found.url)
    for kind, urls in (("exact", found.exact), ("near", found.near)):
        click.echo(f"{kind} duplicates: {len(urls)}")
        for other in urls:
            click.echo(f"  {other}")


@main.command(name="rank")
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--top", type=click.IntRange(1, 1_000_000), default=20, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print a list of {url, pagerank, indegree} as JSON.")
def rank_command(directory: Path, top: int, as_json: bool) -> None:
    """Pages by PageRank (from `crawlspace jobs`), with their in-degree."""
    from crawlspace.jobs import JobOutputError
    from crawlspace.jobs.lookup import printable, top_ranked

    try:
        ranked = top_ranked(_job_directory(directory), top)
    except JobOutputError as exc:
        fail(str(exc))
    if as_json:
        click.echo(json.dumps(ranked, ensure_ascii=False))
        return
    click.echo(f"{'pagerank':>10} {'in':>6}  url")
    for row in ranked:
        click.echo(f"{row['pagerank']:>10.6f} {row['indegree']:>6}  {printable(row['url'])}")


@main.command("config-reference")
def config_reference() -> None:
    """Print the configuration reference (Markdown), generated from CrawlConfig."""
    click.echo(reference_markdown(), nl=False)


def _register_subcommands() -> None:
    from crawlspace.demo import demo
    from crawlspace.graph.cli import graph_group
    from crawlspace.index.cli import index_command, search_command
    from crawlspace.serve.cli import serve
    from crawlspace.simweb.cli import simweb

    main.add_command(simweb)
    main.add_command(graph_group)
    main.add_command(demo)
    main.add_command(index_command)
    main.add_command(search_command)
    main.add_command(serve)


_register_subcommands()
