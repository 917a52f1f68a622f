"""Several crawl processes on one machine (`--processes N`): the host splitter of IIR figure 20.2.

The coordinator (the process the user started) starts N workers (forks of a clean fork server).
Worker k runs a full engine over the hosts `owner_of(host, N) == k`, with its own frontier, URL
set, content set, robots cache, journal and crawl-table shard under DIR/workers/k/; all write WARC
files into the one DIR/warc/.
They talk over socketpairs the coordinator makes and hands to each worker:

- worker -> worker: batches of URLs for the receiver's hosts (journaled by the sender as X lines,
  acknowledged by the receiver once it journaled them as its own submissions, K lines: delivery is
  at least once, repeats are dropped by the receiver's URL set); exact-duplicate questions about a
  body fingerprint to the partition that owns `fp mod N` ("which URL had this body first?"), and
  their answers. With `store_near_duplicates` off a first URL's page may turn out not to be stored
  (a near-duplicate): its partition then says whether it was (`settle`), and the owner holds the
  answers for the body's copies until it has, so that no revisit record refers to a page never written.
- worker -> coordinator: its telemetry Snapshots and, when asked, termination probes: (round, idle,
  batches sent, batches received). The crawl is over when two consecutive rounds find every worker
  idle with equal totals (Mattern's four-counter method: a batch in transit shows as sent > received,
  one received between the rounds changes the totals).
- coordinator -> worker: probes, and stop.

A page budget (`max_pages`) is one shared counter. The coordinator merges the workers' latest
Snapshots (crawl/telemetry.py) for its progress display and `Crawler.stats`, and their last ones
into DIR/stats.json at the end. Resuming restarts the same N workers, each from its own checkpoint
and journal; their unacknowledged batches are sent again. Per-IP politeness holds within a partition: hosts on one
address in different partitions each keep their own delay (see docs/architecture.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import multiprocessing
import multiprocessing.sharedctypes
import os
import signal
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from multiprocessing.context import ForkContext, ForkServerContext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crawlspace.config import CrawlConfig
from crawlspace.crawl.checkpoint import STARTUP_ERRORS, report_recovery
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
from crawlspace.distributed.channel import Channel, ChannelClosed
from crawlspace.distributed.splitter import Batch, Outbox, owner_of
from crawlspace.frontier.entry import FrontierEntry
from crawlspace.store.pagestore import WARC_DIR
from crawlspace.store.shards import WORKERS_DIR
from crawlspace.store.warc import WarcWriter

if TYPE_CHECKING:
    from crawlspace.crawl.engine import CrawlEngine

QUERY_TIMEOUT = 10.0
PROBE_INTERVAL = 0.2


class WorkerStartupError(Exception):
    """A partition could not start (its state cannot be resumed, its directory is in use...)."""


def worker_directory(crawl_dir: Path, index: int) -> Path:
    return crawl_dir / WORKERS_DIR / str(index)


class PageBudget:
    """The crawl's page limit, shared by its processes: a page fetch claims one unit first."""

    def __init__(self, limit: int | None, shared: Any = None) -> None:
        self.limit = limit
        self._shared = shared  # a multiprocessing.Value('q') when several processes share the budget
        self._local = 0

    @property
    def used(self) -> int:
        return int(self._shared.value) if self._shared is not None else self._local

    def exhausted(self) -> bool:
        return self.limit is not None and self.used >= self.limit

    def claim(self) -> bool:
        if self.limit is None:
            self._count(1)
            return True
        if self._shared is not None:
            with self._shared.get_lock():
                if self._shared.value >= self.limit:
                    return False
                self._shared.value += 1
            return True
        if self._local >= self.limit:
            return False
        self._local += 1
        return True

    def set_used(self, used: int) -> None:
        """Continue the count of a resumed crawl (its pages fetched so far)."""
        if self._shared is not None:
            with self._shared.get_lock():
                self._shared.value += used
        else:
            self._local = used

    def _count(self, pages: int) -> None:
        if self._shared is not None:
            with self._shared.get_lock():
                self._shared.value += pages
        else:
            self._local += pages


@dataclass
class PartitionLink:
    """What a worker's engine uses to reach the other partitions and the coordinator."""

    index: int
    count: int
    warc_dir: Path
    peer_sockets: dict[int, socket.socket]
    control_socket: socket.socket
    outbox: Outbox = field(init=False)
    sent: int = 0  # URL batches sent by this process, resends included (termination counting)
    received: int = 0  # URL batches received and journaled
    idle: bool = False
    _peers: dict[int, Channel] = field(default_factory=dict)
    _control: Channel | None = None
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _queries: dict[int, tuple[int, asyncio.Future[tuple[str, float] | None]]] = field(default_factory=dict)
    _unsettled: dict[int, list[tuple[int, int, str, float]]] = field(default_factory=dict)
    """Fingerprints this partition owns whose first URL's page may not be stored, with the claims of
    other URLs waiting for `settle` (sender, query number, URL, fetch time)."""
    _gone: set[int] = field(default_factory=set)  # peers whose channel closed
    _query_numbers: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _engine: CrawlEngine | None = None

    def __post_init__(self) -> None:
        self.outbox = Outbox(self.index, self.count)

    # -- ownership ---------------------------------------------------------------------------

    def owner(self, host: str) -> int:
        return owner_of(host, self.count)

    def content_owner(self, fingerprint: int) -> int:
        return fingerprint % self.count

    # -- lifecycle ---------------------------------------------------------------------------

    async def ready(self, problem: str | None = None) -> bool:
        """Tell the coordinator this partition could open its state (or why not); True when every
        partition could and the crawl goes ahead: no partition crawls unless all of them can."""
        self._control = await Channel.over(self.control_socket)
        self._control.send(["fatal", self.index, problem] if problem else ["ready", self.index])
        await self._control.drain()
        while True:
            try:
                message = await self._control.receive()
            except ChannelClosed:
                return False
            if message[0] in ("go", "stop"):
                return bool(message[0] == "go")

    async def start(self, engine: CrawlEngine) -> None:
        self._engine = engine
        for peer, sock in self.peer_sockets.items():
            self._peers[peer] = await Channel.over(sock)
            self._tasks.append(asyncio.create_task(self._listen_peer(peer)))
        self._tasks.append(asyncio.create_task(self._listen_control()))
        self.resend()

    async def close(self, termination: str = "") -> None:
        """Say how the engine ended (a partition that stops by itself, e.g. on a failed journal, stops
        the whole crawl: the others would wait for it forever), then close every channel."""
        if self._control is not None and termination:
            with contextlib.suppress(ChannelClosed):
                self._control.send(["ended", self.index, termination])
        for task in self._tasks:
            task.cancel()
        for channel in [*self._peers.values(), *([self._control] if self._control else [])]:
            with contextlib.suppress(Exception):
                await channel.drain()
            channel.close()

    # -- URL batches -------------------------------------------------------------------------

    def transmit(self, batches: list[Batch]) -> None:
        """Send batches the engine has journaled (as X lines)."""
        self.sent += len(batches)
        for batch in batches:
            urls = [[entry.url, entry.depth, entry.hops] for entry in batch.entries]
            self._send(batch.peer, ["fwd" if batch.forward else "urls", self.index, batch.number, urls])

    def resend(self) -> None:
        """After a resume: every batch not acknowledged before the crash goes out again."""
        self.transmit(sorted(self.outbox.unacked.values(), key=lambda batch: batch.number))

    def _send(self, peer: int, message: list[Any]) -> None:
        with contextlib.suppress(ChannelClosed):  # the peer is gone: the coordinator ends the crawl
            self._peers[peer].send(message)

    # -- exact duplicates, partitioned by fingerprint -------------------------------------------

    async def claim_first(self, fingerprint: int, url: str, fetched_at: float) -> tuple[str, float] | None:
        """The URL that had this body first in the crawl and its fetch time (`url` and `fetched_at`
        if it is the first), asked of the partition that owns the fingerprint. None when that
        partition could not answer: then this partition's own content set decides (a duplicate
        may be stored twice)."""
        owner = self.content_owner(fingerprint)
        if owner in self._gone:
            return None
        number = next(self._query_numbers)
        if owner == self.index:
            first = self._claim(self.index, number, fingerprint, url, fetched_at)
            if first is not None:
                return first
        future: asyncio.Future[tuple[str, float] | None] = asyncio.get_running_loop().create_future()
        self._queries[number] = (owner, future)
        if owner != self.index:
            self._send(owner, ["cq", self.index, number, fingerprint, url, fetched_at])
        try:
            return await asyncio.wait_for(future, timeout=QUERY_TIMEOUT)
        except TimeoutError:
            return None
        finally:
            self._queries.pop(number, None)

    def settle(self, fingerprint: int, url: str, *, stored: bool) -> None:
        """`url`, which `claim_first` named the first with this body, is recorded: its page `stored`,
        or not (a near-duplicate the crawl does not keep; then the next URL with the body becomes
        the first). Called for every such URL while `store_near_duplicates` is off, when copies wait."""
        owner = self.content_owner(fingerprint)
        if owner == self.index:
            self._settled(fingerprint, url, stored)
        else:
            self._send(owner, ["cs", fingerprint, url, stored])

    def _claim(
        self, sender: int, number: int, fingerprint: int, url: str, fetched_at: float
    ) -> tuple[str, float] | None:
        """Answer a claim on a fingerprint this partition owns, or None when it must wait for `settle`."""
        assert self._engine is not None
        waiting = self._unsettled.get(fingerprint)
        if waiting is not None:
            waiting.append((sender, number, url, fetched_at))
            return None
        first = self._engine.content.claim_first(fingerprint, url, fetched_at)
        if first[0] == url and not self._engine.config.store_near_duplicates:
            self._unsettled[fingerprint] = []
        return first

    def _settled(self, fingerprint: int, url: str, stored: bool) -> None:
        assert self._engine is not None
        if not stored:
            self._engine.content.release_first(fingerprint, url)
        for sender, number, other, fetched_at in self._unsettled.pop(fingerprint, []):
            first = self._claim(sender, number, fingerprint, other, fetched_at)
            if first is not None:
                self._answer(sender, number, first)

    def _answer(self, sender: int, number: int, first: tuple[str, float]) -> None:
        if sender != self.index:
            self._send(sender, ["ca", number, [first[0], first[1]]])
            return
        query = self._queries.get(number)
        if query is not None and not query[1].done():
            query[1].set_result(first)

    # -- listening ---------------------------------------------------------------------------

    async def _listen_peer(self, peer: int) -> None:
        channel = self._peers[peer]
        engine = self._engine
        assert engine is not None
        while True:
            try:
                message = await channel.receive()
            except ChannelClosed:
                self._gone.add(peer)
                for owner, future in list(self._queries.values()):
                    if owner == peer and not future.done():
                        future.set_result(None)
                return
            kind = message[0]
            if kind in ("urls", "fwd"):
                _, sender, number, raw = message
                entries = [FrontierEntry(url, int(depth), int(hops)) for url, depth, hops in raw]
                if engine.receive_urls(entries, forwarded=kind == "fwd"):  # journaled: acknowledge it
                    self.received += 1
                    self._send(sender, ["ack", self.index, number])
            elif kind == "ack":
                _, sender, number = message
                engine.batch_acknowledged(int(sender), int(number))
            elif kind == "cq":
                _, sender, number, fingerprint, url, fetched_at = message
                first = self._claim(int(sender), int(number), int(fingerprint), str(url), float(fetched_at))
                if first is not None:
                    self._answer(int(sender), int(number), first)
            elif kind == "cs":
                _, fingerprint, url, stored = message
                self._settled(int(fingerprint), str(url), bool(stored))
            elif kind == "ca":
                _, number, first = message
                query = self._queries.get(int(number))
                if query is not None and not query[1].done():
                    query[1].set_result((str(first[0]), float(first[1])))

    async def _listen_control(self) -> None:
        assert self._control is not None and self._engine is not None
        while True:
            try:
                message = await self._control.receive()
            except ChannelClosed:
                self._engine.stop("coordinator-gone")
                return
            if message[0] == "probe":
                self._control.send(["probe", message[1], self.idle, self.sent, self.received])
            elif message[0] == "stop":
                self._engine.stop(str(message[1]))

    def report(self, snapshot: Snapshot) -> None:
        """This partition's Snapshot to the coordinator, which merges the partitions'."""
        if self._control is not None:
            with contextlib.suppress(ChannelClosed):
                self._control.send(["report", self.index, snapshot.to_builtins()])


@dataclass(frozen=True)
class CoordinatorSink:
    """A partition's TelemetrySink: its Snapshots go to the coordinator instead of a terminal."""

    link: PartitionLink

    def publish(self, snapshot: Snapshot) -> None:
        self.link.report(snapshot)

    def close(self) -> None:
        """The channel is the link's, closed with it."""


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
        link = PartitionLink(spec.index, spec.count, spec.crawl_dir / WARC_DIR, spec.peer_sockets, spec.control_socket)
        budget = PageBudget(spec.config.max_pages, spec.pages)
        directory = worker_directory(spec.crawl_dir, spec.index)
        try:
            engine = CrawlEngine(
                spec.config,
                directory,
                telemetry=[CoordinatorSink(link)],
                resume=spec.resume,
                unstarted_seeds=spec.unstarted_seeds,
                partition=link,
                budget=budget,
                handle_signals=False,
            )
        except STARTUP_ERRORS as exc:  # told to the coordinator, which ends the crawl with this message
            await link.ready(str(exc))
            raise SystemExit(2) from None
        if not await link.ready():  # another partition could not start: this one closes untouched
            engine.close_unstarted()
            return
        if spec.resume:
            report_recovery(directory, engine.recovery)
        await link.start(engine)
        if spec.seeds:
            engine.add_seeds(spec.seeds)
        try:
            await engine.run()
        finally:
            await link.close(engine.stats.termination)

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
        telemetry: Sequence[TelemetrySink] | None = None,
        invalid_seeds: int = 0,
    ) -> None:
        """`telemetry`: where the merged progress goes besides DIR/progress.jsonl (None: the terminal, as
        for one process); `invalid_seeds`: seeds the caller dropped, counted in the crawl's stats."""
        self.config = config
        self.crawl_dir = crawl_dir
        self.seeds = seeds
        self.processes = processes
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
        probes: dict[int, dict[int, list[Any]]] = {}
        listeners = [asyncio.create_task(self._listen(k, channel, probes)) for k, channel in enumerate(channels)]
        while len(self._ready) + len(self.fatal) < len(channels) and any(p.is_alive() for p in workers):
            await asyncio.sleep(0.02)
        self._broadcast(["stop", "worker-failed"] if self.fatal else ["go"])
        if self.fatal:
            self._stop_reason = self.termination = "worker-failed"
        published = time.monotonic()
        previous: dict[int, list[Any]] | None = None
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
                if self.reports and time.monotonic() - published >= self.config.progress_interval:
                    self.telemetry.publish(self._merged_report())
                    published = time.monotonic()
                answers = probes.pop(round_number, {})
                if self._stop_reason is None and len(answers) == len(channels):
                    settled = all(answer[0] for answer in answers.values()) and sum(
                        a[1] for a in answers.values()
                    ) == sum(a[2] for a in answers.values())
                    if settled and previous == answers:
                        self._stop_all("frontier-empty")
                    previous = answers if settled else None
                for old in [number for number in probes if number < round_number]:
                    del probes[old]
            # the partitions' last Snapshots are sent just before they end: read what is left of them
            await asyncio.wait(listeners, timeout=PROBE_INTERVAL * 10)
        finally:
            for task in listeners:
                task.cancel()
            for sig in (signal.SIGINT, signal.SIGTERM):
                with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                    loop.remove_signal_handler(sig)

    async def _listen(self, index: int, channel: Channel, probes: dict[int, dict[int, list[Any]]]) -> None:
        while True:
            try:
                message = await channel.receive()
            except ChannelClosed:
                return
            if message[0] == "probe":
                _, number, idle, sent, received = message
                probes.setdefault(int(number), {})[index] = [bool(idle), int(sent), int(received)]
            elif message[0] == "report":
                self.reports[int(message[1])] = Snapshot.from_builtins(message[2])
            elif message[0] == "fatal":
                self.fatal.append(str(message[2]))
            elif message[0] == "ended":
                if self._stop_reason is None:  # it stopped by itself: the others follow, for the same reason
                    self._stop_all(str(message[2]))
                return  # its last message
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


_PER_WORKER = ("pages_fetched", "pages_per_second", "termination", "runs")
