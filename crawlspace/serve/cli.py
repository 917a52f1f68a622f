"""`crawlspace serve DIR`: the dashboard of a finished or a running crawl."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from crawlspace.serve.server import Address


def announce(address: Address) -> None:
    """Print where the dashboard is (with its token, when one is needed: the only place it is shown)."""
    click.echo(f"crawlspace: dashboard at {address.url}", err=True)
    sys.stderr.flush()


@click.command()
@click.argument("directory", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True, help="0: any free port.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (not loopback: a token).")
@click.option(
    "--token-file",
    type=click.Path(path_type=Path, dir_okay=False),
    help="File holding the access token (default: none on loopback; elsewhere one is generated and printed).",
)
@click.option(
    "--cluster",
    "cluster_url",
    metavar="URL",
    envvar="CRAWLSPACE_CLUSTER",
    help="DIRECTORY is a node of this cluster crawl (its Redis): every node's row on the overview.",
)
@click.option(
    "--query-log",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Append every search made on the dashboard to FILE, one query a line (outside DIRECTORY): the query "
    "log of a continuous crawl's user-experience refresh policy (its refresh_query_log).",
)
@click.option("--stop-with-parent", is_flag=True, hidden=True, help="End when the process that started this one ends.")
def serve(
    directory: Path, port: int, host: str, token_file: Path | None, cluster_url: str | None, query_log: Path | None,
    stop_with_parent: bool,
) -> None:  # fmt: skip
    """Serve the dashboard, search page, JSON API and Prometheus /metrics of the crawl in DIRECTORY.

    It only reads DIRECTORY (the pause, resume and stop buttons write its control.json)."""
    # imported here: every crawlspace command registers this one, and a crawl should not start slower
    from crawlspace.serve.nodes import ClusterNodes
    from crawlspace.serve.security import is_loopback
    from crawlspace.serve.server import ServeError, make_guard, read_token_file, serve_forever

    try:
        token = read_token_file(token_file) if token_file is not None else None
        if not is_loopback(host) and token is None:
            click.echo("crawlspace: listening beyond loopback: every request needs the token below", err=True)
        nodes = None if cluster_url is None else ClusterNodes.of_directory(cluster_url, directory)
        serve_forever(
            directory, host, port, make_guard(host, token), announce, nodes, stop_with_parent=stop_with_parent,
            query_log=query_log,
        )  # fmt: skip
    except ServeError as exc:
        click.echo(f"crawlspace: error: {exc}", err=True)
        sys.exit(2)
