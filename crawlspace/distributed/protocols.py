"""The two sides of a partition's transport: what the engine offers it (`Inbox`), what it offers the
engine (`Peers`). `socketmesh.SocketMesh` is the one-machine implementation (socketpairs between the
processes of `--processes`); a transport between machines (Redis streams) implements `Peers` alike.

Contract for an implementer of `Peers`:
- `transmit` sends batches the engine has already journaled; delivery may repeat a batch (after a
  resume the engine transmits every unacknowledged one again), never lose one without the sender
  hearing of it: the engine forgets a batch only on `Inbox.batch_acknowledged`. Deliver a received
  batch to `Inbox.receive_urls`; acknowledge it to its sender only when that returns True
  (journaled by the receiver), and count it in `received` then.
- `claim_first` asks the partition owning the fingerprint (`assignment.content_owner`) and may
  return None when that partition cannot answer in reasonable time (the engine then decides
  locally: a duplicate may be stored twice, nothing is lost); it must never block the crawl.
- `ask_near` carries one near-duplicate question to each partition it is keyed by
  (distributed.nearclaims: the owners of the page's LSH band keys) and returns the answers that
  came back within the transport's timeout, keyed alike; a partition missing from the result did
  not answer (gone, slow, the question or answer lost) and the engine counts it and treats the page
  as new there. The question to the asking partition itself is answered by its own
  `Inbox.answer_near`, without a message. On the owner, deliver each question to
  `Inbox.answer_near` and send back what it returns, `None` included ("nothing similar here": an
  answer, unlike silence). Two message kinds: the question (asker, its number, `NearQuestion`'s
  five fields) and the answer (the number, `NearMatch`'s three fields or nothing). Answering twice
  is harmless (the owner re-indexes the page under the same keys); an answer to a question no
  longer awaited is dropped. A malformed question (`NearQuestionError` from `NearQuestion`) is
  dropped unanswered.
- `transmit_outdated` carries a page's outdated notices (distributed.outdated) to one partition, to be
  given to `Inbox.receive_outdated`; `acknowledge_outdated` carries the receiver's acknowledgement
  back, to `Inbox.outdated_acknowledged`. Delivery may lose or repeat either: the engine sends a
  notice again until acknowledged, and applying one twice is harmless. A malformed notice
  (`OutdatedNoticeError` from `outdated.checked_notice`) is dropped, its batch's others applied.
  Neither counts in `sent` and `received` (the crawl may end with notices on their way: they are
  durable at the sender and sent again when it resumes).
- `sent`, `received` and `idle` answer the termination probes (distributed.termination): `sent`
  counts every transmitted batch, resends included, `received` every delivery journaled, repeats
  included; `idle` is set by the engine (nothing to fetch, nothing in flight, every batch it sent
  acknowledged).
- A stop from the cluster (a coordinator, an operator) goes to `Inbox.stop(reason)`.
- Re-partitioning (a crawl resumed with another number of partitions, distributed.resize): before
  any fetch, `transmit_handover` carries a part to its new owner (as `encode_part` bytes if the wire
  wants bytes), to be given to `Inbox.receive_handover`; acknowledge it (`Inbox.handover_acknowledged`
  at the sender) only when that returns True (made durable). Parts may be repeated, never lost
  without the sender hearing of it: it sends every unacknowledged part again until acknowledged.
  `repartitioned` is the phase's barrier: this partition has handed over everything and made what
  it received durable; it returns once every partition of the crawl has said so (the crawl begins),
  False if the crawl is stopped meanwhile. `partitions` is the new count; the partitions leaving
  (indexes from `partitions` up) take part in the phase and then end.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from crawlspace.distributed.claims import Answer
from crawlspace.distributed.nearclaims import NearMatch, NearQuestion
from crawlspace.distributed.resize import Part
from crawlspace.distributed.splitter import Batch
from crawlspace.frontier.entry import FrontierEntry
from crawlspace.seen.content import OutdatedNotice


class Inbox(Protocol):
    """A partition's engine, as its transport sees it."""

    def receive_urls(self, entries: list[FrontierEntry], *, forwarded: bool = False) -> bool:
        """A batch for this partition's hosts; True once journaled (then acknowledge it).
        `forwarded`: hosts handed over for per-IP politeness, kept here from now on."""
        ...

    def batch_acknowledged(self, peer: int, number: int) -> None:
        """`peer` journaled batch `number` of ours."""
        ...

    def claim_first(self, body_fingerprint: int, url: str, fetched_at: float) -> Answer:
        """This partition's content set on a fingerprint it owns (distributed.claims.ContentOracle)."""
        ...

    def release_first(self, body_fingerprint: int, url: str) -> None: ...

    def answer_near(self, question: NearQuestion) -> NearMatch | None:
        """This partition's band table on band keys it owns: the best candidate asked before the page,
        or None (distributed.nearclaims.answer_near; the page is indexed here then)."""
        ...

    def receive_outdated(self, sender: int, notices: list[OutdatedNotice]) -> None:
        """Pages of `sender` that no longer have these bodies: their entries here go (acknowledged by
        the engine through `Peers.acknowledge_outdated` once that is durable)."""
        ...

    def outdated_acknowledged(self, peer: int, keys: list[tuple[str, float]]) -> None:
        """`peer` made our notices (URL, time of the replacing fetch) durable: not sent again."""
        ...

    def stop(self, reason: str) -> None:
        """Stop the crawl: finish the fetches in flight, checkpoint."""
        ...

    def receive_handover(self, sender: int, number: int, part: Part) -> bool:
        """A part of a resize's handover from `sender`; True once durable here (then acknowledge it)."""
        ...

    def handover_acknowledged(self, peer: int, number: int) -> None:
        """`peer` made our handover part `number` durable."""
        ...


class Peers(Protocol):
    """The other partitions of a crawl, as one partition's engine sees them."""

    index: int
    partitions: int
    sent: int
    received: int
    idle: bool

    async def start(self, inbox: Inbox) -> None:
        """Begin delivering to `inbox` (after the engine has resumed its state)."""
        ...

    def transmit(self, batches: list[Batch]) -> None:
        """Send batches whose URLs the engine has journaled."""
        ...

    async def claim_first(self, body_fingerprint: int, url: str, fetched_at: float) -> Answer | None:
        """The URL that had this body first in the crawl, and its fetch time (`url` itself if it is
        the first); None when the owning partition could not answer."""
        ...

    async def ask_near(self, questions: dict[int, NearQuestion]) -> dict[int, NearMatch | None]:
        """Each question to the partition it is keyed by, all at once; the answers of those that
        answered in time (None: nothing similar there). Never raises, never waits past the timeout."""
        ...

    def settle(self, body_fingerprint: int, url: str, *, stored: bool) -> None:
        """`url`, named first for this body, has been recorded: its page stored or not."""
        ...

    def transmit_outdated(self, peer: int, notices: list[OutdatedNotice]) -> None:
        """Send outdated notices, durable here, to `peer` (again, if they were not acknowledged)."""
        ...

    def acknowledge_outdated(self, peer: int, keys: list[tuple[str, float]]) -> None:
        """Tell `peer` that its notices (URL, time of the replacing fetch) are applied durably here."""
        ...

    def stop_asking(self) -> None:
        """The crawl stops: open questions end unanswered now and no other partition is asked again.
        A page in flight is then decided locally instead of waiting for owners that may have stopped,
        past the shutdown grace (its task was cancelled: a page lost, or fetched again)."""
        ...

    async def close(self, termination: str = "") -> None:
        """Say how this partition ended (one that stops by itself stops the crawl), then disconnect."""
        ...

    def transmit_handover(self, peer: int, number: int, part: Part) -> None:
        """Send a handover part of a resize to its new owner (again, if it was not acknowledged)."""
        ...

    async def repartitioned(self) -> bool:
        """Every part this partition sent acknowledged: wait for the others; True when the crawl
        may begin, False when it was stopped meanwhile."""
        ...


@runtime_checkable
class TransportHealth(Protocol):
    """A transport through a server that can be lost while the partition crawls on (Redis): the engine
    shows it in its progress (Gauges.transport_down) so that an operator sees a node cut off."""

    connected: bool
