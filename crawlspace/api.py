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
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from crawlspace.config import ConfigError, CrawlConfig
from crawlspace.crawl import partitioning
from crawlspace.crawl.checkpoint import STARTUP_ERRORS, report_recovery
from crawlspace.crawl.engine import CrawlEngine
from crawlspace.crawl.telemetry import CrawlStats, TelemetrySink, display_sink
from crawlspace.crawl.workers import ParallelCrawl, WorkerStartupError
from crawlspace.hooks.protocols import Item, ItemSink, PageProcessor, Prioritizer, ProtocolHandler, UrlFilter
from crawlspace.hooks.runtime import Extensions
from crawlspace.urls import InvalidURL, Normalizer


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
    (out / "config.json").write_text(json.dumps(config.to_dict(), indent=2) + "\n")
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
    ) -> None:
        if config is not None and not isinstance(config, CrawlConfig):
            raise TypeError(f"config must be a CrawlConfig, not {type(config).__name__}")
        self.out = Path(out)
        self.resume = resume
        self.config_changes: dict[str, tuple[object, object]] = {}
        saved = saved_config(self.out) if resume else None
        config = config or saved or CrawlConfig()
        extended = bool(filters or processors or sinks or handlers or prioritizer)
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
        if not valid and (candidates or not self.resume):  # a resumed crawl has its frontier
            where = seeds_file if seeds_file is not None else "the seeds given"
            raise SeedsError(f"no valid seed URL in {where}", problems)
        return valid, problems

    # -- running -----------------------------------------------------------------------------

    def run(self) -> CrawlStats:
        """Crawl to the end in a new event loop (uvloop when available); returns the statistics."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise CrawlError("Crawler.run() blocks; inside a running event loop use `await crawler.crawl()`")
        if (self.config.processes or 1) > 1:
            return self._run_parallel()  # the coordinator runs its own event loop
        with asyncio.Runner(loop_factory=_event_loop_factory()) as runner:
            return runner.run(self._crawl(handle_signals=True))

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
        return await self._crawl(handle_signals=False)

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
