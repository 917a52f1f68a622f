"""Distribution of the crawl by host splitter (IIR §20.2.2, figure 20.2).

Every host has one owner among the N partitions of a crawl (`assignment`: modulo by default,
rendezvous hashing for a cluster that resizes); only the owner fetches the host's URLs, so
politeness, robots.txt and the URL-seen test of a host stay local to one process. A partition
that finds a URL of another partition's host sends it there in batches (`router` and `splitter`),
before duplicate elimination (IIR exercise 20.2): the owner's URL set decides (a URL the sender
sent recently is not sent again: crawl.links drops repeats before the splitter). Batches are
delivered at least once: the sender journals each batch and forgets it only when the owner
acknowledges having journaled its URLs; after a crash the unacknowledged batches are sent again,
and the owner's URL set drops the repeats. Exact-duplicate content is partitioned by fingerprint
value: the owner of `fp mod N` answers "which URL had it first?" (`claims`); near-duplicates by
LSH band key: the owners of a page's band keys answer "anything similar asked before?"
(`nearclaims`), each from its share of the band table. The end of the crawl
is decided by the four-counter test (`termination`), the page budget is shared (`budget`).

A crawl resumed with another number of partitions re-partitions its hosts first (`resize`: who
hands what to whom, in parts acknowledged once durable; the engine's side is crawl/repartition.py).

The engine sees the other partitions only through `protocols.Peers`, and offers them its
`protocols.Inbox`; `socketmesh` implements them over socketpairs between the processes of one
machine (`--processes`), `channel` frames the messages. A transport between machines implements
the same two protocols.
"""

from crawlspace.distributed.assignment import (
    Assignment,
    HostBucketAssignment,
    ModuloAssignment,
    RendezvousAssignment,
)
from crawlspace.distributed.protocols import Inbox, Peers
from crawlspace.distributed.router import PartitionRouter
from crawlspace.distributed.splitter import Batch, Outbox

__all__ = [
    "Assignment",
    "Batch",
    "HostBucketAssignment",
    "Inbox",
    "ModuloAssignment",
    "Outbox",
    "PartitionRouter",
    "Peers",
    "RendezvousAssignment",
]
