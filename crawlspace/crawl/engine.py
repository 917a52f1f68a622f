"""The engine: one asyncio loop driving the crawl loop of DESIGN.md §2, dispatch and leases only.

A dispatcher takes leases from the frontier while fetch slots are free and starts one task per
lease. The task checks robots.txt from the per-origin cache (fetching it through the same lease
when missing, so that the robots request is subject to the host's politeness too), resolves the
host, fetches, and hands the result to the stages:

- `FetchRecorder` (recorder.py): store writes, content verdict, and the links a page leads to;
- `LinkPipeline` (links.py): normalize, filter, policy, host splitter, URL-seen test, admission,
  frontier; redirect targets, canonical URLs and sitemap URLs take the same path as links (Mercator);
- `Ledger` (ledger.py): the journal every stage writes to, checkpoints and replay;
- `Peers` and `PartitionRouter` (distributed/): the other partitions of the crawl, if any; the
  engine is their `Inbox`.

Every component is built from the configuration in assembly.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import logging
import os
import signal
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from crawlspace.config import CrawlConfig
from crawlspace.crawl import assembly
from crawlspace.crawl.checkpoint import CheckpointError, CrawlState
from crawlspace.crawl.control import CONTROL_FILE, ControlReader
from crawlspace.crawl.hostfile import HOSTS_FILE, HostFile
from crawlspace.crawl.ledger import JOURNAL_BROKEN, Ledger
from crawlspace.crawl.ratelimit import RateLimit
from crawlspace.crawl.recorder import Recorded
from crawlspace.crawl.refreshing import Refreshing
from crawlspace.crawl.repartition import Repartition
from crawlspace.crawl.robotsgate import Verdict
from crawlspace.crawl.telemetry import (
    PROGRESS_FILE,
    CrawlStats,
    Gauges,
    JsonLinesSink,
    Snapshot,
    Telemetry,
    TelemetrySink,
    display_sink,
)
from crawlspace.distributed.assignment import Assignment
from crawlspace.distributed.budget import Budget, PageBudget
from crawlspace.distributed.claims import Answer
from crawlspace.distributed.protocols import Peers, TransportHealth
from crawlspace.distributed.resize import HandoverPlan, Resize
from crawlspace.dns import DNSFailure
from crawlspace.dns.resolver import hostname_of_authority
from crawlspace.fetch import Fetcher, FetchResult, Outcome, Validators
from crawlspace.fetch.retry import RetryDecision
from crawlspace.frontier import FrontierEntry, Lease, Prioritizer
from crawlspace.hooks.protocols import ProtocolHandler
from crawlspace.hooks.runtime import Extensions
from crawlspace.urls.fingerprint import UrlFingerprints

log = logging.getLogger("crawlspace")


def _host_failed(result: FetchResult) -> bool:
    """A failure that says something about the host rather than the URL: it backs the host off,
    and repeated ones park it and finally give it up (a 404 or a 500 is the page's problem)."""
    return result.outcome.is_transient or result.status in (429, 503)


_ABRUPT = frozenset(
    {"interrupted", "disk-full", "journal-failed", "checkpoint-failed", "stopped", "worker-failed", "coordinator-gone"}
)
"""Terminations after which in-flight fetches get `shutdown_grace` seconds, then are abandoned."""


class CrawlEngine:
    def __init__(
        self,
        config: CrawlConfig,
        out_dir: str | Path,
        *,
        live_progress: bool | None = None,
        resume: bool = False,
        unstarted_seeds: Sequence[str] | None = None,
        extensions: Extensions | None = None,
        prioritizer: Prioritizer | None = None,
        handle_signals: bool = True,
        peers: Peers | None = None,
        assignment: Assignment | None = None,
        budget: Budget | None = None,
        shared_warc_dir: Path | None = None,
        telemetry: Sequence[TelemetrySink] | None = None,
        resize: Resize | None = None,
        url_fingerprints: UrlFingerprints | None = None,
        control_file: Path | None = None,
    ) -> None:
        """`peers`: the other partitions, when this engine is one of several (crawl.workers); hosts are
        theirs or ours by `assignment` (default: the modulo rule every crawl so far was made with).
        `budget`: the page budget, shared by the partitions. `shared_warc_dir`: the WARC directory
        the partitions share (recovered before they start). `unstarted_seeds`: a resumed crawl's
        seeds: it starts from them if it was killed before its first checkpoint, else they are queued
        again unless already seen. `telemetry`: the sinks of the
        crawl's Snapshots besides DIR/progress.jsonl (None: the terminal's, `display_sink(live_progress)`;
        a partition's goes to its coordinator). `resize`: the crawl was resumed with another number of
        partitions: `repartition` hands hosts over before the crawl (crawl/repartition.py).
        `url_fingerprints`: the crawl's URL fingerprints (crawl.partitioning), for a partition's URL set.
        `control_file`: the operator's commands (crawl/control.py; default DIR/control.json; a partition
        polls its crawl's)."""
        self.config = config
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.peers = peers
        self.budget: Budget = budget or PageBudget(config.max_pages)
        self.resuming = resume
        # the user's filters, processors, sinks and protocol handlers (crawlspace.hooks)
        self.extensions = extensions or Extensions()
        self._not_http = tuple(scheme + ":" for scheme in sorted(self.extensions.other_schemes))
        parts = assembly.assemble(
            config,
            self.out_dir,
            resume=resume,
            extensions=self.extensions,
            prioritizer=prioritizer,
            on_host_activated=lambda host: self.prefetch.activated(host),
            partitions=peers.partitions if peers else 1,
            shared_warc_dir=shared_warc_dir,
            url_fingerprints=url_fingerprints,
        )
        self.politeness, self.policy, self.frontier = parts.politeness, parts.policy, parts.frontier
        self.robots, self.robots_log = parts.robots, parts.robots_log
        self.urlset, self.content, self.store = parts.urlset, parts.content, parts.store
        self.resolver, self.guard, self.retry = parts.resolver, parts.guard, parts.retry
        self.url_filter = parts.url_filter
        self._changed = asyncio.Event()
        partitions = peers.partitions if peers else 1
        self.refreshing: Refreshing | None = None
        if config.refresh:  # before the ledger: a page's next refresh is written before its fetch is journaled
            self.refreshing = Refreshing.open(
                config, self.out_dir, self.frontier, resume=resume, partitions=partitions, wake=self._changed.set
            )
        self.ledger = Ledger(
            self.out_dir,
            (
                self.robots_log.flush,
                self.store.commit_unsynced,
                *((self.refreshing.commit_unsynced,) if self.refreshing else ()),
            ),
            self._ledger_failed,
        )
        restart = resume and unstarted_seeds is not None and self._never_checkpointed()
        state = self._saved_state() if resume and not restart else None
        self.stats = CrawlStats.resumed(state.stats) if state is not None else CrawlStats()
        self._stopped = asyncio.Event()  # the crawl stops: the dispatcher, waiting for a free slot, hears it
        self._unpaused = asyncio.Event()  # cleared by an operator's pause: no new fetch starts until resumed
        self._unpaused.set()
        self._control = ControlReader(control_file or self.out_dir / CONTROL_FILE, since=time.time())
        wired = assembly.stages(
            config,
            parts,
            stats=self.stats,
            ledger=self.ledger,
            extensions=self.extensions,
            peers=peers,
            assignment=assignment,
            wake=self._changed.set,
            send_batches=self._send_batches,
            send_soon=self._send_soon,
            stop=self.stop,
            stopping=lambda: self._stopping,
        )
        self.router, self.links, self.recorder = wired.router, wired.links, wired.recorder
        self.robots_gate, self.handoff, self.prefetch = wired.robots_gate, wired.handoff, wired.prefetch
        self.resume_state, self.partition = wired.resume_state, wired.partition
        self.resize = resize
        self.draining = resize is not None and peers is not None and resize.draining(peers.index)
        self.rate_limit = RateLimit(config.max_rate / partitions) if config.max_rate is not None else None
        self._low_water = 2 * config.concurrency  # below this many queued URLs the URL buffer is drained
        sinks = telemetry if telemetry is not None else [display_sink(live_progress)]
        self.telemetry = Telemetry([JsonLinesSink(self.out_dir / PROGRESS_FILE), *sinks])
        index = peers.index if peers is not None else None
        self.host_file = HostFile(
            self.out_dir / HOSTS_FILE, self.frontier, extra=None if index is None else lambda: {"partition": index}
        )
        # Ctrl-C and SIGTERM stop the crawl gracefully; not when it runs inside an application's own loop
        self._signals = (signal.SIGINT, signal.SIGTERM) if handle_signals else ()
        self._tasks: set[asyncio.Task[None]] = set()
        self._internal_errors_logged: set[str] = set()
        self._started = time.monotonic()
        self.disk_full: str | None = None
        self.recovery: dict[str, Any] = {}
        if state is not None:
            self._resume(state)
            if resize is None and self.resume_state.resize_unconfirmed:
                self._queue_unconfirmed()
            if resize is None and unstarted_seeds:
                # a kill between the first checkpoint and the journal write of the seeds (a partition
                # waits for the others in between) left a crawl with nothing queued: the seeds enter
                # again at every resume, and the URL set drops those the crawl has already seen
                self.links.add_seeds(unstarted_seeds)
        else:
            self.ledger.reset()
        self.extensions.attach(self.stats.errors)  # the resumed crawl's counters, when resuming
        self.checkpoint()  # the base every later crash resumes from
        if restart:  # killed before its first checkpoint: nothing was fetched, start it again
            self.recovery = {"restarted_from_seeds": True}
            self.add_seeds(unstarted_seeds or ())

    # -- public ------------------------------------------------------------------------------

    def add_seeds(self, seeds: Iterable[str]) -> int:
        added = self.links.add_seeds(seeds)
        self.ledger.flush()
        return added

    def stop(self, reason: str = "stopped") -> None:
        """Stop taking new URLs; in-flight fetches finish."""
        if not self._stopping:
            self._stopped.set()
            self.stats.termination = self.stats.termination or reason
            self._changed.set()
            if self.peers is not None:
                self.peers.stop_asking()  # pages in flight are decided here, not after the shutdown grace

    @property
    def _stopping(self) -> bool:
        return self._stopped.is_set()

    def _on_signal(self) -> None:
        """First SIGINT/SIGTERM: stop gracefully (finish in-flight fetches, checkpoint). Second: exit
        at once; the last checkpoint and the journal still resume the crawl."""
        if self._stopping and self.stats.termination == "interrupted":
            os._exit(130)
        self.stop("interrupted")

    # -- checkpoints (see checkpoint.py and ledger.py) ------------------------------------------

    def checkpoint(self) -> None:
        """Make the whole crawl state durable; the frontier's atomic checkpoint is the commit point."""
        if self.ledger.broken:
            raise CheckpointError(JOURNAL_BROKEN)
        self._send_batches()  # URLs for other partitions leave as journaled batches, kept until acknowledged
        self.links.drain()  # the URL set checkpoints with an empty buffer
        self.ledger.checkpoint(
            (
                self.urlset.checkpoint,
                self._checkpoint_pinned_urls,
                self.content.checkpoint,
                self.store.flush,
                self.robots_log.sync,
                self.robots_log.maybe_compact,
                *((self.refreshing.checkpoint,) if self.refreshing is not None else ()),
            ),
            self.resume_state.capture,
            self.frontier.checkpoint,
        )

    def _checkpoint_pinned_urls(self) -> None:
        if self.links.pinned_urls is not None:
            self.links.pinned_urls.checkpoint()

    def _close_pinned_urls(self, *, checkpoint: bool) -> None:
        if self.links.pinned_urls is not None:
            self.links.pinned_urls.close(checkpoint=checkpoint)

    def _never_checkpointed(self) -> bool:
        """No checkpoint and no journal: the crawl was killed while it opened its state, before its
        first checkpoint (the one its constructor writes, before any URL is fetched)."""
        return not self.frontier.extra and self.ledger.never_written()

    def _saved_state(self) -> CrawlState:
        if not self.frontier.extra:
            raise CheckpointError(f"{self.out_dir} has no checkpoint to resume (was a crawl started there?)")
        return CrawlState.decode(self.frontier.extra, str(self.out_dir / "frontier"))

    def _resume(self, state: CrawlState) -> None:
        """Continue from the last checkpoint: restore the engine's state, replay the journals since."""
        self.recovery = {
            **self.resume_state.restore(state, self.ledger),
            "fallback": self.frontier.fallback,
            "warc_recovered": [str(item) for item in self.store.stats.recovered],
        }
        self.budget.set_used(self.stats.pages_fetched)
        self.stats.sections["recovery"] = self.recovery

    def _queue_unconfirmed(self) -> None:
        """URLs a resize's phase left untested (killed between its end and its last checkpoint): queued,
        rather than lost; a few may be fetched twice."""
        rows, self.resume_state.resize_unconfirmed = self.resume_state.resize_unconfirmed, []
        entries = [FrontierEntry(url, depth, hops) for url, depth, hops in rows]
        self.frontier.add_many(entries)
        self.urlset.insert(np.fromiter((self.urlset.scheme.function(e.url) for e in entries), np.uint64, len(entries)))

    def _ledger_failed(self, exc: OSError) -> None:
        """The journal could not be written: what its lines recorded is lost to a resume (as in a
        crash) and the crawl stops, as "disk-full" or, for any other I/O error, "journal-failed"."""
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            self._disk_full(exc)
        else:
            self.stats.errors["journal-write-failed"] += 1
            self.stop("journal-failed")

    def _release(self, lease: Lease, duration: float, *, put_back: FrontierEntry | None = None, **options: Any) -> None:
        """End a lease; a lease that does not put its URL back finishes the URL (journaled)."""
        self.frontier.release(lease, duration, put_back=put_back, **options)
        if put_back is None:
            self.ledger.done(lease.entry.url)
            self.links.url_finished(lease.entry.url)

    # -- partitions (crawl/partition.py) -------------------------------------------------------

    async def connect(self) -> None:
        """Start the transport to the other partitions (after the engine has resumed its state)."""
        assert self.partition is not None
        await self.partition.connect()

    def _send_batches(self) -> None:
        if self.partition is not None:
            self.partition.send_batches()

    def _send_soon(self) -> None:
        if self.partition is not None:
            self.partition.send_soon()

    async def repartition(self) -> bool:
        """A resize's phase instead of `connect`: hand over the hosts that are others' now, take in
        ours, wait for every partition (crawl/repartition.py); True when the crawl may begin."""
        assert self.partition is not None and self.router is not None and self.resize is not None
        plan = HandoverPlan(
            self.router.index, self.router.assignment, fingerprints=self.urlset.scheme, per_ip=self.config.per_ip
        )
        phase = Repartition(
            self.resize, plan, peers=self.partition.peers, frontier=self.frontier, urlset=self.urlset,
            links=self.links, url_filter=self.url_filter, robots_gate=self.robots_gate, router=self.router,
            resume_state=self.resume_state, checkpoint=self.checkpoint,
            history_dir=self.out_dir / "seen" / "resize-history",
        )  # fmt: skip
        phase.begin()
        self.partition.handover, self.partition.handover_acks = phase.receive, phase.acknowledged
        await self.partition.connect(resend=False)
        began = await phase.run()
        self.partition.handover = self.partition.handover_acks = None
        self.stats.sections["resize"] = {
            "epoch": self.resize.epoch, "from": self.resize.previous, "to": self.resize.partitions,
            "draining": self.draining, **phase.stats,
        }  # fmt: skip
        self.ledger.flush()
        return began

    def snapshot(self) -> Snapshot:
        """The crawl as it stands: the counters (copied) and the gauges."""
        return Snapshot.take(self.stats, self._gauges())

    async def run(self) -> CrawlStats:
        loop = asyncio.get_running_loop()
        for host in self.frontier.hosts_awaiting_address():  # activated before the loop ran
            self.prefetch.activated(host)
        for sig in self._signals:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, self._on_signal)
        fetcher = assembly.fetcher(self.config, self.resolver, self.guard, spill_dir=self.out_dir)
        try:
            async with fetcher:
                progress = asyncio.create_task(self._report_periodically())
                sender = asyncio.create_task(self.partition.send_periodically()) if self.partition else None
                teller = asyncio.create_task(self.partition.tell_outdated_periodically()) if self.partition else None
                feeder = asyncio.create_task(self.refreshing.feed()) if self.refreshing else None
                try:
                    await self._dispatch(fetcher)
                finally:
                    progress.cancel()
                    for task in (sender, teller, feeder):
                        if task is not None:
                            task.cancel()
        finally:
            for sig in self._signals:
                with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                    loop.remove_signal_handler(sig)
            self.prefetch.cancel()  # no DNS for hosts activated at shutdown
            await self.resolver.close()
            await self._close_extensions()
            self.policy.close()
            self.stats.sections.update(
                dns=self.resolver.stats(), robots=self.robots.stats(), guard=self.guard.stats(), fetch=fetcher.stats()
            )
            self.stats.sections["frontier"] = {
                **self.frontier.stats.to_dict(),
                "given_up_reasons": dict(self.frontier.given_up_reasons),
                "parked_hosts": self.frontier.parked_hosts,
            }
            self.stats.sections["policy"] = self.policy.stats()
            if self.refreshing is not None:
                self.stats.sections["refresh"] = self.refreshing.stats()
            self._shut_down()
        return self.stats

    def close_unstarted(self) -> None:
        """Close a crawl that was opened but will not run (another partition could not open its state)."""
        self.stats.termination = self.stats.termination or "not-started"
        self._shut_down()

    def _shut_down(self) -> None:
        """A last checkpoint (what was left to crawl survives the run), stats.json, then close the stores.
        With the disk full the checkpoint may fail: the previous one and the journal still resume."""
        committed = False
        try:
            self.checkpoint()
            committed = True
        except CheckpointError:
            self.stats.errors["checkpoint-failed"] += 1
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            self._disk_full(exc)
            self.stats.errors["checkpoint-failed"] += 1
        self._write_host_file(final=True)
        self.stats.finished_at = time.time()
        with contextlib.suppress(OSError) if self.disk_full else contextlib.nullcontext():
            self.stats.write(self.out_dir / "stats.json")
        with contextlib.suppress(OSError) if self.disk_full else contextlib.nullcontext():
            self.telemetry.close(self.snapshot())  # the last Snapshot, what stats.json says, to every sink
        for close in (
            functools.partial(self.urlset.close, checkpoint=committed),  # never ahead of the journal
            functools.partial(self._close_pinned_urls, checkpoint=committed),
            self.content.close,
            self.store.close,
            self.robots_log.close,
            *((self.refreshing.close,) if self.refreshing is not None else ()),
            self.ledger.close,
            functools.partial(self.frontier.close, checkpoint=committed),
        ):
            if self.disk_full:
                with contextlib.suppress(OSError):
                    close()
            else:
                close()

    # -- dispatch ----------------------------------------------------------------------------

    async def _dispatch(self, fetcher: Fetcher) -> None:
        try:
            await self._dispatch_leases(fetcher)
        except OSError as exc:  # a full disk met outside a lease (a drain's write to the URL set): stop cleanly
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            self._disk_full(exc)
        await self._finish_in_flight()

    async def _dispatch_leases(self, fetcher: Fetcher) -> None:
        slots = asyncio.Semaphore(self.config.concurrency)
        while True:
            self._check_limits()
            if self._stopping or not await self._free_slot(slots):
                break
            if not self._unpaused.is_set() and not await self._resumed():
                slots.release()
                break
            await self.extensions.room()  # processors keep up, or no new fetch starts
            if self.links.pending and len(self.frontier) < self._low_water:
                self.links.drain()
            lease = self.frontier.acquire()
            while lease is None and not self._stopping and self._unpaused.is_set():
                if self.links.pending:  # nothing is ready: the buffered URLs may be
                    self.links.drain()
                    lease = self.frontier.acquire()
                    continue
                if (
                    self.frontier.in_flight == 0
                    and not self.extensions.busy  # a page being processed may still emit URLs
                    and (len(self.frontier) == 0 or self._only_robots_waits())
                ):
                    # nothing left that may be fetched: a crawl does not idle only to retry the
                    # robots.txt of unreachable hosts; their URLs stay queued (robots_waiting)
                    self.stats.robots_waiting = len(self.frontier)
                    if self.refreshing is not None:  # a continuous crawl waits for its next refresh
                        await self._idle_wait()
                        lease = self.frontier.acquire()
                        continue
                    if self.peers is not None and self.router is not None:  # idle: the cluster decides the end
                        self._send_batches()
                        self.peers.idle = not self.router.outbox.waiting
                        if self.draining and self.peers.idle:  # a resize's leaving partition: all handed over
                            self.stats.termination = "drained"
                            self._stopped.set()
                            break
                        await self._idle_wait()
                        lease = self.frontier.acquire()
                        continue
                    self.stats.termination = "frontier-empty"
                    self._stopped.set()
                    break
                wake = self.frontier.next_contact()
                timeout = None if wake is None else max(0.0, wake - time.monotonic())
                self._changed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), timeout=self._wait_cap(timeout))
                self._check_limits()
                lease = self.frontier.acquire()
            if lease is not None and not self._unpaused.is_set():  # paused while it waited: handed out first again
                self._release(lease, 0.0, put_back=lease.entry, contacted=False)
                lease = None
            if lease is None:
                slots.release()
                if self._stopping or self._unpaused.is_set():
                    break
                continue  # paused: the next turn waits for the resume
            if self.rate_limit is not None:  # the crawl's bandwidth budget (max_rate)
                wait = self.rate_limit.reserve(time.monotonic())
                if wait > 0:
                    await asyncio.sleep(wait)
            if self.peers is not None:
                self.peers.idle = False
            task = asyncio.create_task(self._process(fetcher, lease))
            self._tasks.add(task)
            task.add_done_callback(functools.partial(self._task_done, slots=slots))

    async def _free_slot(self, slots: asyncio.Semaphore) -> bool:
        """A fetch slot, or False when the crawl stops first: with every slot held by a page that does
        not end (a stalled processor, an answer that never comes), the dispatcher would otherwise never
        see the stop, and the shutdown grace that cancels such pages would never begin."""
        if not slots.locked():
            await slots.acquire()
            return True
        acquiring = asyncio.ensure_future(slots.acquire())
        stopping = asyncio.ensure_future(self._stopped.wait())
        await asyncio.wait((acquiring, stopping), return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if acquiring.done() and not acquiring.cancelled():
            if self._stopping:
                slots.release()
                return False
            return True
        acquiring.cancel()
        return False

    async def _finish_in_flight(self) -> None:
        """Let the fetches in flight end (within the grace period after an interrupt or a full disk)."""
        grace = self.config.shutdown_grace if self.stats.termination in _ABRUPT else None
        if self._tasks:
            _, late = await asyncio.wait(set(self._tasks), timeout=grace)
            for task in late:  # abandoned: their URLs were leased, so the checkpoint hands them out again
                task.cancel()
            if late:
                self.stats.errors["abandoned-at-shutdown"] += len(late)
                await asyncio.gather(*late, return_exceptions=True)
        await self.extensions.drain(timeout=grace)  # pages fetched are processed, within the grace period

    async def _idle_wait(self) -> None:
        self._changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), timeout=self._wait_cap(0.05))
        self._check_limits()

    def _only_robots_waits(self) -> bool:
        """Is every queued URL on a host that waits for the retry of an unreachable robots.txt?

        True when the front queues are empty and every host holding a back queue (active, or set
        aside by the frontier until its retry time) is such a host.
        """
        frontier = self.frontier
        holding = frontier.active_hosts + frontier.parked_hosts
        parked = self.robots_gate.parked
        if len(parked) >= holding:  # a host whose URLs went elsewhere (a resize, a per-IP move) waits no more:
            # counted, it would stand for a host that holds URLs and waits for nothing (and end the crawl)
            self.robots_gate.parked = parked = {host for host in parked if frontier.holds(host)}
        return sum(frontier.front_sizes()) == 0 and 0 < holding == len(parked)

    def _wait_cap(self, timeout: float | None) -> float:
        cap = self.config.progress_interval
        if self.config.max_seconds is not None:
            cap = min(cap, max(0.01, self.config.max_seconds - (time.monotonic() - self._started)))
        return cap if timeout is None else min(timeout, cap)

    def _task_done(self, task: asyncio.Task[None], *, slots: asyncio.Semaphore) -> None:
        self._tasks.discard(task)
        slots.release()
        self._changed.set()
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            self.stats.errors[f"internal:{type(exc).__name__}"] += 1

    def _check_limits(self) -> None:
        config = self.config
        if self.budget.exhausted():  # every page of the budget fetched or being fetched (by any partition)
            self.stop("max-pages")
        elif config.max_seconds is not None and time.monotonic() - self._started >= config.max_seconds:
            self.stop("max-seconds")
        elif config.max_bytes is not None and self.stats.bytes_downloaded >= config.max_bytes:
            self.stop("max-bytes")

    async def _report_periodically(self) -> None:
        last_checkpoint = time.monotonic()
        while True:
            await asyncio.sleep(self.config.progress_interval)
            try:
                if time.monotonic() - last_checkpoint >= self.config.checkpoint_interval:
                    self.checkpoint()
                    last_checkpoint = time.monotonic()
                else:
                    self.store.maybe_flush()
            except OSError as exc:
                if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                    self._disk_full(exc)
                else:  # an I/O error: crawling on without checkpoints would only grow what a crash loses
                    self.stats.errors["checkpoint-failed"] += 1
                    self.stop("checkpoint-failed")
            except CheckpointError:  # the journal failed before: the crawl is stopping already
                self.stats.errors["checkpoint-failed"] += 1
            self._obey_operator()
            self.telemetry.publish(self.snapshot())
            self._write_host_file(final=False)

    def _write_host_file(self, *, final: bool) -> None:
        """DIR/hosts.json (crawl/hostfile.py): a window on the crawl, whose failure costs it nothing."""
        try:
            if final:
                self.host_file.write()
            else:
                self.host_file.maybe_write()
        except OSError:
            self.stats.errors["host-file-failed"] += 1

    def _obey_operator(self) -> None:
        """Apply the newest command of the control file, if one came since the last report."""
        given = self._control.poll()
        if given is None:
            return
        if given.command == "pause":
            self._unpaused.clear()
        elif given.command == "resume":
            self._unpaused.set()
        else:
            self.stop("operator-stop")
            self._unpaused.set()

    async def _resumed(self) -> bool:
        """Wait out an operator's pause: True once resumed, False when the crawl stops first (a
        limit such as max_seconds is still checked while paused)."""
        while not self._unpaused.is_set() and not self._stopping:
            resuming = asyncio.ensure_future(self._unpaused.wait())
            stopping = asyncio.ensure_future(self._stopped.wait())
            await asyncio.wait((resuming, stopping), timeout=self._wait_cap(None), return_when=asyncio.FIRST_COMPLETED)
            resuming.cancel()
            stopping.cancel()
            self._check_limits()
        return not self._stopping

    def _gauges(self) -> Gauges:
        return Gauges(
            **self.frontier.gauges(),
            urls_seen=len(self.urlset),
            urls_buffered=self.urlset.pending,
            robots_cached=len(self.robots),
            dns_cached=len(self.resolver),
            dns_cache_hits=self.resolver.hits + self.resolver.negative_hits,
            dns_cache_misses=self.resolver.lookups,
            robots_cache_hits=self.robots.hits,
            robots_cache_misses=self.robots.misses,
            **self.extensions.gauges(),
            transport_down=int(not self.peers.connected) if isinstance(self.peers, TransportHealth) else None,
            paused=None if self._unpaused.is_set() else 1,
        )

    # -- one lease ---------------------------------------------------------------------------

    async def _process(self, fetcher: Fetcher, lease: Lease) -> None:
        try:
            if self.resume_state.finished_before_crash(lease.entry.url):  # fetched after the checkpoint resumed from
                self._release(lease, 0.0, contacted=False)
                return
            await self._process_lease(fetcher, lease)
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            self._disk_full(exc)
        finally:
            self.ledger.flush_soon()

    def _disk_full(self, exc: OSError) -> None:
        """No space left: stop cleanly. What the failed write was for is in flight: the last checkpoint
        and the journal (whose torn last batch is dropped on resume) still describe a consistent crawl."""
        self.stats.errors["disk-full"] += 1
        self.disk_full = f"{exc.filename or 'a crawl file'}: {exc.strerror or exc}"
        self.stop("disk-full")

    async def _process_lease(self, fetcher: Fetcher, lease: Lease) -> None:
        entry = lease.entry
        if self._not_http and entry.url.startswith(self._not_http):
            await self._process_by_handler(lease)
            return
        if self.refreshing is not None and self.refreshing.skip(entry.url):  # refetched moments ago
            self._release(lease, 0.0, contacted=False)
            return
        self.robots_gate.parked.discard(lease.host)  # parked again below if robots.txt is still unreachable
        try:  # usually answered from the cache (prefetched); a dead host fails here, before robots.txt
            address = await self.resolver.resolve(hostname_of_authority(lease.host))
        except DNSFailure as exc:
            self._dns_failed(lease, exc)
            return
        self.frontier.set_host_address(lease.host, address)  # no-op unless it changed or was unknown
        owner = self.router.owner_by_address(lease.host, address) if self.router is not None else None
        if owner is not None:
            self.stats.handed_over += 1
            assert self.partition is not None
            self.partition.hand_over(lease.entry, owner)
            self._release(lease, 0.0, contacted=False)
            self.partition.send_batches()
            return
        robots = self.robots_gate.decide(entry.url, lease.host, time.monotonic())
        if robots.verdict is Verdict.FETCH_ROBOTS:
            started = time.monotonic()
            fetched = await self.robots_gate.fetch(fetcher, robots.origin, entry.url)
            if fetched.sitemaps:
                self.links.add_sitemaps(fetched.sitemaps, fetched.base, entry.depth)
            crawl_delay = self.robots_gate.crawl_delay(fetched.rules)
            self._release(lease, time.monotonic() - started, put_back=entry, crawl_delay=crawl_delay)
            return
        if robots.verdict is Verdict.WAIT:
            self._release(lease, 0.0, put_back=entry, retry_after=robots.retry_after)
            return
        if robots.verdict is Verdict.DROPPED:
            self.links.sitemaps.discard(entry.url)
            self._release(lease, 0.0, contacted=False)
            return
        assert robots.rules is not None
        rules = robots.rules
        if not self.budget.claim():  # the crawl's page budget is spent (by this or another partition)
            self._release(lease, 0.0, put_back=entry, contacted=False)
            self.stop("max-pages")
            return
        validators = self.refreshing.validators(entry.url) if self.refreshing is not None else None
        result = await self._fetch_page(fetcher, entry.url, validators)
        attempts = self.resume_state.attempts.pop(entry.url, 0) + 1
        decision = self.retry.decide(result, attempts)
        first = fingerprint = None
        sitemap = self.links.is_sitemap(entry.url)
        wanted = self.peers is not None or self.refreshing is not None  # else the recorder takes it itself
        abandoned = False
        try:  # the claim too: raised outside, it left the lease held and the host idle for good
            if wanted and not sitemap and self.recorder.content_checked(result):
                fingerprint = result.payload_fingerprint()  # once, for the claim, the recorder and the refresher
                if self.peers is not None:
                    first = await self.peers.claim_first(fingerprint, result.url, result.started)
            if sitemap:
                if not decision.retry:
                    self.links.sitemaps.discard(entry.url)
                self._follow_up(self.recorder.record_sitemap(result, entry), entry)
            else:
                recorded = await self._record(result, entry, first=first, fingerprint=fingerprint)
                followed = self._follow_up(recorded, entry)
                if not decision.retry:
                    self.handoff.page_done(result, entry, recorded.page)
                if self.refreshing is not None:
                    if fingerprint is None and result.status == 200:
                        fingerprint = result.payload_fingerprint()
                    self.refreshing.fetched(
                        result, entry, fingerprint=fingerprint, retry=decision.retry,
                        links=[link.url for link in followed if not link.hops],
                    )  # fmt: skip
            if decision.retry:  # back into the frontier, behind a longer rest of its host: no worker waits
                self.resume_state.attempts[entry.url] = attempts
                self.stats.retries += 1
            elif decision.reason:
                self.stats.errors["gave-up-after-retries"] += 1
        except asyncio.CancelledError:
            # abandoned at shutdown while it waited (for the partitions' near-duplicate answers): its
            # links were never followed, so the lease stays out and the checkpoint hands the URL out
            # again; released as done, the page's links were lost for good
            abandoned = True
            raise
        except Exception as exc:
            if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise  # the crawl stops (disk-full); the checkpoint and the journal resume it
            decision = self._failed_in_processing(exc, entry, attempts)
        finally:
            result.release()  # stored and parsed: a spilled body's files go now, not when the task is collected
            if not abandoned:
                self._release(
                    lease,
                    result.duration,
                    put_back=entry if decision.retry else None,
                    crawl_delay=self.robots_gate.crawl_delay(rules),
                    retry_after=decision.delay,
                    contacted=result.outcome not in (Outcome.DNS_ERROR, Outcome.GUARD_REFUSED),
                    error=_host_failed(result),
                )

    def _failed_in_processing(self, exc: Exception, entry: FrontierEntry, attempts: int) -> RetryDecision:
        """A fetched page whose recording or links raised (a bug, a store or a peer that failed): fetched
        again later, as a network failure is, and given up after as many attempts. Released as done, the
        URL was finished with its links never followed: every page only they led to was lost."""
        name = type(exc).__name__
        self.stats.errors[f"internal:{name}"] += 1
        if name not in self._internal_errors_logged:
            self._internal_errors_logged.add(name)
            log.warning("processing %s failed (%s: %s); retried, logged once per kind", entry.url, name, exc,
                        exc_info=exc)  # fmt: skip
        decision = self.retry.failed(f"internal:{name}", attempts)
        if decision.retry:
            self.resume_state.attempts[entry.url] = attempts
            self.stats.retries += 1
        else:
            self.stats.errors["gave-up-after-internal-errors"] += 1
        return decision

    def _dns_failed(self, lease: Lease, failure: DNSFailure) -> None:
        """A temporary failure puts the URL back until the resolver's backoff has passed; a definitive
        one accounts for the URL (and, one by one without lookups, for the rest of its host's URLs)."""
        self.stats.outcomes[Outcome.DNS_ERROR] += 1
        self.stats.errors[str(Outcome.DNS_ERROR)] += 1
        if failure.retry_at is not None:
            wait = max(failure.retry_at - time.monotonic(), 0.0)
            self._release(lease, 0.0, put_back=lease.entry, retry_after=wait)
        else:
            self._release(lease, 0.0, contacted=False)

    async def _record(
        self, result: FetchResult, entry: FrontierEntry, *, first: Answer | None = None, fingerprint: int | None = None
    ) -> Recorded:
        """The recorder's verdict on a fetch; a new page's near-duplicate test asked of the partitions
        owning its band keys when there are several (crawl/partition.py), in between."""
        recorded = self.recorder.record(result, entry, first=first, fingerprint=fingerprint)
        pending = recorded.near
        if pending is None:
            return recorded
        assert self.partition is not None
        match = await self.partition.near_match(result.url, result.started, pending.signature)
        return self.recorder.record_near(pending, match)

    def _follow_up(self, recorded: Recorded, entry: FrontierEntry) -> list[FrontierEntry]:
        """Hand on what recording a fetch decided: scope, sitemap files, links, the peers' settlement;
        the links followed, normalized (the refresher counts them as in-links)."""
        if recorded.widen_scope is not None:
            self.links.widen_scope(entry.url, recorded.widen_scope)
        if recorded.sitemap_files:
            base = recorded.links.base if recorded.links else entry.url
            self.links.add_sitemaps(recorded.sitemap_files, base, entry.depth)
        followed = self.links.follow(recorded.links) if recorded.links is not None else []
        if recorded.settle is not None and self.peers is not None:
            self.peers.settle(recorded.settle[0], entry.url, stored=recorded.settle[1])
        return followed

    # -- extension points (crawlspace.hooks) ---------------------------------------------------

    async def _fetch_page(self, fetcher: Fetcher, url: str, validators: Validators | None = None) -> FetchResult:
        """The built-in HTTP fetch (conditional with `validators`), or the handler registered for the URL's scheme."""
        handler = self.extensions.handler_for(url)
        if handler is None:
            return await fetcher.fetch(url, validators=validators)
        return await self.extensions.fetch(handler, url)

    async def _process_by_handler(self, lease: Lease) -> None:
        """A URL of a non-HTTP scheme (file:) that a registered handler fetches: no DNS, no robots.txt,
        no retries; the host's politeness delay applies only if the handler asks for it."""
        entry = lease.entry
        handler: ProtocolHandler | None = self.extensions.handler_for(entry.url)
        assert handler is not None, f"no handler for {entry.url}"
        if not self.budget.claim():
            self._release(lease, 0.0, put_back=entry, contacted=False)
            self.stop("max-pages")
            return
        result = await self.extensions.fetch(handler, entry.url)
        try:
            recorded = await self._record(result, entry)
            self._follow_up(recorded, entry)
            self.handoff.page_done(result, entry, recorded.page)
        finally:
            self._release(lease, result.duration, contacted=bool(handler.polite))

    async def _close_extensions(self) -> None:
        """Processors of pages still in hand finish (or are cancelled if the crawl failed), then every
        extension is closed, so that the sinks' last items are in stats.json."""
        self.extensions.cancel()
        await self.extensions.drain()
        await self.extensions.close()
        if self.extensions.active:
            self.stats.sections["extensions"] = self.extensions.stats()
