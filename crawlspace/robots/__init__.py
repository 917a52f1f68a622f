"""robots.txt: parsing and matching (rules), and the per-host cache with fetch-status semantics (cache).

The engine asks the cache right before each fetch (IIR §20.2.1: a URL can wait in the frontier
for days, the rules may have changed). A miss makes the engine fetch /robots.txt through the
host's politeness slot and store the outcome; the cache turns HTTP status codes into rules.
"""

from crawlspace.robots.cache import RobotsCache
from crawlspace.robots.rules import RobotsRules, parse

__all__ = ["RobotsCache", "RobotsRules", "parse"]
