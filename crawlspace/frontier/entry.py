"""What the frontier stores per URL: small, slotted, cheap to serialize."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True, frozen=True)
class FrontierEntry:
    url: str  # normalized
    depth: int = 0  # link hops from a seed
    hops: int = 0  # redirect hops from the URL that was first discovered
