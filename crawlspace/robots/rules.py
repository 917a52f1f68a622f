"""RFC 9309 rules of one robots.txt, wrapping Protego (Scrapy's parser: wildcards, longest match)."""

from __future__ import annotations

from protego import Protego

MAX_ROBOTS_BYTES = 500 * 1024  # RFC 9309 §2.5: parse at least the first 500 KiB


class RobotsRules:
    """What one robots.txt allows. `allow_all()` and `disallow_all()` stand for fetch outcomes."""

    __slots__ = ("_parser", "_verdict")

    def __init__(self, parser: Protego | None, verdict: bool | None = None) -> None:
        self._parser = parser
        self._verdict = verdict

    @classmethod
    def allow_all(cls) -> RobotsRules:
        return cls(None, True)

    @classmethod
    def disallow_all(cls) -> RobotsRules:
        return cls(None, False)

    def allowed(self, url: str, user_agent: str) -> bool:
        if self._parser is None:
            return bool(self._verdict)
        if url.endswith("/robots.txt") and url.count("/") == 3:
            return True
        return bool(self._parser.can_fetch(url, user_agent))

    def crawl_delay(self, user_agent: str) -> float | None:
        if self._parser is None:
            return None
        delay = self._parser.crawl_delay(user_agent)
        return None if delay is None else float(delay)

    @property
    def sitemaps(self) -> list[str]:
        return [] if self._parser is None else list(self._parser.sitemaps)

    def __repr__(self) -> str:
        if self._parser is None:
            return f"RobotsRules({'allow' if self._verdict else 'disallow'} all)"
        return "RobotsRules(parsed)"


def parse(body: bytes) -> RobotsRules:
    """Rules of a robots.txt body; undecodable bytes are replaced, never fatal."""
    text = body[:MAX_ROBOTS_BYTES].decode("utf-8", errors="replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    return RobotsRules(Protego.parse(text))
