"""DIR/hosts.json: the frontier's view of its hosts (queued URLs, next contact, current delay and its
cause) for whoever watches the crawl from outside its process: the dashboard, an operator's `jq`.

Written by the engine at its progress cadence, but no sooner than `MIN_INTERVAL` seconds nor
`COST_FACTOR` times the last write took after the last (the report walks the host table: a crawl of a
million hosts would otherwise pay for it every half second), and once more at the end; replaced
atomically (write, rename), never fsynced: it is a window on the crawl, not its state, and a crash
that loses it loses nothing. Bounded: the `limit`
hosts with most URLs queued, every other host only counted (frontier/report.py). A `--processes`
crawl's partitions each write their own, DIR/workers/k/hosts.json; `read_host_files` reads them all.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from crawlspace.frontier import Frontier

HOSTS_FILE = "hosts.json"
HOST_LIMIT = 200
"""Hosts listed in full: about 250 bytes each as JSON."""
COST_FACTOR = 1000.0
"""A write is repeated no sooner than this many times its own duration: at most 0.1% of the crawl. At
100 (1%) the file took 0.5-0.6% of a crawl process's CPU on the throughput benchmark's heavy web
(2,000 hosts, 1,000 a partition: a write walks them all), a cost of the crawl's seconds, not its pages."""
MIN_INTERVAL = 1.0
"""Seconds between two writes at the least (the dashboard reads the file at most once a second)."""
FORMAT = 1


class HostFile:
    def __init__(
        self,
        path: Path,
        frontier: Frontier,
        *,
        limit: int = HOST_LIMIT,
        extra: Callable[[], dict[str, Any]] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`extra`: fields of the partition's own beside the report (its index)."""
        self.path = path
        self.frontier = frontier
        self.limit = limit
        self._extra = extra
        self._monotonic = monotonic
        self._clock = clock
        self._next = 0.0
        self.writes = 0
        self.seconds = 0.0  # spent writing, over the run

    def maybe_write(self) -> bool:
        """Write the report if the last write is old enough for the cost rule; True if it did."""
        if self._monotonic() < self._next:
            return False
        self.write()
        return True

    def write(self) -> None:
        began = self._monotonic()
        report = self.frontier.host_report(self.limit).to_dict()
        extra = self._extra() if self._extra is not None else {}
        document = {"format": FORMAT, "time": round(self._clock(), 3), **report, **extra}
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_bytes(msgspec.json.encode(document))
        os.replace(tmp, self.path)
        took = self._monotonic() - began
        self.writes += 1
        self.seconds += took
        self._next = self._monotonic() + max(MIN_INTERVAL, COST_FACTOR * took)


@dataclass(frozen=True, slots=True)
class HostFiles:
    """Every partition's host report of a crawl directory, as read at one moment."""

    reports: list[dict[str, Any]]

    def rows(self) -> dict[str, dict[str, Any]]:
        """Host -> its row, with `next_contact` as a wall-clock time and the partition's index; hosts
        are disjoint between partitions (each owns its own)."""
        rows: dict[str, dict[str, Any]] = {}
        for report in self.reports:
            at = float(report.get("time") or 0.0)
            for row in report.get("rows") or []:
                if isinstance(row, dict) and isinstance(row.get("host"), str):
                    wait = row.get("next_contact_in")
                    wait = float(wait) if isinstance(wait, int | float) else 0.0
                    rows[row["host"]] = {**row, "next_contact": at + wait, "partition": report.get("partition")}
        return rows

    def summary(self) -> dict[str, Any]:
        """The reports' counts added up: hosts by status and by delay cause, URLs queued."""
        total: dict[str, Any] = {"hosts": 0, "listed": 0, "back_queued": 0, "front_queued": 0, "time": None}
        by_status: dict[str, int] = {}
        by_cause: dict[str, int] = {}
        for report in self.reports:
            for key in ("hosts", "listed", "back_queued", "front_queued"):
                value = report.get(key)
                total[key] += value if isinstance(value, int) else 0
            for into, key in ((by_status, "by_status"), (by_cause, "by_cause")):
                for name, n in (report.get(key) or {}).items():
                    if isinstance(n, int):
                        into[str(name)] = into.get(str(name), 0) + n
            when = report.get("time")
            if isinstance(when, int | float) and (total["time"] is None or when < total["time"]):
                total["time"] = when  # the oldest partition's: how stale the figures may be
        return total | {"by_status": by_status, "by_cause": by_cause}


def read_host_files(directory: Path) -> HostFiles:
    """DIR/hosts.json and every DIR/workers/k/hosts.json; a missing, torn or foreign file is skipped
    (being replaced: read at the next call)."""
    paths = [directory / HOSTS_FILE, *sorted(directory.glob(f"workers/*/{HOSTS_FILE}"))]
    reports = []
    for path in paths:
        try:
            document = json.loads(path.read_bytes())
        except (OSError, ValueError):
            continue
        if isinstance(document, dict) and document.get("format") == FORMAT:
            reports.append(document)
    return HostFiles(reports)
