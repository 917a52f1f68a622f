"""The URL set against a Python set: never a false "seen", never a false "new", in arrival order.

The model is the obvious sequential one: each submitted (fingerprint, item) in turn is new
iff its fingerprint was never submitted before. The real set batches, caches, spills runs,
merges them, checkpoints, is closed and reopened, and "crashes" (dropped without a
checkpoint): after a crash it must come back exactly as at its last checkpoint.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crawlspace.seen import sortedruns
from crawlspace.seen.sortedruns import RunStore, SeenStateError
from crawlspace.seen.urlset import FingerprintCache, FingerprintSet, PartitionedFingerprintSet, UrlSet

# small values collide a lot (duplicates within and across batches); the edges of uint64 and 0 too
FINGERPRINTS = st.one_of(
    st.integers(0, 40),
    st.sampled_from([2**63 - 1, 2**63, 2**64 - 1, 2**64 - 2, 1 << 40]),
    st.integers(0, 2**64 - 1),
)

OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("submit"), st.lists(FINGERPRINTS, min_size=0, max_size=12)),
        st.tuples(st.just("drain"), st.none()),
        st.tuples(st.just("checkpoint"), st.none()),
        st.tuples(st.just("reopen"), st.none()),
        st.tuples(st.just("crash"), st.none()),
    ),
    max_size=60,
)


class Model:
    def __init__(self) -> None:
        self.seen: set[int] = set()
        self.pending: list[tuple[int, int]] = []
        self.durable: set[int] = set()

    def drain(self) -> list[int]:
        out = []
        for fingerprint, item in self.pending:
            if fingerprint not in self.seen:
                self.seen.add(fingerprint)
                out.append(item)
        self.pending = []
        return out


def open_backend(directory: Path, partitions: int) -> FingerprintSet:
    if partitions == 1:
        return RunStore(directory, memtable_limit=3)
    return PartitionedFingerprintSet.open_local(directory, partitions, memtable_limit=3)


def crash(urls: UrlSet[Any]) -> None:
    """Drop the set without checkpointing, as a killed process would (files closed, nothing written)."""
    backend = urls.backend
    stores = backend.partitions if isinstance(backend, PartitionedFingerprintSet) else [backend]
    for store in stores:
        assert isinstance(store, RunStore)
        store.close(checkpoint=False)


def run_operations(directory: Path, operations: list[tuple[str, Any]], partitions: int, cache_bytes: int) -> None:
    def fresh() -> UrlSet[int]:
        return UrlSet(open_backend(directory, partitions), cache_bytes=cache_bytes, buffer_urls=5)

    urls = fresh()
    model = Model()
    next_item = 0
    for name, argument in operations:
        if name == "submit":
            items = list(range(next_item, next_item + len(argument)))
            next_item += len(argument)
            urls.submit_many(argument, items)
            model.pending.extend(zip(argument, items, strict=True))
            if urls.full:
                assert urls.drain() == model.drain()
        elif name == "drain":
            assert urls.drain() == model.drain()
        elif name == "checkpoint":
            assert urls.drain() == model.drain()
            urls.checkpoint()
            model.durable = set(model.seen)
        elif name == "reopen":
            assert urls.drain() == model.drain()
            urls.close()
            model.durable = set(model.seen)
            urls = fresh()
        elif name == "crash":
            crash(urls)
            model.seen = set(model.durable)
            model.pending = []
            urls = fresh()
        assert len(urls) == len(model.seen)
    assert urls.drain() == model.drain()
    probe = sorted(model.seen | {0, 1, 2, 3, 2**64 - 1, 12345678901234567})
    assert urls.contains(probe).tolist() == [value in model.seen for value in probe]
    urls.close()


@pytest.mark.usefixtures("tiny_runs")
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(operations=OPERATIONS, partitions=st.sampled_from([1, 3]), cache_bytes=st.sampled_from([0, 33 * 2, 4096]))
def test_urlset_matches_a_python_set(
    tmp_path_factory: pytest.TempPathFactory, operations: list[tuple[str, Any]], partitions: int, cache_bytes: int
) -> None:
    run_operations(tmp_path_factory.mktemp("urls"), operations, partitions, cache_bytes)


@pytest.mark.usefixtures("tiny_runs")
def test_many_batches_with_spills_merges_and_reopens(tmp_path: Path) -> None:
    """Thousands of fingerprints through many spills and merges; every drain checked against a set."""
    rng = np.random.default_rng(7)
    urls: UrlSet[int] = UrlSet(RunStore(tmp_path, memtable_limit=50), cache_bytes=2048, buffer_urls=64)
    seen: set[int] = set()
    item = 0
    for round_number in range(300):
        # a mix of old fingerprints (hits) and fresh random ones, and repeats inside one batch
        old = rng.choice(np.fromiter(seen, np.uint64), size=8) if seen else np.empty(0, np.uint64)
        fresh = rng.integers(0, 2**64 - 1, size=20, dtype=np.uint64, endpoint=True)
        batch = np.concatenate([old, fresh, fresh[:3], rng.integers(0, 300, size=10).astype(np.uint64)])
        rng.shuffle(batch)
        items = list(range(item, item + batch.size))
        item += batch.size
        urls.submit_many(batch, items)
        expected = []
        for fingerprint, entry in zip(batch.tolist(), items, strict=True):
            if fingerprint not in seen:
                seen.add(fingerprint)
                expected.append(entry)
        assert urls.drain() == expected
        if round_number % 97 == 96:
            urls.close()
            urls = UrlSet(RunStore(tmp_path, memtable_limit=50), cache_bytes=2048, buffer_urls=64)
    store = urls.backend
    assert isinstance(store, RunStore)
    assert len(store.runs) <= sortedruns.MAX_RUNS
    assert len(urls) == len(seen)
    assert urls.cache.hits > 0
    urls.close()


def test_cache_keeps_popular_fingerprints_and_forgets_one_off_ones() -> None:
    cache = FingerprintCache(33 * 4)  # 4 sets of 4 ways
    popular = np.array([11, 12], np.uint64)
    one_off = np.array([21, 22], np.uint64)
    cache.insert(np.concatenate([popular, one_off]))
    assert cache.probe(np.concatenate([popular, one_off])).all()
    rng = np.random.default_rng(5)
    for _ in range(40):
        cache.probe(popular)  # hit on every page, like a site's navigation links
        cache.insert(rng.integers(1, 2**64 - 1, size=2, dtype=np.uint64))
    assert cache.probe(popular).all()
    assert not cache.probe(one_off).any()  # 80 insertions into 16 ways pushed them out
    assert not cache.probe(np.array([0], np.uint64)).any()  # 0 marks an empty way, never a hit


def test_zero_budget_cache_never_hits() -> None:
    cache = FingerprintCache(0)
    cache.insert(np.array([5], np.uint64))
    assert not cache.probe(np.array([5], np.uint64)).any()


def test_checkpoint_refuses_with_pending_urls(tmp_path: Path) -> None:
    urls: UrlSet[str] = UrlSet.open(tmp_path, cache_bytes=1024, buffer_urls=10)
    assert urls.submit(42, "http://a.test/")
    with pytest.raises(RuntimeError, match="drain"):
        urls.checkpoint()
    assert urls.drain() == ["http://a.test/"]
    assert not urls.submit(42, "http://a.test/")  # now a cache hit: dropped at once
    assert urls.drain() == []
    urls.close()
    reopened: UrlSet[str] = UrlSet.open(tmp_path, cache_bytes=1024, buffer_urls=10)
    assert 42 in reopened and 43 not in reopened
    reopened.submit(42, "again")
    assert reopened.drain() == []
    reopened.close()
    fresh: UrlSet[str] = UrlSet.open(tmp_path, reset=True)
    assert len(fresh) == 0 and 42 not in fresh
    fresh.close()


def test_submit_many_rejects_mismatched_lengths(tmp_path: Path) -> None:
    urls: UrlSet[str] = UrlSet.open(tmp_path)
    with pytest.raises(ValueError, match="2 fingerprints for 1 items"):
        urls.submit_many([1, 2], ["x"])
    urls.close()


def test_runstore_rejects_unsorted_batches(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    with pytest.raises(ValueError, match="sorted and distinct"):
        store.test_and_set(np.array([3, 2], np.uint64))
    with pytest.raises(ValueError, match="sorted and distinct"):
        store.test_and_set(np.array([2, 2], np.uint64))
    store.close()


@pytest.mark.usefixtures("tiny_runs")
def test_partitions_split_by_fingerprint_mod_n(tmp_path: Path) -> None:
    parts = PartitionedFingerprintSet.open_local(tmp_path, 3, memtable_limit=4)
    values = np.arange(0, 60, dtype=np.uint64)
    assert parts.test_and_set(values).all()
    assert not parts.test_and_set(values).any()
    for index, partition in enumerate(parts.partitions):
        assert len(partition) == 20
        held = partition.contains(values)
        assert held.tolist() == [int(value) % 3 == index for value in values]
    parts.close()


# -- crash safety and corruption ------------------------------------------------------------------------


def filled_store(directory: Path, values: range) -> RunStore:
    store = RunStore(directory, memtable_limit=4)
    store.test_and_set(np.array(list(values), np.uint64))
    store.checkpoint()
    return store


@pytest.mark.usefixtures("tiny_runs")
def test_crash_after_checkpoint_reopens_at_the_checkpoint(tmp_path: Path) -> None:
    store = RunStore(tmp_path, memtable_limit=4)
    for start in range(0, 100, 10):  # even numbers, in batches: several checkpointed runs
        store.test_and_set(np.arange(start, start + 10, 2, dtype=np.uint64))
    store.checkpoint()
    checkpointed = {info.name for info in store.runs}
    for start in range(1, 100, 10):  # odd numbers: spills and merges replace checkpointed runs
        store.test_and_set(np.arange(start, start + 9, 2, dtype=np.uint64))
    assert len(store) == 100
    assert checkpointed - {info.name for info in store.runs}, "the test needs a merge of checkpointed runs"
    store.close(checkpoint=False)
    reopened = RunStore(tmp_path, memtable_limit=4)
    assert len(reopened) == 50
    assert {info.name for info in reopened.runs} == checkpointed
    everything = np.arange(0, 100, dtype=np.uint64)
    assert reopened.contains(everything).tolist() == [value % 2 == 0 for value in range(100)]
    on_disk = {path.name for path in tmp_path.iterdir() if path.name.startswith("run-")}
    assert on_disk == checkpointed  # files written after the checkpoint were removed
    reopened.close()


def test_torn_manifest_write_is_ignored(tmp_path: Path) -> None:
    store = filled_store(tmp_path, range(10))
    store.close()
    (tmp_path / "MANIFEST.tmp").write_text('{"format": "crawlspace-finger')  # crash while writing the next one
    (tmp_path / "run-00009999.fp").write_bytes(b"\x01" * 12)  # a half-written run
    reopened = RunStore(tmp_path)
    assert len(reopened) == 10
    assert not (tmp_path / "MANIFEST.tmp").exists() and not (tmp_path / "run-00009999.fp").exists()
    reopened.close()


def test_truncated_run_is_a_clear_error(tmp_path: Path) -> None:
    store = filled_store(tmp_path, range(10))
    store.close()
    run = next(tmp_path.glob("run-*.fp"))
    run.write_bytes(run.read_bytes()[:-3])
    with pytest.raises(SeenStateError, match=rf"{run.name}: .*torn file"):
        RunStore(tmp_path)


def test_flipped_byte_is_a_checksum_error(tmp_path: Path) -> None:
    store = filled_store(tmp_path, range(10, 20))
    store.close()
    run = next(tmp_path.glob("run-*.fp"))
    data = bytearray(run.read_bytes())
    data[-1] ^= 0x01  # the last fingerprint changes, order is kept: only the checksum can tell
    run.write_bytes(bytes(data))
    with pytest.raises(SeenStateError, match="checksum"):
        RunStore(tmp_path)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not json", "unreadable manifest"),
        ('{"format": "something-else/9"}', "not a fingerprint-run manifest"),
        ('{"format": "crawlspace-fingerprint-runs/1", "count": 3, "next": 1, "runs": []}', "do not add up"),
        (
            '{"format": "crawlspace-fingerprint-runs/1", "count": 0, "next": 1, "runs": [{"name": "../x"}]}',
            "malformed run entry",
        ),
    ],
)
def test_bad_manifest_is_a_clear_error(tmp_path: Path, content: str, message: str) -> None:
    (tmp_path / "MANIFEST").write_text(content)
    with pytest.raises(SeenStateError, match=message):
        RunStore(tmp_path)


def test_missing_run_is_a_clear_error(tmp_path: Path) -> None:
    store = filled_store(tmp_path, range(5))
    store.close()
    run = next(tmp_path.glob("run-*.fp"))
    run.unlink()
    with pytest.raises(SeenStateError, match="missing"):
        RunStore(tmp_path)


@pytest.mark.usefixtures("tiny_runs")
def test_merges_bound_the_extra_disk(tmp_path: Path) -> None:
    """Runs take at most 8 * 1.4 bytes per fingerprint while merged ones await the checkpoint, 8 after
    it (plus the manifest's few hundred bytes, which only matter at this toy size)."""
    store = RunStore(tmp_path, memtable_limit=64)
    rng = np.random.default_rng(3)
    worst = 0.0
    for _ in range(300):
        batch = np.unique(rng.integers(0, 2**64 - 1, size=64, dtype=np.uint64, endpoint=True))
        store.test_and_set(batch)
        worst = max(worst, sum(path.stat().st_size for path in tmp_path.glob("run-*.fp")) / len(store))
        store.checkpoint()
        assert sum(path.stat().st_size for path in tmp_path.glob("run-*.fp")) == 8 * len(store)
    assert 8.0 < worst <= 8.0 * (1 + sortedruns.MAX_MERGE_SHARE) <= 12.0
    assert len(store.runs) <= 12
    store.close()
