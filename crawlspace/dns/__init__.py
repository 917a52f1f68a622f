"""Name resolution of the crawl loop: an asynchronous caching resolver and the SSRF guard.

The engine resolves a host before its first fetch; the fetcher connects to exactly the address
that was resolved and checked (no second lookup, so DNS rebinding cannot slip past the guard).
The resolved address is also the key of per-IP politeness.
"""

from crawlspace.dns.guard import AddressGuard, GuardRefused
from crawlspace.dns.resolver import DNSFailure, Resolver, read_hosts_file

__all__ = ["AddressGuard", "DNSFailure", "GuardRefused", "Resolver", "read_hosts_file"]
