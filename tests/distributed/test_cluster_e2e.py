"""Three cluster nodes as separate OS processes (the CLI) against the simulated web and a redis-server of
the test's own, judged from the web server's request log: the union of the nodes' fetches is what one
process crawls, nothing is fetched twice (beyond the pages in flight at a SIGKILL), and politeness (per
host and per IP, hosts sharing an address included) holds across the nodes."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from crawlspace.api import Crawler
from crawlspace.config import CrawlConfig
from crawlspace.simweb import RunningServer, SimWeb, SimWebConfig, judge_crawl, serve_in_background
from crawlspace.store.reader import CrawlReader
from tests.conftest import REPO, run_cli
from tests.distributed.redis_server import RedisServer

pytestmark = pytest.mark.slow

WEB = SimWebConfig(
    hosts=30, seed=11, mean_pages_per_host=8.0, max_pages_per_host=60, robots_crawl_delay=0.0, include_trap=False,
    shared_ip_hosts=6,
)  # fmt: skip
MIN_DELAY = 0.02
NODES = 3
CONCURRENCY = 4


@pytest.fixture(scope="module")
def web() -> SimWeb:
    return SimWeb.generate(WEB)


@pytest.fixture
def served(web: SimWeb, tmp_path: Path) -> Iterator[RunningServer]:
    with serve_in_background(web, tmp_path / "simweb", seeds=5) as running:
        yield running


class Cluster:
    """The nodes' processes, each with its own directory under `base`."""

    def __init__(self, base: Path, server: RedisServer, web: RunningServer) -> None:
        self.base, self.server, self.web = base, server, web
        self.processes: dict[int, subprocess.Popen[str]] = {}

    def directory(self, node: int) -> Path:
        return self.base / f"node{node}"

    def start(
        self, node: int, *, resume: bool = False, extra: tuple[str, ...] = (), every_node: tuple[str, ...] = ()
    ) -> None:
        """`extra`: the crawl's options, given to node 0; `every_node`: a node's own (such as its cadence)."""
        command = [sys.executable, "-m", "crawlspace", "crawl", "--cluster", self.server.url, "--no-progress"]
        command += every_node
        if resume:
            command += ["--resume", str(self.directory(node))]
        else:
            command += ["--out", str(self.directory(node)), "--node", str(node), "--nodes", str(NODES)]
            command += ["--hosts-file", str(self.web.hosts_file), "--concurrency", str(CONCURRENCY)]
            if node == 0:  # the first node: the seeds and the crawl's configuration
                command += [str(self.web.seeds_file), "--allow-private-addresses", "--min-delay", str(MIN_DELAY)]
                command += ["--max-seconds", "150", *extra]
        log = (self.base / f"node{node}.log").open("a")
        self.processes[node] = subprocess.Popen(
            command, stdout=log, stderr=log, text=True, env=dict(os.environ, PYTHONPATH=str(REPO))
        )

    def start_all(self, *extra: str, every_node: tuple[str, ...] = ()) -> None:
        self.start(0, extra=extra, every_node=every_node)
        self.wait_published()  # the first node publishes the crawl; the others join it
        for node in range(1, NODES):
            self.start(node, every_node=every_node)

    def wait_published(self, timeout: float = 60) -> None:
        """Until the first node has published the crawl: one started before takes its own configuration,
        not the crawl's, and is refused (a fixed 1 s was too short at a load average of 12)."""
        connection = redis.Redis.from_url(self.server.url)
        try:
            deadline = time.monotonic() + timeout
            while not connection.exists("crawlspace:{crawl}:meta"):
                assert time.monotonic() < deadline and self.processes[0].poll() is None, self.output(0)
                time.sleep(0.05)
        finally:
            connection.close()

    def kill(self, node: int) -> None:
        process = self.processes[node]
        os.kill(process.pid, signal.SIGKILL)
        process.wait()

    def wait(self, timeout: float = 240) -> None:
        deadline = time.monotonic() + timeout
        for node, process in self.processes.items():
            try:
                code = process.wait(max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.stop()
                raise AssertionError(f"node {node} did not end:\n{self.output(node)}") from None
            assert code == 0, f"node {node} exited with {code}:\n{self.output(node)}"

    def running(self) -> bool:
        return all(process.poll() is None for process in self.processes.values())

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                os.kill(process.pid, signal.SIGKILL)
                process.wait()

    def output(self, node: int) -> str:
        return (self.base / f"node{node}.log").read_text(errors="replace")[-3000:]

    def outputs(self) -> str:
        """Every node's output, each under its number: why a wait for the cluster's state never ended."""
        return "".join(f"\n--- node {number}:\n{self.output(number)}" for number in range(NODES))

    def stats(self, node: int) -> dict[str, object]:
        return dict(json.loads((self.directory(node) / "stats.json").read_text()))


@pytest.fixture
def cluster(tmp_path: Path, redis_server: RedisServer, served: RunningServer) -> Iterator[Cluster]:
    nodes = Cluster(tmp_path, redis_server, served)
    try:
        yield nodes
    finally:
        nodes.stop()


def wait_for_requests(web: RunningServer, count: int, timeout: float = 60) -> bool:
    """Wait until the server has logged `count` requests; False if it has not in `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while len(web.read_log()) < count:
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


def one_process_crawl(web: SimWeb, tmp_path: Path) -> set[str]:
    """What a crawl of one process fetches from the same web (its own server, its own log)."""
    with serve_in_background(web, tmp_path / "single-web", seeds=5) as running:
        config = CrawlConfig(
            min_delay=MIN_DELAY, allow_private_addresses=True, hosts_file=str(running.hosts_file), processes=1,
            max_seconds=120.0,
        )  # fmt: skip
        Crawler(config, out=tmp_path / "single", seeds=running.seeds, progress=False).run()
        running.stop()
        return set(judge_crawl(web, running.read_log(), running.seeds, min_delay=MIN_DELAY).fetched)


def judged(web: SimWeb, served: RunningServer, *, refetches_allowed: int = 0) -> set[str]:
    served.stop()
    verdict = judge_crawl(web, served.read_log(), served.seeds, min_delay=MIN_DELAY)
    assert verdict.expected
    assert not verdict.missing, verdict.summary()  # zero URLs lost
    assert not verdict.unexpected, verdict.summary()
    assert not verdict.disallowed, verdict.summary()
    assert sum(count - 1 for count in verdict.refetched.values()) <= refetches_allowed, verdict.summary()
    assert not verdict.host_overlaps and not verdict.ip_overlaps, verdict.summary()
    assert not verdict.delay_violations, verdict.summary()
    return set(verdict.fetched)


def test_three_nodes_fetch_what_one_process_fetches_once_each_and_politely(
    web: SimWeb, cluster: Cluster, served: RunningServer, redis_server: RedisServer, tmp_path: Path
) -> None:
    cluster.start_all()
    assert wait_for_requests(served, 20)
    garbage = redis.Redis.from_url(redis_server.url)
    garbage.xadd("crawlspace:{crawl}:stream:2", {b"m": b"\x93not a crawlspace message"})
    garbage.close()
    cluster.wait()
    fetched = judged(web, served)
    assert fetched == one_process_crawl(web, tmp_path)

    stats = [cluster.stats(node) for node in range(NODES)]
    assert [s["termination"] for s in stats] == ["frontier-empty"] * NODES
    assert sum(int(s["pages_fetched"]) for s in stats) == len(fetched)  # type: ignore[call-overload]
    assert all(int(s["pages_fetched"]) > 0 for s in stats)  # type: ignore[call-overload]
    assert stats[2]["errors"] == {"transport:malformed-message": 1}  # counted, skipped, nothing else
    transport = [s["transport"] for s in stats]
    assert all(
        t["batches_acknowledged"] > 0 and t["batch_latency_ms_p99"] >= t["batch_latency_ms_p50"] > 0 for t in transport
    )
    assert sum(t["messages_out"] for t in transport) <= sum(t["messages_in"] for t in transport) + 1  # garbage read too
    assert sum(int(s["handed_over"]) for s in stats) > 0  # type: ignore[call-overload]  # hosts sharing an address moved

    for node in range(NODES):  # each node's directory is a crawl of its own, read like any other
        with CrawlReader(cluster.directory(node)) as reader:
            assert sum(1 for _ in reader.pages()) >= int(stats[node]["pages_fetched"]) > 0  # type: ignore[call-overload]
        saved = (cluster.directory(node) / "cluster.json").read_text()
        assert json.loads(saved) == {
            "crawl_id": "crawl",
            "node": node,
            "nodes": NODES,
            "epoch": 0,
            "resizing_from": None,
        }
        for path in cluster.directory(node).glob("*.json*"):
            assert redis_server.password not in path.read_text(errors="replace"), path
        assert redis_server.password not in cluster.output(node)

    status = run_cli("status", "--cluster", redis_server.url, "--json")
    assert status.returncode == 0, status.stderr
    report = json.loads(status.stdout)
    assert [row["state"] for row in report["nodes"]] == ["finished"] * NODES
    assert report["summary"]["pages"] == len(fetched)
    table = run_cli("status", "--cluster", redis_server.url)
    assert table.returncode == 0 and "3 of 3 nodes reporting" in table.stdout

    cluster.start(1, resume=True)  # alone, after the crawl ended: the others' last answers stand in for them
    cluster.wait(timeout=60)
    again = cluster.stats(1)
    assert again["termination"] == "frontier-empty" and again["runs"] == 2
    assert again["pages_fetched"] == stats[1]["pages_fetched"]


def test_nodes_killed_at_random_moments_resume_and_lose_nothing(
    web: SimWeb, cluster: Cluster, served: RunningServer
) -> None:
    cluster.start_all()
    kills: list[int] = []
    threshold = random.randint(30, 100)
    for _ in range(2):  # a second kill, of any node, if the crawl is still going
        if not cluster.running() or not wait_for_requests(served, threshold, timeout=30):
            break
        victim = random.randrange(NODES)
        cluster.kill(victim)
        kills.append(victim)
        time.sleep(random.uniform(0.0, 2.0))
        ended = all(process.poll() is not None for node, process in cluster.processes.items() if node != victim)
        cluster.start(victim, resume=True)  # its lock expires, then it takes its place again
        if ended:  # the crawl ended before the kill took effect: the victim resumed alone may fetch again
            for node in range(NODES):  # the pages it had in flight and send their links to nodes not running
                if node != victim:  # (then it waits for them: docs/architecture.md, "Termination")
                    cluster.start(node, resume=True)
        threshold = len(served.read_log()) + random.randint(20, 60)
    assert kills, "the crawl ended before a node could be killed"
    cluster.wait()
    judged(web, served, refetches_allowed=CONCURRENCY * len(kills))  # the pages in flight at each kill
    for victim in set(kills):
        stats = cluster.stats(victim)
        assert stats["termination"] == "frontier-empty"
        assert int(stats["runs"]) == 1 + kills.count(victim)  # type: ignore[call-overload]


def test_redis_killed_and_restarted_loses_nothing(
    web: SimWeb, cluster: Cluster, served: RunningServer, redis_server: RedisServer
) -> None:
    cluster.start_all()
    assert wait_for_requests(served, random.randint(20, 100))
    redis_server.kill()
    time.sleep(2.0)  # the nodes crawl their own hosts meanwhile
    redis_server.start()  # the same directory: the append-only file, less at most its last second
    cluster.wait()
    judged(web, served)
    lost = sum(dict(cluster.stats(node)["errors"]).get("transport:redis-lost", 0) for node in range(NODES))  # type: ignore[call-overload]
    assert lost >= NODES  # every node noticed, and came back
    progress = [
        json.loads(line) for node in range(NODES) for line in (cluster.directory(node) / "progress.jsonl").open()
    ]
    assert any(line.get("transport_down") == 1 for line in progress)  # the nodes said so while cut off
    assert all(line.get("transport_down") in (0, 1) for line in progress)


def test_the_page_budget_is_the_whole_cluster_s(web: SimWeb, cluster: Cluster, served: RunningServer) -> None:
    cluster.start_all("--max-pages", "60")
    cluster.wait()
    served.stop()
    pages = [entry for entry in served.read_log() if entry.path != "/robots.txt"]
    stats = [cluster.stats(node) for node in range(NODES)]
    assert len(pages) == sum(int(s["pages_fetched"]) for s in stats) == 60  # type: ignore[call-overload]
    assert {s["termination"] for s in stats} == {"max-pages"}
