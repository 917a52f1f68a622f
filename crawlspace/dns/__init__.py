"""Name resolution of the crawl loop: an asynchronous caching resolver and the SSRF guard.

Who fills the cache: `Resolver.prefetch` when URLs of a host enter the frontier, and the engine's
`resolve` before a leased URL is fetched; who drains it: the fetcher's connector, which connects
to exactly the address that was resolved and that `AddressGuard` accepted (no second lookup,
so DNS rebinding cannot slip past the guard), and per-IP politeness (`Resolver.cached`).

Invariants: a name is looked up at most once at a time; a name whose lookups fail is not asked
again before its negative TTL or backoff has passed; every refused address is counted against
its host.
"""

from crawlspace.dns.guard import AddressGuard, GuardRefused
from crawlspace.dns.resolver import Backoff, DNSFailure, Resolver, read_hosts_file

__all__ = ["AddressGuard", "Backoff", "DNSFailure", "GuardRefused", "Resolver", "read_hosts_file"]
