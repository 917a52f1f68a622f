"""Batch jobs over a crawl on Dask: exact and near-duplicate clusters, the link graph, PageRank, the
connectivity server's compressed graph (`connectivity`, crawlspace.graph), the search index.

Who fills it: nothing during a crawl; `run(DIR)` (or `crawlspace jobs DIR`) after it, or during a
pause. Who drains it: `crawlspace dups` and `crawlspace rank`, the search index and the link-graph
server, from DIR/jobs/<name>/ (Parquet tables and summary.json; `output.read_table`; the index job's
output is an index directory, `crawlspace.index.Index(DIR/jobs/index)`).

Every job reads the crawl through `CrawlReader` only: one Dask partition per key range of the crawl
table (`CrawlReader.partitions`), each task opening its own reader, so a single-process crawl, a
`--processes` crawl and the directories of several nodes are read alike. Each job is also a
function over Dask collections (`dedup.duplicate_clusters`, `graph.link_graph`,
`pagerank.power_iteration`, `neardup.near_pairs`) to compose with one's own steps.

Invariants: the same crawl gives the same tables on any scheduler (synchronous, threads, a
cluster) and any partitioning; an output directory is complete or absent (`output`: written aside,
fsynced, swapped in by one rename), so a killed job leaves the previous output intact; no job holds
the pages of the whole crawl in one process (map output goes through Dask's shuffle, on disk).
"""

from crawlspace.jobs.context import JobContext
from crawlspace.jobs.output import JobOutputError, read_summary, read_table
from crawlspace.jobs.runner import JOB_NAMES, JobError, run

__all__ = ["JOB_NAMES", "JobContext", "JobError", "JobOutputError", "read_summary", "read_table", "run"]
