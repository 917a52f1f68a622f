"""The crawl loop itself: the engine's dispatch and leases, and the stages around them.

Who fills what: the frontier hands out leases; the engine (engine.py) runs one task per lease: DNS
(prefetch.py looked the host up when it got a back queue), the robots check (robotsgate.py), the
page budget, the fetch; the recorder (recorder.py) turns the result into store writes, a content
verdict and the links it leads to; the link pipeline (links.py) takes those links back to the
frontier through the URL filter, the ordering policy, the host splitter and the URL-seen test;
processors get their pages through handoff.py. Every stage that changes durable state writes to
the ledger (ledger.py), whose journal and checkpoints let a killed crawl resume without losing a
URL (resume.py: the engine's part of a checkpoint). With several partitions, partition.py is the
engine's side of the transport and workers.py the coordinator of the processes of one machine;
partitioning.py records how a crawl directory is partitioned and decides what a resume with
another number of processes does, and repartition.py is the handover phase of such a resize.
assembly.py builds every component from the configuration; telemetry.py publishes Snapshots.
"""

from crawlspace.crawl.engine import CrawlEngine
from crawlspace.crawl.telemetry import CrawlStats

__all__ = ["CrawlEngine", "CrawlStats"]
