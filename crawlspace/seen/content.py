"""Content seen: exact duplicates by a 64-bit body fingerprint, near-duplicates by MinHash-LSH.

Who fills it: the engine, once per fetched page. `check` first (before parsing) with the
body's xxh3 fingerprint: a body already seen at another URL is an EXACT duplicate (the engine
writes a WARC revisit record and does not extract its links); the same URL fetched again with
the same body is UNCHANGED (a revisit too, but its links are followed: see crash safety). For
new content the engine parses the page and calls `check_near` with its text: word shingles
(IIR ch. 19.6, `shingles.py`) give a MinHash signature; LSH bands find candidates and the
whole signature estimates their Jaccard similarity; at or above the threshold (0.9 by
default) the page is a NEAR duplicate of the best candidate. Only original pages are indexed,
so a cluster's id is its first page. Whether near-duplicates are still stored is the engine's
choice (config `store_near_duplicates`); the relation is recorded here either way
(`verdict_of(url)`). The first URL of a body is the original its exact copies' revisit records
refer to, so it must be a stored one: a near-duplicate the engine does not store gives that
place up (`release_first`), and its copies are then judged as it was, near-duplicates.

The fingerprint the engine passes is that of the body as received (Content-Encoding not
undone): the payload the WARC record stores and digests. An exact duplicate is then one whose
revisit record may say "identical payload"; the same content under another encoding is a
near-duplicate of similarity 1.

In a crawl of several partitions (crawl.workers) the partition owning a fingerprint decides
which URL had the body first (`claim_first`, on that partition's set); each partition then
passes the answer to its own `check` (`first=`), which keeps it as the body's first URL here
too, so that one original holds for the whole crawl, whichever partition fetched it. The
near-duplicate test is the partitions' together too (distributed.nearclaims): a partition
answers on the LSH band keys it owns (`near_lookup`) and records its own
pages' verdicts from the owners' answers (`record_near`) instead of calling `check_near`.

Each URL's record keeps its content fingerprint (IIR §20.2.1): when a page is fetched again
with another body, its outdated fingerprint (and its LSH entries) are deleted, so that the
old content at another URL is no longer called a duplicate of a page that no longer has it. An exact
copy refetched with the same body is judged again when its original no longer has that body (then
it may be the body's first itself): a page that changed back and forth is judged against the
crawl's current content only, never against versions that have been replaced.

Storage: a `seen.contentstore.ContentStore` (RocksDB by default: point lookups, a few dozen per
page, with a resident footprint bounded by its cache and memtables; that module says why not LMDB
any more), in DIR, with four tables: fp (content fingerprint -> first URL and time), url (URL
fingerprint -> content fingerprint, verdict, signature, URL), band (LSH band key -> the URL
fingerprints of its pages, concatenated) and meta (shingling parameters: signatures made with others
cannot be compared, so reopening with others is an error). A crawl begun with the LMDB set of
earlier versions has it copied into the store when it resumes.

A partition of a crawl of several keeps three more, for the others as much as for itself: oracle
(the first URL of each body fingerprint it owns, `claim_first`), and the share of the crawl's LSH
table it owns (distributed.nearclaims): nearband (band key -> URL fingerprints, for the band keys
it owns) and nearsig (URL fingerprint -> signature, times, URL and band keys of a page indexed
there, whichever partition fetched it). Its own pages' near-duplicate verdicts from such answers
name originals that may be another partition's, so nearof keeps the original's URL and time.
They are in the same transaction as the rest: checkpointed, and reopened after a crash, alike.

A page's outdated entries on the other partitions (IIR 20.2.1 across partitions): when a page that
was NEW or NEAR is fetched again with another body, `_forget` removes what this partition holds of its
old version (`forget_outdated`: the oracle's first URL of the old body, the page's entries in the share
of the LSH table here) and, for each other partition (`outdated_peers`, set by a crawl of several),
puts an outdated notice (URL, old body fingerprint, the time of the fetch that replaced it) in the
`outdated` table, in the same commit: the notice is durable exactly when the forgetting it tells
of is, so a crash loses both or neither. The partition's transport (crawl.partition) sends each notice
once the set is committed and deletes it when the receiver acknowledges it, which that receiver does
only once its own `forget_outdated` is committed (distributed.outdated): a notice lost on the way is
sent again, one applied twice changes nothing, and a receiver removes an entry only if it still names
that URL with a time before the replacing fetch (not a later version the page has since been judged
at).

Crash safety: the writes since the last commit wait in memory and are committed as one atomic
batch by `checkpoint()` (and fsynced) and, to bound that memory, every `commit_every` pages. After a crash the set
is therefore at or after the last checkpoint, never before: a page processed after the
checkpoint may already be known when it is fetched again after recovery. That is harmless:
the same URL with the same body is UNCHANGED (its links are followed again, so links lost with
the frontier's rollback are found again), and a copy at another URL is a duplicate of a page
that is itself fetched again.
"""

from __future__ import annotations

import dataclasses
import enum
import itertools
import math
import shutil
import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from crawlspace.seen.contentstore import ContentStore, RocksContentStore, migrate_lmdb
from crawlspace.seen.shingles import Shingler, SigArray, band_keys, choose_bands, similarity
from crawlspace.seen.sortedruns import SeenStateError
from crawlspace.urls.fingerprint import url_fingerprint

SCHEMA = b"crawlspace-content-seen/1"

_FP_RECORD = struct.Struct("<Qd")  # first URL's fingerprint, its fetch time; then the URL
_URL_RECORD = struct.Struct("<QdBfQH")  # content fp, fetch time, kind, similarity, of-URL fp, signature bytes
_NEAR_RECORD = struct.Struct("<ddBH")  # fetch time, question time, band keys, signature bytes; then those, the URL
_BAND_KEY = struct.Struct(">BQ")  # band number, band key (big-endian): the key of a band table
_BAND_KEY_BYTES = _BAND_KEY.size
_MEMBER_BYTES = 8  # a band table's value: the URL fingerprints (big-endian) of its pages, concatenated

# the tables (seen.contentstore.ContentStore), by number
_FP, _URL, _BAND, _META, _ORACLE, _NEAR_BAND, _NEAR_SIG, _NEAR_OF, _OUTDATED = range(1, 10)
_TABLE_NUMBERS = {b"fp": _FP, b"url": _URL, b"band": _BAND, b"meta": _META, b"oracle": _ORACLE,
                  b"nearband": _NEAR_BAND, b"nearsig": _NEAR_SIG, b"nearof": _NEAR_OF}  # fmt: skip
_COUNTED = (_URL, _NEAR_SIG)
_FILTERED = (_FP, _URL, _BAND, _ORACLE, _NEAR_BAND, _NEAR_SIG)  # keys of random bits, mostly read when absent
_OUTDATED_KEY = struct.Struct(">HQd")  # peer, URL fingerprint, time of the fetch that replaced the version
_OUTDATED_VALUE = struct.Struct("<HQd")  # peer, the old body's fingerprint, that time; then the URL


class NearCandidate(NamedTuple):
    """A page in this partition's share of the LSH table (distributed.nearclaims.NearIndex)."""

    url: str
    fetched_at: float
    asked_at: float
    signature: bytes


class OwnedNearLookup:
    """One near-duplicate question's reads of this partition's share of the LSH table (`near_lookup`):
    the owner decides its answer from `asked_at` and `candidates`, then `index`es the page with the
    band members already read (issue 17: reading them again, and the page's own entry twice more,
    was a third of the owner's CPU)."""

    __slots__ = ("_seen", "asked_at", "band_bytes", "candidates", "members", "previous", "url", "url_key", "version")

    def __init__(
        self,
        seen: ContentSeen,
        url: str,
        url_key: bytes,
        band_bytes: list[bytes],
        members: list[list[bytes]],
        previous: bytes | None,
        version: int,
        asked_at: float | None,
        candidates: list[NearCandidate],
    ) -> None:
        self._seen = seen
        self.url = url
        self.url_key = url_key
        self.band_bytes = band_bytes  # the band table's keys of the question's bands
        self.members = members  # each band's members as read
        self.previous = previous  # the page's entry here, if it was indexed here before
        self.version = version  # the set's changes when read
        self.asked_at = asked_at  # when the page was asked about, as indexed here (None: it is not)
        self.candidates = candidates  # the other pages under those bands, each once

    def index(self, fetched_at: float, asked_at: float, signature: bytes) -> None:
        """Index the page under the question's bands, replacing the keys and signature it had here."""
        self._seen._index_near(self, fetched_at, asked_at, signature)


class OutdatedNotice(NamedTuple):
    """A page's version that another partition may still hold entries of: the page at `url` no longer has
    the body `fingerprint`, as its fetch at `replaced_at` found (distributed.outdated)."""

    url: str
    fingerprint: int
    replaced_at: float


class ContentKind(enum.IntEnum):
    NEW = 0
    EXACT = 1
    NEAR = 2
    UNCHANGED = 3


@dataclass(frozen=True, slots=True)
class ContentVerdict:
    """What a page's content is: NEW, an EXACT or NEAR duplicate of another URL's, or UNCHANGED."""

    kind: ContentKind
    of_url: str | None = None
    of_time: float | None = None
    similarity: float = 0.0

    @property
    def is_duplicate(self) -> bool:
        """A duplicate of another URL's content (not the page's own earlier fetch)."""
        return self.kind in (ContentKind.EXACT, ContentKind.NEAR)


NEW = ContentVerdict(ContentKind.NEW)


@dataclass(frozen=True, slots=True)
class _UrlRecord:
    content_fp: int
    fetched_at: float
    kind: ContentKind
    similarity: float
    of_url_fp: int
    signature: bytes
    url: str

    def pack(self) -> bytes:
        head = _URL_RECORD.pack(
            self.content_fp, self.fetched_at, self.kind, self.similarity, self.of_url_fp, len(self.signature)
        )
        return head + self.signature + self.url.encode("utf-8", "surrogatepass")

    @classmethod
    def unpack(cls, data: bytes) -> _UrlRecord:
        content_fp, fetched_at, kind, sim, of_url_fp, sig_len = _URL_RECORD.unpack_from(data)
        start = _URL_RECORD.size
        signature = bytes(data[start : start + sig_len])
        url = bytes(data[start + sig_len :]).decode("utf-8", "surrogatepass")
        return cls(content_fp, fetched_at, ContentKind(kind), sim, of_url_fp, signature, url)


_TIME = struct.Struct(">d")


def _key(value: int) -> bytes:
    return value.to_bytes(8, "big")


def _utf8(url: str) -> bytes:
    return url.encode("utf-8", "surrogatepass")


def _near_candidate(stored: bytes) -> NearCandidate:
    fetched_at, asked_at, count, sig_len = _NEAR_RECORD.unpack_from(stored)
    start = _NEAR_RECORD.size + count * _BAND_KEY_BYTES
    signature = bytes(stored[start : start + sig_len])
    return NearCandidate(_url_after(stored, start + sig_len), fetched_at, asked_at, signature)


def _url_after(data: bytes, start: int) -> str:
    """The URL that ends an fp or oracle record, after its fixed-size head."""
    return bytes(data[start:]).decode("utf-8", "surrogatepass")


class ContentSeen:
    """Exact and near-duplicate content detection, persisted under a directory (seen.contentstore)."""

    def __init__(
        self,
        directory: str | Path,
        *,
        near_threshold: float = 0.9,
        shingle_words: int = 4,
        num_perm: int = 128,
        commit_every: int = 1_000,
        reset: bool = False,
        store: ContentStore | None = None,
    ) -> None:
        """`store`: the tables' store (a fake in tests); by default RocksDB in `directory`."""
        if not 0.0 < near_threshold <= 1.0:
            raise ValueError("near_threshold must be in (0, 1]")
        self.directory = Path(directory)
        if store is None:
            if reset and self.directory.exists():
                shutil.rmtree(self.directory)
            self.directory.mkdir(parents=True, exist_ok=True)
            store = RocksContentStore(self.directory, counted=_COUNTED, filtered=_FILTERED)
            migrate_lmdb(self.directory, store, _TABLE_NUMBERS)
        self.near_threshold = near_threshold
        self.shingler = Shingler(shingle_words=shingle_words, num_perm=num_perm)
        self.bands, self.rows = choose_bands(num_perm, near_threshold)
        self.commit_every = commit_every
        self._store: ContentStore | None = store
        self.outdated_peers: tuple[int, ...] = ()  # the other partitions, told of outdated versions
        self.on_outdated: Callable[[], None] | None = None  # told when a notice is put (the transport's wake-up)
        self._uncommitted = 0
        self._version = 0  # changes made (`_changed`): a near lookup is reused for indexing only if none came between
        self._check_parameters(shingle_words, num_perm)
        # notices left by an earlier run (killed before their acknowledgement) are to be sent as new ones
        self.outdated_added = sum(1 for _ in store.values(_OUTDATED))

    def __repr__(self) -> str:
        return f"ContentSeen({str(self.directory)!r}, {len(self)} pages, threshold={self.near_threshold})"

    outdated_added: int
    """Notices put (or found on opening) since the transport last looked; the transport resets it."""

    @property
    def _tables(self) -> ContentStore:
        if self._store is None:
            raise SeenStateError(f"{self.directory}: the content set is closed")
        return self._store

    def _check_parameters(self, shingle_words: int, num_perm: int) -> None:
        wanted = b"%s k=%d perm=%d" % (SCHEMA, shingle_words, num_perm)
        stored = self._tables.get(_META, b"parameters")
        if stored is None:
            self._tables.put(_META, b"parameters", wanted)
        elif stored != wanted:
            self.abandon()
            raise SeenStateError(
                f"{self.directory}: content set made with {stored.decode()!r}, asked for {wanted.decode()!r}"
                " (signatures would not compare; reset it or keep the old parameters)"
            )

    def __len__(self) -> int:
        """URLs with a recorded content fingerprint."""
        return self._tables.count(_URL)

    # -- a band table: band key -> the URL keys of its pages ------------------------------------------------

    @staticmethod
    def _split(stored: bytes | None) -> list[bytes]:
        if stored is None:
            return []
        return [stored[start : start + _MEMBER_BYTES] for start in range(0, len(stored), _MEMBER_BYTES)]

    def _members(self, table: int, band_keys: list[bytes]) -> list[list[bytes]]:
        return [self._split(stored) for stored in self._tables.get_many(table, band_keys)]

    def _add_members(self, table: int, keys: list[bytes], url_key: bytes, members: list[list[bytes]]) -> None:
        """Add `url_key` to each band whose current `members` the caller read."""
        self._tables.put_many(
            table,
            [
                (band_key, b"".join(band_members) + url_key)
                for band_key, band_members in zip(keys, members, strict=True)
                if url_key not in band_members
            ],
        )

    def _discard_member(self, table: int, band_key: bytes, url_key: bytes) -> None:
        members = self._split(self._tables.get(table, band_key))
        if url_key not in members:
            return
        members.remove(url_key)
        if members:
            self._tables.put(table, band_key, b"".join(members))
        else:
            self._tables.delete(table, band_key)

    # -- checks ----------------------------------------------------------------------------------------

    def check(
        self, url: str, body_fingerprint: int, fetched_at: float, *, first: tuple[str, float] | None = None
    ) -> ContentVerdict:
        """Exact test of a fetched body; records it. NEW content should go on to `check_near`.

        `first`: the URL that had this body first in the whole crawl and its fetch time, as the
        partition owning the fingerprint answered (`claim_first`); it replaces this set's own first
        of the body, so that later copies here refer to the crawl's original too. Without it (one
        partition, or the owner could not be asked) this set's own first decides."""
        tables = self._tables
        url_fp = url_fingerprint(url)
        url_key = _key(url_fp)
        previous = tables.get(_URL, url_key)
        if previous is not None:
            record = _UrlRecord.unpack(previous)
            if record.content_fp == body_fingerprint and self._still_judged(record, body_fingerprint, first):
                return ContentVerdict(ContentKind.UNCHANGED, url, record.fetched_at, 1.0)
            self._forget(url_fp, record, replaced_at=fetched_at)
        fp_key = _key(body_fingerprint)
        if first is not None:
            first_url, first_time = first
            tables.put(_FP, fp_key, _FP_RECORD.pack(url_fingerprint(first_url), first_time) + _utf8(first_url))
        else:
            stored = tables.get(_FP, fp_key)
            if stored is None:
                first_url, first_time = url, fetched_at
                tables.put(_FP, fp_key, _FP_RECORD.pack(url_fp, fetched_at) + _utf8(url))
            else:
                first_url, first_time = _url_after(stored, _FP_RECORD.size), _FP_RECORD.unpack_from(stored)[1]
        # the first may be this URL even with a record: a copy in this partition was told of it first
        if first_url != url:
            record = _UrlRecord(
                body_fingerprint, fetched_at, ContentKind.EXACT, 1.0, url_fingerprint(first_url), b"", url
            )
            tables.put(_URL, url_key, record.pack())
            verdict = ContentVerdict(ContentKind.EXACT, first_url, first_time, 1.0)
        else:
            tables.put(
                _URL, url_key, _UrlRecord(body_fingerprint, fetched_at, ContentKind.NEW, 0.0, 0, b"", url).pack()
            )
            verdict = NEW
        self._changed()
        return verdict

    def _still_judged(self, record: _UrlRecord, body_fingerprint: int, first: tuple[str, float] | None) -> bool:
        """The verdict of a page's last fetch still holds for the same body: always, unless it was an
        exact copy of a URL that no longer has that body (the original changed since: the copy is
        then judged again, against what the crawl holds now, and may be the body's first itself)."""
        if record.kind != ContentKind.EXACT:
            return True
        if first is not None:
            return url_fingerprint(first[0]) == record.of_url_fp
        stored = self._tables.get(_FP, _key(body_fingerprint))
        return stored is not None and _FP_RECORD.unpack_from(stored)[0] == record.of_url_fp

    def claim_first(self, body_fingerprint: int, url: str, fetched_at: float) -> tuple[str, float]:
        """The partitioned exact test (crawl.workers): this set owns `body_fingerprint` among the
        partitions of a crawl. The first URL that showed it, with its fetch time: `url` and
        `fetched_at` themselves if no URL did before (it is recorded as the first)."""
        key = _key(body_fingerprint)
        first = self._tables.get(_ORACLE, key)
        if first is not None:
            return _url_after(first, _TIME.size), _TIME.unpack_from(first)[0]
        self._tables.put(_ORACLE, key, _TIME.pack(fetched_at) + _utf8(url))
        self._changed()
        return url, fetched_at

    def release_first(self, body_fingerprint: int, url: str) -> None:
        """`url`'s body was not stored (a near-duplicate the crawl does not keep): it is no longer
        the first URL of that body, which a revisit record of a copy would refer to in vain. The
        next URL with the body takes its place (here and, on the owning partition, in the claims)."""
        key = _key(body_fingerprint)
        tables = self._tables
        stored = tables.get(_FP, key)
        if stored is not None and _url_after(stored, _FP_RECORD.size) == url:
            tables.delete(_FP, key)
        claimed = tables.get(_ORACLE, key)
        if claimed is not None and _url_after(claimed, _TIME.size) == url:
            tables.delete(_ORACLE, key)
        self._changed()

    def check_near(self, url: str, text: str) -> ContentVerdict:
        """Near-duplicate test of a page `check` found NEW; records the verdict or indexes the page."""
        url_fp = url_fingerprint(url)
        url_key = _key(url_fp)
        tables = self._tables
        stored = tables.get(_URL, url_key)
        if stored is None:
            raise KeyError(f"check_near({url!r}) before check(): the page has no content record")
        record = _UrlRecord.unpack(stored)
        if record.kind != ContentKind.NEW or record.signature:
            raise ValueError(f"check_near({url!r}): the page is {record.kind.name}, not new and unindexed")
        signature = self.shingler.signature(text)
        if signature is None:
            return NEW
        keys = list(itertools.starmap(_BAND_KEY.pack, enumerate(band_keys(signature, self.rows).tolist())))
        members = self._members(_BAND, keys)
        best_fp, best_similarity = self._best_candidate(url_fp, signature, members)
        if best_fp is not None and best_similarity >= self.near_threshold:
            original_record = tables.get(_URL, _key(best_fp))
            assert original_record is not None  # a candidate is one with a record
            original = _UrlRecord.unpack(original_record)
            near = dataclasses.replace(record, kind=ContentKind.NEAR, similarity=best_similarity, of_url_fp=best_fp)
            tables.put(_URL, url_key, near.pack())
            return ContentVerdict(ContentKind.NEAR, original.url, original.fetched_at, best_similarity)
        tables.put(_URL, url_key, dataclasses.replace(record, signature=signature.tobytes()).pack())
        self._add_members(_BAND, keys, url_key, members)
        return NEW

    def record_near(self, url: str, match: tuple[str, float, float] | None) -> ContentVerdict:
        """The verdict of a page `check` found NEW, from the partitions owning its band keys
        (distributed.nearclaims): `match` (original URL, its fetch time, similarity) when the best
        answer was at or above the threshold, else None. The page's signature is indexed by those
        owners, not here."""
        url_key = _key(url_fingerprint(url))
        tables = self._tables
        stored = tables.get(_URL, url_key)
        if stored is None:
            raise KeyError(f"record_near({url!r}) before check(): the page has no content record")
        record = _UrlRecord.unpack(stored)
        if record.kind != ContentKind.NEW:
            raise ValueError(f"record_near({url!r}): the page is {record.kind.name}, not new")
        if match is None:
            return NEW
        of_url, of_time, score = match
        near = dataclasses.replace(record, kind=ContentKind.NEAR, similarity=score, of_url_fp=url_fingerprint(of_url))
        tables.put(_URL, url_key, near.pack())
        tables.put(_NEAR_OF, url_key, _TIME.pack(of_time) + _utf8(of_url))
        self._changed()
        return ContentVerdict(ContentKind.NEAR, of_url, of_time, score)

    # -- the share of the crawl's LSH table this partition owns (distributed.nearclaims.NearIndex) -------

    def near_lookup(self, url: str, bands: Sequence[tuple[int, int]]) -> OwnedNearLookup:
        """What this share of the LSH table holds for a question (distributed.nearclaims.NearIndex)."""
        url_key = _key(url_fingerprint(url))
        tables = self._tables
        band_bytes = list(itertools.starmap(_BAND_KEY.pack, bands))
        members = self._members(_NEAR_BAND, band_bytes)
        previous = tables.get(_NEAR_SIG, url_key)
        candidates: list[NearCandidate] = []
        if any(members):
            seen: set[bytes] = {url_key}
            for band_members in members:
                for member in band_members:
                    if member in seen:
                        continue
                    seen.add(member)
                    stored = tables.get(_NEAR_SIG, member)
                    if stored is not None:
                        candidates.append(_near_candidate(stored))
        asked_at = None if previous is None else float(_NEAR_RECORD.unpack_from(previous)[1])
        return OwnedNearLookup(self, url, url_key, band_bytes, members, previous, self._version, asked_at, candidates)

    def _index_near(self, lookup: OwnedNearLookup, fetched_at: float, asked_at: float, signature: bytes) -> None:
        """`OwnedNearLookup.index`: from what the lookup read, unless the set changed since (then read
        again: another page indexed meanwhile would be lost from a band written from the old members),
        and the members read again after the page's old keys go (it was indexed here before)."""
        url_key = lookup.url_key
        tables = self._tables
        members = lookup.members
        previous = lookup.previous
        if lookup.version != self._version:
            previous = tables.get(_NEAR_SIG, url_key)
        if previous is not None:  # the page fetched again with other text: its old keys go
            count = _NEAR_RECORD.unpack_from(previous)[2]
            start = _NEAR_RECORD.size
            for offset in range(start, start + count * _BAND_KEY_BYTES, _BAND_KEY_BYTES):
                self._discard_member(_NEAR_BAND, previous[offset : offset + _BAND_KEY_BYTES], url_key)
        if previous is not None or lookup.version != self._version:
            members = self._members(_NEAR_BAND, lookup.band_bytes)
        head = _NEAR_RECORD.pack(fetched_at, asked_at, len(lookup.band_bytes), len(signature))
        tables.put(_NEAR_SIG, url_key, head + b"".join(lookup.band_bytes) + signature + _utf8(lookup.url))
        self._add_members(_NEAR_BAND, lookup.band_bytes, url_key, members)
        self._changed()

    def near_indexed(self) -> int:
        """Pages indexed in this partition's share of the crawl's LSH table."""
        return self._tables.count(_NEAR_SIG)

    def _best_candidate(self, url_fp: int, signature: SigArray, members: list[list[bytes]]) -> tuple[int | None, float]:
        candidates: set[bytes] = set()
        for band_members in members:
            candidates.update(band_members)
        candidates.discard(_key(url_fp))
        best_fp: int | None = None
        best = -math.inf
        for candidate in candidates:
            stored = self._tables.get(_URL, candidate)
            if stored is None:
                continue
            other = _UrlRecord.unpack(stored)
            if not other.signature:
                continue
            score = similarity(signature, np.frombuffer(other.signature, np.uint16))
            if score > best:
                best_fp, best = int.from_bytes(candidate, "big"), score
        return best_fp, best

    def _forget(self, url_fp: int, record: _UrlRecord, *, replaced_at: float) -> None:
        """Delete a refreshed page's outdated fingerprint, LSH entries and record; the shares of the
        crawl's tables that hold the old version here go too, and the other partitions are told
        (an exact copy was never first of its body nor indexed anywhere: nothing to tell)."""
        tables = self._tables
        if record.kind in (ContentKind.NEW, ContentKind.NEAR):
            self.forget_outdated(OutdatedNotice(record.url, record.content_fp, replaced_at))
            for peer in self.outdated_peers:
                tables.put(
                    _OUTDATED,
                    _OUTDATED_KEY.pack(peer, url_fp, replaced_at),
                    _OUTDATED_VALUE.pack(peer, record.content_fp, replaced_at) + _utf8(record.url),
                )
                self.outdated_added += 1
            if self.outdated_peers and self.on_outdated is not None:
                self.on_outdated()
        fp_key = _key(record.content_fp)
        url_key = _key(url_fp)
        first = tables.get(_FP, fp_key)
        if first is not None and _FP_RECORD.unpack_from(first)[0] == url_fp:
            tables.delete(_FP, fp_key)
        if record.signature:
            keys = band_keys(np.frombuffer(record.signature, np.uint16), self.rows)
            for band, key in enumerate(keys.tolist()):
                self._discard_member(_BAND, _BAND_KEY.pack(band, key), url_key)
        tables.delete(_URL, url_key)
        if record.kind == ContentKind.NEAR:
            tables.delete(_NEAR_OF, url_key)

    # -- outdated versions across partitions (distributed.outdated) ------------------------------------

    def forget_outdated(self, notice: OutdatedNotice) -> bool:
        """Remove what this partition holds of a page's replaced version, the entries that still name
        the page with a time before `notice.replaced_at`: the body's first URL (as owner of the
        fingerprint, and as told by its owner) and the page in this share of the LSH table. Idempotent;
        an entry of a later version (the page judged again since) stays. True if anything went."""
        tables = self._tables
        url_fp = url_fingerprint(notice.url)
        url_key = _key(url_fp)
        fp_key = _key(notice.fingerprint)
        removed = False
        claimed = tables.get(_ORACLE, fp_key)
        if (
            claimed is not None
            and _TIME.unpack_from(claimed)[0] < notice.replaced_at
            and _url_after(claimed, _TIME.size) == notice.url
        ):
            tables.delete(_ORACLE, fp_key)
            removed = True
        first = tables.get(_FP, fp_key)
        if first is not None:
            first_fp, first_time = _FP_RECORD.unpack_from(first)
            if first_fp == url_fp and first_time < notice.replaced_at:
                tables.delete(_FP, fp_key)
                removed = True
        indexed = tables.get(_NEAR_SIG, url_key)
        if indexed is not None and _NEAR_RECORD.unpack_from(indexed)[0] < notice.replaced_at:
            count = _NEAR_RECORD.unpack_from(indexed)[2]
            start = _NEAR_RECORD.size
            for offset in range(start, start + count * _BAND_KEY_BYTES, _BAND_KEY_BYTES):
                self._discard_member(_NEAR_BAND, indexed[offset : offset + _BAND_KEY_BYTES], url_key)
            tables.delete(_NEAR_SIG, url_key)
            removed = True
        if removed:
            self._changed()
        return removed

    def outdated_waiting(self) -> Iterator[tuple[int, OutdatedNotice]]:
        """Every notice not yet acknowledged, with the partition it is for (a scan: the table holds only
        what is on its way, a few seconds of the pages that changed)."""
        for value in self._tables.values(_OUTDATED):
            peer, fingerprint, replaced_at = _OUTDATED_VALUE.unpack_from(value)
            yield peer, OutdatedNotice(_url_after(value, _OUTDATED_VALUE.size), fingerprint, replaced_at)

    def outdated_delivered(self, peer: int, url: str, replaced_at: float) -> None:
        """`peer` has made its `forget_outdated` of this notice durable: it need not be sent again."""
        key = _OUTDATED_KEY.pack(peer, url_fingerprint(url), replaced_at)
        tables = self._tables
        if tables.get(_OUTDATED, key) is not None:
            tables.delete(_OUTDATED, key)
            self._changed()

    # -- queries -----------------------------------------------------------------------------------------

    def verdict_of(self, url: str) -> ContentVerdict | None:
        """The recorded verdict of a URL's last fetch (the duplicate-of relation), None if never seen."""
        tables = self._tables
        stored = tables.get(_URL, _key(url_fingerprint(url)))
        if stored is None:
            return None
        record = _UrlRecord.unpack(stored)
        if record.kind in (ContentKind.NEW, ContentKind.UNCHANGED):
            return ContentVerdict(ContentKind.NEW)
        original = tables.get(_URL, _key(record.of_url_fp))
        of_url: str | None = None
        of_time: float | None = None
        if original is not None:
            of = _UrlRecord.unpack(original)
            of_url, of_time = of.url, of.fetched_at
        elif record.kind == ContentKind.EXACT:
            first = tables.get(_FP, _key(record.content_fp))
            if first is not None:
                of_time = _FP_RECORD.unpack_from(first)[1]
                of_url = _url_after(first, _FP_RECORD.size)
        else:
            elsewhere = tables.get(_NEAR_OF, _key(url_fingerprint(record.url)))
            if elsewhere is not None:
                of_time, of_url = _TIME.unpack_from(elsewhere)[0], _url_after(elsewhere, _TIME.size)
        return ContentVerdict(record.kind, of_url, of_time, record.similarity)

    def urls(self) -> Iterator[str]:
        """Every URL with a recorded content fingerprint (for reports and tests: a full scan)."""
        for value in self._tables.values(_URL):
            yield _UrlRecord.unpack(value).url

    def fingerprint_of(self, url: str) -> int | None:
        stored = self._tables.get(_URL, _key(url_fingerprint(url)))
        return None if stored is None else _UrlRecord.unpack(stored).content_fp

    # -- durability ---------------------------------------------------------------------------------------

    def _changed(self) -> None:
        self._version += 1
        self._uncommitted += 1
        if self._uncommitted >= self.commit_every:
            self._tables.commit()
            self._uncommitted = 0

    def commit(self) -> None:
        """Make what was done so far durable now (and fsynced), between checkpoints: what an outdated
        notice tells must be durable before it is sent or acknowledged (distributed.outdated). The set
        is then after its last checkpoint, which it may always be (see crash safety)."""
        self._tables.sync()
        self._uncommitted = 0

    def checkpoint(self) -> None:
        """Commit and flush: after a crash the set reopens at least as it is now."""
        self._tables.sync()
        self._uncommitted = 0

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    def abandon(self) -> None:
        """Drop uncommitted work and close, as a crash would (for tests and error paths)."""
        if self._store is not None:
            self._store.abandon()
            self._store = None

    def disk_bytes(self) -> int:
        return self._tables.disk_bytes()
