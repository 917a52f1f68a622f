"""robots.txt: parsing and matching (rules), and the per-origin cache with fetch-status semantics (cache).

Who fills it: the engine, which fetches /robots.txt through the host's own politeness slot
(following up to 5 redirects) whenever the cache has no fresh entry for the URL's origin, and
stores the outcome; the cache turns HTTP statuses into rules (2xx parsed, 4xx allow all, 5xx and
network errors disallow all, retried with backoff). Who drains it: the engine again, right
before every fetch (IIR §20.2.1: a URL can wait in the frontier for days and the rules may have
changed), never only at enqueue time. Sitemaps named in a robots.txt go to the frontier.

Invariants: no URL is fetched unless the rules in force for its origin at that moment allow
it; /robots.txt itself is always allowed; parsing never raises and reads at most 500 KiB.
"""

from crawlspace.robots.cache import RobotsCache, RobotsEntry, RobotsStatus
from crawlspace.robots.rules import RobotsRules, parse

__all__ = ["RobotsCache", "RobotsEntry", "RobotsRules", "RobotsStatus", "parse"]
