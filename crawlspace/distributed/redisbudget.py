"""The page budget of a cluster crawl (`max_pages`), one counter in Redis for every node (distributed.budget).

The counter is a hash of what each node claimed (`Keys.budget`: node -> pages), and a claim is one
Lua script (atomic in Redis): the total of the hash, and a grant of at most what is left. A node
claims pages in small blocks and hands them to its fetches from memory, so a fetch costs a Redis round
trip only once a block (one page at a time for the last 4 x nodes x BLOCK pages, so that no node sits
on pages another could fetch when the budget runs out: the crawl fetches exactly `max_pages`). A block
unused for `IDLE_RETURN` seconds, or at the end, is given back. `Budget.claim` is synchronous (the
engine asks it right before a fetch), so the budget keeps a synchronous client of its own: one round trip a block.

Resume: the hash already holds what the node claimed before it died, so `set_used` only raises the
node's entry to what its checkpoint counted (a Redis that lost its data, or its last second, must not
hand those pages out again) and never adds them twice.

Redis lost: the node may still fetch its fair share of what was left when it last heard the counter
(what was left / nodes), counted as owed and added to the hash once the server is back. The global
limit can then be passed only by what other nodes claimed in the same moments: a bound, not zero.
"""

from __future__ import annotations

import logging
import time

import redis

from crawlspace.distributed.redislink import REDIS_FAILURES, Keys

log = logging.getLogger(__name__)

BLOCK = 16  # most pages claimed at once
IDLE_RETURN = 2.0  # a block unused this long goes back to the crawl
RETRY_AFTER = 1.0  # after a failed round trip, the next waits this long (owed pages meanwhile)

_CLAIM = """
local total = 0
local values = redis.call('HVALS', KEYS[1])
for _, value in ipairs(values) do total = total + tonumber(value) end
local limit = tonumber(ARGV[3])
local grant = math.min(tonumber(ARGV[2]), limit - total)
if grant < 0 then grant = 0 end
if grant > 0 then redis.call('HINCRBY', KEYS[1], ARGV[1], grant) end
return {grant, total + grant}
"""

_AT_LEAST = """
local current = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
local wanted = tonumber(ARGV[2])
if wanted > current then redis.call('HSET', KEYS[1], ARGV[1], wanted) return wanted end
return current
"""


class RedisBudget:
    """`limit` pages for the whole cluster; this node's claims in `Keys.budget` under its index."""

    def __init__(self, url: str, keys: Keys, node: int, nodes: int, limit: int) -> None:
        self.limit = limit
        self._key = keys.budget
        self._field = str(node)
        self._nodes = nodes
        self._redis = redis.Redis.from_url(url, socket_connect_timeout=1.0, socket_timeout=2.0)
        self._claim = self._redis.register_script(_CLAIM)
        self._at_least = self._redis.register_script(_AT_LEAST)
        self._reserve = 0  # pages claimed in Redis, not yet handed to a fetch
        self._used = 0  # pages handed to fetches by this node
        self._total = 0  # the crawl's claims as last heard
        self._owed = 0  # pages fetched while Redis was lost, to be added to the hash
        self._outage_share = 0
        self._retry_at = 0.0
        self._last_claim = time.monotonic()

    def __repr__(self) -> str:
        return f"RedisBudget({self._total} of {self.limit} claimed in the crawl, {self._reserve} reserved here)"

    @property
    def used(self) -> int:
        """The crawl's claims as last heard, with this node's owed ones."""
        return self._total + self._owed

    def exhausted(self) -> bool:
        if self._reserve > 0 and time.monotonic() - self._last_claim >= IDLE_RETURN:
            self._give_back()  # an idle node keeps no pages another could fetch
        return self._reserve == 0 and self._owed == 0 and self._total >= self.limit

    def claim(self) -> bool:
        self._last_claim = time.monotonic()
        if self._reserve == 0 and not self._refill():
            if self._total >= self.limit and self._owed == 0:
                return False
            if self._owed >= self._outage_share:  # Redis lost and this node's share of the rest taken
                return False
            self._owed += 1
            self._used += 1
            return True
        if self._reserve == 0:
            return False
        self._reserve -= 1
        self._used += 1
        return True

    def _refill(self) -> bool:
        """A block from Redis; False when the server could not be asked (the reserve stays empty)."""
        if time.monotonic() < self._retry_at:
            return False
        # near the end one page at a time: a block held by one node when another finds the budget spent
        # would end the crawl short of its limit
        block = BLOCK if self.limit - self._total > 4 * self._nodes * BLOCK else 1
        try:
            if self._owed:
                self._redis.hincrby(self._key, self._field, self._owed)
                self._owed = 0
            grant, total = self._claim(keys=[self._key], args=[self._field, block, self.limit])
        except REDIS_FAILURES as exc:
            if not self._outage_share:
                log.warning("page budget: Redis unreachable (%s); this node fetches its share of the rest", exc)
                self._outage_share = max(0, self.limit - self._total) // self._nodes
            self._retry_at = time.monotonic() + RETRY_AFTER
            return False
        self._outage_share = 0
        self._reserve += int(grant)
        self._total = int(total)
        return True

    def _give_back(self) -> None:
        try:
            self._redis.hincrby(self._key, self._field, -self._reserve)
        except REDIS_FAILURES:
            self._retry_at = time.monotonic() + RETRY_AFTER
            return
        self._total -= self._reserve
        self._reserve = 0

    def set_used(self, used: int) -> None:
        """A resumed node: the hash has its claims already; raise them to its checkpoint's count at least."""
        try:
            self._at_least(keys=[self._key], args=[self._field, used])
            self._total = sum(int(value) for value in self._redis.hvals(self._key))
        except REDIS_FAILURES as exc:
            log.warning("page budget: Redis unreachable at resume (%s)", exc)

    def close(self) -> None:
        """Give back the pages claimed and not fetched."""
        if self._reserve:
            self._give_back()
        if self._owed:
            try:
                self._redis.hincrby(self._key, self._field, self._owed)
                self._total += self._owed
                self._owed = 0
            except REDIS_FAILURES:
                log.warning("page budget: %d pages fetched while Redis was lost are not counted there", self._owed)
        self._redis.close()
