"""Content seen: exact duplicates by a 64-bit fingerprint of the body (near-duplicates: issue 6)."""

from __future__ import annotations


class ContentSeen:
    def __init__(self) -> None:
        self._first_url: dict[int, str] = {}

    def check(self, fingerprint: int, url: str) -> str | None:
        """The URL where this content was first seen, or None if it is new (then it is recorded)."""
        first = self._first_url.setdefault(fingerprint, url)
        return None if first == url else first

    def __len__(self) -> int:
        return len(self._first_url)
