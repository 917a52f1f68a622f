"""What a resume with another number of processes makes of a crawl directory (crawl.partitioning), and
the URL set's recorded fingerprint spelling (an old directory keeps its own, or is a clear error)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from crawlspace.crawl import partitioning
from crawlspace.crawl.partitioning import Partitioning, PartitioningError, legacy, plan
from crawlspace.distributed.assignment import HostBucketAssignment, ModuloAssignment
from crawlspace.distributed.resize import Resize
from crawlspace.seen import SeenStateError, UrlSet
from crawlspace.seen.urlset import SCHEME_FILE
from crawlspace.urls.fingerprint import UrlFingerprints


def test_a_new_crawl_uses_host_buckets_and_a_resume_keeps_them() -> None:
    new = plan(None, 3)
    assert new == Partitioning(3) and new.resize is None and new.workers == 3
    assert isinstance(new.make_assignment(), HostBucketAssignment)
    assert plan(new, 3) is new


def test_another_count_is_a_resize_and_its_phase_is_resumed_not_restarted() -> None:
    grown = plan(Partitioning(2), 3)
    assert grown.resize == Resize(previous=2, partitions=3, epoch=1) and grown.workers == 3
    assert plan(grown, 3) is grown, "killed in the phase: the same resize again"
    with pytest.raises(PartitioningError, match="resume it with 3 first"):
        plan(grown, 2)
    done = grown.resized()
    assert done.resize is None and done.epoch == 1
    shrunk = plan(done, 2)
    assert shrunk.resize == Resize(previous=3, partitions=2, epoch=2) and shrunk.workers == 3


def test_a_modulo_directory_resizes_to_host_buckets_but_keeps_its_flat_fingerprints() -> None:
    old = legacy(2)
    assert isinstance(old.make_assignment(), ModuloAssignment) and old.fingerprints is UrlFingerprints.FLAT
    assert plan(old, 2) is old
    resized = plan(old, 4)
    assert resized.assignment == "host-buckets" and resized.fingerprints is UrlFingerprints.FLAT
    assert resized.resize == Resize(previous=2, partitions=4, epoch=1)


@pytest.mark.parametrize(("saved", "wanted"), [(1, 2), (3, 1)])
def test_one_process_and_several_do_not_convert(saved: int, wanted: int) -> None:
    with pytest.raises(PartitioningError, match="2 or more processes"):
        plan(Partitioning(saved), wanted)


def test_the_record_round_trips_and_a_bad_one_is_named(tmp_path: Path) -> None:
    assert partitioning.read(tmp_path) is None
    record = plan(Partitioning(2), 5)
    partitioning.write(tmp_path, record)
    assert partitioning.read(tmp_path) == record
    (tmp_path / partitioning.LAYOUT_FILE).write_text('{"format": "crawlspace-partitions/1", "partitions": 2}')
    with pytest.raises(PartitioningError, match=r"partitions\.json"):
        partitioning.read(tmp_path)
    (tmp_path / partitioning.LAYOUT_FILE).write_text("{not json")
    with pytest.raises(PartitioningError, match="cannot read"):
        partitioning.read(tmp_path)


def test_a_url_set_records_its_fingerprints_and_an_old_one_stays_flat(tmp_path: Path) -> None:
    fresh: UrlSet[int] = UrlSet.open(tmp_path / "new", reset=True)
    assert fresh.scheme is UrlFingerprints.HOST_BUCKET
    fresh.close()
    assert UrlSet.open(tmp_path / "new").scheme is UrlFingerprints.HOST_BUCKET
    made_before: UrlSet[int] = UrlSet.open(tmp_path / "old", reset=True)
    made_before.close()
    (tmp_path / "old" / SCHEME_FILE).unlink()  # as every crawl made before the record
    assert UrlSet.open(tmp_path / "old").scheme is UrlFingerprints.FLAT
    with pytest.raises(SeenStateError, match="this crawl's are host-bucket"):
        UrlSet.open(tmp_path / "old", scheme=UrlFingerprints.HOST_BUCKET)
    (tmp_path / "old" / SCHEME_FILE).write_text("fancy/9\n")
    with pytest.raises(SeenStateError, match="unknown to this version"):
        UrlSet.open(tmp_path / "old")
    flat: UrlSet[int] = UrlSet.open(tmp_path / "flat", reset=True, scheme=UrlFingerprints.FLAT)
    assert flat.scheme is UrlFingerprints.FLAT
    flat.close()


def test_scan_yields_every_fingerprint_once(tmp_path: Path) -> None:
    urls: UrlSet[int] = UrlSet.open(tmp_path, reset=True, buffer_urls=100)
    values = np.unique(np.random.default_rng(3).integers(1, 2**63, 5000, dtype=np.uint64))
    for start in range(0, values.size, 700):
        urls.insert(values[start : start + 700])
        if start % 1400 == 0:
            urls.checkpoint()  # some in runs, some in the tail
    scanned = np.concatenate(list(urls.backend.scan(chunk=333)))
    assert np.array_equal(np.sort(scanned), values)
    urls.close()
