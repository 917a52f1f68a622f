"""Fetching: one HTTP(S) attempt per call, ending in exactly one outcome of a fixed taxonomy.

Who calls it: the engine, with a URL whose host the frontier has leased, whose name the resolver
has answered and whose robots.txt allows it. `Fetcher.fetch` returns a FetchResult and never
raises for anything the network or the server does; it never sleeps and never retries.
Redirects are returned, not followed (Mercator: targets re-enter the loop through the URL
filter and the URL-seen test). After each attempt the engine asks `RetryPolicy` whether the URL
goes back into the frontier, and how long its host must rest (Retry-After, backoff).

Invariants: every byte read is bounded (body, decoded body, compression ratio, headers); every
connection goes to an address the guard accepted; every attempt is counted by outcome. A body
beyond `spill_bytes` waits for its page's processing in an unnamed file (`body.py`), not in memory:
what the fetches in flight hold is bounded per fetch, not by the size of the pages.
"""

from crawlspace.fetch.fetcher import Fetcher, FetchLimits, FetchResult, Validators
from crawlspace.fetch.outcomes import Outcome
from crawlspace.fetch.retry import RetryDecision, RetryPolicy

__all__ = ["FetchLimits", "FetchResult", "Fetcher", "Outcome", "RetryDecision", "RetryPolicy", "Validators"]
