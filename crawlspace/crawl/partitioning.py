"""How a crawl directory is partitioned, recorded in DIR/partitions.json, and what a resume with
another `--processes` makes of it (a resize: distributed.resize, crawl/repartition.py).

The record names the number of partitions, the host assignment (distributed.assignment.ASSIGNMENTS)
and the URL fingerprints of the crawl's URL sets (urls.fingerprint.UrlFingerprints), which every
partition shares: a partition created by a resize makes its URL set with the crawl's fingerprints,
never its own. A resize not over is recorded too (`resizing_from`), so a crawl killed in it resumes
the same phase, not a new one: over once every partition has handed over and every draining one has
ended, its last URL batches acknowledged (crawl/workers.py).

A directory without the record was made before there was one: N partitions by modulo, FLAT URL
fingerprints (or one process, its state in DIR itself). Resized, it moves to `host-buckets` (every
host is handed over anyway), its URL sets keep FLAT (their fingerprints cannot be respelled), so
each resize sends every partition's whole URL set to every new member.

`plan` is the decision, pure; `read` and `write` the file (written atomically).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from crawlspace.distributed.assignment import ASSIGNMENTS, Assignment
from crawlspace.distributed.resize import Resize
from crawlspace.urls.fingerprint import UrlFingerprints

LAYOUT_FILE = "partitions.json"
FORMAT = "crawlspace-partitions/1"


class PartitioningError(Exception):
    """A resume that cannot be done with the partitions asked for, or an unreadable record."""


@dataclass(frozen=True, slots=True)
class Partitioning:
    partitions: int
    assignment: str = "host-buckets"
    fingerprints: UrlFingerprints = UrlFingerprints.HOST_BUCKET
    epoch: int = 0  # resizes so far
    resizing_from: int | None = None  # the partitions before a resize not over yet

    def make_assignment(self) -> Assignment:
        return ASSIGNMENTS[self.assignment](self.partitions)

    @property
    def resize(self) -> Resize | None:
        if self.resizing_from is None:
            return None
        return Resize(self.resizing_from, self.partitions, self.epoch)

    @property
    def workers(self) -> int:
        """Processes to start: during a resize's phase the old partitions leaving take part too."""
        return max(self.partitions, self.resizing_from or 0)

    def resized(self) -> Partitioning:
        """The record once the phase has ended."""
        return replace(self, resizing_from=None)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "partitions": self.partitions,
            "assignment": self.assignment,
            "url_fingerprints": self.fingerprints.value,
            "epoch": self.epoch,
            "resizing_from": self.resizing_from,
        }


def legacy(processes: int) -> Partitioning:
    """A directory made before partitions.json: modulo, FLAT fingerprints."""
    return Partitioning(processes, "modulo", UrlFingerprints.FLAT)


def plan(saved: Partitioning | None, wanted: int) -> Partitioning:
    """The partitioning a crawl resumes with when `wanted` processes are asked for: the same, the
    same unfinished resize, or a new resize (epoch + 1) from the saved count."""
    if saved is None:
        return Partitioning(wanted)
    if saved.resizing_from is not None:
        if wanted != saved.partitions:
            raise PartitioningError(
                f"this crawl is being resized from {saved.resizing_from} to {saved.partitions} processes: "
                f"resume it with {saved.partitions} first (then it can change again)"
            )
        return saved
    if wanted == saved.partitions:
        return saved
    if 1 in (saved.partitions, wanted):
        raise PartitioningError(
            f"this crawl runs in {saved.partitions} process{'es' if saved.partitions > 1 else ''}; a crawl of one "
            "process keeps its state in the crawl directory itself, partitions in DIR/workers/: it resizes only "
            "between 2 or more processes"
        )
    return replace(
        saved, partitions=wanted, assignment="host-buckets", epoch=saved.epoch + 1, resizing_from=saved.partitions
    )


def read(out: Path) -> Partitioning | None:
    path = out / LAYOUT_FILE
    try:
        values = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise PartitioningError(f"cannot read {path}: {exc}") from None
    try:
        if values.get("format") != FORMAT:
            raise ValueError(f"format {values.get('format')!r}, expected {FORMAT!r}")
        partitioning = Partitioning(
            int(values["partitions"]),
            str(values["assignment"]),
            UrlFingerprints(values["url_fingerprints"]),
            int(values["epoch"]),
            None if values["resizing_from"] is None else int(values["resizing_from"]),
        )
        if partitioning.assignment not in ASSIGNMENTS or partitioning.partitions < 1:
            raise ValueError(f"assignment {partitioning.assignment!r} of {partitioning.partitions} partitions")
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise PartitioningError(f"{path}: not a partitioning record this version reads ({exc})") from None
    return partitioning


def write(out: Path, partitioning: Partitioning) -> None:
    write_record(out / LAYOUT_FILE, partitioning.to_json())


def write_record(path: Path, values: dict[str, Any]) -> None:
    """A small JSON record that a crash leaves whole or as it was (a node's cluster.json too)."""
    temporary = path.with_suffix(".tmp")
    with temporary.open("w", encoding="utf-8") as file:
        json.dump(values, file, indent=2)
        file.write("\n")
        file.flush()
        os.fsync(file.fileno())
    temporary.replace(path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
