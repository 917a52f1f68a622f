"""Content seen: exact and near duplicates, refreshes, persistence, and the simulated web's ground truth."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from crawlspace.parse import parse_html
from crawlspace.seen.content import ContentKind, ContentSeen
from crawlspace.seen.sortedruns import SeenStateError
from crawlspace.simweb import SimWeb, SimWebConfig
from crawlspace.urls.fingerprint import content_fingerprint
from tests.killing import kill_at_first_line

WORDS = [f"w{index}x" for index in range(3000)]


def text_of(seed: int, words: int = 600) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(words))


def changed(text: str, count: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    words = text.split()
    for position in rng.sample(range(len(words)), count):
        words[position] = "zz" + words[position]
    return " ".join(words)


def see(content: ContentSeen, url: str, text: str, at: float = 1.0) -> tuple[ContentKind, str | None]:
    verdict = content.check(url, content_fingerprint(text.encode()), at)
    if verdict.kind is ContentKind.NEW:
        verdict = content.check_near(url, text)
    return verdict.kind, verdict.of_url


def test_exact_duplicate_at_another_url(tmp_path: Path) -> None:
    content = ContentSeen(tmp_path)
    body = text_of(1)
    assert see(content, "http://a.test/", body, at=10.0) == (ContentKind.NEW, None)
    verdict = content.check("http://b.test/copy", content_fingerprint(body.encode()), 20.0)
    assert verdict.kind is ContentKind.EXACT and verdict.is_duplicate
    assert (verdict.of_url, verdict.of_time, verdict.similarity) == ("http://a.test/", 10.0, 1.0)
    again = content.check("http://a.test/", content_fingerprint(body.encode()), 30.0)
    assert again.kind is ContentKind.UNCHANGED and not again.is_duplicate
    assert (again.of_url, again.of_time) == ("http://a.test/", 10.0)
    content.close()


def test_near_duplicates_by_changed_words(tmp_path: Path) -> None:
    content = ContentSeen(tmp_path)
    original = text_of(2)
    assert see(content, "http://a.test/", original) == (ContentKind.NEW, None)
    for count in range(1, 6):
        kind, of = see(content, f"http://b.test/{count}", changed(original, count, seed=count))
        assert (kind, of) == (ContentKind.NEAR, "http://a.test/")
    verdict = content.verdict_of("http://b.test/5")
    assert verdict is not None and verdict.kind is ContentKind.NEAR and 0.9 <= verdict.similarity <= 1.0
    # a heavily rewritten page and an unrelated one are new
    assert see(content, "http://c.test/", changed(original, 150, seed=9))[0] is ContentKind.NEW
    assert see(content, "http://d.test/", text_of(3))[0] is ContentKind.NEW
    content.close()


def test_threshold_is_configurable(tmp_path: Path) -> None:
    original = text_of(4)
    rewritten = changed(original, 60, seed=1)  # 10% of words: Jaccard of 4-shingles about 0.5
    strict = ContentSeen(tmp_path / "strict")
    see(strict, "http://a.test/", original)
    assert see(strict, "http://b.test/", rewritten)[0] is ContentKind.NEW
    strict.close()
    loose = ContentSeen(tmp_path / "loose", near_threshold=0.3)
    see(loose, "http://a.test/", original)
    assert see(loose, "http://b.test/", rewritten) == (ContentKind.NEAR, "http://a.test/")
    loose.close()


def test_refreshed_page_forgets_its_outdated_fingerprint(tmp_path: Path) -> None:
    content = ContentSeen(tmp_path)
    old, new = text_of(5), text_of(6)
    see(content, "http://a.test/", old)
    assert content.fingerprint_of("http://a.test/") == content_fingerprint(old.encode())
    assert see(content, "http://a.test/", new) == (ContentKind.NEW, None)  # the page changed
    assert content.fingerprint_of("http://a.test/") == content_fingerprint(new.encode())
    # the old content, exact or nearly, elsewhere: no longer a duplicate of a.test, which does not have it
    assert see(content, "http://b.test/", old) == (ContentKind.NEW, None)
    assert see(content, "http://c.test/", changed(old, 2)) == (ContentKind.NEAR, "http://b.test/")
    assert see(content, "http://d.test/", new) == (ContentKind.EXACT, "http://a.test/")
    content.close()


def test_a_page_that_changed_back_and_forth_is_judged_against_current_content_only(tmp_path: Path) -> None:
    """IIR 20.2.1: a page's outdated fingerprint and LSH entries go when its new version is stored."""
    content = ContentSeen(tmp_path)
    own, other = text_of(11), text_of(12)
    assert see(content, "http://a.test/", own) == (ContentKind.NEW, None)
    assert see(content, "http://b.test/", other) == (ContentKind.NEW, None)
    assert see(content, "http://a.test/", other) == (ContentKind.EXACT, "http://b.test/")  # A became a copy of B
    # while A holds B's content, A's former text, exact or nearly, is no duplicate of A
    assert see(content, "http://d.test/", changed(own, 2)) == (ContentKind.NEW, None)
    # A changes back: judged against what D holds now, not against its own past
    assert see(content, "http://a.test/", own) == (ContentKind.NEAR, "http://d.test/")
    assert see(content, "http://c.test/", own) == (ContentKind.EXACT, "http://a.test/")  # A has it again
    assert see(content, "http://e.test/", other) == (ContentKind.EXACT, "http://b.test/")  # B still has it
    content.close()


def test_a_copy_whose_original_changed_is_judged_again(tmp_path: Path) -> None:
    content = ContentSeen(tmp_path)
    body, later = text_of(14), text_of(15)
    see(content, "http://a.test/", body)
    assert see(content, "http://b.test/", body) == (ContentKind.EXACT, "http://a.test/")
    assert see(content, "http://b.test/", body)[0] is ContentKind.UNCHANGED  # A still has it: nothing new
    see(content, "http://a.test/", later)
    # B is now the only holder of the body: new, the first of its copies
    assert see(content, "http://b.test/", body) == (ContentKind.NEW, None)
    assert see(content, "http://c.test/", body) == (ContentKind.EXACT, "http://b.test/")
    content.close()


_KILLED_WRITER = """
import sys, time
from pathlib import Path
from crawlspace.seen.content import ContentSeen
from crawlspace.urls.fingerprint import content_fingerprint

directory, own, other, third = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
content = ContentSeen(directory, commit_every=1_000_000)

def see(url, text):
    if content.check(url, content_fingerprint(text.encode()), 1.0).kind.name == "NEW":
        content.check_near(url, text)

see("http://a.test/", own)
see("http://b.test/", other)
see("http://a.test/", other)  # A's own text forgotten ...
content.checkpoint()  # ... durably
see("http://b.test/", third)  # after the checkpoint: lost with the crash, B keeps `other`
print("ready", flush=True)
time.sleep(60)
"""


def test_forgotten_entries_stay_forgotten_after_kill_9_and_kept_ones_stay(tmp_path: Path) -> None:
    """A kill -9 after a checkpoint: the set reopens at it, neither resurrecting the fingerprint and
    LSH entries a refetch dropped nor losing the ones it kept; what came after is rolled back whole."""
    own, other, third = text_of(16), text_of(17), text_of(18)
    directory = tmp_path / "content"
    assert kill_at_first_line(_KILLED_WRITER, str(directory), own, other, third) == "ready"
    content = ContentSeen(directory)
    assert content.fingerprint_of("http://a.test/") == content_fingerprint(other.encode())
    assert content.fingerprint_of("http://b.test/") == content_fingerprint(other.encode())  # B's change rolled back
    assert see(content, "http://x.test/", own) == (ContentKind.NEW, None)  # not resurrected: A no longer has it
    assert see(content, "http://y.test/", changed(own, 2)) == (ContentKind.NEAR, "http://x.test/")
    assert see(content, "http://z.test/", other) == (ContentKind.EXACT, "http://b.test/")  # kept
    assert see(content, "http://w.test/", third) == (ContentKind.NEW, None)  # never committed
    content.close()


def test_persists_across_checkpoint_close_and_reopen(tmp_path: Path) -> None:
    content = ContentSeen(tmp_path, commit_every=1_000_000)
    body = text_of(7)
    see(content, "http://a.test/", body)
    see(content, "http://b.test/", changed(body, 3))
    content.checkpoint()
    see(content, "http://c.test/", text_of(8))  # after the checkpoint, then a crash
    content.abandon()
    reopened = ContentSeen(tmp_path, commit_every=1_000_000)
    assert len(reopened) == 2
    assert reopened.verdict_of("http://c.test/") is None
    near = reopened.verdict_of("http://b.test/")
    assert near is not None and near.kind is ContentKind.NEAR and near.of_url == "http://a.test/"
    assert see(reopened, "http://e.test/", body) == (ContentKind.EXACT, "http://a.test/")
    assert see(reopened, "http://f.test/", changed(body, 4, seed=1)) == (ContentKind.NEAR, "http://a.test/")
    reopened.close()
    again = ContentSeen(tmp_path)
    assert len(again) == 4
    again.close()
    assert len(ContentSeen(tmp_path, reset=True)) == 0


def test_reopening_with_other_shingling_parameters_is_an_error(tmp_path: Path) -> None:
    ContentSeen(tmp_path, shingle_words=4).close()
    with pytest.raises(SeenStateError, match=r"k=4 perm=128.*k=3 perm=128"):
        ContentSeen(tmp_path, shingle_words=3)
    ContentSeen(tmp_path, near_threshold=0.8).close()  # the threshold may change


def test_the_first_url_the_owner_names_is_this_sets_first_too(tmp_path: Path) -> None:
    """Several partitions: the one owning the fingerprint says which URL had the body first; the set
    keeps the answer, so that later copies here refer to that original too, and that URL's own check,
    when a copy was told of it first, finds it NEW."""
    content = ContentSeen(tmp_path)
    body = content_fingerprint(b"<html>one body</html>")
    copy = content.check("http://b.test/", body, 2.0, first=("http://a.test/", 1.0))
    assert (copy.kind, copy.of_url, copy.of_time) == (ContentKind.EXACT, "http://a.test/", 1.0)
    later = content.check("http://c.test/", body, 3.0)  # the owner could not be asked: this set decides
    assert (later.kind, later.of_url, later.of_time) == (ContentKind.EXACT, "http://a.test/", 1.0)
    verdict = content.verdict_of("http://b.test/")  # the original's own record is in another partition
    assert verdict is not None and (verdict.of_url, verdict.of_time) == ("http://a.test/", 1.0)
    assert content.check("http://a.test/", body, 1.0, first=("http://a.test/", 1.0)).kind is ContentKind.NEW
    content.close()


def test_claims_name_one_first_url_until_it_is_released(tmp_path: Path) -> None:
    content = ContentSeen(tmp_path)
    assert content.claim_first(7, "http://a.test/", 1.0) == ("http://a.test/", 1.0)
    assert content.claim_first(7, "http://b.test/", 2.0) == ("http://a.test/", 1.0)
    assert content.claim_first(7, "http://a.test/", 5.0) == ("http://a.test/", 1.0)  # fetched again
    content.release_first(7, "http://b.test/")  # not the first: nothing changes
    assert content.claim_first(7, "http://c.test/", 3.0) == ("http://a.test/", 1.0)
    content.release_first(7, "http://a.test/")  # a near-duplicate the crawl did not store
    assert content.claim_first(7, "http://c.test/", 3.0) == ("http://c.test/", 3.0)
    content.close()


def test_a_released_first_url_is_nobodys_original(tmp_path: Path) -> None:
    """A page that was not stored cannot be referred to: the next URL with its body is the first."""
    content = ContentSeen(tmp_path)
    text = text_of(10)
    body = content_fingerprint(text.encode())
    assert see(content, "http://a.test/", text) == (ContentKind.NEW, None)
    content.release_first(body, "http://a.test/")
    assert content.check("http://b.test/", body, 2.0).kind is ContentKind.NEW
    assert see(content, "http://c.test/", text) == (ContentKind.EXACT, "http://b.test/")
    content.close()


def test_check_near_needs_a_new_page(tmp_path: Path) -> None:
    content = ContentSeen(tmp_path)
    with pytest.raises(KeyError, match="before check"):
        content.check_near("http://a.test/", "some words here")
    body = text_of(9)
    see(content, "http://a.test/", body)
    with pytest.raises(ValueError, match="not new and unindexed"):
        content.check_near("http://a.test/", body)
    assert see(content, "http://empty.test/", "") == (ContentKind.NEW, None)  # no words: exact test only
    content.close()


# -- the simulated web's ground truth -----------------------------------------------------------------


def test_simweb_ground_truth(tmp_path: Path) -> None:
    """Exact duplicates perfect; near duplicates (1 to 5 words changed) precision >= 0.95, recall >= 0.9."""
    web = SimWeb.generate(
        SimWebConfig(
            hosts=30,
            seed=11,
            mean_pages_per_host=12,
            duplicate_fraction=0.08,
            near_duplicate_fraction=0.2,
            include_trap=False,
        )
    )
    urls = [url for url in web.all_urls() if web.status(url) == 200]
    random.Random(3).shuffle(urls)  # crawl order: originals are not always first
    content = ContentSeen(tmp_path)
    exact: dict[str, str] = {}
    near: dict[str, str] = {}
    for number, url in enumerate(urls):
        body = web.body(url)
        verdict = content.check(url, content_fingerprint(body), float(number))
        if verdict.kind is ContentKind.NEW:
            verdict = content.check_near(url, parse_html(body, url).text)
        assert verdict.of_url is not None or verdict.kind is ContentKind.NEW
        if verdict.kind is ContentKind.EXACT:
            exact[url] = str(verdict.of_url)
        elif verdict.kind is ContentKind.NEAR:
            near[url] = str(verdict.of_url)
    content.close()

    clusters = [[url for url in members if url in set(urls)] for members in web.duplicate_clusters().values()]
    expected_exact = sum(len(members) - 1 for members in clusters if members)
    assert expected_exact > 20
    assert len(exact) == expected_exact
    for url, original in exact.items():
        assert web.duplicate_cluster(url) is not None and web.duplicate_cluster(url) == web.duplicate_cluster(original)

    true_pairs = {frozenset((url, original)) for url in urls if (original := web.near_duplicate_of(url)) is not None}
    assert len(true_pairs) > 40
    found = {frozenset(pair) for pair in near.items()}
    correct = found & true_pairs
    precision = len(correct) / max(1, len(found))
    recall = len(correct) / len(true_pairs)
    assert precision >= 0.95, (precision, sorted(map(sorted, found - true_pairs)))
    assert recall >= 0.9, (recall, sorted(map(sorted, true_pairs - found)))
