"""The engine's side of the extension points: runs them, isolates their failures, counts what they did.

Who fills it: `crawlspace.Crawler` builds an `Extensions` from the objects the user passed; the
engine asks it about every URL (`rejection`), hands it every fetched page (`submit`), and lets it
fetch the URLs of registered schemes (`fetch`). Who drains it: each submitted page becomes a task
that runs the page's processors in order and sends their items to every sink and their
`Follow`s back to the engine's link pipeline.

Invariants. No exception of an extension reaches the engine: each is caught, counted per
extension and in stats.json `errors` (`processor-error`, `processor-timeout`, `filter-error`,
`sink-error`, `handler-error`; `processing-abandoned` for pages cut off at an interrupt), and
reported with its URL and traceback once per distinct error (same extension, same exception
type, raised at the same place); later ones are only counted. At most `concurrency` pages are
being processed at once: the engine waits for `room()` before it starts another fetch, so memory
stays bounded however slow the processors are, and the crawl ends only once `busy` is False (a
processor may still emit URLs).
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
import re
import time
import traceback
from collections import Counter
from collections.abc import AsyncIterable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from crawlspace.fetch import FetchResult, Outcome
from crawlspace.frontier import FrontierEntry
from crawlspace.hooks.protocols import (
    Follow,
    Item,
    ItemSink,
    Page,
    PageProcessor,
    ProtocolHandler,
    UrlFilter,
    as_outputs,
    hook_name,
)
from crawlspace.hooks.sinks import ItemsLost, as_sink

if TYPE_CHECKING:
    from crawlspace.config import CrawlConfig

log = logging.getLogger("crawlspace.hooks")

Kind = Literal["processor", "filter", "sink", "handler"]
MAX_REPORTS = 100
"""Distinct errors kept with their traceback in stats.json; further distinct ones are only counted."""
HTTP_SCHEMES = frozenset({"http", "https"})
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*$")
_REMOTE_FRAME = re.compile(r'File "([^"]+)", line (\d+)')


@dataclass(slots=True)
class ErrorReport:
    kind: Kind
    hook: str
    error: str
    url: str
    traceback: str
    count: int = 1

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(slots=True)
class HookCounts:
    """What one extension did; the fields that apply to its kind are reported."""

    calls: int = 0
    rejected: int = 0
    items: int = 0
    follows: int = 0
    lost: int = 0
    errors: int = 0
    timeouts: int = 0
    seconds: float = 0.0


@dataclass(slots=True)
class _Named:
    name: str
    hook: Any
    counts: HookCounts = field(default_factory=HookCounts)


def _unique(hooks: Iterable[Any], taken: set[str] | None = None) -> list[_Named]:
    """Name each hook (hook_name), numbering repeats (`parse`, `parse#2`) so their counts stay apart."""
    taken = set() if taken is None else taken
    named = []
    for hook in hooks:
        base = name = hook_name(hook)
        number = 1
        while name in taken:
            number += 1
            name = f"{base}#{number}"
        taken.add(name)
        named.append(_Named(name, hook))
    return named


def _origin(exc: BaseException) -> str:
    """Where an exception was raised (file:line of the innermost frame), the worker's for pooled processors."""
    cause = exc.__cause__
    if cause is not None and type(cause).__name__ == "_RemoteTraceback":
        frames = _REMOTE_FRAME.findall(str(cause))
        if frames:
            return f"{frames[-1][0]}:{frames[-1][1]}"
    frame = exc.__traceback__
    if frame is None:
        return ""
    while frame.tb_next is not None:
        frame = frame.tb_next
    return f"{frame.tb_frame.f_code.co_filename}:{frame.tb_lineno}"


def _written(sink: object) -> int | None:
    """Items a sink says it wrote (its `items` attribute), which may be fewer than it was offered."""
    items = getattr(sink, "items", None)
    return items if isinstance(items, int) else None


def _as_item(value: object) -> Item:
    if isinstance(value, Mapping):
        return value
    if (dataclasses.is_dataclass(value) and not isinstance(value, type)) or isinstance(value, msgspec.Struct):
        converted = msgspec.to_builtins(value)
        if isinstance(converted, dict):
            return converted
    raise TypeError(f"a processor emits mappings (items) and Follow(url), not {type(value).__name__}")


class Extensions:
    """The user's filters, processors, sinks and protocol handlers, run on the engine's behalf."""

    def __init__(
        self,
        *,
        filters: Sequence[UrlFilter] = (),
        processors: Sequence[PageProcessor] = (),
        sinks: Sequence[ItemSink | Callable[[Item], object]] = (),
        handlers: Mapping[str, ProtocolHandler] | None = None,
        concurrency: int = 16,
        timeout: float | None = 300.0,
        fetch_timeout: float | None = 60.0,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self._filters = _unique(filters)
        self._processors = _unique(processors)
        self._sinks = _unique(as_sink(sink) for sink in sinks)
        self._handlers: dict[str, _Named] = {}
        for scheme, handler in (handlers or {}).items():
            key = scheme.lower().rstrip(":")
            if not _SCHEME.match(key):
                raise ValueError(f"not a URL scheme: {scheme!r}")
            if not callable(getattr(handler, "fetch", None)):
                raise TypeError(f"the handler for {key!r} has no fetch(url) method: {handler!r}")
            if not isinstance(getattr(handler, "polite", None), bool):
                raise TypeError(f"the handler for {key!r} needs a bool attribute `polite`: {handler!r}")
            self._handlers[key] = _Named(key, handler)
        self.concurrency = concurrency
        self.timeout = timeout
        self.fetch_timeout = fetch_timeout
        self._tasks: set[asyncio.Task[None]] = set()
        self._room: asyncio.Event | None = None
        self._reports: dict[tuple[str, str, str, str], ErrorReport] = {}
        self._unreported = 0
        self._peak_pending = 0
        self._errors: Counter[str] = Counter()  # replaced by the crawl's stats.errors in attach()
        self._closed = False

    @classmethod
    def from_config(
        cls,
        config: CrawlConfig,
        *,
        filters: Sequence[UrlFilter] = (),
        processors: Sequence[PageProcessor] = (),
        sinks: Sequence[ItemSink | Callable[[Item], object]] = (),
        handlers: Mapping[str, ProtocolHandler] | None = None,
    ) -> Extensions:
        return cls(
            filters=filters,
            processors=processors,
            sinks=sinks,
            handlers=handlers,
            concurrency=config.processor_concurrency,
            timeout=config.processor_timeout,
            fetch_timeout=config.total_timeout,
        )

    def attach(self, errors: Counter[str]) -> None:
        """Count extension errors in the crawl's own error counter (stats.json `errors`)."""
        errors.update(self._errors)
        self._errors = errors

    @property
    def active(self) -> bool:
        """Any extension registered at all (stats.json then has an `extensions` section)."""
        return bool(self._filters or self._processors or self._sinks or self._handlers)

    # -- schemes and handlers ----------------------------------------------------------------

    @property
    def schemes(self) -> frozenset[str]:
        """Schemes with a registered handler (they become crawlable)."""
        return frozenset(self._handlers)

    @property
    def other_schemes(self) -> frozenset[str]:
        """Registered schemes that are not HTTP: fetched without DNS and robots.txt."""
        return frozenset(self._handlers) - HTTP_SCHEMES

    def handler_for(self, url: str) -> ProtocolHandler | None:
        if not self._handlers:
            return None
        named = self._handlers.get(url[: url.find(":")].lower())
        return None if named is None else named.hook

    async def fetch(self, handler: ProtocolHandler, url: str) -> FetchResult:
        """`handler.fetch(url)`, with its failures and its time bounded: never raises."""
        named = self._handlers[url[: url.find(":")].lower()]
        named.counts.calls += 1
        started, clock = time.time(), time.monotonic()
        try:
            async with asyncio.timeout(self.fetch_timeout):
                result = await handler.fetch(url)
            if not isinstance(result, FetchResult):
                raise TypeError(f"fetch() returned {type(result).__name__}, not a FetchResult")
        except TimeoutError:
            named.counts.timeouts += 1
            outcome, error = Outcome.TIMEOUT, f"handler {named.name!r} took more than {self.fetch_timeout} s"
        except Exception as exc:
            self._failed("handler", named, url, exc)
            outcome, error = Outcome.NETWORK_ERROR, f"handler {named.name!r} raised {type(exc).__name__}: {exc}"
        else:
            result.url = url  # the result is the URL's, whatever spelling the handler used
            named.counts.seconds += time.monotonic() - clock
            return result
        return FetchResult(url=url, outcome=outcome, started=started, duration=time.monotonic() - clock, error=error)

    # -- filters -----------------------------------------------------------------------------

    def rejection(self, entry: FrontierEntry) -> str | None:
        """The stats.json `filtered` key of the first user filter that rejects `entry`, or None."""
        for named in self._filters:
            named.counts.calls += 1
            try:
                verdict = named.hook(entry)
                if verdict is True:
                    continue
                if verdict is False:
                    named.counts.rejected += 1
                    return named.name
                if isinstance(verdict, str) and verdict:
                    named.counts.rejected += 1
                    return f"{named.name}:{verdict}"
                raise TypeError(f"a filter returns True, False or a reason string, not {verdict!r}")
            except Exception as exc:
                self._failed("filter", named, entry.url, exc)
                named.counts.rejected += 1
                return f"{named.name}:error"
        return None

    # -- processors and sinks ----------------------------------------------------------------

    @property
    def processes_pages(self) -> bool:
        return bool(self._processors)

    @property
    def busy(self) -> bool:
        """Pages are being processed (their processors may still emit URLs)."""
        return bool(self._tasks)

    @property
    def pending(self) -> int:
        return len(self._tasks)

    def submit(self, page: Page, follow: Callable[[Page, list[str]], None]) -> asyncio.Task[None]:
        """Process `page` in a task of its own; `follow(page, urls)` receives the URLs its processors emit."""
        task = asyncio.get_running_loop().create_task(self._process(page, follow))
        self._tasks.add(task)
        self._peak_pending = max(self._peak_pending, len(self._tasks))
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if self._room is not None:
            self._room.set()
        if not task.cancelled() and task.exception() is not None:  # a bug here, not in a processor
            self._errors[f"internal:extensions:{type(task.exception()).__name__}"] += 1

    async def room(self) -> None:
        """Return once fewer than `concurrency` pages are being processed."""
        while len(self._tasks) >= self.concurrency:
            if self._room is None:
                self._room = asyncio.Event()
            self._room.clear()
            await self._room.wait()

    async def drain(self, timeout: float | None = None) -> None:
        """Wait until every submitted page has been processed; after `timeout` seconds (a crawl stopping
        within its grace period), abandon the pages still in processing, counted as processing-abandoned."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._tasks:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            _, late = await asyncio.wait(set(self._tasks), timeout=remaining)
            if late and deadline is not None and time.monotonic() >= deadline:
                self._errors["processing-abandoned"] += len(late)
                for task in late:
                    task.cancel()
                await asyncio.gather(*late, return_exceptions=True)

    def cancel(self) -> None:
        for task in self._tasks:
            task.cancel()

    async def _process(self, page: Page, follow: Callable[[Page, list[str]], None]) -> None:
        for named in self._processors:
            urls: list[str] = []
            named.counts.calls += 1
            clock = time.monotonic()
            try:
                result = named.hook(page)
                if isinstance(result, AsyncIterable):
                    async with asyncio.timeout(self.timeout):
                        async for output in result:
                            self._emit(named, page, output, urls)
                else:
                    if inspect.isawaitable(result):
                        async with asyncio.timeout(self.timeout):
                            result = await result
                    for output in as_outputs(result):  # a generator runs here, item by item
                        self._emit(named, page, output, urls)
            except TimeoutError as exc:  # the traceback shows where it was waiting
                named.counts.timeouts += 1
                self._failed("processor", named, page.url, exc, counter="processor-timeout")
            except Exception as exc:
                self._failed("processor", named, page.url, exc)
            named.counts.seconds += time.monotonic() - clock
            if urls:  # what it emitted before a failure still counts
                named.counts.follows += len(urls)
                follow(page, urls)

    def _emit(self, processor: _Named, page: Page, output: object, urls: list[str]) -> None:
        if isinstance(output, Follow):
            urls.append(output.url)
            return
        item = _as_item(output)
        processor.counts.items += 1
        for sink in self._sinks:
            sink.counts.calls += 1
            try:
                sink.hook.write(item)
            except ItemsLost as exc:
                sink.counts.lost += exc.count
                self._failed("sink", sink, page.url, exc)
            except Exception as exc:
                sink.counts.lost += 1
                self._failed("sink", sink, page.url, exc)

    # -- errors ------------------------------------------------------------------------------

    def _failed(self, kind: Kind, named: _Named, url: str, exc: BaseException, *, counter: str = "") -> None:
        named.counts.errors += 1
        self._errors[counter or f"{kind}-error"] += 1
        key = (kind, named.name, type(exc).__qualname__, _origin(exc))
        report = self._reports.get(key)
        if report is not None:
            report.count += 1
            return
        if len(self._reports) >= MAX_REPORTS:
            self._unreported += 1
            return
        text = "".join(traceback.format_exception(exc)).rstrip()
        summary = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        self._reports[key] = ErrorReport(kind, named.name, summary, url, text)
        log.error(
            "%s %r failed on %s: %s (reported once; later occurrences are counted in stats.json)\n%s",
            kind,
            named.name,
            url,
            summary,
            text,
        )

    @property
    def reports(self) -> list[ErrorReport]:
        return list(self._reports.values())

    # -- end and statistics ------------------------------------------------------------------

    async def close(self) -> None:
        """Close every extension that has a close() (sinks last, after the processors that feed them)."""
        if self._closed:
            return
        self._closed = True
        groups: list[tuple[Kind, list[_Named]]] = [
            ("processor", self._processors),
            ("filter", self._filters),
            ("handler", list(self._handlers.values())),
            ("sink", self._sinks),
        ]
        for kind, hooks in groups:
            for named in hooks:
                close = getattr(named.hook, "close", None)
                if not callable(close):
                    continue
                try:
                    outcome = close()
                    if inspect.isawaitable(outcome):
                        await outcome
                except ItemsLost as exc:
                    named.counts.lost += exc.count
                    self._failed(kind, named, "(close)", exc)
                except Exception as exc:
                    self._failed(kind, named, "(close)", exc)

    def gauges(self) -> dict[str, Any]:
        if not self._processors:
            return {}
        return {
            "processing": len(self._tasks),
            "items": sum(named.counts.items for named in self._processors),
        }

    def stats(self) -> dict[str, Any]:
        """The `extensions` section of stats.json."""

        def counts(hooks: Iterable[_Named], *fields: str) -> dict[str, dict[str, Any]]:
            return {
                named.name: {
                    name: round(value, 3) if isinstance(value, float) else value
                    for name in fields
                    for value in [getattr(named.counts, name)]
                }
                for named in hooks
            }

        return {
            "filters": counts(self._filters, "calls", "rejected", "errors"),
            "processors": counts(self._processors, "calls", "items", "follows", "errors", "timeouts", "seconds"),
            "sinks": {
                named.name: {
                    "offered": named.counts.calls,
                    "items": _written(named.hook),
                    "lost": named.counts.lost,
                    "errors": named.counts.errors,
                }
                for named in self._sinks
            },
            "handlers": counts(self._handlers.values(), "calls", "errors", "timeouts", "seconds"),
            "peak_pages_processing": self._peak_pending,
            "errors": [report.to_dict() for report in self._reports.values()],
            "errors_not_reported": self._unreported,
        }

    def __repr__(self) -> str:
        return (
            f"<Extensions filters={[n.name for n in self._filters]} processors={[n.name for n in self._processors]}"
            f" sinks={[n.name for n in self._sinks]} handlers={sorted(self._handlers)} processing={len(self._tasks)}>"
        )
