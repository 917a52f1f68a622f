"""Several crawl processes on one machine (`--processes N`): the host splitter of IIR figure 20.2.

The coordinator (the process the user started) starts N workers (forks of a clean fork server).
Worker k runs a full engine over the hosts its `Assignment` gives partition k, with its own
frontier, URL set, content set, robots cache, journal and crawl-table shard under
DIR/workers/k/; all write WARC files into the one DIR/warc/. The workers reach each other and
the coordinator through a `SocketMesh` (distributed.socketmesh: URL batches delivered at least
once, the partitioned exact-duplicate oracle, probes); the engine sees only its `Peers` protocol.

The coordinator starts the workers (two-phase: none crawls unless all could open their state),
relays Ctrl-C and SIGTERM as stop messages, merges their progress, and decides the end of the
crawl with the four-counter test (distributed.termination) over rounds of probes. A page budget
(`max_pages`) is one shared counter (distributed.budget). Statistics are merged into
DIR/stats.json at the end. Resuming restarts the same N workers, each from its own checkpoint and
journal; their unacknowledged batches are sent again. Per-IP politeness holds within a partition:
hosts on one address are handed to the partition owning the address (see docs/architecture.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import multiprocessing
import multiprocessing.sharedctypes
import os
import signal
import socket
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from multiprocessing.context import ForkContext, ForkServerContext
from pathlib import Path
from typing import Any

from crawlspace.config import CrawlConfig
from crawlspace.crawl.checkpoint import STARTUP_ERRORS, report_recovery
from crawlspace.crawl.housekeeping import CrawlStats
from crawlspace.distributed.budget import PageBudget
from crawlspace.distributed.channel import Channel, ChannelClosed
from crawlspace.distributed.socketmesh import SocketMesh
from crawlspace.distributed.termination import ProbeAnswer, crawl_over, settled
from crawlspace.store.pagestore import WARC_DIR
from crawlspace.store.shards import WORKERS_DIR
from crawlspace.store.warc import WarcWriter

PROBE_INTERVAL = 0.2


class WorkerStartupError(Exception):
    """A partition could not start (its state cannot be resumed, its directory is in use...)."""


def worker_directory(crawl_dir: Path, index: int) -> Path:
    return crawl_dir / WORKERS_DIR / str(index)


# -- the processes ------------------------------------------------------------------------------


@dataclass
class WorkerSpec:
    index: int
    count: int
    crawl_dir: Path
    config: CrawlConfig
    seeds: list[str]
    resume: bool
    peer_sockets: dict[int, socket.socket]
    control_socket: socket.socket
    pages: Any  # the shared page counter
    unstarted_seeds: list[str] | None = None
    foreign_sockets: list[socket.socket] = field(default_factory=list)  # inherited by a fork, not ours


def _worker_main(spec: WorkerSpec) -> None:
    """A worker process: one engine over one partition until the coordinator says stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the coordinator relays interrupts (as stop messages)
    for sock in spec.foreign_sockets:  # else a dead coordinator's channel would never read as closed
        sock.close()
    from crawlspace.crawl.engine import CrawlEngine

    with contextlib.suppress(ImportError):
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())

    async def run() -> None:
        mesh = SocketMesh(
            spec.index,
            spec.count,
            spec.peer_sockets,
            spec.control_socket,
            hold_until_settled=not spec.config.store_near_duplicates,
        )
        budget = PageBudget(spec.config.max_pages, spec.pages)
        directory = worker_directory(spec.crawl_dir, spec.index)
        try:
            engine = CrawlEngine(
                spec.config,
                directory,
                live_progress=False,
                resume=spec.resume,
                unstarted_seeds=spec.unstarted_seeds,
                peers=mesh,
                shared_warc_dir=spec.crawl_dir / WARC_DIR,
                budget=budget,
                handle_signals=False,
            )
        except STARTUP_ERRORS as exc:  # told to the coordinator, which ends the crawl with this message
            await mesh.ready(str(exc))
            raise SystemExit(2) from None
        if not await mesh.ready():  # another partition could not start: this one closes untouched
            engine.close_unstarted()
            return
        if spec.resume:
            report_recovery(directory, engine.recovery)
        await engine.connect()
        if spec.seeds:
            engine.add_seeds(spec.seeds)
        try:
            await engine.run()
        finally:
            await mesh.close(engine.stats.termination)

    asyncio.run(run())


def start_method() -> str:
    """How to start the crawl processes: a fork (cheap; the children share this process's pages and
    their CPU time is its children's), unless this process runs RocksDB's background threads, which
    a process that has opened a crawl table keeps for good: a fork copies only the forking thread,
    and a child forked from such a process hung closing its table, waiting for threads it does not
    have. Then they start from a fork server (a clean process)."""
    try:
        names = [(Path("/proc/self/task") / task / "comm").read_text() for task in os.listdir("/proc/self/task")]
    except OSError:
        return "forkserver"  # unknown: take the safe way
    return "forkserver" if any(name.startswith("rocksdb") for name in names) else "fork"


def _stop_fork_server() -> None:
    """Stop (and reap) the fork server after a crawl: its children's CPU time then counts as this
    process's children's, as with a fork, and no idle server outlives the crawl. Python has no public
    call for it; without one the server simply ends with this process."""
    from multiprocessing import forkserver

    stop = getattr(forkserver._forkserver, "_stop", None)
    if stop is not None:
        with contextlib.suppress(OSError, ChildProcessError):
            stop()


class ParallelCrawl:
    """The coordinator of `processes` workers over one crawl directory."""

    def __init__(
        self,
        config: CrawlConfig,
        crawl_dir: Path,
        seeds: list[str],
        *,
        processes: int,
        resume: bool,
        live: bool | None = None,
        unstarted_seeds: list[str] | None = None,
    ) -> None:
        self.config = config
        self.crawl_dir = crawl_dir
        self.seeds = seeds
        self.processes = processes
        self.resume = resume
        self.live = live
        self.unstarted_seeds = unstarted_seeds  # a resumed partition killed before its first checkpoint
        self.reports: dict[int, dict[str, Any]] = {}
        self.termination = ""
        self._stop_reason: str | None = None
        self._channels: list[Channel] = []
        self._stop_requested = False
        self.fatal: list[str] = []  # workers that could not start, and why
        self._ready: set[int] = set()

    def request_stop(self) -> None:
        """Stop the crawl (from any thread): the workers finish their fetches and checkpoint."""
        self._stop_requested = True

    def run(self) -> CrawlStats:
        method = start_method()
        if method == "fork":
            context: ForkContext | ForkServerContext = multiprocessing.get_context("fork")
        else:
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload(["crawlspace.crawl.engine", "crawlspace.crawl.workers"])
        crawl_dir = self.crawl_dir
        (crawl_dir / WORKERS_DIR).mkdir(parents=True, exist_ok=True)
        WarcWriter.recover(crawl_dir / WARC_DIR)  # once for all workers: they share the directory
        pages = context.Value("q", 0)  # a resumed worker adds the pages its checkpoint counted
        n = self.processes
        pairs = {(a, b): socket.socketpair() for a in range(n) for b in range(a + 1, n)}
        controls = [socket.socketpair() for _ in range(n)]
        workers = []
        for k in range(n):
            peers = {}
            for (a, b), (sa, sb) in pairs.items():
                if a == k:
                    peers[b] = sa
                elif b == k:
                    peers[a] = sb
            mine = {id(sock) for sock in [*peers.values(), controls[k][1]]}
            everything = [sock for pair in [*pairs.values(), *controls] for sock in pair]
            spec = WorkerSpec(
                k, n, crawl_dir, self.config, self.seeds, self.resume, peers, controls[k][1], pages,
                self.unstarted_seeds,
                [sock for sock in everything if id(sock) not in mine] if method == "fork" else [],
            )  # fmt: skip
            process = context.Process(target=_worker_main, args=(spec,), name=f"crawlspace-worker-{k}")
            process.start()
            workers.append(process)
        for sa, sb in pairs.values():
            sa.close()
            sb.close()
        for _, worker_end in controls:
            worker_end.close()
        started = time.time()
        try:
            asyncio.run(self._coordinate([control for control, _ in controls], workers))
        finally:
            for process in workers:
                process.join(timeout=self.config.shutdown_grace + 30)
                if process.is_alive():
                    process.kill()
                    process.join()
            if method == "forkserver":
                _stop_fork_server()
        if self.fatal:
            raise WorkerStartupError(self.fatal[0])
        stats = merge_worker_stats(crawl_dir, n, started)
        failed = [p.name for p in workers if p.exitcode not in (0, None)]
        if failed:
            stats.errors["worker-failed"] += len(failed)
        stats.termination = self.termination or stats.termination
        stats.write(crawl_dir / "stats.json")
        return stats

    async def _coordinate(self, sockets: list[socket.socket], workers: list[Any]) -> None:
        channels = self._channels = [await Channel.over(sock) for sock in sockets]
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, self._interrupt)
        probes: dict[int, dict[int, ProbeAnswer]] = {}
        listeners = [asyncio.create_task(self._listen(k, channel, probes)) for k, channel in enumerate(channels)]
        while len(self._ready) + len(self.fatal) < len(channels) and any(p.is_alive() for p in workers):
            await asyncio.sleep(0.02)
        self._broadcast(["stop", "worker-failed"] if self.fatal else ["go"])
        if self.fatal:
            self._stop_reason = self.termination = "worker-failed"
        progress = _Progress(self.crawl_dir, self.live, self.reports)
        previous: dict[int, ProbeAnswer] | None = None
        round_number = 0
        try:
            while any(process.is_alive() for process in workers):
                if self._stop_reason is None and (
                    self.fatal or any(process.exitcode not in (None, 0) for process in workers)
                ):
                    self._stop_all("worker-failed")
                if self._stop_reason is None and self._stop_requested:
                    self._stop_all("stopped")
                if self._stop_reason is None:
                    round_number += 1
                    self._broadcast(["probe", round_number])
                await asyncio.sleep(PROBE_INTERVAL)
                progress.maybe_report()
                answers = probes.pop(round_number, {})
                if self._stop_reason is None and len(answers) == len(channels):
                    if crawl_over(previous, answers, len(channels)):
                        self._stop_all("frontier-empty")
                    previous = answers if settled(answers) else None
                for old in [number for number in probes if number < round_number]:
                    del probes[old]
        finally:
            progress.close()
            for task in listeners:
                task.cancel()
            for sig in (signal.SIGINT, signal.SIGTERM):
                with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                    loop.remove_signal_handler(sig)

    async def _listen(self, index: int, channel: Channel, probes: dict[int, dict[int, ProbeAnswer]]) -> None:
        while True:
            try:
                message = await channel.receive()
            except ChannelClosed:
                return
            if message[0] == "probe":
                _, number, idle, sent, received = message
                probes.setdefault(int(number), {})[index] = ProbeAnswer(bool(idle), int(sent), int(received))
            elif message[0] == "report":
                self.reports[int(message[1])] = message[2]
            elif message[0] == "fatal":
                self.fatal.append(str(message[2]))
            elif message[0] == "ended":
                if self._stop_reason is None:  # it stopped by itself: the others follow, for the same reason
                    self._stop_all(str(message[2]))
            elif message[0] == "ready":
                self._ready.add(index)

    def _interrupt(self) -> None:
        if self._stop_reason == "interrupted":
            os._exit(130)  # a second Ctrl-C: at once (the checkpoints and journals still resume)
        self._stop_all("interrupted")

    def _stop_all(self, reason: str) -> None:
        self._stop_reason = reason
        self.termination = self.termination or reason
        self._broadcast(["stop", reason])

    def _broadcast(self, message: list[Any]) -> None:
        for channel in self._channels:
            with contextlib.suppress(ChannelClosed):  # that worker is gone: its exit code tells
                channel.send(message)


class _Progress:
    """The coordinator's progress: the workers' reports summed, on the terminal and in progress.jsonl."""

    def __init__(self, crawl_dir: Path, live: bool | None, reports: dict[int, dict[str, Any]]) -> None:
        self._reports = reports
        self._path = crawl_dir / "progress.jsonl"
        self._handle = self._path.open("a", encoding="utf-8")
        self._started = time.monotonic()
        self._last = 0.0
        self._last_pages = 0
        self._interval = 2.0
        self._stream = sys.stderr

    def maybe_report(self) -> None:
        now = time.monotonic()
        if now - self._last < self._interval or not self._reports:
            return
        total: Counter[str] = Counter()
        for report in self._reports.values():
            for key, value in report.items():
                if isinstance(value, int) and not isinstance(value, bool):
                    total[key] += value
        pages = int(total.get("pages", 0))
        recent = (pages - self._last_pages) / (now - self._last) if self._last else 0.0
        self._last, self._last_pages = now, pages
        line = {"time": round(time.time(), 3), "elapsed": round(now - self._started, 2), "workers": len(self._reports)}
        line.update(dict(sorted(total.items())))
        line["pages_per_second_recent"] = round(recent, 1)
        self._handle.write(json.dumps(line) + "\n")
        self._handle.flush()
        self._stream.write(
            f"[{line['elapsed']:>7.1f}s] pages {pages} ({recent:.1f}/s), frontier {int(total.get('frontier', 0))}, "
            f"in flight {int(total.get('in_flight', 0))}, workers {len(self._reports)}, "
            f"errors {int(total.get('errors', 0))}\n"
        )
        self._stream.flush()

    def close(self) -> None:
        self._handle.close()


def merge_worker_stats(crawl_dir: Path, count: int, started: float) -> CrawlStats:
    """One CrawlStats for the whole crawl from the workers' stats.json files."""
    merged = CrawlStats(started_at=started)
    snapshots = []
    for k in range(count):
        path = worker_directory(crawl_dir, k) / "stats.json"
        try:
            snapshots.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            merged.errors["worker-stats-missing"] += 1
    for data in snapshots:
        for name in _SUMMED:
            setattr(merged, name, getattr(merged, name) + int(data.get(name, 0)))
        merged.responses_by_status.update({int(k): v for k, v in data.get("responses_by_status", {}).items()})
        merged.outcomes.update(data.get("outcomes", {}))
        merged.errors.update(data.get("errors", {}))
        merged.filtered.update(data.get("filtered", {}))
        merged.runs = max(merged.runs, int(data.get("runs", 1)))
    for name in {key for data in snapshots for key, value in data.items() if isinstance(value, dict)} - _TOP_COUNTERS:
        merged.sections[name] = _combine([data[name] for data in snapshots if name in data])
    if snapshots:
        merged.termination = str(snapshots[0].get("termination", ""))
    merged.sections["workers"] = [{key: data.get(key) for key in _PER_WORKER} for data in snapshots]
    merged.finished_at = time.time()
    longest = max((float(data.get("duration_seconds", 0.0)) for data in snapshots), default=0.0)
    merged.crawl_seconds_before = max(0.0, longest - (merged.finished_at - started))  # elapsed: the longest run
    return merged


_SUMMED = (
    "pages_fetched", "bytes_downloaded", "robots_fetches", "robots_excluded", "robots_unreachable", "robots_waiting",
    "sitemaps_fetched", "sitemap_urls", "duplicate_urls", "duplicate_content", "near_duplicate_content",
    "links_extracted", "links_dropped", "nofollow_links", "noindex_pages", "canonical_elsewhere", "urls_discovered",
    "retries", "handed_over",
)  # fmt: skip
_PER_WORKER = ("pages_fetched", "pages_per_second", "termination", "runs")
_TOP_COUNTERS = frozenset({"responses_by_status", "outcomes", "errors", "filtered"})


def _combine(values: list[Any]) -> Any:
    """The partitions' values of one stats entry as one: counts add up, rates and other fractions
    are averaged, tables combine key by key, anything else keeps the first partition's value."""
    if all(isinstance(value, dict) for value in values):
        keys = {key: None for value in values for key in value}
        return {key: _combine([value[key] for value in values if key in value]) for key in keys}
    if all(isinstance(value, int) and not isinstance(value, bool) for value in values):
        return sum(values)
    if all(isinstance(value, int | float) and not isinstance(value, bool) for value in values):
        return sum(values) / len(values)
    return values[0]
