"""Fetching: one HTTP(S) attempt per call, ending in exactly one outcome of a fixed taxonomy.

The engine hands the fetcher a URL whose host the frontier has leased and whose robots.txt
allows it; the fetcher returns a FetchResult and never raises for anything the network or the
server does. Redirects are returned, not followed (Mercator: targets re-enter the loop).
"""

from crawlspace.fetch.fetcher import Fetcher, FetchResult
from crawlspace.fetch.outcomes import Outcome

__all__ = ["FetchResult", "Fetcher", "Outcome"]
