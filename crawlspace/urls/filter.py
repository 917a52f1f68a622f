"""URL filter of the crawl loop: which discovered URLs may enter the frontier, and why not.

Every rejection has a reason, counted in stats.json under `filtered`.
"""

from __future__ import annotations

from dataclasses import dataclass

from crawlspace.frontier.entry import FrontierEntry

MAX_URL_LENGTH = 2048


@dataclass(frozen=True, slots=True)
class UrlFilter:
    max_depth: int | None = None
    max_redirects: int = 10
    max_url_length: int = MAX_URL_LENGTH

    def rejection(self, entry: FrontierEntry) -> str | None:
        """Why `entry` may not be crawled, or None when it may."""
        if len(entry.url) > self.max_url_length:
            return "url-too-long"
        if self.max_depth is not None and entry.depth > self.max_depth:
            return "max-depth"
        if entry.hops > self.max_redirects:
            return "too-many-redirects"
        return None
