"""The Mercator URL frontier (IIR §20.2.3, figs. 20.3 and 20.4): what is fetched, and when.

A URL's life. The engine `add`s a URL that passed the URL-seen test. The `Prioritizer` gives it a
level and it is appended to that level's front queue (F disk-backed FIFOs: a window of the newest
URLs in memory, older ones in zstd-compressed blocks on disk). Whenever fewer than B hosts own a
back queue (B defaults to 3 x the fetch concurrency), the router draws URLs from the front queues,
choosing a level at random with weight 2^-level among the non-empty ones. A drawn URL whose host
already owns a back queue joins it (disk-backed too) and the draw goes on; otherwise its host gets
a back queue, and `on_activate(host)` lets the engine resolve the host's address meanwhile. Hosts
beyond B wait in the front queues.

A host with URLs is offered in its politeness group's heap at its earliest contact time t_e; the
frontier's heap holds one entry per group (an IP address with per-IP politeness, else the host
alone) at max(group t_e, its earliest host's t_e). `acquire` pops the root once its time has come
and hands out the head URL of that host's back queue as a `Lease`. `release` records what the
fetch did and sets t_e = now + max(Crawl-delay, min(max(min_delay, k x duration), max_delay)) for
the host, the same without Crawl-delay for its address; Retry-After and repeated errors push it
later. A host whose next contact is far away (parked after errors, a long Crawl-delay) gives its
back queue up to another host until then, keeping its URLs on disk; a host that keeps failing is
given up and its URLs are dropped and counted. When a back queue runs dry its host leaves it; the
host's row stays in the table while its delay or its errors still matter.

`host_report(limit)` (report.py) says, as plain data, what each host waits for: its URLs queued, its
next contact, and which term set its delay (Crawl-delay, min delay, k x the fetch's duration, or a
backoff), for the hosts with most URLs queued; the engine writes it to DIR/hosts.json.

`checkpoint()` syncs the blocks and atomically replaces the state file: queue windows, the host
table with relative times, heap sequence numbers, the RNG. `Frontier.open(directory)` continues
from it: the same URLs come out in the same order with the same gaps; leases that were out are
handed out again.

Invariants, asserted at acquire and release and audited by `Frontier.check_invariants`: a host
owns at most one back queue and a back queue holds URLs of one host only; at most B hosts own one;
no host (nor, with per-IP politeness, address) has more leases than allowed; no URL is handed out
before its host's and its address's t_e; a host with URLs and a free connection is always in the
heap (nothing starves). Memory is bounded by the host table and a window of each of the F + B
queues (a parked host's URLs are all on disk), not by the number of URLs queued.
"""

from crawlspace.frontier.back import Lease, Politeness
from crawlspace.frontier.entry import FrontierEntry
from crawlspace.frontier.front import BreadthFirst, ByDepth, Prioritizer
from crawlspace.frontier.frontier import Frontier, FrontierError, FrontierStats
from crawlspace.frontier.state import FrontierStateError
from crawlspace.frontier.store import DirectoryStore, FrontierStoreError, MemoryStore, SegmentStore

__all__ = [
    "BreadthFirst",
    "ByDepth",
    "DirectoryStore",
    "Frontier",
    "FrontierEntry",
    "FrontierError",
    "FrontierStateError",
    "FrontierStats",
    "FrontierStoreError",
    "Lease",
    "MemoryStore",
    "Politeness",
    "Prioritizer",
    "SegmentStore",
]
