"""The Mercator URL frontier (IIR §20.2.3): what is fetched, and when.

A URL's life: the engine `add`s it after duplicate elimination; the prioritizer gives it a level
and it waits in that level's FIFO front queue. When a back queue runs dry, the router draws from
the front queues (biased towards high priority); a URL whose host already owns a back queue joins
it, otherwise it opens a back queue for its host. The selector pops the heap of earliest contact
times; `acquire` hands out the head URL of a host whose time has come, as a Lease. `release`
records the fetch duration and sets the host's next contact time
t_e = now + max(crawl-delay, min(max(min_delay, k x duration), max_delay)).

Invariants (asserted): a host is in at most one back queue; a back queue holds one host; no host has
more leases out than `max_conn_per_host`; no URL is handed out before its host's t_e.
"""

from crawlspace.frontier.back import Politeness
from crawlspace.frontier.front import BreadthFirst, Prioritizer
from crawlspace.frontier.frontier import Frontier, FrontierEntry, Lease

__all__ = ["BreadthFirst", "Frontier", "FrontierEntry", "Lease", "Politeness", "Prioritizer"]
