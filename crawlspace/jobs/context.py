"""Where a job runs and what it reads: the scheduler, the crawl's partitions, the output directory.

A `JobContext` is the only thing a job function needs besides its parameters: `compute` runs Dask
collections on the chosen scheduler (the synchronous or threaded scheduler in this process, or a
`distributed.Client` for a cluster), `partitions` are the crawl table's key ranges (one Dask
partition each), and `frame(builder)` maps a builder over them, each task opening its own
`CrawlReader` on the same directories (nothing but the small key range travels to a worker).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dask
import dask.dataframe as dd
import pandas as pd

from crawlspace.store.reader import CrawlReader, KeyRange, StoredPage

DEFAULT_PARTITIONS = 8
LOCAL_SCHEDULERS = ("synchronous", "threads")


@dataclass(frozen=True)
class Piece:
    """One task's input: the directories to open and the key range to read (small, picklable)."""

    dirs: tuple[str, ...]
    part: KeyRange
    index: int
    offset: int = 0
    """Dense ids of this piece's pages start here (set by `with_offsets`)."""


PartitionBuilder = Callable[[CrawlReader, Piece], pd.DataFrame]
"""Makes one Dask partition from one piece of the crawl, through the reader a task opened for it."""


def is_robots_txt(url: str) -> bool:
    """robots.txt files are fetched and stored but are not pages (RFC 9309: only /robots.txt, no query)."""
    return url.endswith("/robots.txt") and url.count("/") == 3


def crawl_pages(reader: CrawlReader, piece: Piece) -> Iterator[StoredPage]:
    """The pages of a piece that the jobs see: every fetched URL but the robots.txt files."""
    for page in reader.pages(piece.part):
        if not is_robots_txt(page.url):
            yield page


def _build(piece: Piece, builder: PartitionBuilder) -> pd.DataFrame:
    with CrawlReader(list(piece.dirs)) as reader:
        return builder(reader, piece)


@dataclass
class JobContext:
    """The crawl directories, where outputs go, and the scheduler (`synchronous`, `threads` or a Client)."""

    dirs: list[Path]
    out: Path
    scheduler: Any = "synchronous"
    partitions: int = DEFAULT_PARTITIONS
    pieces: list[Piece] = field(default_factory=list)

    @classmethod
    def open(
        cls, dirs: Sequence[Path], *, out: Path | None = None, scheduler: Any = "synchronous", partitions: int = 0
    ) -> JobContext:
        if not dirs:
            raise ValueError("no crawl directory given")
        wanted = partitions or max(DEFAULT_PARTITIONS, 2 * _workers(scheduler))
        with CrawlReader(list(dirs)) as reader:
            ranges = reader.partitions(wanted)
        names = tuple(str(Path(directory).resolve()) for directory in dirs)
        pieces = [Piece(names, part, index) for index, part in enumerate(ranges)]
        return cls(list(dirs), out if out is not None else Path(dirs[0]), scheduler, wanted, pieces)

    @property
    def distributed(self) -> bool:
        return not isinstance(self.scheduler, str)

    @property
    def shuffle_method(self) -> str:
        """Dask's on-disk shuffle in one process, the peer-to-peer one (spilling to disk) on a cluster."""
        return "p2p" if self.distributed else "disk"

    def compute(self, *collections: Any) -> tuple[Any, ...]:
        with dask.config.set({"dataframe.convert-string": False}):
            return tuple(dask.compute(*collections, scheduler=self.scheduler))

    def frame(self, builder: PartitionBuilder, meta: pd.DataFrame, pieces: list[Piece] | None) -> dd.DataFrame:
        """One Dask partition per piece (default: every key range of the crawl), built by `builder`."""
        with dask.config.set({"dataframe.convert-string": False}):
            return dd.from_map(
                _build,
                pieces if pieces is not None else self.pieces,
                builder=builder,
                meta=meta,
                enforce_metadata=False,
                label=getattr(builder, "__name__", "crawl"),
            )

    def read_parquet(self, path: Path, columns: list[str] | None = None) -> dd.DataFrame:
        """A table a job wrote, as a Dask dataframe (its string columns come back as pandas' string dtype:
        cast them to object before joining them with a builder's frame)."""
        with dask.config.set({"dataframe.convert-string": False}):
            return dd.read_parquet(str(path), columns=columns)

    def with_offsets(self, counts: Sequence[int]) -> list[Piece]:
        """The pieces with the first dense id of each (the pages before it, in key order)."""
        offsets, total = [], 0
        for count in counts:
            offsets.append(total)
            total += count
        return [
            Piece(piece.dirs, piece.part, piece.index, offset)
            for piece, offset in zip(self.pieces, offsets, strict=True)
        ]


def _workers(scheduler: Any) -> int:
    if isinstance(scheduler, str):
        return 1
    try:
        return max(1, len(scheduler.scheduler_info().get("workers", {})))
    except Exception:  # a client that cannot say: the default partitions
        return 1
