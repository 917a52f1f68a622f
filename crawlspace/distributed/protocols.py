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
- `sent`, `received` and `idle` answer the termination probes (distributed.termination): `sent`
  counts every transmitted batch, resends included, `received` every delivery journaled, repeats
  included; `idle` is set by the engine (nothing to fetch, nothing in flight, every batch it sent
  acknowledged).
- A stop from the cluster (a coordinator, an operator) goes to `Inbox.stop(reason)`.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from crawlspace.distributed.claims import Answer
from crawlspace.distributed.splitter import Batch
from crawlspace.frontier.entry import FrontierEntry


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

    def stop(self, reason: str) -> None:
        """Stop the crawl: finish the fetches in flight, checkpoint."""
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

    def settle(self, body_fingerprint: int, url: str, *, stored: bool) -> None:
        """`url`, named first for this body, has been recorded: its page stored or not."""
        ...

    async def close(self, termination: str = "") -> None:
        """Say how this partition ended (one that stops by itself stops the crawl), then disconnect."""
        ...


@runtime_checkable
class TransportHealth(Protocol):
    """A transport through a server that can be lost while the partition crawls on (Redis): the engine
    shows it in its progress (Gauges.transport_down) so that an operator sees a node cut off."""

    connected: bool
