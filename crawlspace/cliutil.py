"""What the command modules share (crawlspace/cli.py and the packages' own `cli.py`): one way to fail
and one way to open a crawl for reading, so that every command reports a bad directory alike.

A module of its own because the packages' commands cannot import crawlspace/cli.py (it registers them:
a cycle tests/test_layers.py refuses)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click

if TYPE_CHECKING:  # imported where used: registering a command must not load the stores
    from crawlspace.store.reader import CrawlReader


def fail(message: str, code: int = 2) -> NoReturn:
    click.echo(f"crawlspace: error: {message}", err=True)
    sys.exit(code)


def open_reader(directory: Path) -> CrawlReader:
    """The read side of a crawl directory, or a one-line error naming what is wrong with it."""
    from crawlspace.store import CrawlTableError
    from crawlspace.store.reader import CrawlReader

    try:
        return CrawlReader(directory)
    except CrawlTableError as exc:
        fail(str(exc))
