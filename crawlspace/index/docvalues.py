"""What an index generation says about a segment's documents after the segment was written.

A segment is never rewritten (IIR 4.5: a new crawl of changed pages goes into a new segment, and
the old postings stay until a merge). So each generation of an index writes, beside every segment
it keeps, a small file `<segment>.live-<generation>` with one value per document:

    deleted   1 when the document is masked: its page was refetched with another body, gained or
              lost anchor text, moved to the other tier, failed or disappeared from the crawl
              (its new version, if any, is in a newer segment)
    prior     the page's PageRank now (PageRank is computed again over the whole graph each run)
    group     its near-duplicate group key now (clusters change as pages are added)
    key       what the page's version is: a hash of its body's fingerprint and its anchor text,
              compared by the next incremental build to decide what to write again

A search skips deleted documents, scores the prior and collapses the group read here, and the
global statistics count live documents only, so an incremental index ranks exactly as a rebuild.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from crawlspace.index.container import IndexFormatError, SectionSpec, open_container, write_container
from crawlspace.index.segment import Segment

__all__ = ["DocValues", "DocValuesFormatError", "live_name"]

MAGIC: Final = b"CSPLIV\x00"
VERSION: Final = 1
_SECTIONS: Final[SectionSpec] = {
    "deleted": ("|u1", lambda h: h["docs"]),
    "prior": ("<f4", lambda h: h["docs"]),
    "group": ("<u8", lambda h: h["docs"]),
    "key": ("<u8", lambda h: h["docs"]),
}


class DocValuesFormatError(IndexFormatError):
    """A document values file that cannot be read, or that belongs to another segment."""


def live_name(segment_name: str, generation: int) -> str:
    """The document values file of `segment_name` (relative to the index) in `generation`."""
    return f"{segment_name}.live-{generation:04d}"


@dataclass(frozen=True, slots=True)
class DocValues:
    """Per document of one segment: masked or not, prior, group key, version key."""

    deleted: npt.NDArray[np.bool_]
    prior: npt.NDArray[np.float32]
    group: npt.NDArray[np.uint64]
    key: npt.NDArray[np.uint64]

    @classmethod
    def of(cls, segment: Segment) -> DocValues:
        """The values a segment was written with: nothing deleted, its own priors and groups, no keys."""
        return cls(
            np.zeros(segment.docs, dtype=bool),
            np.asarray(segment.prior, dtype=np.float32),
            np.asarray(segment.doc_group, dtype=np.uint64),
            np.zeros(segment.docs, dtype=np.uint64),
        )

    @property
    def live(self) -> int:
        return int(self.deleted.size - np.count_nonzero(self.deleted))

    def write(self, path: Path, segment: Segment) -> Path:
        header = {"segment": segment.fingerprint, "docs": int(self.deleted.size)}
        sections: dict[str, npt.NDArray[Any]] = {
            "deleted": self.deleted.astype(np.uint8),
            "prior": self.prior.astype(np.float32),
            "group": self.group.astype(np.uint64),
            "key": self.key.astype(np.uint64),
        }
        return write_container(path, MAGIC, VERSION, header, sections)

    @classmethod
    def read(cls, path: Path, segment: Segment) -> DocValues:
        """The values stored for `segment` (refused when the file was written for another one)."""
        container = open_container(
            path, magic=MAGIC, version=VERSION, kind="index document values", spec=_SECTIONS,
            error=DocValuesFormatError,
        )  # fmt: skip
        try:
            if container.header.get("segment") != segment.fingerprint or container.header.get("docs") != segment.docs:
                raise DocValuesFormatError(f"{path}: written for another segment than {segment.path}")
            s = container.sections
            return cls(s["deleted"].astype(bool), np.array(s["prior"]), np.array(s["group"]), np.array(s["key"]))
        finally:
            container.close()
