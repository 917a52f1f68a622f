"""Asynchronous host resolution with a TTL cache, negative caching, backoff and prefetch.

Order of authority: fixed `resolve` mappings, the `hosts_file`, the system hosts file, then DNS
through c-ares (aiodns), so that a slow lookup never blocks other fetches (IIR §20.2.2: DNS is
a well-known bottleneck of crawling).

Answers are cached for their TTL clamped to [min_ttl, max_ttl]: a TTL of 0 would mean a lookup
per fetch, a TTL of a week would keep a moved site wrong for too long.

Failures come in two kinds. A definitive one (NXDOMAIN, no address records, a malformed name)
is cached for `negative_ttl` and reported once. A temporary one (timeout, SERVFAIL, refused) puts
the host into backoff (Mercator): the next lookup may happen only after a wait growing
geometrically from `retry_initial` to `retry_max` seconds; within the wait every caller gets the
failure at once, with the time of the next attempt, so the engine can put the URL back into the
frontier instead of sleeping. After `retry_attempts` attempts the failure becomes definitive.
A host is therefore never looked up in a tight loop, however many of its URLs are queued.

`prefetch` starts a lookup in the background when a host's URLs are about to be fetched, so
that the fetch finds the answer in the cache. Lookups of one name in flight at once are merged.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiodns
import pycares

SYSTEM_HOSTS_FILE = "/etc/hosts"
CHANNEL_RESET_INTERVAL = 30.0
log = logging.getLogger(__name__)

# c-ares error codes after which asking again will not help (until the negative TTL expires).
_DEFINITIVE_ERRORS = frozenset(
    {
        aiodns.error.ARES_ENOTFOUND,
        aiodns.error.ARES_ENONAME,
        aiodns.error.ARES_ENODATA,
        aiodns.error.ARES_EBADNAME,
        aiodns.error.ARES_EBADFAMILY,
        aiodns.error.ARES_EBADSTR,
    }
)


class DNSFailure(Exception):
    """`host` has no usable address. `retry_at` (monotonic clock) is when a new lookup will be
    attempted; None means the failure is definitive for now and the host's URLs fail at once."""

    def __init__(self, host: str, reason: str, retry_at: float | None = None) -> None:
        super().__init__(f"cannot resolve {host}: {reason}" + ("" if retry_at is None else " (will retry)"))
        self.host = host
        self.reason = reason
        self.retry_at = retry_at

    @property
    def temporary(self) -> bool:
        return self.retry_at is not None


def read_hosts_file(path: str | Path) -> dict[str, str]:
    """name -> first address, from a file in /etc/hosts format; unreadable files give {}."""
    mapping: dict[str, str] = {}
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return mapping
    for line in text.splitlines():
        fields = line.split("#", 1)[0].split()
        if len(fields) < 2 or not is_ip_literal(fields[0]):
            continue
        for name in fields[1:]:
            mapping.setdefault(name.lower().rstrip("."), fields[0])
    return mapping


def hostname_of_authority(authority: str) -> str:
    """The host name of `host[:port]` or `[v6]:port`, lower-cased, without brackets or port."""
    if authority.startswith("["):
        end = authority.find("]")
        return authority[1:end].lower() if end > 0 else authority.lower()
    host, _, _ = authority.partition(":")
    return host.lower().rstrip(".")


def is_ip_literal(name: str) -> bool:
    candidate = name.strip("[]")
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, candidate)
            return True
        except OSError:
            continue
    return False


@dataclass(slots=True)
class _Answer:
    """A cache entry: addresses (IPv4 first) until `expires`, or a failure.

    A failure with `retry_at` set is temporary: `attempts` lookups have failed so far."""

    addresses: tuple[str, ...]
    expires: float
    reason: str = ""
    attempts: int = 0
    retry_at: float | None = None

    @property
    def failed(self) -> bool:
        return not self.addresses


@dataclass(frozen=True, slots=True)
class Backoff:
    """Waits between lookups of a host whose lookups time out: `initial` growing geometrically to
    `maximum` over `attempts - 1` waits (Mercator: about five attempts, 1 s to about 90 s)."""

    attempts: int = 5
    initial: float = 1.0
    maximum: float = 90.0

    def wait(self, failed_attempts: int) -> float | None:
        """Seconds before the next attempt after `failed_attempts` failures; None once exhausted."""
        if failed_attempts >= self.attempts:
            return None
        if self.attempts <= 2:
            return self.initial
        factor = (self.maximum / self.initial) ** (1.0 / (self.attempts - 2))
        return float(min(self.initial * factor ** (failed_attempts - 1), self.maximum))


class Resolver:
    def __init__(
        self,
        overrides: Mapping[str, str] | None = None,
        hosts_file: str | None = None,
        *,
        use_system_hosts: bool = True,
        nameservers: Sequence[str] = (),
        min_ttl: float = 60.0,
        max_ttl: float = 86400.0,
        negative_ttl: float = 3600.0,
        timeout: float = 5.0,
        tries: int = 2,
        backoff: Backoff | None = None,
        max_entries: int = 1_000_000,
        max_prefetch: int = 256,
        clock: Callable[[], float] = time.monotonic,
        on_unresolvable: Callable[[str, str], None] | None = None,
    ) -> None:
        self._static: dict[str, str] = {}
        if use_system_hosts:
            self._static.update(read_hosts_file(SYSTEM_HOSTS_FILE))
        if hosts_file:
            self._static.update(read_hosts_file(hosts_file))
        self._static.update({name.lower().rstrip("."): address for name, address in (overrides or {}).items()})
        self._nameservers = list(nameservers)
        self._cache: dict[str, _Answer] = {}
        self._pending: dict[str, asyncio.Future[tuple[str, ...]]] = {}
        self._lookup_tasks: set[asyncio.Task[None]] = set()
        self._min_ttl, self._max_ttl, self._negative_ttl = min_ttl, max_ttl, negative_ttl
        self._timeout, self._tries = timeout, tries
        self._backoff = backoff or Backoff()
        self._max_entries = max_entries
        self._max_prefetch = max_prefetch
        self._clock = clock
        self._on_unresolvable = on_unresolvable
        self._dns: aiodns.DNSResolver | None = None
        self._last_reset = float("-inf")
        # statistics (stats.json "dns")
        self.lookups = 0  # queries sent to DNS (each may be several packets: A and AAAA)
        self.hits = 0  # answered from the cache, or by joining a lookup already in flight
        self.negative_hits = 0  # failures answered from the cache (negative or in backoff)
        self.static_answers = 0  # answered by --resolve or a hosts file
        self.failures = 0  # lookups that failed, temporarily or definitively
        self.failure_reasons: Counter[str] = Counter()
        self.retries = 0  # lookups after a temporary failure
        self.prefetches = 0  # lookups started by prefetch
        self.channel_resets = 0  # c-ares channels replaced because no server could be reached
        self.unresolvable: dict[str, str] = {}  # host -> reason, each reported once

    def cached(self, host: str) -> str | None:
        """The address of `host` if known without a lookup (literal, static or fresh in the cache).

        This is what per-IP politeness keys on."""
        name = host.lower().rstrip(".")
        static = self._static.get(name)
        if static is not None:
            return static
        if is_ip_literal(name):
            return name.strip("[]")
        entry = self._cache.get(name)
        if entry is not None and entry.addresses and entry.expires > self._clock():
            return entry.addresses[0]
        return None

    def _answer_now(self, name: str) -> str | None:
        """The answer if no lookup is needed; raises DNSFailure for cached failures."""
        static = self._static.get(name)
        if static is not None:
            self.static_answers += 1
            return static
        if is_ip_literal(name):
            return name.strip("[]")
        entry = self._cache.get(name)
        if entry is None:
            return None
        now = self._clock()
        if entry.addresses:
            if entry.expires > now:
                self.hits += 1
                return entry.addresses[0]
            return None
        if entry.retry_at is not None:  # temporary failure: wait for the backoff to pass
            if entry.retry_at > now:
                self.negative_hits += 1
                raise DNSFailure(name, entry.reason, entry.retry_at)
            return None
        if entry.expires > now:
            self.negative_hits += 1
            raise DNSFailure(name, entry.reason)
        return None

    # -- lookups -------------------------------------------------------------------------------

    async def resolve(self, host: str) -> str:
        """One address of `host` (IPv4 preferred); raises DNSFailure."""
        name = host.lower().rstrip(".")
        answer = self._answer_now(name)
        if answer is not None:
            return answer
        pending = self._pending.get(name)
        if pending is not None:
            self.hits += 1  # joined a lookup already on its way (often a prefetch)
        else:
            pending = self._begin(name)
        # shielded: a cancelled fetch must not cancel a lookup others wait on
        return (await asyncio.shield(pending))[0]

    def prefetch(self, host: str) -> None:
        """Resolve `host` (a name or an authority) in the background unless its answer is cached
        or on its way. Cheap when there is nothing to do; never raises. Needs a running loop."""
        name = hostname_of_authority(host)
        if not name or name in self._static or name in self._pending or is_ip_literal(name):
            return  # (no name: a URL without a host, such as file:///, has nothing to resolve)
        entry = self._cache.get(name)
        now = self._clock()
        if entry is not None and (
            (entry.addresses and entry.expires > now)
            or (entry.retry_at is not None and entry.retry_at > now)
            or (entry.failed and entry.retry_at is None and entry.expires > now)
        ):
            return
        if len(self._pending) >= self._max_prefetch:
            return  # DNS is the bottleneck already: the fetch will resolve for itself
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return  # not crawling yet (seeds added before the loop runs)
        self.prefetches += 1
        self._begin(name)

    def _begin(self, name: str) -> asyncio.Future[tuple[str, ...]]:
        """Start the one lookup of `name`; its future is registered before this returns."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[tuple[str, ...]] = loop.create_future()
        self._pending[name] = future
        task = loop.create_task(self._complete(name, future))
        self._lookup_tasks.add(task)
        task.add_done_callback(self._lookup_tasks.discard)
        return future

    async def _complete(self, name: str, future: asyncio.Future[tuple[str, ...]]) -> None:
        try:
            addresses = await self._lookup(name)
        except DNSFailure as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: nobody may be waiting (a prefetch)
        except BaseException:
            future.set_exception(DNSFailure(name, "lookup abandoned", self._clock()))
            future.exception()
            raise
        else:
            future.set_result(addresses)
        finally:
            if self._pending.get(name) is future:
                del self._pending[name]

    def _channel(self) -> aiodns.DNSResolver:
        if self._dns is None:
            options: dict[str, Any] = {
                "timeout": self._timeout,
                "tries": self._tries,
                "flags": pycares.ARES_FLAG_NOSEARCH,  # crawled names are fully qualified
                "lookups": "b",  # hosts files were read above, in our order of authority
            }
            if self._nameservers:
                options["servers"] = self._nameservers
            self._dns = aiodns.DNSResolver(**options)
        return self._dns

    async def _lookup(self, name: str) -> tuple[str, ...]:
        previous = self._cache.get(name)
        attempts = previous.attempts if previous is not None and previous.retry_at is not None else 0
        if attempts:
            self.retries += 1
        self.lookups += 1
        try:
            channel = self._channel()
            try:
                result = await channel.getaddrinfo(name, family=socket.AF_UNSPEC, type=socket.SOCK_STREAM)
            except aiodns.error.DNSError as exc:
                if not exc.args or exc.args[0] != aiodns.error.ARES_ECONNREFUSED:
                    raise
                # c-ares found no server it could reach. Seen after a name server restart, and with a
                # channel that came up broken (it then stays so; in about half the runs under gVisor):
                # a fresh channel recovers. Lookups that failed on a channel already replaced just try
                # again on the new one.
                if channel is self._dns:
                    if not self._may_reset():
                        raise
                    await self._reset_channel()
                result = await self._channel().getaddrinfo(name, family=socket.AF_UNSPEC, type=socket.SOCK_STREAM)
        except aiodns.error.DNSError as exc:
            code = exc.args[0] if exc.args else None
            reason = str(exc.args[1]) if len(exc.args) > 1 else str(exc)
            raise self._failed(name, reason, definitive=code in _DEFINITIVE_ERRORS, attempts=attempts + 1) from None
        nodes = sorted(result.nodes, key=lambda node: node.family != socket.AF_INET)
        if not nodes:
            raise self._failed(name, "no addresses", definitive=True, attempts=attempts + 1)
        addresses = tuple(dict.fromkeys(_address(node.addr) for node in nodes))
        ttl = min(max(float(min(node.ttl for node in nodes)), self._min_ttl), self._max_ttl)
        self._store(name, _Answer(addresses, self._clock() + ttl))
        self.unresolvable.pop(name, None)
        return addresses

    def _may_reset(self) -> bool:
        """Replace a failing channel at most every CHANNEL_RESET_INTERVAL seconds (a name server that
        is really down must not cost a new channel, and its thread, per lookup)."""
        return self._clock() - self._last_reset >= CHANNEL_RESET_INTERVAL

    async def _reset_channel(self) -> None:
        self.channel_resets += 1
        self._last_reset = self._clock()
        if self._dns is not None:
            channel, self._dns = self._dns, None
            await channel.close()  # its other queries fail now, as temporary failures

    def _failed(self, name: str, reason: str, *, definitive: bool, attempts: int) -> DNSFailure:
        self.failures += 1
        self.failure_reasons[reason] += 1
        now = self._clock()
        wait = None if definitive else self._backoff.wait(attempts)
        if wait is not None:
            self._store(name, _Answer((), now + wait, reason, attempts, now + wait))
            return DNSFailure(name, reason, now + wait)
        if not definitive:
            reason = f"{reason} ({attempts} attempts)"
        self._store(name, _Answer((), now + self._negative_ttl, reason, attempts))
        if name not in self.unresolvable:
            self.unresolvable[name] = reason
            log.warning(
                "host %s cannot be resolved: %s; its URLs fail until %.0f s from now", name, reason, self._negative_ttl
            )
            if self._on_unresolvable is not None:
                self._on_unresolvable(name, reason)
        return DNSFailure(name, reason)

    def _store(self, name: str, answer: _Answer) -> None:
        cache = self._cache
        cache.pop(name, None)
        if len(cache) >= self._max_entries:
            self._evict()
        cache[name] = answer

    def _evict(self) -> None:
        """Drop expired entries, or failing that the oldest tenth (insertion order)."""
        now = self._clock()
        expired = [name for name, entry in self._cache.items() if entry.expires <= now]
        victims = expired or list(self._cache)[: max(1, len(self._cache) // 10)]
        for name in victims:
            del self._cache[name]

    # -- lifecycle and reporting ---------------------------------------------------------------

    async def close(self) -> None:
        tasks = list(self._lookup_tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if self._dns is not None:
            await self._dns.close()
            self._dns = None

    def stats(self) -> dict[str, Any]:
        """The "dns" section of stats.json. hit_rate counts only names that needed DNS."""
        answered = self.hits + self.negative_hits
        return {
            "lookups": self.lookups,
            "hits": self.hits,
            "negative_hits": self.negative_hits,
            "static_answers": self.static_answers,
            "failures": self.failures,
            "failure_reasons": dict(self.failure_reasons.most_common(10)),
            "retries": self.retries,
            "prefetches": self.prefetches,
            "channel_resets": self.channel_resets,
            "hit_rate": round(answered / (answered + self.lookups), 4) if answered + self.lookups else 0.0,
            "cached_names": len(self._cache),
            "unresolvable_hosts": len(self.unresolvable),
            "unresolvable": dict(list(self.unresolvable.items())[:100]),
        }

    def __len__(self) -> int:
        return len(self._cache)

    def __bool__(self) -> bool:  # an empty cache is still a resolver
        return True

    def __repr__(self) -> str:
        return (
            f"<Resolver static={len(self._static)} cached={len(self._cache)} pending={len(self._pending)} "
            f"lookups={self.lookups} hits={self.hits} failures={self.failures}>"
        )


def _address(addr: tuple[Any, ...]) -> str:
    host = addr[0]
    return host.decode("ascii") if isinstance(host, bytes) else str(host)
