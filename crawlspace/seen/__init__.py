"""The two "seen?" tests of the crawl loop: duplicate URL elimination and content seen.

URL seen (`urlset`): the engine submits the fingerprint of every normalized link with its
frontier entry; a cache of popular fingerprints drops most repeats at once, the rest wait in a
buffer that is checked in one batch against the disk-resident sorted set (`sortedruns`) when
full, when the frontier runs low and before a checkpoint; entries of new URLs come back in
arrival order and go to the frontier. Memory is bounded by the cache and buffer budgets.

Content seen (`content`): every fetched body's fingerprint is checked against the pages seen;
a body already seen at another URL is an exact duplicate (a WARC revisit record, links not
extracted again). New content is shingled (`shingles`) and checked for near-duplicates by
MinHash-LSH; the duplicate-of relation is recorded with each URL's content fingerprint.

Both live under the crawl directory (DIR/seen/urls, DIR/seen/content) and are made durable by
their `checkpoint()`; reopening a directory gives the set as of its last checkpoint.
"""

from crawlspace.seen.content import ContentKind, ContentSeen, ContentVerdict
from crawlspace.seen.sortedruns import RunStore, SeenStateError
from crawlspace.seen.urlset import FingerprintCache, FingerprintSet, PartitionedFingerprintSet, UrlSet

__all__ = [
    "ContentKind",
    "ContentSeen",
    "ContentVerdict",
    "FingerprintCache",
    "FingerprintSet",
    "PartitionedFingerprintSet",
    "RunStore",
    "SeenStateError",
    "UrlSet",
]
