"""The engine's side of a resize's phase (crawl/repartition.py) with its neighbours replaced by records:
what a partition repeating a phase it had already handed over in does with its unacknowledged batches."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import numpy as np
import pytest

from crawlspace.crawl.repartition import Repartition
from crawlspace.distributed.assignment import HostBucketAssignment
from crawlspace.distributed.resize import HandoverPlan, Resize
from crawlspace.distributed.router import PartitionRouter
from crawlspace.distributed.splitter import Batch
from crawlspace.frontier import FrontierEntry
from crawlspace.seen.sortedruns import RunStore
from crawlspace.urls.fingerprint import UrlFingerprints
from tests.distributed.test_router import RecordingJournal


class _Peers:
    """The transport: every batch transmitted, a barrier that passes at once."""

    def __init__(self) -> None:
        self.transmitted: list[Batch] = []

    def transmit(self, batches: list[Batch]) -> None:
        self.transmitted.extend(batches)

    async def repartitioned(self) -> bool:
        return True


class _Links:
    """The link pipeline: what went into the URL-seen test (where the owner's URL set decides)."""

    def __init__(self) -> None:
        self.submitted: list[str] = []

    def submit(self, entries: list[FrontierEntry]) -> None:
        self.submitted.extend(entry.url for entry in entries)


def test_a_repeated_phase_sends_a_forward_again_as_a_forward_not_through_the_url_set(tmp_path: Path) -> None:
    """A shrinking resize (3 partitions to 2, the third draining): partition 1 handed over and passed the
    barrier, then crawled and handed a leased URL of a host to partition 0, the owner of its address
    (per-IP politeness: a forward, the lease ended here). The crawl was killed before partition 0
    acknowledged and before the draining partition had drained, so the phase is not over: the resume
    repeats it, and partition 1, handed over already, goes straight to the end of the phase.

    The forward used to be routed again there as an ordinary batch: partition 0 tested its URLs against
    its URL set, which after a resize holds the crawl's history (what it queued itself in an earlier
    assignment, the others' seen parts) and may know them, and dropped them; partition 1's copy had ended
    with the lease. The URLs, and every page only they led to, were never fetched (52 pages of 338 in a
    stress run of test_kill_nine_during_the_handover_and_resume_loses_nothing with other kill timings).
    A forward is a URL its receiver tests only against its URLs of pinned hosts: it is sent again as one."""
    resize = Resize(previous=3, partitions=2, epoch=2)
    assignment = HostBucketAssignment(2)
    journal = RecordingJournal()
    router = PartitionRouter(1, assignment, journal, per_ip=True)
    forwarded = FrontierEntry("http://site0000.test/archive/a22.html", 2, 0)
    linked = FrontierEntry("http://site0001.test/p1.html", 3, 0)
    # the checkpoint and journal replayed: the host moved to partition 0, the forward unacknowledged, and a
    # batch of links found on a page after the barrier, unacknowledged too
    router.start_replay([(0, 7, True, [(forwarded.url, 2, 0)]), (0, 8, False, [(linked.url, 3, 0)])], 9, {}, [])
    router.replay_moved("site0000.test", 0)
    router.finish_replay()
    peers, links = _Peers(), _Links()
    resume_state = SimpleNamespace(
        resize_started=2, resize_handed=2, resize_unconfirmed=[], resize_pinned=[], done=set()
    )  # its handover was committed: the repeat goes straight to the barrier
    checkpoints: list[int] = []
    phase = Repartition(
        resize,
        HandoverPlan(1, assignment, fingerprints=UrlFingerprints.HOST_BUCKET, per_ip=True),
        peers=cast(Any, peers),
        frontier=cast(Any, None),
        urlset=cast(Any, None),
        links=cast(Any, links),
        url_filter=cast(Any, None),
        robots_gate=cast(Any, None),
        router=router,
        resume_state=cast(Any, resume_state),
        checkpoint=lambda: checkpoints.append(1),
        history_dir=tmp_path / "resize-history",
    )
    assert phase.handed

    assert asyncio.run(phase.run())

    assert forwarded.url not in links.submitted, "a forward was routed through its receiver's URL set"
    again = [batch for batch in peers.transmitted if batch.forward]
    assert [(batch.peer, batch.number, batch.entries) for batch in again] == [(0, 7, [forwarded])]
    assert [batch.number for batch in router.unacknowledged] == [7]  # kept until partition 0 acknowledges
    assert links.submitted == [linked.url]  # an ordinary batch goes through the host splitter again
    assert checkpoints  # the phase's last checkpoint holds what it decided


class _Killed(Exception):
    """A SIGKILL, as the removal of a file sees it."""


def test_a_kill_while_the_phase_drops_its_history_leaves_a_history_that_opens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the phase's last checkpoint the fingerprints the others handed over (seen/resize-history) are
    removed. A kill -9 in the middle of that removal, the phase not yet over (a draining partition had not
    drained), used to leave the manifest naming a run file already deleted: the phase's repeat could not
    open the history ('run named in the manifest is missing'), the partition died at every resume and the
    crawl ended 'worker-failed' with 170 of 338 pages never fetched (a stress run of the handover kill
    test). The manifest now goes first; the kill here falls right after the first run file is removed."""
    history = tmp_path / "resize-history"
    store = RunStore(history, memtable_limit=4)
    store.test_and_set(np.arange(1, 11, dtype=np.uint64))
    store.checkpoint()
    store.close(checkpoint=False)
    phase = Repartition(
        Resize(previous=3, partitions=2, epoch=2),
        HandoverPlan(1, HostBucketAssignment(2), fingerprints=UrlFingerprints.HOST_BUCKET, per_ip=True),
        peers=cast(Any, _Peers()), frontier=cast(Any, None), urlset=cast(Any, None), links=cast(Any, _Links()),
        url_filter=cast(Any, None), robots_gate=cast(Any, None), router=cast(Any, None),
        resume_state=cast(Any, SimpleNamespace()), checkpoint=lambda: None, history_dir=history,
    )  # fmt: skip
    unlink = os.unlink

    def killed_after_a_run(path: Any, *args: Any, **kwargs: Any) -> None:
        unlink(path, *args, **kwargs)
        if os.fspath(path).endswith(".fp"):
            raise _Killed

    monkeypatch.setattr(os, "unlink", killed_after_a_run)
    with pytest.raises(_Killed):
        phase._drop_history()
    monkeypatch.undo()
    reopened = RunStore(history)  # what the phase's repeat opens
    assert len(reopened) == 0
    reopened.close(checkpoint=False)


def test_a_kill_while_a_run_store_is_wiped_leaves_a_store_that_opens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same for a run store opened with reset=True (the URLs of pinned hosts, reset by a handover)."""
    directory = tmp_path / "pinned"
    store = RunStore(directory, memtable_limit=4)
    store.test_and_set(np.arange(1, 11, dtype=np.uint64))
    store.checkpoint()
    store.close(checkpoint=False)
    unlink = Path.unlink

    def killed_after_a_run(path: Path, *args: Any, **kwargs: Any) -> None:
        unlink(path, *args, **kwargs)
        if path.name.endswith(".fp"):
            raise _Killed

    monkeypatch.setattr(Path, "unlink", killed_after_a_run)
    with pytest.raises(_Killed):
        RunStore(directory, reset=True)
    monkeypatch.undo()
    reopened = RunStore(directory)
    assert len(reopened) == 0
    reopened.close(checkpoint=False)
