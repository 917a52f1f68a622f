"""The near-duplicate test across partitions, without a transport: what is asked of whom, what an owner
answers and indexes, how the answers combine, and that the partitions together decide as one process
does; the owners' store is seen.ContentSeen (persisted, checkpointed) or a dict."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from crawlspace.distributed.assignment import band_owner
from crawlspace.distributed.nearclaims import (
    NearMatch,
    NearQuestion,
    NearQuestionError,
    answer_near,
    best_match,
    near_questions,
)
from crawlspace.seen import ContentKind, ContentSeen
from crawlspace.seen.content import NearCandidate
from crawlspace.seen.shingles import Shingler, band_keys, choose_bands

THRESHOLD = 0.9
SHINGLER = Shingler()
BANDS, ROWS = choose_bands(SHINGLER.num_perm, THRESHOLD)
WORDS = [f"w{index}" for index in range(5000)]


def text(seed: int, length: int = 400) -> str:
    chooser = random.Random(seed)
    return " ".join(chooser.choice(WORDS) for _ in range(length))


def near_copy(original: str, changed: int, seed: int = 0) -> str:
    words = original.split()
    chooser = random.Random(seed)
    for position in chooser.sample(range(len(words)), changed):
        words[position] = f"changed{position}"
    return " ".join(words)


class DictIndex:
    """A NearIndex in a dict: the owner's band table as the protocol describes it."""

    def __init__(self) -> None:
        self.bands: dict[tuple[int, int], set[str]] = {}
        self.pages: dict[str, tuple[NearCandidate, tuple[tuple[int, int], ...]]] = {}

    def near_lookup(self, url: str, bands: Sequence[tuple[int, int]]) -> DictLookup:
        urls = set().union(*(self.bands.get(band, set()) for band in bands)) - {url}
        asked_at = self.pages[url][0].asked_at if url in self.pages else None
        return DictLookup(self, url, tuple(bands), asked_at, [self.pages[other][0] for other in sorted(urls)])

    def near_asked_at(self, url: str) -> float | None:
        return self.pages[url][0].asked_at if url in self.pages else None


@dataclass
class DictLookup:
    owner: DictIndex
    url: str
    bands: tuple[tuple[int, int], ...]
    asked_at: float | None
    candidates: list[NearCandidate]

    def index(self, fetched_at: float, asked_at: float, signature: bytes) -> None:
        pages, bands = self.owner.pages, self.owner.bands
        if self.url in pages:
            for band in pages[self.url][1]:
                bands[band].discard(self.url)
        for band in self.bands:
            bands.setdefault(band, set()).add(self.url)
        pages[self.url] = (NearCandidate(self.url, fetched_at, asked_at, signature), self.bands)


def ask(owners: list[DictIndex] | list[ContentSeen], url: str, words: str, at: float) -> NearMatch | None:
    """One page's questions, answered by the owners one after the other, combined as the asker does."""
    signature = SHINGLER.signature(words)
    assert signature is not None
    questions = near_questions(url, at, at, signature, ROWS, len(owners))
    return best_match({owner: answer_near(owners[owner], q, THRESHOLD) for owner, q in questions.items()})


def test_each_band_key_is_asked_once_of_its_owner_and_one_partition_is_asked_everything() -> None:
    signature = SHINGLER.signature(text(1))
    assert signature is not None
    keys = band_keys(signature, ROWS).tolist()
    for partitions in (1, 2, 3, 7):
        questions = near_questions("http://a.test/", 1.0, 2.0, signature, ROWS, partitions)
        asked = sorted(pair for question in questions.values() for pair in question.bands)
        assert asked == list(enumerate(keys))  # every band once
        for owner, question in questions.items():
            assert all(band_owner(key, partitions) == owner for _, key in question.bands)
            assert np.array_equal(question.signature_values(), signature)  # the whole signature, to verify with
            assert (question.url, question.fetched_at, question.asked_at) == ("http://a.test/", 1.0, 2.0)
    assert list(near_questions("http://a.test/", 1.0, 2.0, signature, ROWS, 1)) == [0]


def test_an_owner_answers_its_best_earlier_candidate_and_indexes_originals_only() -> None:
    index = DictIndex()
    original = text(2)
    signature = SHINGLER.signature(original)
    assert signature is not None
    (only,) = near_questions("http://a.test/o", 1.0, 1.0, signature, ROWS, 1).values()
    assert answer_near(index, only, THRESHOLD) is None and "http://a.test/o" in index.pages
    copy = SHINGLER.signature(near_copy(original, 3))
    assert copy is not None
    (question,) = near_questions("http://b.test/c", 2.0, 2.0, copy, ROWS, 1).values()
    match = answer_near(index, question, THRESHOLD)
    assert match is not None and match.url == "http://a.test/o" and match.fetched_at == 1.0
    assert THRESHOLD <= match.similarity < 1.0
    assert "http://b.test/c" not in index.pages  # a near-duplicate is not indexed: originals only
    # the same URL fetched again is not its own near-duplicate; its entry is replaced
    (again,) = near_questions("http://a.test/o", 3.0, 3.0, signature, ROWS, 1).values()
    assert answer_near(index, again, THRESHOLD) is None
    entry = index.pages["http://a.test/o"][0]
    assert (entry.fetched_at, entry.asked_at) == (3.0, 1.0)  # the new fetch, its place in the order kept


def test_two_near_duplicates_asked_in_opposite_orders_on_two_owners_are_never_each_others() -> None:
    """Owner A hears P then Q, owner B hears Q then P: only the later question can name the earlier page."""
    first, second = text(3), near_copy(text(3), 2)
    p = SHINGLER.signature(first)
    q = SHINGLER.signature(second)
    assert p is not None and q is not None
    for partitions in (2, 3):
        owners = [DictIndex() for _ in range(partitions)]
        asked_p = near_questions("http://p.test/", 10.0, 10.0, p, ROWS, partitions)
        asked_q = near_questions("http://q.test/", 10.0, 10.001, q, ROWS, partitions)
        answers_p: dict[int, NearMatch | None] = {}
        answers_q: dict[int, NearMatch | None] = {}
        for owner in range(partitions):
            pair = [("p", asked_p.get(owner)), ("q", asked_q.get(owner))]
            for name, question in pair if owner % 2 == 0 else pair[::-1]:
                if question is not None:
                    (answers_p if name == "p" else answers_q)[owner] = answer_near(owners[owner], question, THRESHOLD)
        verdict_p, verdict_q = best_match(answers_p), best_match(answers_q)
        assert verdict_p is None  # asked first: nothing earlier, whatever order the owners heard it in
        assert verdict_q is not None and verdict_q.url == "http://p.test/"


def test_a_page_asked_again_keeps_its_place_so_its_near_duplicate_never_becomes_its_original() -> None:
    """P is indexed; Q, near P, is indexed under a band P did not have here; P is fetched again (its
    partition rolled back by a crash) and now shares that band: Q was asked after P, so Q is no original of P."""
    p = SHINGLER.signature(text(80))
    assert p is not None
    q = p.copy()
    q[0] ^= 1  # similarity 127/128
    index = DictIndex()
    signature_p, signature_q = p.tobytes(), q.tobytes()
    assert answer_near(index, NearQuestion("http://p.test/", 1.0, 1.0, signature_p, ((0, 7),)), THRESHOLD) is None
    assert answer_near(index, NearQuestion("http://q.test/", 2.0, 2.0, signature_q, ((1, 9),)), THRESHOLD) is None
    again = NearQuestion("http://p.test/", 3.0, 3.0, signature_p, ((0, 7), (1, 9)))
    assert answer_near(index, again, THRESHOLD) is None
    assert index.near_asked_at("http://p.test/") == 1.0  # still first
    later = answer_near(index, NearQuestion("http://r.test/", 4.0, 4.0, signature_p, ((1, 9),)), THRESHOLD)
    assert later is not None and (later.url, later.similarity) == ("http://p.test/", 1.0)  # P's new signature


def test_the_best_answer_over_owners_is_the_most_similar_then_the_earliest() -> None:
    a = NearMatch("http://a.test/", 5.0, 0.95)
    b = NearMatch("http://b.test/", 1.0, 0.95)
    c = NearMatch("http://c.test/", 0.5, 0.91)
    assert best_match({0: a, 1: None, 2: b, 3: c}) == b
    assert best_match({0: c, 1: a}) == a
    assert best_match({0: None, 1: None}) is None
    assert best_match({}) is None


@pytest.mark.parametrize("partitions", [2, 3])
def test_partitions_asked_one_page_after_another_decide_as_one_process(tmp_path: Path, partitions: int) -> None:
    """Originals, near-copies (1 to 40 words of 400 changed: some above the threshold, some below) and
    copies of near-copies, in a shuffled order: the same verdicts as ContentSeen.check_near."""
    pages: list[tuple[str, str]] = []
    for seed in range(30):
        original = text(100 + seed)
        pages.append((f"http://h{seed}.test/o", original))
        pages.append((f"http://m{seed}.test/n", near_copy(original, 1 + seed % 40, seed)))
        if seed % 3 == 0:
            pages.append((f"http://k{seed}.test/k", near_copy(original, 2, seed + 1000)))
    random.Random(7).shuffle(pages)
    single = ContentSeen(tmp_path / "single", near_threshold=THRESHOLD)
    owners = [ContentSeen(tmp_path / str(index), near_threshold=THRESHOLD) for index in range(partitions)]
    near = 0
    for at, (url, words) in enumerate(pages):
        single.check(url, hash(url) & (2**63 - 1), float(at))
        expected = single.check_near(url, words)
        match = ask(owners, url, words, float(at))
        found = match is not None and match.similarity >= THRESHOLD
        assert found is (expected.kind is ContentKind.NEAR), (url, expected, match)
        if found:
            assert match is not None and (match.url, match.fetched_at) == (expected.of_url, expected.of_time)
            assert match.similarity == pytest.approx(expected.similarity)
            near += 1
    assert 10 <= near <= len(pages) - 40  # both verdicts were tested: 30 originals, some far copies
    for seen in [single, *owners]:
        seen.close()


def test_the_owners_table_survives_a_checkpoint_and_loses_only_what_came_after_it(tmp_path: Path) -> None:
    """kill -9 after a checkpoint (`abandon`): the pages indexed before it are still candidates, those
    indexed after are gone (their askers' pages are fetched again, being after their checkpoint too)."""
    owner = ContentSeen(tmp_path / "owner", near_threshold=THRESHOLD, commit_every=1_000_000)
    before, after = text(50), text(51)
    assert ask([owner], "http://a.test/before", before, 1.0) is None
    owner.checkpoint()
    assert ask([owner], "http://a.test/after", after, 2.0) is None
    assert owner.near_indexed() == 2
    owner.abandon()
    reopened = ContentSeen(tmp_path / "owner", near_threshold=THRESHOLD)
    assert reopened.near_indexed() == 1
    match = ask([reopened], "http://b.test/copy", near_copy(before, 2), 3.0)
    assert match is not None and match.url == "http://a.test/before" and match.fetched_at == 1.0
    assert ask([reopened], "http://b.test/copy2", near_copy(after, 2), 4.0) is None  # lost: indexed anew
    reopened.close()


def test_a_page_fetched_again_with_other_text_leaves_its_old_band_keys(tmp_path: Path) -> None:
    owner = ContentSeen(tmp_path / "owner", near_threshold=THRESHOLD)
    old, new = text(60), text(61)
    assert ask([owner], "http://a.test/page", old, 1.0) is None
    assert ask([owner], "http://a.test/page", new, 2.0) is None  # refetched: re-indexed
    assert owner.near_indexed() == 1
    assert ask([owner], "http://b.test/old", near_copy(old, 2), 3.0) is None  # the old text is no longer there
    match = ask([owner], "http://b.test/new", near_copy(new, 2), 4.0)
    assert match is not None and match.url == "http://a.test/page"
    owner.close()


def test_a_near_verdict_from_the_owners_names_an_original_fetched_elsewhere(tmp_path: Path) -> None:
    seen = ContentSeen(tmp_path / "asker")
    assert seen.check("http://b.test/copy", 42, 5.0).kind is ContentKind.NEW
    verdict = seen.record_near("http://b.test/copy", ("http://a.test/original", 1.5, 0.97))
    assert (verdict.kind, verdict.of_url, verdict.of_time, verdict.similarity) == (
        ContentKind.NEAR,
        "http://a.test/original",
        1.5,
        0.97,
    )
    seen.checkpoint()
    seen.close()
    reopened = ContentSeen(tmp_path / "asker")
    recorded = reopened.verdict_of("http://b.test/copy")
    assert recorded is not None and (recorded.kind, recorded.of_url, recorded.of_time) == (
        ContentKind.NEAR,
        "http://a.test/original",
        1.5,
    )
    with pytest.raises(ValueError, match="not new"):
        reopened.record_near("http://b.test/copy", None)
    with pytest.raises(KeyError):
        reopened.record_near("http://never.test/", None)
    reopened.close()


@pytest.mark.parametrize(
    ("signature", "bands"),
    [
        (b"", ((0, 1),)),
        (b"\x01\x02\x03", ((0, 1),)),
        (b"\x01\x02", ()),
        (b"\x01\x02", ((256, 1),)),
        (b"\x01\x02", ((0, -1),)),
    ],
)
def test_a_malformed_question_is_refused_with_its_reason(signature: bytes, bands: tuple[tuple[int, int], ...]) -> None:
    with pytest.raises(NearQuestionError, match=r"http://a\.test/"):
        NearQuestion("http://a.test/", 1.0, 1.0, signature, bands)


def test_a_lookup_indexed_after_the_set_changed_reads_the_bands_again(tmp_path: Path) -> None:
    """Two lookups of the same band before either page is indexed: the second indexing must not write the
    band from the members it read before the first (which would drop the first page from it)."""
    content = ContentSeen(tmp_path)
    signature = SHINGLER.signature(text(90))
    assert signature is not None
    data, bands = signature.tobytes(), ((0, 11), (1, 12))
    first = content.near_lookup("http://p.test/", bands)
    second = content.near_lookup("http://q.test/", bands)
    first.index(1.0, 1.0, data)
    second.index(2.0, 2.0, data)
    found = content.near_lookup("http://r.test/", bands).candidates
    assert sorted(candidate.url for candidate in found) == ["http://p.test/", "http://q.test/"]
    content.close()
