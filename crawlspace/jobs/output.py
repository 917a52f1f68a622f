"""Job outputs on disk: DIR/jobs/<name>/ holds Parquet tables and summary.json, replaced atomically.

A run writes into a fresh hidden directory beside the output (`.<name>.<stamp>`), fsyncs every file
and the directory, then swaps the symlink DIR/jobs/<name> to it with one `rename` (atomic on POSIX).
A run that is killed leaves its hidden directory behind (removed by the next run) and the symlink
still naming the previous, complete output. A lock file keeps two runs of one job apart.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from crawlspace.durable import fsync_directory

JOBS_DIR = "jobs"
SUMMARY = "summary.json"


class JobOutputError(RuntimeError):
    """A job's output that is missing or unreadable (the job never ran, or ran on another crawl)."""


def jobs_dir(crawl_dir: str | Path) -> Path:
    return Path(crawl_dir) / JOBS_DIR


def _fsync_tree(root: Path) -> None:
    for directory, _, files in os.walk(root):
        for name in files:
            with open(os.path.join(directory, name), "rb") as handle:
                os.fsync(handle.fileno())
        fsync_directory(Path(directory))


class PendingOutput:
    """The directory a run writes into; `commit` makes it the job's output."""

    def __init__(self, root: Path, name: str) -> None:
        self.root = root
        self.name = name
        self.path = root / f".{name}.{time.time_ns()}"
        self.path.mkdir(parents=True)

    def table(self, table: str) -> Path:
        """Where a Parquet table (a directory of part files) of this run goes."""
        return self.path / table

    def commit(self, summary: dict[str, Any]) -> Path:
        summary_path = self.path / SUMMARY
        summary_path.write_text(json.dumps(summary, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
        _fsync_tree(self.path)
        link = self.root / self.name
        staged = self.root / f".{self.name}.link"
        staged.unlink(missing_ok=True)
        staged.symlink_to(self.path.name)
        previous = link.resolve() if link.is_symlink() else None
        os.replace(staged, link)
        fsync_directory(self.root)
        if previous is not None and previous != self.path:
            shutil.rmtree(previous, ignore_errors=True)
        return link


@contextmanager
def pending_output(crawl_dir: Path, name: str) -> Iterator[PendingOutput]:
    """A run's output directory, under the job's lock; on an error it is removed and the old output stays."""
    root = jobs_dir(crawl_dir)
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f".{name}.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise JobOutputError(f"job {name} is already running on {crawl_dir}") from None
        _remove_abandoned(root, name)
        pending = PendingOutput(root, name)
        try:
            yield pending
        except BaseException:
            shutil.rmtree(pending.path, ignore_errors=True)
            raise


def _remove_abandoned(root: Path, name: str) -> None:
    """Directories of runs that were killed before their commit (the lock says none is running)."""
    link = root / name
    current = link.resolve() if link.is_symlink() else None
    for path in root.glob(f".{name}.*"):
        if path.is_dir() and not path.is_symlink() and path != current:
            shutil.rmtree(path, ignore_errors=True)


def output_path(crawl_dir: str | Path, name: str) -> Path:
    path = jobs_dir(crawl_dir) / name
    if not (path / SUMMARY).is_file():
        raise JobOutputError(f"no output of job {name} in {crawl_dir} (run `crawlspace jobs {crawl_dir}` first)")
    return path


def read_summary(crawl_dir: str | Path, name: str) -> dict[str, Any]:
    try:
        value = json.loads((output_path(crawl_dir, name) / SUMMARY).read_text())
    except (OSError, ValueError) as exc:
        raise JobOutputError(f"unreadable summary of job {name} in {crawl_dir}: {exc}") from exc
    if not isinstance(value, dict):
        raise JobOutputError(f"summary of job {name} in {crawl_dir} is not a JSON object")
    return value


def read_table(
    crawl_dir: str | Path, name: str, table: str, *, columns: list[str] | None = None, filters: Any = None
) -> pd.DataFrame:
    """One output table in one process: for lookups and small results (filters push down to Parquet)."""
    path = output_path(crawl_dir, name) / table
    try:
        frame: pd.DataFrame = pq.read_table(path, columns=columns, filters=filters).to_pandas()
    except (OSError, ValueError) as exc:
        raise JobOutputError(f"unreadable table {table} of job {name} in {crawl_dir}: {exc}") from exc
    return frame


def parquet_files(crawl_dir: str | Path, name: str, table: str) -> list[Path]:
    """The part files of an output table, in partition order (what a later job maps one task over)."""
    files = sorted((output_path(crawl_dir, name) / table).glob("*.parquet"), key=_part_number)
    return files


def _part_number(path: Path) -> tuple[int, str]:
    digits = "".join(ch for ch in path.stem if ch.isdigit())
    return (int(digits) if digits else -1, path.name)
