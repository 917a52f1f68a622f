"""The engine's side of a resize's start-up phase (distributed.resize): hand over, take in, then crawl.

`begin` (after the engine resumed its checkpoint and journal, before the transport delivers):
the first time in this resize, checkpoint that the phase began; then, unless this partition
already finished its handover, read what leaves (queued URLs of hosts others own now, URLs of
per-IP hand-overs not yet acknowledged, the URL set, per-host counts and robots.txt waits, the
seeds) into numbered parts. `run` sends them until each is acknowledged, sending the
unacknowledged ones again every `RESEND_INTERVAL`; then removes the leaving hosts from the
frontier, drops the old assignment's per-IP moves and pins, and records the handover as done in
one checkpoint; waits at the barrier (`Peers.repartitioned`); tests the URLs that arrived
unconfirmed (queued for a host moved away per IP, here or by the sender: the owner of the host's
address may have its own copy, which only its URL set of pinned hosts told apart) against what the
others handed over (the fingerprints of their seen parts, kept on disk in `seen/resize-history`
until the phase's last checkpoint, so that a partition killed after acknowledging them still has
them); and
finally sends the old assignment's unacknowledged URL batches again under the new one, through
the host splitter (their owners' URL sets decide).

Receiving (`receive`): fingerprints join the URL set; queued URLs join the frontier and the URL
set unless already queued here (a set of the fingerprints of everything in this partition's
frontier, rebuilt from the frontier at every `begin`, so a repeated part or a URL two old
partitions both held is queued once); counts, robots.txt waits and seeds join the URL filter and
the robots gate. Each part is acknowledged after a checkpoint
that holds it. The frontier of a partition in the phase still holds what it hands over: a
checkpoint before its last acknowledgement keeps those URLs, so a kill -9 loses none.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np

from crawlspace.crawl.links import LinkPipeline
from crawlspace.crawl.resume import ResumeState
from crawlspace.crawl.robotsgate import RobotsGate
from crawlspace.distributed.protocols import Peers
from crawlspace.distributed.resize import (
    FrontierPart,
    HandoverOutbox,
    HandoverPlan,
    HostsPart,
    Part,
    Resize,
    SeenPart,
    part_size,
)
from crawlspace.distributed.router import PartitionRouter
from crawlspace.frontier import Frontier, FrontierEntry
from crawlspace.seen import UrlSet
from crawlspace.seen.sortedruns import RunStore, remove_runs
from crawlspace.urls import host_of, url_fingerprint
from crawlspace.urls.filter import UrlFilter

RESEND_INTERVAL = 2.0
HISTORY_MEMTABLE = 1 << 16  # fingerprints the others handed over, held in memory before a sorted run

log = logging.getLogger("crawlspace")


class Repartition:
    def __init__(
        self,
        resize: Resize,
        plan: HandoverPlan,
        *,
        peers: Peers,
        frontier: Frontier,
        urlset: UrlSet[FrontierEntry],
        links: LinkPipeline,
        url_filter: UrlFilter,
        robots_gate: RobotsGate,
        router: PartitionRouter,
        resume_state: ResumeState,
        checkpoint: Callable[[], None],
        history_dir: Path,
    ) -> None:
        self.resize = resize
        self.plan = plan
        self.peers = peers
        self.outbox = HandoverOutbox()
        self._frontier = frontier
        self._urlset = urlset
        self._links = links
        self._url_filter = url_filter
        self._robots_gate = robots_gate
        self._router = router
        self._resume = resume_state
        self._checkpoint = checkpoint
        self._queued: set[int] = set()  # url_fingerprint of every URL this partition keeps queued
        self._history_dir = history_dir  # the fingerprints the others handed over (URL-set spelling)
        self._history: RunStore | None = None
        self._pinned_before: set[str] = set()  # hosts this partition held for per-IP politeness
        self._acknowledged = asyncio.Event()
        self.stats: dict[str, int] = {"parts": 0, "parts_sent": 0, "parts_received": 0, "urls_in": 0, "urls_out": 0}
        self.stats.update(fingerprints_in=0, fingerprints_out=0, urls_already_queued=0, unconfirmed_dropped=0)

    def __repr__(self) -> str:
        return f"Repartition({self.resize!r}, {self.plan!r}, {self.outbox!r})"

    @property
    def handed(self) -> bool:
        """This partition's handover is done (durably: its checkpoint says so)."""
        return self._resume.resize_handed == self.resize.epoch

    # -- the phase -------------------------------------------------------------------------------

    def begin(self) -> None:
        epoch = self.resize.epoch
        new_phase = self._resume.resize_started != epoch
        # on disk, as durable as the parts it came from: a partition killed after it acknowledged a
        # seen part (even after its handover) still tests its unconfirmed URLs against it
        self._history = RunStore(self._history_dir, memtable_limit=HISTORY_MEMTABLE, reset=new_phase)
        if new_phase:
            self._resume.resize_started = epoch
            self._checkpoint()
        if not self.handed:  # the handover resets the pins: a repeat after it finds them checkpointed
            self._resume.resize_pinned = sorted(self._router.pinned)
        self._pinned_before = set(self._resume.resize_pinned)
        finished = self._resume.done
        queued = list(self._frontier.queued_entries())
        # a queued copy of a URL finished since the checkpoint (fetched, or handed to the owner of its
        # address) is dropped when the frontier hands it out: it does not count as queued here
        live = [entry for entry in queued if url_fingerprint(entry.url) not in finished]
        self._queued = {url_fingerprint(entry.url) for entry in live}
        if self.handed:
            return
        leaving = self.plan.leaving
        forwarded = self._unacknowledged_forwards()  # never tested by their host's URL set
        self._resume.resize_unconfirmed.extend(
            (entry.url, entry.depth, entry.hops) for entry in forwarded if not leaving(host_of(entry.url))
        )
        unforwarded = self._take_out_unforwarded(leaving)
        if unforwarded:
            gone = {url_fingerprint(entry.url) for entry in unforwarded}
            live = [entry for entry in live if url_fingerprint(entry.url) not in gone]
            queued = [entry for entry in queued if url_fingerprint(entry.url) not in gone]
            self._queued -= gone
            self._checkpoint()  # out of the frontier and unconfirmed in one commit
        # a forward's URL is finished here (its lease ended by the hand-over) but queued nowhere until
        # its holder acknowledges it: it travels, and stays out of the seen entries, like a queued one;
        # so do the URLs waiting unconfirmed (a repeated phase finds those it took out earlier only
        # there): sent as seen, they would come back from a member repeating its own phase and be dropped
        spelled = self._urlset.scheme.function
        waiting = [url for url, _, _ in self._resume.resize_unconfirmed]
        in_frontiers = np.unique(
            np.fromiter((spelled(url) for url in [*(entry.url for entry in [*live, *forwarded]), *waiting]), np.uint64)
        )
        parts: dict[int, list[Part]] = {}
        frontier_parts = self.plan.frontier_parts(
            (entry for entry in queued if leaving(host_of(entry.url))),
            finished=finished,
            in_flight=forwarded,
            sitemaps=self._links.sitemaps,
            moved_away=set(self._router.moved),
        )
        seen_parts = self.plan.seen_parts(self._urlset.backend.scan(), in_frontiers)
        hosts_parts = self.plan.hosts_parts(
            self._url_filter.host_counts(), self._url_filter.seeds, self._robots_gate.parked
        )
        for grouped in (seen_parts, hosts_parts, frontier_parts):
            for peer, peer_parts in grouped.items():
                parts.setdefault(peer, []).extend(peer_parts)
        for peer in sorted(parts):
            for part in parts[peer]:
                self.outbox.add(peer, part)
                self.stats["parts"] += 1
                if isinstance(part, FrontierPart):
                    self.stats["urls_out"] += part_size(part)
                elif isinstance(part, SeenPart):
                    self.stats["fingerprints_out"] += part_size(part)

    async def run(self) -> bool:
        """Hand everything over, wait for the others; True when the crawl may begin."""
        while not self.outbox.complete:
            for (peer, number), part in sorted(self.outbox.unacked.items(), key=lambda item: item[0][1]):
                self.peers.transmit_handover(peer, number, part)
                self.stats["parts_sent"] += 1
            await self._acknowledgements()
        if not self.handed:
            self._resume.copies_taken_out(self._frontier.take_out(self.plan.leaving))
            self._robots_gate.parked = {host for host in self._robots_gate.parked if not self.plan.leaving(host)}
            for peer, number in [key for key, batch in self._router.outbox.unacked.items() if batch.forward]:
                self._router.acknowledge(peer, number)  # handed over as queued URLs
            self._router.moved, self._router.pinned = {}, set()  # the old assignment's per-IP decisions
            self._links.reset_pinned()
            self._resume.resize_handed = self.resize.epoch
            self._checkpoint()  # the commit point of this partition's handover
        if not await self.peers.repartitioned():
            assert self._history is not None
            self._history.close()  # kept for the phase's repeat
            return False
        self._confirm()
        self._queued = set()
        self._resend_batches()
        self._checkpoint()
        self._drop_history()
        return True

    def _drop_history(self) -> None:
        """The fingerprints the others handed over go, after the phase's last checkpoint. Their manifest
        first: a kill during the removal must leave a set that opens (empty), not a manifest naming a run
        already deleted, which the phase's repeat (the resize is over only once the draining partitions
        have drained) could not open: the partition died at every resume and the crawl ended there."""
        if self._history is not None:
            self._history.close(checkpoint=False)
            self._history = None
        if self._history_dir.exists():
            remove_runs(self._history_dir)
        shutil.rmtree(self._history_dir, ignore_errors=True)

    async def _acknowledgements(self) -> None:
        """Until every part is acknowledged, or none was for RESEND_INTERVAL (then send again)."""
        while not self.outbox.complete:
            self._acknowledged.clear()
            try:
                await asyncio.wait_for(self._acknowledged.wait(), timeout=RESEND_INTERVAL)
            except TimeoutError:
                return

    def _take_out_unforwarded(self, leaving: Callable[[str], bool]) -> list[FrontierEntry]:
        """The URLs still queued here for hosts this partition moved to the owner of their address and
        keeps under the new assignment. A link to such a host found here went to that owner's URL set,
        not this one's, so the owner may hold (or have fetched) its own copy of a URL queued here: the
        owner's URL set of pinned hosts dropped the second copy when it was forwarded, a dedup the
        resize ends. They wait out of the frontier, unconfirmed, for what the others hand over."""
        moved = set(self._router.moved)
        if not moved:
            return []
        finished = self._resume.done
        taken = self._frontier.take_out(lambda host: host in moved and not leaving(host))
        live = [entry for entry in taken if url_fingerprint(entry.url) not in finished]  # the others: forwarded
        self._resume.copies_taken_out(taken)
        self._resume.resize_unconfirmed.extend((entry.url, entry.depth, entry.hops) for entry in live)
        return live

    def _unacknowledged_forwards(self) -> list[FrontierEntry]:
        """URLs of per-IP hand-overs no one acknowledged: they were in no frontier but those batches."""
        return [entry for batch in self._router.unacknowledged if batch.forward for entry in batch.entries]

    def _confirm(self) -> None:
        """The unconfirmed URLs (queued for hosts moved away per IP, never tested by the host's URL set),
        now that every part is in: dropped if queued here, seen elsewhere (the fingerprints others
        handed over), or seen here while this partition held the host."""
        rows, self._resume.resize_unconfirmed = self._resume.resize_unconfirmed, []
        self._resume.resize_pinned = []
        if not rows:
            return
        assert self._history is not None
        spelled = self._urlset.scheme.function
        entries = [FrontierEntry(url, depth, hops) for url, depth, hops in rows]
        fingerprints = np.fromiter((spelled(entry.url) for entry in entries), np.uint64, len(entries))
        distinct, inverse = np.unique(fingerprints, return_inverse=True)
        seen_elsewhere = self._history.contains(distinct)[inverse]  # answers in sorted order: back to the rows'
        seen_here = self._urlset.contains(fingerprints)
        confirmed = [
            entry
            for entry, elsewhere, here in zip(entries, seen_elsewhere.tolist(), seen_here.tolist(), strict=True)
            if not elsewhere and not (here and host_of(entry.url) in self._pinned_before)
        ]
        self.stats["unconfirmed_dropped"] = len(entries) - len(confirmed)
        self._take_in(confirmed)

    def _resend_batches(self) -> None:
        """The old assignment's unacknowledged batches: their URLs through the host splitter again.

        Per-IP forwards are not among them: the handover acknowledged the old assignment's (they
        travelled as queued URLs), so an unacknowledged forward here was made under the new assignment,
        after the barrier of this phase, by a partition killed before the phase was recorded as over,
        which now repeats it. It is sent again as the forward it is. Routed as an ordinary batch, its
        URLs met their new holder's URL set, which after a resize holds the crawl's history (its own
        queue of an earlier assignment, the others' seen parts) and may know them, and were dropped,
        while the lease here had ended them: lost with every page only they led to."""
        router = self._router
        waiting = [batch for batch in router.unacknowledged if not batch.forward]
        forwards = [batch for batch in router.unacknowledged if batch.forward]
        entries = [entry for batch in waiting for entry in batch.entries]
        self.stats["batches_routed_again"] = len(waiting)
        for batch in waiting:
            router.acknowledge(batch.peer, batch.number)
        if entries:
            self._links.submit(entries)
        if forwards:
            self.peers.transmit(forwards)

    # -- the transport's side --------------------------------------------------------------------

    def receive(self, sender: int, number: int, part: Part) -> bool:
        self.stats["parts_received"] += 1
        if isinstance(part, SeenPart):
            fingerprints = part.array()
            assert self._history is not None
            self._history.test_and_set(np.unique(fingerprints))
            self.stats["fingerprints_in"] += self._urlset.insert(fingerprints)
        elif isinstance(part, FrontierPart):
            self._links.sitemaps |= set(part.sitemaps)
            self._take_in([FrontierEntry(url, depth, hops) for url, depth, hops in part.entries])
            self._resume.resize_unconfirmed.extend(part.unconfirmed)
        elif isinstance(part, HostsPart):
            self._url_filter.merge(part.seeds, part.hosts)
            self._robots_gate.parked.update(part.robots_waiting)
        try:
            if isinstance(part, SeenPart) and self._history is not None:
                self._history.checkpoint()  # before the commit: never a part acknowledged without it
            self._checkpoint()
        except Exception as exc:  # not durable: not acknowledged; the sender sends it again
            log.warning("handover part %d from partition %d not taken in: %s", number, sender, exc)
            return False
        return True

    def _take_in(self, entries: list[FrontierEntry]) -> None:
        queued = self._queued
        new = []
        for entry in entries:
            fingerprint = url_fingerprint(entry.url)
            if fingerprint in queued:
                self.stats["urls_already_queued"] += 1
                continue
            queued.add(fingerprint)
            new.append(entry)
        self._frontier.add_many(new)
        if new:  # queued here: this partition's URL set knows them from now on
            spelled = self._urlset.scheme.function
            self._urlset.insert(np.fromiter((spelled(entry.url) for entry in new), np.uint64, len(new)))
        self.stats["urls_in"] += len(new)

    def acknowledged(self, peer: int, number: int) -> None:
        if self.outbox.acknowledge(peer, number):
            self._acknowledged.set()
