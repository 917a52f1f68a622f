"""Several crawl processes on one machine (`--processes N`): the host splitter of IIR figure 20.2.

The coordinator (the process the user started) starts N workers (forks of a clean fork server).
Worker k runs a full engine over the hosts its `Assignment` gives partition k, with its own
frontier, URL set, content set, robots cache, journal and crawl-table shard under
DIR/workers/k/; all write WARC files into the one DIR/warc/. The workers reach each other and
the coordinator through a `SocketMesh` (distributed.socketmesh: URL batches delivered at least
once, the partitioned exact-duplicate oracle, probes, telemetry); the engine sees only its
`Peers` protocol.

The coordinator starts the workers (two-phase: none crawls unless all could open their state),
relays Ctrl-C and SIGTERM as stop messages, decides the end of the crawl over rounds of probes
(distributed.termination), and merges the workers' latest Snapshots (crawl/telemetry.py) for its
progress display and `Crawler.stats`, and their last ones into DIR/stats.json at the end. A page
budget (`max_pages`) is one shared counter (distributed.budget). Resuming restarts the same N
workers, each from its own checkpoint and journal; their unacknowledged batches are sent again.
Resuming with another number M (crawl.partitioning) starts max(N, M) workers for a handover phase
first (distributed.resize, crawl/repartition.py): the coordinator waits until each has said `handed`
and lets the crawl begin (`resized`); workers M and up then send their last URL batches and end
(`drained`), and only then is the resize recorded as done.
Per-IP politeness holds within a partition: hosts on one address are handed to the partition
owning the address (see docs/architecture.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import multiprocessing
import multiprocessing.sharedctypes
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.context import ForkContext, ForkServerContext
from pathlib import Path
from typing import Any

from crawlspace.config import CrawlConfig
from crawlspace.crawl import partitioning as layout
from crawlspace.crawl.checkpoint import STARTUP_ERRORS, report_recovery
from crawlspace.crawl.control import CONTROL_FILE
from crawlspace.crawl.partitioning import Partitioning
from crawlspace.crawl.telemetry import (
    PROGRESS_FILE,
    CrawlStats,
    Gauges,
    JsonLinesSink,
    Snapshot,
    Telemetry,
    TelemetrySink,
    display_sink,
    merge,
)
from crawlspace.distributed.budget import PageBudget
from crawlspace.distributed.channel import Channel, ChannelClosed
from crawlspace.distributed.socketmesh import SocketMesh
from crawlspace.distributed.termination import ProbeAnswer, crawl_over, settled
from crawlspace.frontier.store import PREVIOUS_STATE_NAME, STATE_NAME
from crawlspace.store.pagestore import WARC_DIR
from crawlspace.store.shards import WORKERS_DIR
from crawlspace.store.warc import WarcWriter

PROBE_INTERVAL = 0.2  # between the rounds that decide the end, once a partition said it is idle
BUSY_PROBE_INTERVAL = 1.0  # while every partition is busy: each round costs every process (issue 17)


class WorkerStartupError(Exception):
    """A partition could not start (its state cannot be resumed, its directory is in use...)."""


def worker_directory(crawl_dir: Path, index: int) -> Path:
    return crawl_dir / WORKERS_DIR / str(index)


def has_state(directory: Path) -> bool:
    """Has this partition ever committed a checkpoint? (A partition new in a resize has not, until
    its first one.)"""
    frontier = directory / "frontier"
    return (frontier / STATE_NAME).exists() or (frontier / PREVIOUS_STATE_NAME).exists()


@dataclass(frozen=True)
class CoordinatorSink:
    """A partition's TelemetrySink: its Snapshots go to the coordinator instead of a terminal."""

    mesh: SocketMesh

    def publish(self, snapshot: Snapshot) -> None:
        self.mesh.report(snapshot.to_builtins())

    def close(self) -> None:
        """The channel is the mesh's, closed with it."""


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
    partitioning: Partitioning
    unstarted_seeds: list[str] | None = None
    foreign_sockets: list[socket.socket] = field(default_factory=list)  # inherited by a fork, not ours


GC_THRESHOLDS = (10_000, 10, 10)
"""The cyclic collector's thresholds while a crawl runs in a process. At Python's (700, 10, 10) a
partition of a 20,000-page crawl ran about 1,000 young collections, 90 middle and 8 full ones, 5.3% of
its CPU, though a page's objects are freed by their reference counts (what cycles a crawl makes, from
exceptions and their frames, wait a little longer): at 10,000 new containers, 30, 3 and none, 1%
(bench/README.md, issue 17's eighth round)."""


@contextlib.contextmanager
def crawl_gc() -> Iterator[None]:
    """`GC_THRESHOLDS` while the block runs, the process's own thresholds again after it."""
    previous = gc.get_threshold()
    gc.set_threshold(*GC_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*previous)


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
            spec.partitioning.partitions,
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
                telemetry=[CoordinatorSink(mesh)],
                resume=spec.resume,
                unstarted_seeds=spec.unstarted_seeds,
                peers=mesh,
                shared_warc_dir=spec.crawl_dir / WARC_DIR,
                budget=budget,
                handle_signals=False,
                assignment=spec.partitioning.make_assignment(),
                resize=spec.partitioning.resize,
                url_fingerprints=spec.partitioning.fingerprints,
                control_file=spec.crawl_dir / CONTROL_FILE,
            )
        except STARTUP_ERRORS as exc:  # told to the coordinator, which ends the crawl with this message
            await mesh.ready(str(exc))
            raise SystemExit(2) from None
        if not await mesh.ready():  # another partition could not start: this one closes untouched
            engine.close_unstarted()
            return
        if spec.resume:
            report_recovery(directory, engine.recovery)
        if spec.partitioning.resize is not None:
            await engine.repartition()  # stopped meanwhile: the run below only checkpoints and ends
        else:
            await engine.connect()
        if spec.seeds:
            engine.add_seeds(spec.seeds)
        try:
            await engine.run()
        finally:
            await mesh.close(engine.stats.termination)

    with crawl_gc():
        asyncio.run(run())


THREAD_PREFIX = "crawlspace-"
"""The name of every thread the package starts beside a crawl (see `start_method`)."""


def start_method() -> str:
    """How to start the crawl processes: a fork (cheap; the children share this process's pages and
    their CPU time is its children's), unless this process runs RocksDB's background threads, which
    a process that has opened a crawl table keeps for good: a fork copies only the forking thread,
    and a child forked from such a process hung closing its table, waiting for threads it does not
    have. Then they start from a fork server (a clean process), as they do beside a thread this
    package started (named `crawlspace-...`: the dashboard attached to the crawl), whose locks and
    sockets a fork would copy half-held into every child."""
    if any(thread.name.startswith(THREAD_PREFIX) for thread in threading.enumerate()):
        return "forkserver"
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
        telemetry: Sequence[TelemetrySink] | None = None,
        invalid_seeds: int = 0,
        partitioning: Partitioning | None = None,
    ) -> None:
        """`telemetry`: where the merged progress goes besides DIR/progress.jsonl (None: the terminal, as
        for one process); `invalid_seeds`: seeds the caller dropped, counted in the crawl's stats;
        `partitioning`: how the hosts are split (crawl.partitioning; None: a new crawl's rule), a
        resize when it differs from the directory's."""
        self.config = config
        self.crawl_dir = crawl_dir
        self.seeds = seeds
        self.partitioning = partitioning or Partitioning(processes)
        self.processes = self.partitioning.workers
        self.resume = resume
        self.unstarted_seeds = unstarted_seeds  # a resumed partition killed before its first checkpoint
        self.invalid_seeds = invalid_seeds
        self.reports: dict[int, Snapshot] = {}  # each partition's latest, by index
        sinks = telemetry if telemetry is not None else [display_sink(live)]
        self.telemetry = Telemetry([JsonLinesSink(crawl_dir / PROGRESS_FILE), *sinks])
        self.termination = ""
        self._stop_reason: str | None = None
        self._channels: list[Channel] = []
        self._stop_requested = False
        self.fatal: list[str] = []  # workers that could not start, and why
        self._ready: set[int] = set()
        self._ended: set[int] = set()  # workers that said they ended (their last message)
        self._lost: set[int] = set()  # workers whose channel closed without it: they died
        self._refused: set[int] = set()  # workers that said why they could not start (in `fatal`)
        self._handed: set[int] = set()  # workers done with a resize's handover
        self._drained: set[int] = set()  # workers leaving in a resize that have ended
        self._attention = asyncio.Event()  # a worker turned idle, ended or died: the next round now
        self._all_idle = False  # every partition answered idle in the last complete round
        self._idle_noticed_in = -1  # the round sent last when a partition said it turned idle
        self.probe_rounds = 0  # termination probes sent to every worker (stats.json: "coordinator")
        self.idle_notices = 0  # workers that said they turned idle (each brings a round forward)

    @property
    def stats(self) -> CrawlStats | None:
        """The crawl's statistics as last published (every `progress_interval`), final once it ended."""
        latest = self.telemetry.latest
        return None if latest is None else latest.stats

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
        layout.write(crawl_dir, self.partitioning)  # a resize is recorded before any worker starts
        pages = context.Value("q", 0)  # a resumed worker adds the pages its checkpoint counted
        n = self.processes
        resizing = self.partitioning.resize is not None
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
            resume = self.resume and (not resizing or has_state(worker_directory(crawl_dir, k)))
            spec = WorkerSpec(
                k, n, crawl_dir, self.config, self.seeds, resume, peers, controls[k][1], pages,
                self.partitioning, self.unstarted_seeds if resume or not resizing else None,
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
        except BaseException:
            self.telemetry.close()  # no last Snapshot, but the display is given back
            raise
        finally:
            for process in workers:
                process.join(timeout=self.config.shutdown_grace + 30)
                if process.is_alive():
                    process.kill()
                    process.join()
            if method == "forkserver":
                _stop_fork_server()
        if self.fatal:
            self.telemetry.close()
            raise WorkerStartupError(self.fatal[0])
        stats = self._final_stats(started)
        failed = [p.name for p in workers if p.exitcode not in (0, None)]
        if failed:
            stats.errors["worker-failed"] += len(failed)
        stats.termination = self.termination or stats.termination
        stats.write(crawl_dir / "stats.json")
        latest = [self.reports[k] for k in sorted(self.reports)]
        gauges = merge([report.gauges for report in latest]) if latest else Gauges()
        self.telemetry.close(Snapshot(stats, gauges, time.time(), stats.elapsed, partitions=len(latest)))
        return stats

    def _final_stats(self, started: float) -> CrawlStats:
        """One CrawlStats for the whole crawl from the partitions' last Snapshots: each sends one after
        its final checkpoint (finished_at set); a partition that died has only its latest report."""
        latest = [self.reports[k].stats for k in sorted(self.reports)]
        merged = merge(latest) if latest else CrawlStats(started_at=started)
        missing = self.processes - sum(1 for stats in latest if stats.finished_at is not None)
        if missing:
            merged.errors["worker-stats-missing"] += missing
        merged.sections["workers"] = [{key: stats.to_dict()[key] for key in _PER_WORKER} for stats in latest]
        merged.sections["coordinator"] = {"probe_rounds": self.probe_rounds, "idle_notices": self.idle_notices}
        merged.invalid_seeds += self.invalid_seeds
        merged.finished_at = merged.finished_at or time.time()
        return merged

    def _merged_report(self) -> Snapshot:
        """The partitions' latest Snapshots as the crawl's."""
        merged = merge([self.reports[k] for k in sorted(self.reports)])
        merged.stats.invalid_seeds += self.invalid_seeds
        return merged

    async def _coordinate(self, sockets: list[socket.socket], workers: list[Any]) -> None:
        channels = self._channels = [await Channel.over(sock) for sock in sockets]
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, self._interrupt)
        probes: dict[int, dict[int, ProbeAnswer]] = {}
        listeners = [asyncio.create_task(self._listen(k, channel, probes)) for k, channel in enumerate(channels)]
        while len(self._ready) + len(self.fatal) < len(channels) and not self._lost:
            await asyncio.sleep(0.02)
        for index in sorted(self._lost - self._ready - self._refused):  # died without saying why
            workers[index].join(timeout=5)
            self.fatal.append(
                f"crawl process {index} ended before it was ready (exit code {workers[index].exitcode}); "
                "its error is above"
            )
        self._broadcast(["stop", "worker-failed"] if self.fatal else ["go"])
        if self.fatal:
            self._stop_reason = self.termination = "worker-failed"
        published = time.monotonic()
        previous: dict[int, ProbeAnswer] | None = None
        try:
            while any(process.is_alive() for process in workers):
                if self._stop_reason is None and (
                    self.fatal or self._lost or any(process.exitcode not in (None, 0) for process in workers)
                ):
                    self._stop_all("worker-failed")
                if self._stop_reason is None and self._stop_requested:
                    self._stop_all("stopped")
                if self._stop_reason is None:
                    self.probe_rounds += 1
                    self._broadcast(["probe", self.probe_rounds])
                # the round just sent is the first to reflect a notice that came during the one before
                noticed = self._idle_noticed_in >= self.probe_rounds - 1
                hurry = self._all_idle or noticed or self._stop_reason is not None or not self._handed_over
                until_report = self.config.progress_interval - (time.monotonic() - published)
                self._attention.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(
                        self._attention.wait(),
                        timeout=max(
                            PROBE_INTERVAL, min(PROBE_INTERVAL if hurry else BUSY_PROBE_INTERVAL, until_report)
                        ),
                    )
                # due within a short round: published now, else the next wait would be that short round
                if self.reports and time.monotonic() - published >= self.config.progress_interval - PROBE_INTERVAL:
                    self.telemetry.publish(self._merged_report())
                    published = time.monotonic()
                answers = {k: a for k, a in probes.pop(self.probe_rounds, {}).items() if k not in self._drained}
                expected = len(channels) - len(self._drained)
                if self._stop_reason is None and len(answers) == expected and self._handed_over:
                    if crawl_over(previous, answers, expected):
                        self._stop_all("frontier-empty")
                    previous = answers if settled(answers) else None
                    self._all_idle = all(answer.idle for answer in answers.values())  # the end needs every one idle
                for old in [number for number in probes if number < self.probe_rounds]:
                    del probes[old]
            # the partitions' last Snapshots are sent just before they end: read what is left of them
            await asyncio.wait(listeners, timeout=PROBE_INTERVAL * 10)
        finally:
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
                if index not in self._ended:
                    self._lost.add(index)  # killed, or an error it could not report
                    self._attention.set()
                return
            if message[0] == "probe":
                _, number, idle, sent, received = message
                probes.setdefault(int(number), {})[index] = ProbeAnswer(bool(idle), int(sent), int(received))
            elif message[0] == "idle":
                self.idle_notices += 1
                self._idle_noticed_in = self.probe_rounds
                self._attention.set()
            elif message[0] == "report":
                self.reports[int(message[1])] = Snapshot.from_builtins(message[2])
            elif message[0] == "fatal":
                self._refused.add(index)
                self.fatal.append(str(message[2]))
            elif message[0] == "ended":
                self._ended.add(index)
                if str(message[2]) == "drained":  # a partition leaving in a resize, all handed over
                    self._drained.add(index)
                    self._record_resize_when_over()
                elif self._stop_reason is None:  # it stopped by itself: the others follow, for the same reason
                    self._stop_all(str(message[2]))
                return  # its last message
            elif message[0] == "handed":
                self._handed.add(index)
                if self._handed_over and self.partitioning.resize is not None:
                    self._broadcast(["resized"])  # the crawl begins under the new assignment
                    self._record_resize_when_over()
            elif message[0] == "ready":
                self._ready.add(index)

    @property
    def _handed_over(self) -> bool:
        """No resize, or every partition has handed over: the crawl runs under the new assignment."""
        return self.partitioning.resize is None or len(self._handed) == len(self._channels)

    def _record_resize_when_over(self) -> None:
        """partitions.json calls the resize over once every partition has handed over and every
        draining one has ended `drained`. A draining partition sends the old assignment's
        unacknowledged URL batches to their new owners only after the barrier, and until they are
        acknowledged its directory alone holds those URLs: a resume after the resize starts only the
        new count of partitions and never opens it again. A resume before then repeats the phase, which
        the partitions that handed over pass at once, and the draining one sends them again."""
        resize = self.partitioning.resize
        if resize is None or not self._handed_over:
            return
        if any(resize.draining(index) and index not in self._drained for index in range(len(self._channels))):
            return
        self.partitioning = self.partitioning.resized()
        layout.write(self.crawl_dir, self.partitioning)  # the resize is over, for good

    def _interrupt(self) -> None:
        if self._stop_reason == "interrupted":
            os._exit(130)  # a second Ctrl-C: at once (the checkpoints and journals still resume)
        self._stop_all("interrupted")

    def _stop_all(self, reason: str) -> None:
        self._stop_reason = reason
        self._attention.set()
        self.termination = self.termination or reason
        self._broadcast(["stop", reason])

    def _broadcast(self, message: list[Any]) -> None:
        for channel in self._channels:
            with contextlib.suppress(ChannelClosed):  # that worker is gone: its exit code tells
                channel.send(message)


_PER_WORKER = ("pages_fetched", "pages_per_second", "termination", "runs")
