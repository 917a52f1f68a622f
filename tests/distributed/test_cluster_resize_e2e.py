"""A cluster crawl resized (`--resume DIR --cluster URL --nodes M` on every node), judged from the simulated
web's server log: three nodes stopped part-way, resumed as two (node 2 hands its hosts over and ends,
`drained`), then finished. Their fetches together are what one process fetches, nothing twice, nothing
lost, politely; the crawl's published size and every node's record say 2 afterwards."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

from crawlspace.simweb import RunningServer, SimWeb
from tests.conftest import REPO
from tests.distributed.holding_proxy import HoldingProxy
from tests.distributed.redis_server import RedisServer
from tests.distributed.test_cluster_e2e import (
    NODES,
    Cluster,
    cluster,
    judged,
    one_process_crawl,
    served,
    wait_for_requests,
    web,
)

__all__ = ["cluster", "served", "web"]  # the fixtures, shared with the cluster's other end-to-end tests

pytestmark = pytest.mark.slow

RESIZED = 2


def resume(nodes: Cluster, node: int, count: int, *, url: str | None = None) -> None:
    launch(nodes, node, "--resume", str(nodes.directory(node)), "--nodes", str(count), url=url)


def launch(nodes: Cluster, node: int, *arguments: str, url: str | None = None) -> None:
    command = [sys.executable, "-m", "crawlspace", "crawl", "--cluster", url or nodes.server.url, "--no-progress"]
    command += arguments
    log = (nodes.base / f"node{node}.log").open("a")
    nodes.processes[node] = subprocess.Popen(
        command, stdout=log, stderr=log, text=True, env=dict(os.environ, PYTHONPATH=str(REPO))
    )


def frequent_status(directory: Path) -> tuple[str, str]:
    """A node's options for a status every 0.2 s (each node's own setting, not the crawl's): a node whose
    per-IP claims gave it few pages (25 of 244 in a run here) took its queued URLs and emptied its queues
    between two statuses 2 s apart."""
    path = directory / "frequent-status.toml"
    path.write_text("progress_interval = 0.2\n")
    return "--config", str(path)


def wait_all_fetching(
    connection: redis.Redis, nodes: Cluster, *, queued_at: int, least: int, timeout: float = 90
) -> None:
    """Until every node's published status counts a fetched page and a fresh one of node `queued_at`
    (read within 0.1 s of its writing) shows at least `least` URLs queued: a stop then leaves that node
    URLs to hand over. Not a count of the server's requests: node 0 starts alone with the seeds and the
    others after their imports, so under load node 0 alone made the first 60 requests (CI's run failed
    so: a node had fetched nothing at the stop, or node 2 found no URL for node 0 once it was stopped)."""
    deadline = time.monotonic() + timeout
    last_update = None
    seen: list[list[tuple[int, int] | None]] = []  # (pages, queued) of each node, at each fresh status
    while True:
        raw = [connection.get(f"crawlspace:{{crawl}}:status:{node}") for node in range(NODES)]
        statuses = [json.loads(value) if value else {} for value in raw]
        fetching = all(status and status["progress"]["pages"] > 0 for status in statuses)
        watched = statuses[queued_at]
        fresh = bool(watched) and last_update is not None and watched["updated"] != last_update
        if fetching and fresh and watched["progress"]["frontier"] >= least:
            return
        if fresh:
            seen.append([(s["progress"]["pages"], s["progress"]["frontier"]) if s else None for s in statuses])
        last_update = watched.get("updated")
        if time.monotonic() >= deadline:  # every node's log and the last status: why it never did
            raise AssertionError(
                f"not every node fetched with {least} URLs queued at node {queued_at}: {seen} {raw!r}{nodes.outputs()}"
            )
        time.sleep(0.1)


def test_three_nodes_resumed_as_two_fetch_every_page_once(
    web: SimWeb, cluster: Cluster, served: RunningServer, redis_server: RedisServer, tmp_path: Path
) -> None:
    cluster.start_all("--min-delay", "0.25", every_node=frequent_status(tmp_path))  # URLs queued at the stop
    connection = redis.Redis.from_url(redis_server.url)
    wait_all_fetching(connection, cluster, queued_at=2, least=3)
    os.kill(cluster.processes[2].pid, signal.SIGTERM)  # node 2 stops at once, with URLs queued, and with it
    # the cluster (stopped by another node, it would go on fetching until it polled the cluster's stop, up to
    # 0.2 s later: time enough to empty its queues when the per-IP claims gave it few pages, 25-40 of 244 here)
    cluster.wait()
    before = len(served.read_log())
    stats = [cluster.stats(node) for node in range(NODES)]
    assert {s["termination"] for s in stats} == {"interrupted"}
    assert all(int(s["pages_fetched"]) > 0 for s in stats)  # type: ignore[call-overload]  # node 2 has hosts to hand over

    for node in range(NODES):
        resume(cluster, node, RESIZED)
        time.sleep(0.3)
    cluster.wait()
    assert len(served.read_log()) > before, "the resized crawl fetched nothing"
    fetched = judged(web, served)  # nothing lost, nothing twice, polite per host and per address
    assert fetched == one_process_crawl(web, tmp_path)

    stats = [cluster.stats(node) for node in range(NODES)]
    assert [s["termination"] for s in stats] == ["frontier-empty", "frontier-empty", "drained"]
    resize = [s["resize"] for s in stats]
    assert all(isinstance(r, dict) and (r["epoch"], r["from"], r["to"]) == (1, NODES, RESIZED) for r in resize)
    drained = resize[2]
    assert isinstance(drained, dict) and drained["draining"] and drained["parts"] > 0 and drained["urls_out"] > 0
    assert sum(r["urls_in"] for r in resize if isinstance(r, dict)) >= drained["urls_out"] > 0
    for node in range(NODES):
        saved = json.loads((cluster.directory(node) / "cluster.json").read_text())
        assert saved == {"crawl_id": "crawl", "node": node, "nodes": RESIZED, "epoch": 1, "resizing_from": None}
    meta = json.loads(connection.get("crawlspace:{crawl}:meta"))  # type: ignore[arg-type]
    connection.close()
    assert (meta["nodes"], meta["epoch"], meta["resizing_from"]) == (RESIZED, 1, None)


def test_two_nodes_grown_to_three_fetch_every_page_once(
    web: SimWeb, cluster: Cluster, served: RunningServer, redis_server: RedisServer, tmp_path: Path
) -> None:
    local = ["--hosts-file", str(served.hosts_file), "--concurrency", "4"]
    launch(cluster, 0, str(served.seeds_file), "--out", str(cluster.directory(0)), "--node", "0", "--nodes", "2",
           "--allow-private-addresses", "--min-delay", "0.02", *local)  # fmt: skip
    cluster.wait_published()
    launch(cluster, 1, "--out", str(cluster.directory(1)), "--node", "1", "--nodes", "2", *local)
    assert wait_for_requests(served, 60)
    os.kill(cluster.processes[1].pid, signal.SIGTERM)
    cluster.wait()

    for node in range(2):
        resume(cluster, node, 3)
    time.sleep(1.0)  # the first resumed node publishes the resize; the new node joins it
    launch(cluster, 2, "--out", str(cluster.directory(2)), "--node", "2", "--nodes", "3", *local)
    cluster.wait()
    fetched = judged(web, served)
    assert fetched == one_process_crawl(web, tmp_path)
    stats = [cluster.stats(node) for node in range(3)]
    assert [s["termination"] for s in stats] == ["frontier-empty"] * 3
    resize = stats[2]["resize"]
    assert isinstance(resize, dict) and resize["urls_in"] > 0  # the new node took hosts: it fetched their pages,
    # or handed them to the owners of their addresses (per-IP politeness; which it is depends on the addresses)
    assert int(stats[2]["pages_fetched"]) + int(stats[2]["handed_over"]) > 0  # type: ignore[call-overload]
    for node in range(3):
        saved = json.loads((cluster.directory(node) / "cluster.json").read_text())
        assert (saved["nodes"], saved["epoch"], saved["resizing_from"]) == (3, 1, None)


def wait_holding_batches(
    connection: redis.Redis, nodes: Cluster, node: int, receiver: int, timeout: float = 60
) -> None:
    """Until `node`'s published status has shown unacknowledged URL batches for `receiver` in two reports
    in a row (a node sends another a URL once, so batches for a running node in flight could otherwise
    stand for them). Not per-IP forwards: a resize hands those over as queued URLs and routes nothing
    of them again past its barrier (when node 2 held only forwards for node 0, it sent nothing there:
    CI's run failed so, and 2 runs of 2 here)."""
    deadline = time.monotonic() + timeout
    seen: set[float] = set()
    while len(seen) < 2:
        raw = connection.get(f"crawlspace:{{crawl}}:status:{node}")
        if time.monotonic() >= deadline:  # every node's log and the last status: why it never did
            raise AssertionError(f"node {node} never held a batch for {receiver}; its status {raw!r}{nodes.outputs()}")
        status = json.loads(raw) if raw else {}
        if status.get("unacknowledged_batches_by_node", {}).get(str(receiver), {}).get("batches", 0) > 0:
            seen.add(status["updated"])
        elif status:
            seen.clear()
        time.sleep(0.2)


def test_nodes_killed_at_the_barrier_and_in_the_drain_resume_the_same_phase(
    web: SimWeb, cluster: Cluster, served: RunningServer, redis_server: RedisServer, tmp_path: Path
) -> None:
    """Two kills of one resize from 3 nodes to 2: node 0 at the barrier, and the leaving node 2 after the
    barrier passed but before the new owners acknowledged the URL batches it still held (the old
    assignment's, routed again). Until they do, node 2's directory alone holds those URLs: its record
    must still say the phase is on, so that its resume repeats the phase and sends them again, and the
    others must wait for it rather than end the crawl without them."""
    cluster.start_all("--min-delay", "0.25", every_node=frequent_status(tmp_path))  # URLs for node 0 after its stop
    connection = redis.Redis.from_url(redis_server.url)
    wait_all_fetching(connection, cluster, queued_at=2, least=3)
    os.kill(cluster.processes[0].pid, signal.SIGSTOP)  # node 0 acknowledges nothing for a while: node 2 is
    wait_holding_batches(connection, cluster, 2, receiver=0)  # left holding URL batches for it when the cluster stops
    os.kill(cluster.processes[1].pid, signal.SIGTERM)  # (node 1's Ctrl-C)
    for node in (1, 2):
        cluster.processes[node].wait(60)
    os.kill(cluster.processes[0].pid, signal.SIGCONT)
    cluster.wait()
    for node in range(2):  # node 2 not yet: the others hand over, then wait for it at the barrier
        resume(cluster, node, RESIZED)
    barrier = "crawlspace:{crawl}:handed:1"
    deadline = time.monotonic() + 60
    while connection.scard(barrier) < 2:
        assert time.monotonic() < deadline, cluster.output(0)
        time.sleep(0.1)
    cluster.kill(0)  # SIGKILL at the barrier
    saved = json.loads((cluster.directory(0) / "cluster.json").read_text())
    assert (saved["nodes"], saved["epoch"], saved["resizing_from"]) == (RESIZED, 1, NODES)  # the phase, recorded
    resume(cluster, 0, RESIZED)  # the same phase again (its lock expires first)
    # Node 2 reaches Redis through a proxy that lets its barrier SADD through and holds its stream writes
    # after it: the batches it routes again past the barrier stay unsent, unacknowledged, however fast it is.
    proxy = HoldingProxy(redis_server.port, trigger=(b"SADD", barrier.encode()))
    proxy.start()
    try:
        resume(cluster, 2, RESIZED, url=proxy.url(redis_server.password))
        while "node 2: every node of resize 1 has handed over" not in cluster.output(2):  # past the barrier
            assert time.monotonic() < deadline, cluster.output(2)
            time.sleep(0.02)
        deadline = time.monotonic() + 30
        while proxy.held_chunks == 0:  # its batches routed again, checkpointed, waiting for Redis
            assert time.monotonic() < deadline, cluster.output(2)
            time.sleep(0.02)
        cluster.kill(2)  # SIGKILL in the drain
    finally:
        proxy.close()
    assert proxy.triggered.is_set()
    saved = json.loads((cluster.directory(2) / "cluster.json").read_text())
    assert (saved["nodes"], saved["resizing_from"]) == (RESIZED, NODES)  # not drained: the phase, still
    meta = json.loads(connection.get("crawlspace:{crawl}:meta"))  # type: ignore[arg-type]
    assert meta["resizing_from"] == NODES  # the crawl cannot be resized again meanwhile
    connection.delete("crawlspace:{crawl}:lock:2")  # as its expiry would, LOCK_TTL later
    resume(cluster, 2, RESIZED)
    cluster.wait()
    judged(web, served)  # nothing lost, nothing twice
    stats = [cluster.stats(node) for node in range(NODES)]
    assert [s["termination"] for s in stats] == ["frontier-empty"] * 2 + ["drained"]
    assert int(stats[0]["runs"]) == int(stats[2]["runs"]) == 3  # type: ignore[call-overload]
    drained = stats[2]["resize"]
    assert isinstance(drained, dict) and drained["batches_routed_again"] > 0  # it held batches when killed
    assert json.loads((cluster.directory(2) / "cluster.json").read_text())["resizing_from"] is None
    meta = json.loads(connection.get("crawlspace:{crawl}:meta"))  # type: ignore[arg-type]
    assert (meta["nodes"], meta["resizing_from"]) == (RESIZED, None)
    connection.close()
