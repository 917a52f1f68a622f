"""Run the batch jobs over a crawl: choose the scheduler, order the jobs, write each one's output.

`run(dirs)` runs every job in dependency order (the link graph before PageRank); `only` picks some,
and a job whose input job has no output yet gets it run first. The scheduler: a `distributed.Client`
(`client=`), a scheduler address (`scheduler="tcp://host:8786"`, a client is opened and closed here),
or one of Dask's local schedulers, `synchronous` (the default: one thread, nothing to set up) or
`threads`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crawlspace.jobs import connectivity, dedup, graph, index, neardup, pagerank
from crawlspace.jobs.context import LOCAL_SCHEDULERS, JobContext
from crawlspace.jobs.output import JOBS_DIR, SUMMARY, pending_output

JobFunction = Callable[..., dict[str, Any]]
"""(context, pending output, **options) -> the job's summary."""


def _no_inputs(options: dict[str, Any]) -> tuple[str, ...]:
    return ()


@dataclass(frozen=True)
class Job:
    name: str
    function: JobFunction
    needs: Callable[[dict[str, Any]], tuple[str, ...]] = _no_inputs
    """The jobs whose output this one reads, given its options."""


JOBS: dict[str, Job] = {
    job.name: job
    for job in (
        Job(graph.NAME, graph.run),
        Job(pagerank.NAME, pagerank.run, needs=lambda options: (graph.NAME,)),
        Job(connectivity.NAME, connectivity.run, needs=lambda options: (graph.NAME,)),
        Job(dedup.NAME, dedup.run, needs=lambda options: dedup.inputs(**options)),
        Job(neardup.NAME, neardup.run),
        Job(index.NAME, index.run, needs=lambda options: index.inputs(**options)),
    )
}
JOB_NAMES = tuple(JOBS)


class JobError(ValueError):
    """A job request that cannot run: an unknown job name, a bad scheduler, a crawl without a table."""


def plan(only: Iterable[str] | None, out: Path, options: dict[str, dict[str, Any]] | None = None) -> list[str]:
    """The jobs to run, inputs first: those asked for plus any input job without output in `out`."""
    wanted = list(JOB_NAMES) if only is None else [name.strip() for name in only if name.strip()]
    unknown = [name for name in wanted if name not in JOBS]
    if unknown or not wanted:
        raise JobError(f"unknown job {', '.join(unknown) or '(none)'}; choose from {', '.join(JOB_NAMES)}")
    ordered: list[str] = []

    def add(name: str, required: bool) -> None:
        for need in JOBS[name].needs((options or {}).get(name, {})):
            if need not in ordered and (need in wanted or not (out / JOBS_DIR / need / SUMMARY).is_file()):
                add(need, True)
        if name not in ordered and (required or name in wanted):
            ordered.append(name)

    for name in JOB_NAMES:
        if name in wanted:
            add(name, True)
    return ordered


def run(
    dirs: str | Path | Sequence[str | Path],
    client: Any = None,
    only: Iterable[str] | None = None,
    *,
    scheduler: str | None = None,
    out: str | Path | None = None,
    partitions: int = 0,
    options: dict[str, dict[str, Any]] | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, dict[str, Any]]:
    """Run the jobs over the crawl in `dirs` (a directory, or the directories of one crawl's nodes);
    returns each job's summary by name. Outputs go to `out` (default: the first directory) under jobs/.
    `options`: keyword arguments per job (`{"pagerank": {"seeds": [...], "damping": 0.85}}`)."""
    directories = [Path(dirs)] if isinstance(dirs, str | Path) else [Path(directory) for directory in dirs]
    target = Path(out) if out is not None else directories[0]
    names = plan(only, target, options)
    opened = None
    if client is None and scheduler is not None and scheduler not in LOCAL_SCHEDULERS:
        if not scheduler.startswith(("tcp://", "tls://", "inproc://", "ucx://")):
            raise JobError(f"scheduler {scheduler!r}: give synchronous, threads or a tcp:// address")
        from distributed import Client

        opened = client = Client(scheduler)
    try:
        chosen = client if client is not None else (scheduler or "synchronous")
        ctx = JobContext.open(directories, out=target, scheduler=chosen, partitions=partitions)
        summaries: dict[str, dict[str, Any]] = {}
        for name in names:
            started = time.monotonic()
            with pending_output(target, name) as pending:
                summary = JOBS[name].function(ctx, pending, **(options or {}).get(name, {}))
                summary = {"job": name, "dirs": [str(d) for d in directories], **summary}
                summary["seconds"] = round(time.monotonic() - started, 3)
                pending.commit(summary)
            summaries[name] = summary
            if progress is not None:
                progress(f"{name}: done in {summary['seconds']} s")
        return summaries
    finally:
        if opened is not None:
            opened.close()
