"""Per-origin cache of robots.txt rules, with the status-code semantics of RFC 9309 §2.3.

Sans-IO: the engine fetches, the cache decides what the outcome means and for how long.
- 2xx: parse the body; 3xx is followed by the engine (up to 5 hops) before reaching here;
- 4xx: no restrictions ("unavailable");
- 5xx or unreachable: complete disallow ("unreachable"), kept only briefly so it is retried.
"""

from __future__ import annotations

from dataclasses import dataclass

from crawlspace.robots.rules import RobotsRules, parse

UNREACHABLE_RETRY_SECONDS = 300.0


@dataclass(slots=True)
class _Entry:
    rules: RobotsRules
    expires: float


class RobotsCache:
    def __init__(self, ttl: float = 86400.0) -> None:
        self._ttl = ttl
        self._entries: dict[str, _Entry] = {}

    def get(self, origin: str, now: float) -> RobotsRules | None:
        """The rules in force for `origin`, or None when robots.txt must be (re)fetched."""
        entry = self._entries.get(origin)
        if entry is None or entry.expires <= now:
            return None
        return entry.rules

    def store_response(self, origin: str, status: int, body: bytes, now: float) -> RobotsRules:
        if 200 <= status < 300:
            rules = parse(body)
            ttl = self._ttl
        elif 400 <= status < 500:
            rules = RobotsRules.allow_all()
            ttl = self._ttl
        else:
            rules = RobotsRules.disallow_all()
            ttl = min(self._ttl, UNREACHABLE_RETRY_SECONDS)
        self._entries[origin] = _Entry(rules, now + ttl)
        return rules

    def store_unreachable(self, origin: str, now: float) -> RobotsRules:
        return self.store_response(origin, 599, b"", now)

    def __len__(self) -> int:
        return len(self._entries)
