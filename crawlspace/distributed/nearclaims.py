"""The near-duplicate test across partitions: MinHash-LSH band keys partitioned by value.

A page's MinHash signature (seen.shingles) has `bands` band keys; one partition owns each key
(`band_owner`: its value mod N, like `assignment.content_owner`), so the owners' band tables
together are the one LSH table of a single-process crawl. The partition that fetched a page
computes its signature once and sends each owner of some of its keys ONE question
(`near_questions`): the URL, the whole signature and the keys that owner holds. The owner looks
those keys up in its band table, verifies each candidate by the Jaccard similarity its signature
estimates, answers its best candidate, and indexes the page under those keys unless that
candidate is a near-duplicate (`answer_near`, over the owner's store: `NearIndex`, which
seen.ContentSeen implements in its store). The asker takes the best answer over the owners
(`best_match`) and decides as a single process does (threshold, `store_near_duplicates`). An
owner that did not answer in time (the transport's timeout) counts as "nothing similar there":
the page may be stored although it is a near-duplicate, nothing is lost, and the crawl never
waits for it.

The race, and the order that settles it. Two near-identical pages P and Q asked at the same
moment reach their owners in different orders: owner A may see P first (and index it) and then
Q, owner B Q first and then P. If each owner answered whatever it had indexed, A would call Q a
near-duplicate of P and B P one of Q: both near-duplicates, and with `store_near_duplicates` off
neither stored. So a candidate is only ever reported if it comes before the question in one
total order every owner applies alike: (the time the question was asked, by the asker's clock;
then the URL). Of two pages, only the later can be called a near-duplicate of the earlier, never
both of each other. What is accepted instead:

- two near-duplicates asked within moments of each other may both be stored as originals (the
  later question reached some owner before the earlier one was indexed there, and the owners
  that had indexed it were not the ones holding a shared band key); across machines, clock skew
  widens "moments" to the skew. A duplicate stored twice, never a page lost.
- an owner indexes a page when IT found nothing similar, although another owner may have found
  the page's original: the page is then indexed at some owners as if it were an original, and a
  third page near both may be named a near-duplicate of it rather than of the cluster's first
  page (a single process indexes originals only). It takes three mutually near pages whose band
  keys split across owners.
- a page asked about again (fetched again after a crash rolled its partition back, or refreshed)
  keeps the place in the order it had at each owner that still indexes it, so a page named its
  near-duplicate meanwhile cannot become its original; an owner that lost its entry in the same
  crash (rolled back to an earlier checkpoint) places it anew.
- a page refetched with other text is re-indexed by the owners its new question reaches; every
  other partition drops its old signature when the page's outdated notice arrives
  (distributed.outdated), within a second or so (a single process deletes it at once).

Nothing here touches a transport or a clock: the engine passes `asked_at`, the transport carries
`NearQuestion` and `NearMatch | None` (protocols.Peers.ask_near, protocols.Inbox.answer_near).
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from crawlspace.distributed.assignment import band_owner
from crawlspace.seen.content import NearCandidate
from crawlspace.seen.shingles import SigArray, band_key_list, similarity

MAX_BANDS = 256
"""Band numbers travel as one byte (seen.ContentSeen's band table keys)."""
_key = operator.itemgetter(1)


class NearQuestionError(ValueError):
    """A question that cannot be answered: a signature that is not whole uint16 values, a band out of range."""


@dataclass(frozen=True, slots=True)
class NearQuestion:
    """What one owner is asked about one page: is anything indexed under these band keys similar?"""

    url: str
    fetched_at: float  # the page's fetch time (what a verdict names as the original's time)
    asked_at: float  # the asker's clock when asking: the order of `answer_near`
    signature: bytes  # the whole MinHash signature, uint16 little-endian, to verify candidates against
    bands: tuple[tuple[int, int], ...]  # (band number, band key) of the keys this owner holds

    def __post_init__(self) -> None:
        if not self.signature or len(self.signature) % 2:
            raise NearQuestionError(f"{self.url}: a signature of {len(self.signature)} bytes")
        bands = self.bands  # min and max of the pairs give the band numbers' range (scans in C: issue 17)
        if (
            not bands
            or min(bands)[0] < 0
            or max(bands)[0] >= MAX_BANDS
            or not 0 <= min(map(_key, bands)) <= max(map(_key, bands)) < 1 << 64
        ):
            raise NearQuestionError(f"{self.url}: band keys {self.bands[:3]!r} out of range")

    def signature_values(self) -> SigArray:
        values: SigArray = np.frombuffer(self.signature, "<u2")
        return values


@dataclass(frozen=True, slots=True)
class NearMatch:
    """An owner's best candidate for a page: the URL indexed there, its fetch time, the estimated Jaccard."""

    url: str
    fetched_at: float
    similarity: float


class NearLookup(Protocol):
    """One question's reads of an owner's band table: what the answer is decided from, and the indexing
    that may follow, made without reading again (in the same step of the owner's event loop)."""

    @property
    def asked_at(self) -> float | None:
        """When the page was asked about, as indexed here; None if it is not."""
        ...

    @property
    def candidates(self) -> list[NearCandidate]:
        """The pages indexed under any of the question's band keys, each once, the page's own entry left out."""
        ...

    def index(self, fetched_at: float, asked_at: float, signature: bytes) -> None:
        """Index the page under the question's band keys, replacing the keys and signature it had here before."""
        ...


class NearIndex(Protocol):
    """The owner's band table (seen.ContentSeen): band key -> pages, each page's signature.

    Implementers: the lookup and its indexing happen in one step of the owner's event loop, so a
    question is looked up and indexed atomically with respect to every other question; state is made
    durable like the rest of the content set (at checkpoints), and memory must not grow with the pages
    indexed."""

    def near_lookup(self, url: str, bands: Sequence[tuple[int, int]]) -> NearLookup:
        """What is indexed here under these band keys (and of `url` itself)."""
        ...


def near_questions(
    url: str, fetched_at: float, asked_at: float, signature: SigArray, rows: int, partitions: int
) -> dict[int, NearQuestion]:
    """One question per partition owning some of the signature's band keys (`rows` values per band)."""
    data = np.ascontiguousarray(signature, "<u2").tobytes()
    keys: dict[int, list[tuple[int, int]]] = {}
    for band, key in enumerate(band_key_list(data, rows)):
        keys.setdefault(band_owner(key, partitions), []).append((band, key))
    return {owner: NearQuestion(url, fetched_at, asked_at, data, tuple(bands)) for owner, bands in keys.items()}


def answer_near(index: NearIndex, question: NearQuestion, threshold: float) -> NearMatch | None:
    """The owner's side: its best candidate for the page among those asked before it (see the race in
    the module docstring), None if there is none; the page is indexed here unless that candidate is
    at or above `threshold` (only originals are indexed, as far as this owner can tell)."""
    lookup = index.near_lookup(question.url, question.bands)
    asked_at = question.asked_at
    before = lookup.asked_at
    if before is not None and before < asked_at:  # asked again (fetched again after a crash, refreshed):
        asked_at = before  # it keeps its place, or a page named its near-duplicate meanwhile would become its original
    place = (asked_at, question.url)
    best: NearMatch | None = None
    values = question.signature_values()
    for candidate in lookup.candidates:
        if len(candidate.signature) != len(question.signature) or (candidate.asked_at, candidate.url) >= place:
            continue
        match = NearMatch(
            candidate.url, candidate.fetched_at, similarity(values, np.frombuffer(candidate.signature, "<u2"))
        )
        if best is None or _preference(match) < _preference(best):
            best = match
    if best is None or best.similarity < threshold:
        lookup.index(question.fetched_at, asked_at, question.signature)
    return best


def best_match(answers: Mapping[int, NearMatch | None]) -> NearMatch | None:
    """The asker's side: the most similar candidate over the owners' answers (the earliest fetched,
    then the smallest URL, of equally similar ones: the same choice whatever order answers came in)."""
    found = [match for match in answers.values() if match is not None]
    if not found:
        return None
    return min(found, key=_preference)


def _preference(match: NearMatch) -> tuple[float, float, str]:
    """Smaller is better: the most similar, then the earliest fetched, then the smallest URL."""
    return (-match.similarity, match.fetched_at, match.url)
