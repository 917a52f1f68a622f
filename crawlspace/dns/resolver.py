"""Asynchronous host resolution with a TTL cache: fixed mappings, hosts files, then DNS (c-ares).

Order: `--resolve` mappings, `--hosts-file`, the system hosts file, then DNS through aiodns so a
slow lookup never blocks other fetches. Successes are cached for their TTL (clamped), failures
negatively cached so a dead host is not looked up in a tight loop.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import aiodns

SYSTEM_HOSTS_FILE = "/etc/hosts"


class DNSFailure(Exception):
    def __init__(self, host: str, reason: str) -> None:
        super().__init__(f"cannot resolve {host}: {reason}")
        self.host = host
        self.reason = reason


def read_hosts_file(path: str | Path) -> dict[str, str]:
    """name -> first address, from a file in /etc/hosts format; unreadable files give {}."""
    mapping: dict[str, str] = {}
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return mapping
    for line in text.splitlines():
        fields = line.split("#", 1)[0].split()
        if len(fields) < 2:
            continue
        for name in fields[1:]:
            mapping.setdefault(name.lower(), fields[0])
    return mapping


@dataclass(slots=True)
class _Cached:
    address: str | None
    error: str | None
    expires: float


class Resolver:
    def __init__(
        self,
        overrides: Mapping[str, str] | None = None,
        hosts_file: str | None = None,
        *,
        use_system_hosts: bool = True,
        min_ttl: float = 60.0,
        max_ttl: float = 86400.0,
        negative_ttl: float = 300.0,
        timeout: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._static: dict[str, str] = {}
        if use_system_hosts:
            self._static.update(read_hosts_file(SYSTEM_HOSTS_FILE))
        if hosts_file:
            self._static.update(read_hosts_file(hosts_file))
        self._static.update({name.lower(): address for name, address in (overrides or {}).items()})
        self._cache: dict[str, _Cached] = {}
        self._pending: dict[str, asyncio.Future[str]] = {}
        self._min_ttl, self._max_ttl, self._negative_ttl = min_ttl, max_ttl, negative_ttl
        self._timeout = timeout
        self._clock = clock
        self._dns: aiodns.DNSResolver | None = None
        self.lookups = 0
        self.hits = 0
        self.failures = 0

    def cached(self, host: str) -> str | None:
        """The address of `host` if known without a lookup (static or fresh in the cache)."""
        name = host.lower()
        static = self._static.get(name)
        if static is not None:
            return static
        entry = self._cache.get(name)
        if entry is not None and entry.expires > self._clock():
            return entry.address
        return None

    async def resolve(self, host: str) -> str:
        """One address of `host` (IPv4 preferred); raises DNSFailure."""
        name = host.lower().rstrip(".")
        static = self._static.get(name)
        if static is not None:
            self.hits += 1
            return static
        if _is_ip_literal(name):
            return name.strip("[]")
        entry = self._cache.get(name)
        if entry is not None and entry.expires > self._clock():
            self.hits += 1
            if entry.address is None:
                raise DNSFailure(name, entry.error or "failed")
            return entry.address
        pending = self._pending.get(name)
        if pending is not None:
            self.hits += 1
            return await asyncio.shield(pending)
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._pending[name] = future
        try:
            address = await self._lookup(name)
            future.set_result(address)
            return address
        except DNSFailure as exc:
            future.set_exception(exc)
            future.exception()  # mark retrieved: waiters get it through shield
            raise
        finally:
            del self._pending[name]

    async def _lookup(self, name: str) -> str:
        self.lookups += 1
        if self._dns is None:
            self._dns = aiodns.DNSResolver(timeout=self._timeout, tries=2)
        try:
            result = await self._dns.getaddrinfo(name, family=socket.AF_UNSPEC, port=80, type=socket.SOCK_STREAM)
        except aiodns.error.DNSError as exc:
            self.failures += 1
            reason = str(exc.args[1]) if len(exc.args) > 1 else str(exc)
            self._cache[name] = _Cached(None, reason, self._clock() + self._negative_ttl)
            raise DNSFailure(name, reason) from None
        nodes = sorted(result.nodes, key=lambda node: node.family != socket.AF_INET)
        if not nodes:
            self.failures += 1
            self._cache[name] = _Cached(None, "no addresses", self._clock() + self._negative_ttl)
            raise DNSFailure(name, "no addresses")
        address = str(nodes[0].addr[0].decode("ascii"))
        ttl = min(max(float(nodes[0].ttl), self._min_ttl), self._max_ttl)
        self._cache[name] = _Cached(address, None, self._clock() + ttl)
        return address

    def __len__(self) -> int:
        return len(self._cache)


def _is_ip_literal(name: str) -> bool:
    candidate = name.strip("[]")
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, candidate)
            return True
        except OSError:
            continue
    return False
