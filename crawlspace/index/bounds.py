"""Each postings block's largest tfn under one collection's statistics, kept in a file beside its segment.

`scoring.block_max_tfn` needs a pass over every posting of a segment (seconds for a segment of
tens of millions of postings), and its result depends only on the segment and on what BM25F's
length normalization uses (parameters, document count, field length totals), not on the query.
So the first search of a segment under some statistics stores the result as
`<segment>.bounds-<digest of those>`, a container holding the segment's fingerprint, and later
opens read it back. A cache file that is damaged, of another segment or unwritable (a read-only
index) is not an error: the bounds are computed again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import numpy as np
import xxhash

from crawlspace.index.container import IndexFormatError, SectionSpec, open_container, write_container
from crawlspace.index.scoring import BM25F, F64Array, block_max_tfn
from crawlspace.index.segment import Segment

__all__ = ["block_bounds", "bounds_path"]

MAGIC: Final = b"CSPBND\x00"
VERSION: Final = 1
_SECTIONS: Final[SectionSpec] = {"block_max_tfn": ("<f8", lambda h: h["blocks"])}


def bounds_path(segment: Segment, scorer: BM25F) -> Path:
    digest = xxhash.xxh3_64_hexdigest(repr(scorer.key).encode())
    return segment.path.with_name(f"{segment.path.name}.bounds-{digest}")


def block_bounds(segment: Segment, scorer: BM25F, *, cache: bool = True) -> F64Array:
    """The largest tfn of each block of `segment` (read from its cache file when valid)."""
    path = bounds_path(segment, scorer)
    if cache and path.exists():
        try:
            container = open_container(path, magic=MAGIC, version=VERSION, kind="index block bounds", spec=_SECTIONS)
        except IndexFormatError:
            pass
        else:
            try:
                if container.header.get("segment") == segment.fingerprint:
                    return np.array(container.sections["block_max_tfn"])
            finally:
                container.close()
    values = block_max_tfn(segment, scorer)
    if cache:
        header = {"segment": segment.fingerprint, "blocks": segment.block_count, "key": repr(scorer.key)}
        try:
            write_container(path, MAGIC, VERSION, header, {"block_max_tfn": values})
        except OSError:
            pass  # a read-only index: computed again next time
    return values
