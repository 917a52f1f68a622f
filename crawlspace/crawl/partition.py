"""One partition of a crawl of several: the engine's side of the transport to the others.

`PartitionInbox` is the `Inbox` (distributed.protocols) the transport delivers to: URL batches for
this partition's hosts go into the link pipeline and are acknowledged once journaled; the
acknowledgements of this partition's own batches let the router forget them; content claims on
the fingerprints this partition owns, and near-duplicate questions on the LSH band keys it owns,
are answered from its content set. It asks the others the near-duplicate questions of its own
pages (`near_match`, distributed.nearclaims). It also sends: the
router's open batches leave only after the journal write that holds their URLs (X lines), and a
leased URL whose host now belongs to another partition (per-IP politeness) is handed over. Every
`outdated.INTERVAL` it commits the content set when outdated notices are owed (distributed.outdated),
then acknowledges those it applied and sends its own (never before they are durable).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from crawlspace.crawl.ledger import Ledger
from crawlspace.crawl.links import LinkPipeline
from crawlspace.crawl.telemetry import CrawlStats
from crawlspace.distributed import outdated
from crawlspace.distributed.claims import Answer
from crawlspace.distributed.nearclaims import NearMatch, NearQuestion, answer_near, best_match, near_questions
from crawlspace.distributed.protocols import Peers
from crawlspace.distributed.resize import Part
from crawlspace.distributed.router import PartitionRouter
from crawlspace.frontier import FrontierEntry
from crawlspace.seen import ContentSeen
from crawlspace.seen.content import OutdatedNotice
from crawlspace.seen.shingles import SigArray

SEND_INTERVAL = 0.02  # an open batch is cut and sent this long after its first URL (a full one at once)

log = logging.getLogger("crawlspace")


class PartitionInbox:
    def __init__(
        self,
        peers: Peers,
        router: PartitionRouter,
        *,
        links: LinkPipeline,
        ledger: Ledger,
        content: ContentSeen,
        stats: CrawlStats,
        wake: Callable[[], None],
        stop: Callable[[str], None],
    ) -> None:
        self.peers = peers
        self.router = router
        self._links = links
        self._ledger = ledger
        self._content = content
        self._stats = stats
        self._wake = wake
        self._stop = stop
        self._open = asyncio.Event()  # a batch has URLs: the sender's timer runs
        self.handover: Callable[[int, int, Part], bool] | None = None  # a resize's phase (crawl/repartition.py)
        self.handover_acks: Callable[[int, int], None] | None = None
        self._connected = False
        self.outdated = outdated.OutdatedDelivery()
        self._acks_owed: dict[int, list[tuple[str, float]]] = {}  # applied, acknowledged once committed
        self._outdated_news = asyncio.Event()  # a notice came in or was put here: rounds until all is acknowledged
        content.on_outdated = self._outdated_news.set

    def __repr__(self) -> str:
        return f"PartitionInbox({self.peers!r}, {self.router!r})"

    async def connect(self, *, resend: bool = True) -> None:
        """Start the transport; after a resume, every batch the others never acknowledged goes out
        again (they drop repeats); not in a resize's phase, whose end sends them under the new assignment."""
        await self.peers.start(self)
        self._connected = True
        if resend:
            self.peers.transmit(self.router.unacknowledged)

    def send_batches(self) -> None:
        """Cut the open batches and send them once the journal holds their URLs: never unjournaled.
        Before the transport is started (the checkpoint of a resumed engine's constructor, with
        batches its journal replayed) they are only cut: `connect` sends every unacknowledged one."""
        batches = self.router.cut()
        if batches and self._ledger.flush() and self._connected:
            self.peers.transmit(batches)

    def send_soon(self) -> None:
        """A batch is open: it leaves within SEND_INTERVAL (with whatever else joins it meanwhile)."""
        self._open.set()

    async def send_periodically(self) -> None:
        """Send the open batches SEND_INTERVAL after one opened. The sender sleeps while no batch is
        open: it used to wake every SEND_INTERVAL regardless, 50 times a second in each partition,
        a cost that grew with the crawl's duration rather than its pages."""
        while True:
            await self._open.wait()
            await asyncio.sleep(SEND_INTERVAL)
            self._open.clear()
            self.send_batches()
            if self.router.outbox.pending:  # what send_batches could not send (the journal failed)
                self._open.set()

    async def tell_outdated_periodically(self, interval: float = outdated.INTERVAL) -> None:
        """The rounds of distributed.outdated, for as long as the crawl runs: every `interval` while notices
        are put, applied or unacknowledged; else the loop sleeps until a notice comes in or is put here.
        It woke every `interval` whatever happened (and most crawls refresh nothing): a cost per second,
        not per page, that a crawl politeness holds to a page a second paid on every page (issue 17)."""
        while True:
            await asyncio.sleep(interval)
            self.tell_outdated()
            if not (self._content.outdated_added or self._acks_owed or self.outdated.unacknowledged):
                self._outdated_news.clear()
                await self._outdated_news.wait()

    def tell_outdated(self, now: float | None = None) -> None:
        """One round: if notices were applied here or put here since the last, commit the content set;
        then acknowledge the applied ones and send those due (new, or unacknowledged too long)."""
        if not self._connected:
            return
        now = time.monotonic() if now is None else now
        content, delivery = self._content, self.outdated
        added = content.outdated_added > 0
        if not (added or self._acks_owed or delivery.resend_due(now)):
            return
        if added or self._acks_owed:
            try:
                content.commit()
            except Exception as exc:  # a full disk: nothing is acknowledged or sent until a commit succeeds
                self._stats.errors["outdated:commit-failed"] += 1
                log.warning("partition %d: the content set could not commit (%s); notices wait", self.peers.index, exc)
                return
        owed, self._acks_owed = self._acks_owed, {}
        for sender, keys in owed.items():
            self.peers.acknowledge_outdated(sender, keys)
        partitions = self.peers.partitions
        waiting = list(content.outdated_waiting())
        content.outdated_added = 0
        for peer, notice in waiting:
            if peer >= partitions:  # a partition that left the crawl in a resize: its share is gone
                content.outdated_delivered(peer, notice.url, notice.replaced_at)
        due = delivery.due(((peer, notice) for peer, notice in waiting if peer < partitions), now)
        for peer, notices in due.items():
            self._stats.outdated_notices_sent += len(notices)
            self.peers.transmit_outdated(peer, notices)

    def hand_over(self, entry: FrontierEntry, owner: int) -> None:
        """Queue a leased URL for the partition that now owns its host; the caller releases the lease
        (journaled done), then sends."""
        self.router.hand_over(entry, owner)

    async def near_match(self, url: str, fetched_at: float, signature: SigArray) -> NearMatch | None:
        """The most similar page asked about before this one, over the partitions owning its band keys;
        an owner that does not answer in time is counted (`near_duplicate_unanswered`) and passed over."""
        partitions = self.peers.partitions
        questions = near_questions(url, fetched_at, time.time(), signature, self._content.rows, partitions)
        self._stats.near_duplicate_questions += len(questions) - (self.peers.index in questions)
        answers = await self.peers.ask_near(questions)
        self._stats.near_duplicate_unanswered += len(questions) - len(answers)
        return best_match(answers)

    # -- the Inbox ----------------------------------------------------------------------------

    def receive_urls(self, entries: list[FrontierEntry], *, forwarded: bool = False) -> bool:
        if self._ledger.closed:  # shut down, its stores closed: the sender keeps the batch for the resume
            return False
        self.peers.idle = False
        if forwarded:
            self.router.pin(entries)
            self._links.submit_forwarded(entries)
        else:
            self._links.submit(entries, route=False)  # the sender chose this partition
        journaled = self._ledger.flush()
        self._wake()
        return journaled

    def batch_acknowledged(self, peer: int, number: int) -> None:
        if self.router.acknowledge(peer, number):
            self._ledger.flush()

    def claim_first(self, body_fingerprint: int, url: str, fetched_at: float) -> Answer:
        return self._content.claim_first(body_fingerprint, url, fetched_at)

    def release_first(self, body_fingerprint: int, url: str) -> None:
        self._content.release_first(body_fingerprint, url)

    def answer_near(self, question: NearQuestion) -> NearMatch | None:
        return answer_near(self._content, question, self._content.near_threshold)

    def receive_outdated(self, sender: int, notices: list[OutdatedNotice]) -> None:
        self._outdated_news.set()
        for notice in notices:
            if self._content.forget_outdated(notice):
                self._stats.outdated_entries_removed += 1
        self._acks_owed.setdefault(sender, []).extend((notice.url, notice.replaced_at) for notice in notices)

    def outdated_acknowledged(self, peer: int, keys: list[tuple[str, float]]) -> None:
        for url, replaced_at in self.outdated.acknowledged_by(peer, keys):
            self._content.outdated_delivered(peer, url, replaced_at)

    def stop(self, reason: str) -> None:
        self._stop(reason)

    def receive_handover(self, sender: int, number: int, part: Part) -> bool:
        return self.handover is not None and self.handover(sender, number, part)

    def handover_acknowledged(self, peer: int, number: int) -> None:
        if self.handover_acks is not None:
            self.handover_acks(peer, number)
