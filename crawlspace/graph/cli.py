"""`crawlspace graph ...`: build the connectivity server's files for a crawl, and ask it about URLs.

    crawlspace graph build DIR                 the link graph batch job, then the `connectivity` job
    crawlspace graph DIR --out URL [--json]    successors; --in URL predecessors
    crawlspace graph DIR --hops N URL [--dot]  the pages N out-links away, as a list or a Graphviz digraph
    crawlspace graph DIR --stats [--json]      nodes, arcs, bits per link and per URL, degree distributions

`crawlspace graph DIR ...` is short for `crawlspace graph query DIR ...` (a crawl directory named `build` needs
the long form). The graph's modules (numba) and the jobs' (Dask) are imported inside the commands, so that
registering this group costs the other commands nothing, and a query loads no Dask. URLs from the crawl are
hostile input: printed with control characters escaped, and in DOT labels with quotes and backslashes too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from crawlspace.cliutil import fail
from crawlspace.display import printable

if TYPE_CHECKING:
    from crawlspace.graph.connectivity import LinkGraph


class _QueryByDefault(click.Group):
    """A group whose first argument, when it names no subcommand, starts the arguments of `query`."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
            args = ["query", *args]
        return super().parse_args(ctx, args)


@click.group(name="graph", cls=_QueryByDefault)
def graph_group() -> None:
    """The connectivity server: in- and out-links of the crawl's pages (`crawlspace graph build DIR` first).

    crawlspace graph DIR --out URL | --in URL | --hops N URL | --stats"""


@graph_group.command(name="build")
@click.argument("directory", type=click.Path(path_type=Path, file_okay=False))
@click.option("--scheduler", default="synchronous", show_default=True, help="As for `crawlspace jobs`.")
@click.option(
    "--reuse-links",
    is_flag=True,
    help="Build from the link graph job's output as it is (default: run that job again, the crawl may have grown).",
)
def build_command(directory: Path, scheduler: str, reuse_links: bool) -> None:
    """Build the graph, its transpose and the URL map of the crawl in DIRECTORY (into DIR/jobs/connectivity)."""
    from crawlspace.jobs import JobError, JobOutputError, run
    from crawlspace.jobs import graph as link_graph_job
    from crawlspace.jobs.connectivity import NAME
    from crawlspace.store import CrawlTableError

    if not directory.is_dir():
        fail(f"no crawl directory {directory}")
    try:
        summaries = run(
            directory,
            only=[NAME] if reuse_links else [link_graph_job.NAME, NAME],
            scheduler=scheduler,
            progress=lambda line: click.echo(f"crawlspace: {line}", err=True),
        )
    except (JobError, JobOutputError, CrawlTableError, ValueError, OSError) as exc:
        fail(str(exc))
    click.echo(json.dumps(summaries[NAME], indent=2, ensure_ascii=False))


def dot_label(text: str) -> str:
    """A URL inside a DOT double-quoted string: control characters as \\xNN, then backslashes and quotes escaped
    (a bare backslash starts one of DOT's label escapes, a bare quote ends the string)."""
    return printable(text).replace("\\", "\\\\").replace('"', '\\"')


def _dot(links: LinkGraph, around: dict[int, int], hops: int) -> str:
    lines = ["digraph links {", "  node [shape=box];"]
    ordered = sorted(around.items(), key=lambda item: (item[1], item[0]))
    lines.extend(f'  n{node} [label="{dot_label(links.url_of(node))}"];' for node, _ in ordered)
    for node, distance in ordered:
        if distance < hops:
            lines.extend(f"  n{node} -> n{target};" for target in links.successors(node).tolist() if target in around)
    lines.append("}")
    return "\n".join(lines)


def _print_stats(stats: dict[str, Any]) -> None:
    for key in ("nodes", "arcs", "bits_per_link", "bits_per_link_transpose", "bits_per_url"):
        click.echo(f"{key}: {stats[key]}")
    for name in ("outdegree", "indegree"):
        pairs = stats[f"{name}_distribution"]
        shown = ", ".join(f"{degree}: {count}" for degree, count in pairs[:12])
        more = f", ... ({len(pairs) - 12} more degrees, max {stats[f'{name}_max']})" if len(pairs) > 12 else ""
        click.echo(f"{name} (degree: nodes): {shown}{more}")


@graph_group.command(name="query")
@click.argument("directory", type=click.Path(path_type=Path, file_okay=False))
@click.argument("url", required=False)
@click.option("--out", "out_url", metavar="URL", help="The pages URL links to.")
@click.option("--in", "in_url", metavar="URL", help="The pages that link to URL.")
@click.option("--hops", type=click.IntRange(0, 100), help="The pages at most N out-links from URL.")
@click.option("--dot", is_flag=True, help="With --hops: a Graphviz digraph instead of a list.")
@click.option(
    "--limit", type=click.IntRange(1), default=10_000, show_default=True, help="With --hops: at most this many pages."
)
@click.option("--stats", is_flag=True, help="Nodes, arcs, bits per link (both graphs) and per URL, degrees.")
@click.option("--json", "as_json", is_flag=True, help="JSON: a list of URLs, [{url, hops}] or the stats object.")
def query_command(
    directory: Path,
    url: str | None,
    out_url: str | None,
    in_url: str | None,
    hops: int | None,
    dot: bool,
    limit: int,
    stats: bool,
    as_json: bool,
) -> None:
    """Ask the graph of the crawl in DIRECTORY (or a graph directory) about one URL, or for its statistics."""
    asked = [name for name, given in (("--out", out_url), ("--in", in_url), ("--hops", hops), ("--stats", stats))
             if given is not None and given is not False]  # fmt: skip
    if len(asked) != 1:
        fail("give one of --out URL, --in URL, --hops N URL, --stats")
    if hops is not None and url is None:
        fail("--hops N needs a URL")
    if url is not None and hops is None:
        fail(f"a URL argument ({printable(url)}) goes with --hops N; use --out URL or --in URL")
    if dot and hops is None:
        fail("--dot goes with --hops")
    from crawlspace.graph import GraphFormatError, UnknownURL
    from crawlspace.graph import open as open_graph
    from crawlspace.urls import InvalidURL, normalize

    try:
        links = open_graph(directory)
    except GraphFormatError as exc:
        fail(str(exc))
    with links:
        if stats:
            figures = links.stats()
            if as_json:
                click.echo(json.dumps(figures))
            else:
                _print_stats(figures)
            return
        given = out_url or in_url or url or ""
        try:
            node = links.id_of(normalize(given))
        except InvalidURL as exc:
            fail(f"{printable(given)}: {exc}")
        except UnknownURL as exc:
            fail(printable(str(exc)), code=1)
        if hops is not None:
            around = links.neighbourhood(node, hops, limit)
            if len(around) == limit:
                click.echo(f"crawlspace: stopped at --limit {limit} pages", err=True)
            if dot:
                click.echo(_dot(links, around, hops))
                return
            ordered = sorted(around.items(), key=lambda item: (item[1], item[0]))
            if as_json:
                click.echo(json.dumps([{"url": links.url_of(n), "hops": d} for n, d in ordered], ensure_ascii=False))
                return
            for other, distance in ordered:
                click.echo(f"{distance}\t{printable(links.url_of(other))}")
            return
        found = links.successor_urls(node) if out_url else links.predecessor_urls(node)
        if as_json:
            click.echo(json.dumps(found, ensure_ascii=False))
            return
        for other_url in found:
            click.echo(printable(other_url))
