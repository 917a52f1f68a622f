"""URL functions of the crawl loop: resolving hrefs, normalizing for dedup, fingerprints, filters.

Every URL that enters the frontier has gone through `join` (resolved the way a browser would),
`normalize` (the one canonical spelling used for duplicate elimination and storage) and the filters.
All functions here are pure: no I/O, no clock.
"""

from crawlspace.urls.fingerprint import url_fingerprint
from crawlspace.urls.normalize import InvalidURL, host_of, join, normalize, origin_of

__all__ = ["InvalidURL", "host_of", "join", "normalize", "origin_of", "url_fingerprint"]
