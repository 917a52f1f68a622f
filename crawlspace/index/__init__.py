"""The search index over a crawl (issue 19): document-partitioned shards, global statistics, BM25F.

(Filled in as the package grows; see the modules' docstrings.)
"""
