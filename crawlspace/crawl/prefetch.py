"""DNS prefetch (Mercator): a host's address is looked up as soon as the frontier gives it a back queue.

By the time the host's first URL comes out of the frontier its address is usually cached, so the
fetch does not wait for DNS, and with per-IP politeness the frontier needs the address before it
can schedule the host at all (hosts of one address share its delay): it hands the host out once
`set_host_address` told it. A lookup that fails still tells it (address None: the host is
scheduled alone, and its fetch accounts for the failure).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from crawlspace.crawl.telemetry import CrawlStats
from crawlspace.dns import DNSFailure, Resolver
from crawlspace.dns.resolver import hostname_of_authority
from crawlspace.frontier import Frontier


class DnsPrefetch:
    def __init__(
        self,
        resolver: Resolver,
        frontier: Frontier,
        stats: CrawlStats,
        *,
        wake: Callable[[], None],
        stopping: Callable[[], bool],
    ) -> None:
        """`stopping`: is the crawl stopping? (URLs drained into the frontier at shutdown are not
        fetched in this run: no lookups for them)."""
        self.resolver = resolver
        self.frontier = frontier
        self._stopping = stopping
        self._stats = stats
        self._wake = wake
        self._lookups: set[asyncio.Task[None]] = set()

    def __repr__(self) -> str:
        return f"DnsPrefetch({len(self._lookups)} lookups in flight)"

    def activated(self, host: str) -> None:
        """The frontier gave `host` a back queue: find its address meanwhile."""
        frontier = self.frontier
        if self._stopping():
            return
        if not host:  # file:///...: no name to look up (its handler reads local files)
            frontier.set_host_address(host, None)
            return
        address = self.resolver.cached(hostname_of_authority(host))
        if address is not None:
            frontier.set_host_address(host, address)
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # seeds added before the loop runs: `run` resolves the waiting hosts
        task = loop.create_task(self._resolve(frontier, host))
        self._lookups.add(task)
        task.add_done_callback(self._lookups.discard)

    async def _resolve(self, frontier: Frontier, host: str) -> None:
        address: str | None = None  # unresolvable: scheduled alone; its fetch accounts for the failure
        try:
            address = await self.resolver.resolve(hostname_of_authority(host))
        except DNSFailure:
            pass
        except Exception as exc:  # never leave a host waiting for an address forever
            self._stats.errors[f"internal:dns-prefetch:{type(exc).__name__}"] += 1
        frontier.set_host_address(host, address)
        self._wake()

    def cancel(self) -> None:
        """No DNS for hosts activated at shutdown."""
        for lookup in self._lookups:
            lookup.cancel()
