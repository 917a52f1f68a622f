"""URL functions of the crawl loop: resolving hrefs, normalizing for dedup, fingerprints, filters.

Every URL that enters the frontier has gone through `join` (resolved the way a browser would),
a `Normalizer` (the one canonical spelling used for duplicate elimination and storage) and the
filter chain of `crawlspace.urls.filter` (scope, patterns, spider-trap guards). Invariant: a
frontier URL is an absolute http(s) URL, normalized, so equal resources spelled differently
have one fingerprint. All functions here are pure: no I/O, no clock.
"""

from crawlspace.urls.fingerprint import url_fingerprint
from crawlspace.urls.normalize import InvalidURL, Normalizer, host_of, join, normalize, origin_of

__all__ = ["InvalidURL", "Normalizer", "host_of", "join", "normalize", "origin_of", "url_fingerprint"]
