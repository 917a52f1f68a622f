"""Distribution of the crawl by host splitter (IIR §20.2.2, figure 20.2).

Every host has one owner among the N partitions of a crawl, `owner_of(host, N)`; only the owner
fetches the host's URLs, so politeness, robots.txt and the URL-seen test of a host stay local to
one process. A partition that finds a URL of another partition's host sends it there in batches
(`Outbox`), before duplicate elimination (IIR exercise 20.2): the owner's URL set decides. Batches
are delivered at least once: the sender journals each batch and forgets it only when the owner
acknowledges having journaled its URLs; after a crash the unacknowledged batches are sent again,
and the owner's URL set drops the repeats. Exact-duplicate content is partitioned by fingerprint
value: the owner of `fp mod N` answers "seen?" for it.

`channel` frames messages between partitions; `crawl.workers` runs N partitions as processes of
one machine (`--processes`). A distributed engine carries the same messages between machines.
"""

from crawlspace.distributed.splitter import Outbox, owner_of

__all__ = ["Outbox", "owner_of"]
