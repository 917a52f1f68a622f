"""The content set's store: the contract both stores keep, the content set over the fake, and the
LMDB sets of earlier crawls copied into the store when they resume."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from pathlib import Path

import lmdb
import pytest

from crawlspace.seen import content as content_module
from crawlspace.seen.content import ContentKind, ContentSeen
from crawlspace.seen.contentstore import (
    LMDB_MULTI,
    LMDB_TABLES,
    ContentStore,
    KeyFilter,
    MemoryContentStore,
    RocksContentStore,
)
from crawlspace.seen.sortedruns import SeenStateError
from tests.seen.test_content import changed, see, text_of

Reopen = Callable[[], ContentStore]


def _stores(tmp_path: Path) -> list[tuple[ContentStore, Reopen]]:
    memory = MemoryContentStore(counted=(2,))
    return [
        (
            RocksContentStore(tmp_path / "rocks", counted=(2,)),
            lambda: RocksContentStore(tmp_path / "rocks", counted=(2,)),
        ),
        (memory, memory.reopened),
    ]


@pytest.mark.parametrize("which", [0, 1], ids=["rocksdb", "fake"])
def test_reads_see_uncommitted_writes_and_a_crash_keeps_only_the_committed(tmp_path: Path, which: int) -> None:
    store, reopen = _stores(tmp_path)[which]
    store.put(1, b"a", b"first")
    store.put(2, b"a", b"in table 2")
    store.put(2, b"b", b"second")
    assert store.get(1, b"a") == b"first" and store.get(2, b"a") == b"in table 2"
    assert store.get_many(2, [b"b", b"zz", b"a"]) == [b"second", None, b"in table 2"]
    assert store.count(2) == 2
    store.commit()
    store.delete(2, b"a")
    store.put(2, b"c", b"after the commit")
    store.put(1, b"a", b"changed")
    assert store.get(2, b"a") is None and store.count(2) == 2
    assert sorted(store.values(2)) == [b"after the commit", b"second"]
    store.abandon()
    reopened = reopen()
    assert reopened.get(1, b"a") == b"first" and reopened.get(2, b"a") == b"in table 2"
    assert reopened.get(2, b"c") is None
    assert reopened.count(2) == 2 and sorted(reopened.values(2)) == [b"in table 2", b"second"]
    with pytest.raises(ValueError, match="not counted"):
        reopened.count(1)
    reopened.close()


def test_a_locked_store_is_a_clear_error(tmp_path: Path) -> None:
    first = ContentSeen(tmp_path)
    with pytest.raises(SeenStateError, match="cannot open the content set"):
        ContentSeen(tmp_path)
    first.close()


def test_the_content_set_over_the_fake_rolls_back_what_came_after_the_checkpoint(tmp_path: Path) -> None:
    store = MemoryContentStore(counted=content_module._COUNTED)
    content = ContentSeen(tmp_path, store=store, commit_every=1_000_000)
    body = text_of(30)
    assert see(content, "http://a.test/", body) == (ContentKind.NEW, None)
    assert see(content, "http://b.test/", changed(body, 3)) == (ContentKind.NEAR, "http://a.test/")
    content.checkpoint()
    assert store.syncs == 1
    assert see(content, "http://c.test/", text_of(31)) == (ContentKind.NEW, None)
    content.abandon()
    reopened = ContentSeen(tmp_path, store=store.reopened())
    assert len(reopened) == 2 and reopened.verdict_of("http://c.test/") is None
    assert see(reopened, "http://d.test/", body) == (ContentKind.EXACT, "http://a.test/")
    assert see(reopened, "http://e.test/", changed(body, 4, seed=2)) == (ContentKind.NEAR, "http://a.test/")


def test_commit_every_bounds_the_uncommitted_pages() -> None:
    store = MemoryContentStore(counted=content_module._COUNTED)
    content = ContentSeen("unused", store=store, commit_every=3)
    for number in range(7):
        see(content, f"http://a.test/{number}", text_of(100 + number))
    assert store.commits == 2  # after the 3rd and the 6th page
    content.abandon()
    assert len(ContentSeen("unused", store=store.reopened())) == 6


def test_a_band_shared_by_pages_holds_each_once_and_loses_only_the_one_discarded(tmp_path: Path) -> None:
    content = ContentSeen(tmp_path)
    band = content_module._BAND
    keys = [bytes([0]) + (1).to_bytes(8, "big"), bytes([1]) + (2).to_bytes(8, "big")]
    one, two = (1).to_bytes(8, "big"), (2).to_bytes(8, "big")
    for member in (one, two, one):
        content._add_members(band, keys[:1], member, content._members(band, keys[:1]))
    assert content._members(band, keys) == [[one, two], []]
    content._discard_member(band, keys[0], one)
    content._discard_member(band, keys[1], one)  # not there: nothing changes
    assert content._members(band, keys) == [[two], []]
    content._discard_member(band, keys[0], two)
    assert content._tables.get(band, keys[0]) is None  # an empty band is deleted, not kept empty
    content.close()


def _write_lmdb_set(directory: Path, committed: dict[bytes, bytes]) -> None:
    """The layout of the LMDB content sets crawls made before the store: a named database per table,
    the band tables dupsort with one URL key per value."""
    env = lmdb.open(str(directory), map_size=1 << 30, max_dbs=8, subdir=True)
    names = {number: name for name, number in content_module._TABLE_NUMBERS.items()}
    with env.begin(write=True) as txn:
        for name in LMDB_TABLES:
            env.open_db(name, txn=txn, dupsort=name in LMDB_MULTI, dupfixed=name in LMDB_MULTI)
        for table, items in itertools.groupby(sorted(committed.items()), key=lambda item: item[0][0]):
            name = names[table]
            database = env.open_db(name, txn=txn, dupsort=name in LMDB_MULTI, dupfixed=name in LMDB_MULTI)
            for key, value in items:
                if name in LMDB_MULTI:
                    for start in range(0, len(value), 8):
                        txn.put(key[1:], value[start : start + 8], db=database, dupdata=True)
                else:
                    txn.put(key[1:], value, db=database)
    env.close()


def test_an_lmdb_set_of_an_earlier_crawl_is_copied_into_the_store_on_resume(tmp_path: Path) -> None:
    store = MemoryContentStore(counted=content_module._COUNTED)
    earlier = ContentSeen(tmp_path / "unused", store=store)
    body, other = text_of(50), text_of(51)
    see(earlier, "http://a.test/", body)
    see(earlier, "http://b.test/", changed(body, 2))
    see(earlier, "http://c.test/", other)
    see(earlier, "http://d.test/", other)
    earlier.close()
    directory = tmp_path / "content"
    directory.mkdir()
    _write_lmdb_set(directory, store.committed)
    resumed = ContentSeen(directory)
    assert not (directory / "data.mdb").exists()
    assert len(resumed) == 4
    assert sorted(resumed.urls()) == ["http://a.test/", "http://b.test/", "http://c.test/", "http://d.test/"]
    near = resumed.verdict_of("http://b.test/")
    assert near is not None and near.kind is ContentKind.NEAR and near.of_url == "http://a.test/"
    assert see(resumed, "http://e.test/", other) == (ContentKind.EXACT, "http://c.test/")
    assert see(resumed, "http://f.test/", changed(body, 3, seed=5)) == (ContentKind.NEAR, "http://a.test/")
    resumed.close()
    assert len(ContentSeen(directory)) == 6


class _FullDisk:
    """Stands in for the RocksDB handle: every write fails as RocksDB reports a full disk."""

    def __init__(self, real: object) -> None:
        self.real = real

    def write(self, *_: object) -> None:
        raise Exception("IO error: No space left on device: While appending to file: 000004.log")

    def get(self, key: object) -> object:
        return self.real.get(key)  # type: ignore[attr-defined]


def test_a_full_disk_is_the_oserror_the_engine_stops_on_and_loses_nothing_committed(tmp_path: Path) -> None:
    import errno

    store = RocksContentStore(tmp_path / "rocks", counted=(2,))
    store.put(2, b"kept", b"1")
    store.commit()
    real = store._db
    store._db = _FullDisk(real)  # type: ignore[assignment]
    store.put(2, b"lost", b"2")
    with pytest.raises(OSError) as raised:
        store.commit()
    assert raised.value.errno == errno.ENOSPC and "content set" in str(raised.value)
    assert store.get(2, b"lost") == b"2"  # still pending: a commit once space is back writes it
    store._db = real
    store.abandon()
    reopened = RocksContentStore(tmp_path / "rocks", counted=(2,))
    assert reopened.get(2, b"kept") == b"1" and reopened.get(2, b"lost") is None and reopened.count(2) == 1
    reopened.close()


@pytest.mark.parametrize("filter_bytes", [8, 1 << 12], ids=["saturated", "on"])
def test_filtered_reads_are_the_stores_whatever_was_committed_rolled_back_or_reopened(
    tmp_path: Path, filter_bytes: int
) -> None:
    """The bloom filter in front of RocksDB never hides a key: reads match the fake's through puts,
    deletes, commits, a crash and reopenings (its rebuild from the committed keys); a filter too small
    for the keys turns itself off."""
    rng = random.Random(5)

    def open_rocks() -> RocksContentStore:
        return RocksContentStore(tmp_path / "rocks", counted=(2,), filtered=(1, 2), filter_bytes=filter_bytes)

    rocks, fake = open_rocks(), MemoryContentStore(counted=(2,))
    keys = [rng.randbytes(rng.choice((8, 9))) for _ in range(300)]
    for step in range(3000):
        table, key = rng.choice((1, 2, 3)), rng.choice(keys)
        action = rng.random()
        for store in (rocks, fake):
            if action < 0.5:
                store.put(table, key, b"%d" % step)
            elif action < 0.6:
                store.delete(table, key)
        if step % 97 == 0:
            rocks.commit()
            fake.commit()
        if step % 701 == 700:
            if step % 2:
                rocks.abandon()
                fake.abandon()
                fake = fake.reopened()
            else:
                rocks.close()
                fake.close()
                fake = fake.reopened()
            rocks = open_rocks()
        asked = rng.sample(keys, 8)
        assert rocks.get(table, asked[0]) == fake.get(table, asked[0])
        assert rocks.get_many(table, asked) == fake.get_many(table, asked)
    assert rocks.count(2) == fake.count(2)
    assert rocks._filter.on == (filter_bytes > 8)
    rocks.close()


def test_the_key_filter_has_no_false_negatives_few_false_positives_and_turns_off_past_its_capacity() -> None:
    rng = random.Random(6)
    keys = [rng.randbytes(9) for _ in range(20_000)]
    key_filter = KeyFilter(1 << 16)  # capacity 65,536 keys
    key_filter.add_many(keys[:10_000])
    key_filter.add_many(keys[10_000:])
    assert key_filter.on and all(key_filter.may_hold(key) for key in keys)
    others = [rng.randbytes(9) for _ in range(20_000)]
    assert sum(map(key_filter.may_hold, others)) < 0.01 * len(others)  # 26 bits a key: about 0.1%
    mixed = keys[:500] + others
    assert key_filter.may_hold_any(mixed) == [key for key in mixed if key_filter.may_hold(key)]
    key_filter.add_many([rng.randbytes(9) for _ in range(50_000)])
    assert not key_filter.on and key_filter.may_hold(others[0])
    with pytest.raises(ValueError, match="power of two"):
        KeyFilter(1000)
