"""What the frontier stores per URL.

`FrontierEntry` is a msgspec Struct rather than a dataclass because the frontier serializes
millions of them into disk segments: as an array-like Struct it encodes to msgpack at ~20 ns and
takes 40 bytes plus the URL in memory, and `gc=False` keeps the windows out of the cyclic GC.
"""

from __future__ import annotations

import msgspec


class FrontierEntry(msgspec.Struct, frozen=True, array_like=True, gc=False):
    url: str  # normalized
    depth: int = 0  # link hops from a seed
    hops: int = 0  # redirect hops from the URL that was first discovered
