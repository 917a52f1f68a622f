"""The engine's side of a resize's start-up phase (distributed.resize): hand over, take in, then crawl.

`begin` (after the engine resumed its checkpoint and journal, before the transport delivers):
the first time in this resize, drop the old assignment's per-IP moves and pins and checkpoint that
the phase began; then, unless this partition already finished its handover, read what leaves
(queued URLs of hosts others own now, URLs of per-IP hand-overs not yet acknowledged, the URL set,
per-host counts, the seeds) into numbered parts. `run` sends them until each is acknowledged, sending
the unacknowledged ones again every `RESEND_INTERVAL`; then removes the leaving hosts from the
frontier and records the handover as done in one checkpoint, waits at the barrier
(`Peers.repartitioned`), and finally sends the old assignment's unacknowledged URL batches again
under the new one, through the host splitter (their owners' URL sets decide).

Receiving (`receive`): fingerprints join the URL set; queued URLs join the frontier unless already
there (a set of the fingerprints of everything this partition holds in its frontier, rebuilt from
the frontier at every `begin`, so a repeated part or a URL two old partitions both held is
queued once); counts and seeds join the URL filter. Each part is acknowledged after a checkpoint
that holds it. The frontier of a partition in the phase still holds what it hands over: a
checkpoint before its last acknowledgement keeps those URLs, so a kill -9 loses none.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from crawlspace.crawl.links import LinkPipeline
from crawlspace.crawl.resume import ResumeState
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
from crawlspace.urls import host_of, url_fingerprint
from crawlspace.urls.filter import UrlFilter

RESEND_INTERVAL = 2.0

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
        router: PartitionRouter,
        resume_state: ResumeState,
        checkpoint: Callable[[], None],
    ) -> None:
        self.resize = resize
        self.plan = plan
        self.peers = peers
        self.outbox = HandoverOutbox()
        self._frontier = frontier
        self._urlset = urlset
        self._links = links
        self._url_filter = url_filter
        self._router = router
        self._resume = resume_state
        self._checkpoint = checkpoint
        self._queued: set[int] = set()  # url_fingerprint of every URL this partition keeps queued
        self._acknowledged = asyncio.Event()
        self.stats: dict[str, int] = {"parts_sent": 0, "parts_received": 0, "urls_in": 0, "urls_out": 0}
        self.stats.update(fingerprints_in=0, fingerprints_out=0, urls_already_queued=0)

    def __repr__(self) -> str:
        return f"Repartition({self.resize!r}, {self.plan!r}, {self.outbox!r})"

    @property
    def handed(self) -> bool:
        """This partition's handover is done (durably: its checkpoint says so)."""
        return self._resume.resize_handed == self.resize.epoch

    # -- the phase -------------------------------------------------------------------------------

    def begin(self) -> None:
        epoch = self.resize.epoch
        if self._resume.resize_started != epoch:
            self._router.moved, self._router.pinned = {}, set()  # the old assignment's per-IP decisions
            self._resume.resize_started = epoch
            self._checkpoint()
        leaving = self.plan.leaving
        finished = self._resume.done
        forwarded = [] if self.handed else self._unacknowledged_forwards()
        kept = [entry for entry in forwarded if not leaving(host_of(entry.url))]
        self._queued = {url_fingerprint(entry.url) for entry in self._frontier.queued_entries()}
        self._take_in(kept)
        if self.handed:
            return
        leaving_entries = [entry for entry in self._frontier.queued_entries() if leaving(host_of(entry.url))]
        parts: dict[int, list[Part]] = {}
        frontier_parts = self.plan.frontier_parts(
            [*leaving_entries, *forwarded], finished=finished, sitemaps=self._links.sitemaps
        )
        seen_parts = self.plan.seen_parts(self._urlset.backend.scan())
        hosts_parts = self.plan.hosts_parts(self._url_filter.host_counts(), self._url_filter.seeds)
        for grouped in (seen_parts, hosts_parts, frontier_parts):
            for peer, peer_parts in grouped.items():
                parts.setdefault(peer, []).extend(peer_parts)
        for peer in sorted(parts):
            for part in parts[peer]:
                self.outbox.add(peer, part)
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
            self._frontier.take_out(self.plan.leaving)
            for peer, number in [key for key, batch in self._router.outbox.unacked.items() if batch.forward]:
                self._router.acknowledge(peer, number)  # handed over as queued URLs
            self._resume.resize_handed = self.resize.epoch
            self._checkpoint()  # the commit point of this partition's handover
        if not await self.peers.repartitioned():
            return False
        self._queued = set()
        self._resend_batches()
        return True

    async def _acknowledgements(self) -> None:
        """Until every part is acknowledged, or none was for RESEND_INTERVAL (then send again)."""
        while not self.outbox.complete:
            self._acknowledged.clear()
            try:
                await asyncio.wait_for(self._acknowledged.wait(), timeout=RESEND_INTERVAL)
            except TimeoutError:
                return

    def _unacknowledged_forwards(self) -> list[FrontierEntry]:
        """URLs of per-IP hand-overs no one acknowledged: they were in no frontier but those batches."""
        return [entry for batch in self._router.unacknowledged if batch.forward for entry in batch.entries]

    def _resend_batches(self) -> None:
        """The old assignment's unacknowledged batches: their URLs through the host splitter again."""
        router = self._router
        entries = [entry for batch in router.unacknowledged for entry in batch.entries]
        for batch in router.unacknowledged:
            router.acknowledge(batch.peer, batch.number)
        if entries:
            self._links.submit(entries)

    # -- the transport's side --------------------------------------------------------------------

    def receive(self, sender: int, number: int, part: Part) -> bool:
        self.stats["parts_received"] += 1
        if isinstance(part, SeenPart):
            self.stats["fingerprints_in"] += self._urlset.insert(part.array())
        elif isinstance(part, FrontierPart):
            sitemaps = set(part.sitemaps)
            self._links.sitemaps |= sitemaps
            self._take_in([FrontierEntry(url, depth, hops) for url, depth, hops in part.entries])
        elif isinstance(part, HostsPart):
            self._url_filter.merge(part.seeds, part.hosts)
        try:
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
        self.stats["urls_in"] += len(new)

    def acknowledged(self, peer: int, number: int) -> None:
        if self.outbox.acknowledge(peer, number):
            self._acknowledged.set()
