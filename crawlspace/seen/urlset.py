"""Duplicate URL elimination over 64-bit fingerprints of normalized URLs.

This first form keeps the fingerprints in an in-memory set; the disk-resident, batched form
of Mercator and IRLbot replaces it behind the same batch interface (issue 6).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")


class UrlSet:
    def __init__(self) -> None:
        self._fingerprints: set[int] = set()

    def filter_new(self, items: Iterable[tuple[int, T]]) -> Iterator[T]:
        """Items whose fingerprint was never seen, in the order given; marks them seen."""
        seen = self._fingerprints
        for fingerprint, item in items:
            if fingerprint not in seen:
                seen.add(fingerprint)
                yield item

    def __contains__(self, fingerprint: int) -> bool:
        return fingerprint in self._fingerprints

    def __len__(self) -> int:
        return len(self._fingerprints)
