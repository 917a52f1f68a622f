"""One partition of a crawl of several: the engine's side of the transport to the others.

`PartitionInbox` is the `Inbox` (distributed.protocols) the transport delivers to: URL batches for
this partition's hosts go into the link pipeline and are acknowledged once journaled; the
acknowledgements of this partition's own batches let the router forget them; content claims on
the fingerprints this partition owns, and near-duplicate questions on the LSH band keys it owns,
are answered from its content set. It asks the others the near-duplicate questions of its own
pages (`near_match`, distributed.nearclaims). It also sends: the
router's open batches leave only after the journal write that holds their URLs (X lines), and a
leased URL whose host now belongs to another partition (per-IP politeness) is handed over.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from crawlspace.crawl.ledger import Ledger
from crawlspace.crawl.links import LinkPipeline
from crawlspace.crawl.telemetry import CrawlStats
from crawlspace.distributed.claims import Answer
from crawlspace.distributed.nearclaims import NearMatch, NearQuestion, answer_near, best_match, near_questions
from crawlspace.distributed.protocols import Peers
from crawlspace.distributed.resize import Part
from crawlspace.distributed.router import PartitionRouter
from crawlspace.frontier import FrontierEntry
from crawlspace.seen import ContentSeen
from crawlspace.seen.shingles import SigArray

SEND_INTERVAL = 0.02  # an open batch is cut and sent this long after its first URL (a full one at once)


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

    def stop(self, reason: str) -> None:
        self._stop(reason)

    def receive_handover(self, sender: int, number: int, part: Part) -> bool:
        return self.handover is not None and self.handover(sender, number, part)

    def handover_acknowledged(self, peer: int, number: int) -> None:
        if self.handover_acks is not None:
            self.handover_acks(peer, number)
