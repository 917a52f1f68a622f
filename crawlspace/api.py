"""crawlspace as a library: `Crawler(config, out=..., seeds=...).run()`, or `await ....crawl()` in a running loop.

The Crawler is the one way in: the CLI is a thin layer over it (`crawlspace crawl` builds a
CrawlConfig from its flags and a TOML file, then a Crawler), so everything the CLI does (seeds from
a file with line-numbered problems, the output directory, live progress, Ctrl-C) is here too, and
more: the extension points of `crawlspace.hooks`, passed as objects.

A Crawler checks what it can before the crawl starts (seeds, the output directory, the hosts
file, the extensions' types) and raises `CrawlError` with a one-line reason; once it runs,
nothing a server, a page or an extension does stops it: the crawl ends when the frontier is
empty, a limit of the configuration is reached, or `stop()` (or SIGINT/SIGTERM) is called, and
returns the crawl's statistics (also written to OUT/stats.json).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from crawlspace.config import ConfigError, CrawlConfig
from crawlspace.crawl import partitioning
from crawlspace.crawl.checkpoint import STARTUP_ERRORS, report_recovery
from crawlspace.crawl.engine import CrawlEngine
from crawlspace.crawl.telemetry import CrawlStats, Snapshot, TelemetrySink, display_sink, merge
from crawlspace.crawl.workers import ParallelCrawl, WorkerStartupError, crawl_gc
from crawlspace.hooks.protocols import Item, ItemSink, PageProcessor, Prioritizer, ProtocolHandler, UrlFilter
from crawlspace.hooks.runtime import Extensions
from crawlspace.urls import InvalidURL, Normalizer

if TYPE_CHECKING:  # the cluster's modules (and redis) are imported by the functions that need them only
    from crawlspace.distributed.cluster import ClusterSpec


class CrawlError(RuntimeError):
    """A crawl that cannot start, with the reason in one line."""


class SeedsError(CrawlError):
    """No usable seed URL; `problems` says what was wrong with each line."""

    def __init__(self, message: str, problems: Sequence[SeedProblem]) -> None:
        super().__init__(message)
        self.problems = list(problems)


@dataclass(frozen=True, slots=True)
class SeedProblem:
    """A seed that is not a crawlable URL: where it came from (file, line) and why."""

    source: str
    line: int
    text: str
    reason: str

    def __str__(self) -> str:
        return f"{self.source}:{self.line}: {self.reason}"


def read_seeds_file(path: str | Path) -> list[tuple[int, str]]:
    """(line number, text) of the seeds in a file: one URL per line, `#` starts a comment line."""
    try:
        lines = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        raise CrawlError(f"seeds file {path} does not exist") from None
    except OSError as exc:
        raise CrawlError(f"cannot read seeds file {path}: {exc.strerror or exc}") from None
    found = []
    for number, raw in enumerate(lines, start=1):
        text = raw.strip()
        if text and not text.startswith("#"):
            found.append((number, text))
    return found


LOCK_NAME = ".lock"


@contextlib.contextmanager
def _directory_lock(out: Path) -> Iterator[None]:
    """One crawl at a time in a directory: an exclusive flock held for the crawl's duration (released by
    the kernel if the process dies, so a crash leaves nothing to clean up)."""
    fd = os.open(out / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise CrawlError(f"crawl directory {out} is in use by another crawl (lock held on {LOCK_NAME})") from None
        yield
    finally:
        os.close(fd)


def _cluster_processes(config: CrawlConfig) -> CrawlConfig:
    """A node of a cluster crawl is one process, one partition: more of them are more nodes."""
    if (config.processes or 1) > 1:
        raise CrawlError("a cluster node is one process (processes=1): start more nodes instead")
    return config.replace(processes=1)


def _resume_cluster(
    out: Path, url: str, *, node: int | None = None, nodes: int | None = None, crawl_id: str | None = None
) -> ClusterSpec:
    """The node a crawl directory is: its index, crawl id and resize from DIR/cluster.json (arguments given
    must agree with it); resized when `nodes` differs from the crawl's number. CrawlError with a one-line
    reason."""
    from crawlspace.crawl.node import saved_cluster
    from crawlspace.distributed.cluster import ClusterSpec
    from crawlspace.distributed.redislink import ClusterError

    try:
        saved = saved_cluster(out)
    except ClusterError as exc:
        raise CrawlError(str(exc)) from None
    if saved is None:
        raise CrawlError(f"{out} is not a cluster node's directory (no cluster.json): resume it without --cluster")
    if crawl_id is not None and crawl_id != saved["crawl_id"]:
        raise CrawlError(f"{out} is a node of crawl {saved['crawl_id']!r}, not {crawl_id!r}")
    if node is not None and node != saved["node"]:
        raise CrawlError(f"{out} is node {saved['node']} of its crawl, not node {node}")
    if saved["node"] >= saved["nodes"] and saved["resizing_from"] is None:
        raise CrawlError(
            f"{out} was node {saved['node']}, which left the crawl when it was resized to {saved['nodes']} nodes "
            "(it handed its hosts over): nothing to resume; its pages stay readable there"
        )
    try:  # another number of nodes resizes the crawl (distributed.cluster)
        spec = ClusterSpec(
            url, saved["node"], saved["nodes"], saved["crawl_id"], saved["epoch"], saved["resizing_from"]
        )
        return spec.resized_to(nodes or saved["nodes"])
    except ClusterError as exc:
        raise CrawlError(f"{out} (node {saved['node']}): {exc}") from None


def cluster_node(url: str, *, node: int | None = None, nodes: int | None = None, crawl_id: str | None = None,
                 resume_dir: str | Path | None = None) -> ClusterSpec:  # fmt: skip
    """The node to run: from the arguments for a new one, from its directory (DIR/cluster.json) for a
    resumed one (arguments given must agree with it). CrawlError with a one-line reason."""
    from crawlspace.distributed.cluster import ClusterSpec
    from crawlspace.distributed.redislink import ClusterError

    if resume_dir is not None:
        return _resume_cluster(Path(resume_dir), url, node=node, nodes=nodes, crawl_id=crawl_id)
    if node is None or nodes is None:
        raise CrawlError("a new cluster node needs --node K and --nodes N")
    try:
        return ClusterSpec(url, node, nodes, crawl_id) if crawl_id else ClusterSpec(url, node, nodes)
    except ClusterError as exc:
        raise CrawlError(str(exc)) from None


def published_cluster_config(cluster: ClusterSpec) -> CrawlConfig | None:
    """The configuration the crawl's first node published (None: none yet); a joining node starts from it."""
    from crawlspace.distributed.cluster import published_config, read_meta
    from crawlspace.distributed.redislink import ClusterError, connect

    async def fetch() -> CrawlConfig | None:
        connection = await connect(cluster.url)
        try:
            meta = await read_meta(connection, cluster.keys)
        finally:
            await connection.aclose()
        return None if meta is None else published_config(meta)

    try:
        return asyncio.run(fetch())
    except ClusterError as exc:
        raise CrawlError(str(exc)) from None


STALE_AFTER = 30.0  # a running node that has not published its status for this long is shown as silent


def cluster_status(url: str, *, crawl_id: str | None = None) -> dict[str, Any]:
    """Every node's last status in a cluster crawl and a merged summary (what `crawlspace status` shows)."""
    from crawlspace.distributed.cluster import ClusterSpec, read_status
    from crawlspace.distributed.redislink import ClusterError, connect

    spec = ClusterSpec(url, 0, 1, crawl_id) if crawl_id else ClusterSpec(url, 0, 1)

    async def fetch() -> tuple[dict[str, Any], dict[int, dict[str, Any]]]:
        connection = await connect(spec.url)
        try:
            return await read_status(connection, spec.keys)
        finally:
            await connection.aclose()

    try:
        meta, statuses = asyncio.run(fetch())
    except ClusterError as exc:
        raise CrawlError(str(exc)) from None
    now = time.time()
    rows: list[dict[str, Any]] = []
    snapshots: list[Snapshot] = []
    for node in range(int(meta.get("nodes", 0))):
        status = statuses.get(node)
        if status is None:
            rows.append({"node": node, "state": "not-seen"})
            continue
        progress = status.get("progress", {})
        with contextlib.suppress(ValueError, TypeError, msgspec.ValidationError):
            snapshots.append(Snapshot.from_builtins(status["snapshot"]))
        age = now - float(status.get("updated", 0))
        state = "finished" if status.get("finished") else ("silent" if age > STALE_AFTER else "running")
        ended = status.get("termination", "") if state == "finished" else ""
        rows.append(
            {
                "node": node, "state": state, "pages": progress.get("pages", 0),
                "pages/s": progress.get("pages_per_second_recent", 0), "frontier": progress.get("frontier", 0),
                "in flight": progress.get("in_flight", 0), "errors": progress.get("errors", 0),
                "unacked": status.get("unacknowledged_batches", 0),
                "redis": "ok" if status.get("connected") else "LOST",
                "ended": ended,
                "updated_seconds_ago": round(age, 1), "progress": progress,
            }
        )  # fmt: skip
    merged = merge(snapshots) if snapshots else None
    stopped = meta.get("stopped")
    summary = {
        "nodes": int(meta.get("nodes", 0)),
        "nodes_reporting": len(snapshots),
        "pages": merged.stats.pages_fetched if merged else 0,
        "pages_per_second": round(merged.pages_per_second_recent, 1) if merged else 0.0,
        "frontier": merged.gauges.frontier if merged else 0,
        "errors": sum(merged.stats.errors.values()) if merged else 0,
        "stopped": f"{stopped['reason']} (node {stopped['by']})" if stopped else "",
        "stats": merged.stats.to_dict() if merged else None,
    }
    return {"crawl_id": spec.crawl_id, "seeds": len(meta.get("seeds", [])), "nodes": rows, "summary": summary}


def _resolve_processes(config: CrawlConfig, extended: bool, saved: int | None) -> CrawlConfig:
    """The number of processes a crawl runs with, made concrete (config.json records it: a resumed
    crawl keeps its partitions unless told another number, see crawl.partitioning)."""
    wanted = config.processes
    if saved is not None and wanted is None:
        wanted = saved
    if wanted is None:
        wanted = 1 if extended else max(1, os.cpu_count() or 1)
    if wanted > 1 and extended:
        raise CrawlError(
            "Python extensions (filters, processors, sinks, handlers, a prioritizer) run in one process: "
            "set processes=1"
        )
    return config.replace(processes=wanted)


def saved_config(out: str | Path) -> CrawlConfig:
    """The configuration a crawl directory was crawled with (its config.json), to resume it."""
    path = Path(out) / "config.json"
    try:
        values = json.loads(path.read_text())
    except FileNotFoundError:
        raise CrawlError(f"no crawl to resume in {out} (no config.json)") from None
    except (OSError, ValueError) as exc:
        raise CrawlError(f"cannot read {path}: {exc}") from None
    try:
        return CrawlConfig.from_mapping(values, source=str(path))
    except ConfigError as exc:
        raise CrawlError(str(exc)) from None


SEEDS_FILE = "seeds.json"


def _record_start(out: Path, config: CrawlConfig, seeds: Sequence[str], *, resume: bool) -> list[str] | None:
    """Write config.json, and for a new crawl its seeds (durable before any process starts); for a
    resumed crawl, return the seeds it started with: a crawl killed before its first checkpoint
    starts again from them instead of being lost (None for a crawl started before they were saved)."""
    partitioning.write_record(out / "config.json", config.to_dict())  # a kill -9 here leaves the old one whole
    path = out / SEEDS_FILE
    if resume:
        try:
            return [str(url) for url in json.loads(path.read_text())]
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise CrawlError(f"cannot read {path}: {exc}") from None
    temporary = out / (SEEDS_FILE + ".tmp")
    with temporary.open("w") as file:
        json.dump(list(seeds), file)
        file.flush()
        os.fsync(file.fileno())
    temporary.replace(path)
    return None


def _check_output_dir(out: Path) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".write-test"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise CrawlError(f"output directory {out} is not writable: {exc.strerror or exc}") from None


def _event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on POSIX
        return None
    return uvloop.new_event_loop


class Crawler:
    """One crawl: configuration, seeds, output directory and extensions; run it once.

    - `config`: a CrawlConfig (default: CrawlConfig(), polite defaults for the real web).
    - `out`: the crawl directory (WARC files, crawl table, stats.json, progress.jsonl, config.json).
    - `seeds`: URLs; `seeds_file`: a file of them (one per line, # comments); both may be given.
      Invalid ones are skipped and listed in `seed_problems` (and counted as invalid_seeds).
    - `filters`, `prioritizer`, `processors`, `sinks`, `handlers`: see crawlspace.hooks.
    - `progress`: the live display (True/False; None: when stderr is a terminal). Progress lines
      also go to OUT/progress.jsonl.
    - `telemetry`: more places for the crawl's progress, each a `TelemetrySink`
      (crawlspace.crawl.telemetry) that receives every Snapshot of the crawl at the reporting
      cadence (`progress_interval`), merged over the processes of a multi-process crawl.
    - `resume`: continue the crawl in `out` from its last checkpoint (crawlspace.crawl.checkpoint);
      seeds are then optional, and `config` defaults to the one saved in OUT/config.json (keys
      that a given `config` changes are listed in `config_changes`).
    - `cluster`: this crawl is one node of a crawl across machines, joined through Redis
      (crawlspace.distributed.cluster: `cluster_node(url, node=K, nodes=N)` makes one); `config` None:
      the configuration the crawl's first node published. See crawl/node.py.
    """

    def __init__(
        self,
        config: CrawlConfig | None = None,
        *,
        out: str | Path,
        seeds: Iterable[str] = (),
        seeds_file: str | Path | None = None,
        filters: Sequence[UrlFilter] = (),
        prioritizer: Prioritizer | None = None,
        processors: Sequence[PageProcessor] = (),
        sinks: Sequence[ItemSink | Callable[[Item], object]] = (),
        handlers: Mapping[str, ProtocolHandler] | None = None,
        progress: bool | None = None,
        telemetry: Sequence[TelemetrySink] = (),
        resume: bool = False,
        cluster: ClusterSpec | None = None,
    ) -> None:
        if config is not None and not isinstance(config, CrawlConfig):
            raise TypeError(f"config must be a CrawlConfig, not {type(config).__name__}")
        self.out = Path(out)
        self.resume = resume
        if cluster is not None and resume:  # the directory says which node it is (its crawl id wins)
            cluster = _resume_cluster(self.out, cluster.url, node=cluster.node, nodes=cluster.nodes)
        self.cluster = cluster
        self.config_changes: dict[str, tuple[object, object]] = {}
        saved = saved_config(self.out) if resume else None
        if config is None and saved is None and cluster is not None:
            config = published_cluster_config(cluster)
        config = config or saved or CrawlConfig()
        extended = bool(filters or processors or sinks or handlers or prioritizer)
        if self.cluster is not None:
            self.config = _cluster_processes(config)
        else:
            self.config = _resolve_processes(config, extended, saved.processes if saved else None)
        if saved is not None:
            self.config_changes = saved.differences(self.config)
        try:  # a resume with another number of processes resizes the crawl (crawl.partitioning)
            recorded = partitioning.read(self.out) if resume else None
            if saved is not None and recorded is None:
                recorded = partitioning.legacy(saved.processes or 1)
            self.partitioning = partitioning.plan(recorded, self.config.processes or 1)
        except partitioning.PartitioningError as exc:
            raise CrawlError(str(exc)) from None
        if self.partitioning.resizing_from is not None:  # docs/architecture.md, Resizing
            logging.getLogger("crawlspace").info(
                "resizing this crawl from %d to %d processes: hosts are handed over before the first fetch",
                self.partitioning.resizing_from, self.partitioning.partitions,
            )  # fmt: skip
        self.progress = progress
        self._telemetry = [display_sink(progress), *telemetry]
        for kind, hooks in (("filter", filters), ("processor", processors)):
            for hook in hooks:
                if not callable(hook):
                    raise TypeError(f"a {kind} must be callable: {hook!r}")
        if prioritizer is not None and not (
            isinstance(getattr(prioritizer, "levels", None), int) and callable(getattr(prioritizer, "priority", None))
        ):
            raise TypeError(f"a prioritizer has an int `levels` and a priority(entry) method: {prioritizer!r}")
        self.prioritizer = prioritizer
        self._extensions = Extensions.from_config(
            self.config, filters=filters, processors=processors, sinks=sinks, handlers=handlers
        )
        self.seeds, self.seed_problems = self._valid_seeds(seeds, seeds_file)
        if self.config.hosts_file is not None and not Path(self.config.hosts_file).is_file():
            raise CrawlError(f"hosts file {self.config.hosts_file} does not exist")
        _check_output_dir(self.out)
        self._engine: CrawlEngine | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._started = False
        self._stop_requested = False
        self._parallel: ParallelCrawl | None = None

    def _valid_seeds(self, seeds: Iterable[str], seeds_file: str | Path | None) -> tuple[list[str], list[SeedProblem]]:
        candidates = [("seeds", number, text) for number, text in enumerate(seeds, start=1)]
        if seeds_file is not None:
            candidates += [(str(seeds_file), number, text) for number, text in read_seeds_file(seeds_file)]
        check = Normalizer(extra_schemes=self._extensions.schemes)
        valid: list[str] = []
        problems: list[SeedProblem] = []
        for source, number, text in candidates:
            try:
                check(text.strip())
            except InvalidURL as exc:
                problems.append(SeedProblem(source, number, text, str(exc)))
                continue
            valid.append(text.strip())
        if not valid and (candidates or not (self.resume or self.cluster)):  # a resumed crawl has its frontier,
            # a cluster node joining a crawl takes the seeds from Redis
            where = seeds_file if seeds_file is not None else "the seeds given"
            raise SeedsError(f"no valid seed URL in {where}", problems)
        return valid, problems

    # -- running -----------------------------------------------------------------------------

    def run(self) -> CrawlStats:
        """Crawl to the end in a new event loop (uvloop when available); returns the statistics. While it
        runs, the cyclic collector runs at `crawl_gc`'s thresholds (a crawl's pages make few cycles)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise CrawlError("Crawler.run() blocks; inside a running event loop use `await crawler.crawl()`")
        if (self.config.processes or 1) > 1:
            return self._run_parallel()  # the coordinator runs its own event loop; each worker tunes its collector
        with crawl_gc(), asyncio.Runner(loop_factory=_event_loop_factory()) as runner:
            crawling = self._crawl if self.cluster is None else self._crawl_cluster
            return runner.run(crawling(handle_signals=True))

    @contextlib.contextmanager
    def _the_one_run(self) -> Iterator[None]:
        """A Crawler runs once, and holds its directory's lock while it runs."""
        if self._started:
            raise CrawlError("a Crawler runs once; make a new one for another crawl")
        self._started = True
        with _directory_lock(self.out):
            yield

    def _run_parallel(self) -> CrawlStats:
        with self._the_one_run():
            return self._run_parallel_locked()

    def _run_parallel_locked(self) -> CrawlStats:
        parallel = ParallelCrawl(
            self.config,
            self.out,
            self.seeds,
            processes=self.config.processes or 1,
            resume=self.resume,
            partitioning=self.partitioning,
            unstarted_seeds=_record_start(self.out, self.config, self.seeds, resume=self.resume),
            telemetry=self._telemetry,
            invalid_seeds=len(self.seed_problems),
        )
        self._parallel = parallel
        try:
            stats = parallel.run()
        except STARTUP_ERRORS as exc:
            raise CrawlError(str(exc)) from exc
        except WorkerStartupError as exc:
            raise CrawlError(str(exc)) from exc
        return stats

    async def crawl(self) -> CrawlStats:
        """Crawl to the end in the running event loop; returns the statistics.

        The loop is the application's: its signal handlers are left alone (call `stop()` to end the
        crawl early), whereas `run()`, which owns its loop, stops gracefully on Ctrl-C and SIGTERM.
        """
        if (self.config.processes or 1) > 1:  # the coordinator runs its own event loop, on a thread
            return await asyncio.to_thread(self._run_parallel)
        if self.cluster is not None:
            return await self._crawl_cluster(handle_signals=False)
        return await self._crawl(handle_signals=False)

    async def _crawl_cluster(self, *, handle_signals: bool) -> CrawlStats:
        with self._the_one_run():
            return await self._crawl_cluster_locked(handle_signals=handle_signals)

    async def _crawl_cluster_locked(self, *, handle_signals: bool) -> CrawlStats:
        from crawlspace.crawl.node import crawl_node
        from crawlspace.distributed.redislink import ClusterError

        assert self.cluster is not None

        def make_engine(**options: object) -> CrawlEngine:
            try:
                return CrawlEngine(
                    self.config, self.out, extensions=self._extensions, prioritizer=self.prioritizer,
                    handle_signals=handle_signals, **options,  # type: ignore[arg-type]
                )  # fmt: skip
            except STARTUP_ERRORS as exc:
                raise CrawlError(str(exc)) from exc

        def started(engine: CrawlEngine) -> None:
            self._engine, self._loop = engine, asyncio.get_running_loop()
            if self.resume:
                report_recovery(self.out, engine.recovery)
            engine.stats.invalid_seeds += len(self.seed_problems)
            if self._stop_requested:
                engine.stop("stopped")

        try:
            return await crawl_node(
                self.cluster, self.config, self.out, seeds=self.seeds, resume=self.resume,
                record_start=lambda seeds: _record_start(self.out, self.config, seeds, resume=self.resume),
                make_engine=make_engine, telemetry=self._telemetry, on_engine=started,
            )  # fmt: skip
        except BaseException as exc:
            if self._engine is None:  # it never ran: the engine did not close them
                await self._extensions.close()
            if isinstance(exc, ClusterError):
                raise CrawlError(str(exc)) from None
            raise

    async def _crawl(self, *, handle_signals: bool) -> CrawlStats:
        with self._the_one_run():
            return await self._crawl_locked(handle_signals=handle_signals)

    async def _crawl_locked(self, *, handle_signals: bool) -> CrawlStats:
        try:
            unstarted = _record_start(self.out, self.config, self.seeds, resume=self.resume)
        except CrawlError:
            await self._extensions.close()
            raise
        try:
            engine = CrawlEngine(
                self.config,
                self.out,
                telemetry=self._telemetry,
                resume=self.resume,
                unstarted_seeds=unstarted,
                extensions=self._extensions,
                prioritizer=self.prioritizer,
                handle_signals=handle_signals,
            )
        except STARTUP_ERRORS as exc:  # a directory held by another crawl, or a state that cannot resume
            await self._extensions.close()
            raise CrawlError(str(exc)) from exc
        self._engine, self._loop = engine, asyncio.get_running_loop()
        if self.resume:
            report_recovery(self.out, engine.recovery)
        engine.stats.invalid_seeds += len(self.seed_problems)
        engine.add_seeds(self.seeds)
        if self._stop_requested:
            engine.stop("stopped")
        return await engine.run()

    def stop(self) -> None:
        """Stop taking new URLs; fetches in flight finish, processors finish their pages, the sinks
        are closed. Safe from the crawl's event loop (a processor, a task) and from other threads."""
        if self._parallel is not None:
            self._parallel.request_stop()
            return
        engine, loop = self._engine, self._loop
        if engine is None or loop is None:
            self._stop_requested = True
            return
        try:
            same_loop = asyncio.get_running_loop() is loop
        except RuntimeError:
            same_loop = False
        if same_loop:
            engine.stop("stopped")
        else:
            loop.call_soon_threadsafe(engine.stop, "stopped")

    @property
    def stats(self) -> CrawlStats | None:
        """The live statistics while crawling (and after); None before the crawl starts. With several
        processes: the partitions' merged, as of the last progress report (None before the first)."""
        if self._parallel is not None:
            return self._parallel.stats
        return None if self._engine is None else self._engine.stats

    def __repr__(self) -> str:
        state = "ready"
        stats = self.stats
        if stats is not None:
            state = "finished" if stats.finished_at else "running"
        return f"<Crawler {state} out={str(self.out)!r} seeds={len(self.seeds)} {self._extensions!r}>"
