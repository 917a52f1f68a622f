"""The extension points of the crawl loop, as narrow protocols written for the people implementing them.

Each protocol is one call (plus `close` for sinks) so that a plain function satisfies it; objects work
too. They are wired by passing them to `crawlspace.Crawler`, never by naming a class in a string:
a typo is an error at once, and mypy checks the signatures.

Names. Statistics and error reports name each extension by its `name` attribute when it has one,
else by its function or class name (`hook_name`).

Lifecycle. An object passed to the Crawler that has a `close()` method (plain or `async`) is closed
once, after its last call, when the crawl ends; you own everything else about it.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Awaitable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias

from crawlspace.fetch import FetchResult
from crawlspace.frontier import FrontierEntry, Prioritizer
from crawlspace.parse import Link

Item: TypeAlias = Mapping[str, Any]
"""What a processor emits for the sinks: a mapping of JSON-compatible values (one JSONL line, one Parquet row).
Dataclasses and msgspec Structs are converted to dicts on the way."""


@dataclass(frozen=True, slots=True)
class Follow:
    """Emitted by a processor: crawl this URL too (an absolute URL, or an href relative to the page).

    It takes the same path as a link of the page: normalization, the URL filters (built-in and
    yours), the URL-seen test and the per-host guards, at the page's depth + 1. Fetched once at most.
    """

    url: str


@dataclass(frozen=True, slots=True)
class Page:
    """One fetched response, as a processor sees it. Immutable and picklable (it may travel to a worker process).

    Every response with a status reaches the processors (2xx, redirects, 4xx, 5xx), robots.txt and
    sitemap files excepted. `title`, `text`, `links` and `canonical` are filled for HTML bodies the
    crawler parsed (2xx of a parsed content type, see `parse_content_types`) and empty otherwise.
    `links` are all the page's links, resolved, nofollow ones included (see `Link.nofollow`); the
    crawler itself follows them according to the configuration, whatever a processor does.
    """

    url: str
    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes
    """The content with any Content-Encoding undone, at most `max_body_bytes` of it."""
    depth: int
    """Link hops from a seed."""
    fetched_at: float
    """Wall-clock time (seconds since the epoch) of the request."""
    truncated: str = ""
    """Why the body is incomplete ("length", "time", "disconnect"), or "" when it is whole."""
    title: str = ""
    text: str = ""
    links: tuple[Link, ...] = ()
    canonical: str | None = None
    noindex: bool = False
    """The page asked not to be indexed (meta robots or X-Robots-Tag)."""

    @property
    def ok(self) -> bool:
        """A 2xx response."""
        return 200 <= self.status < 300

    @property
    def content_type(self) -> str:
        """The media type, lower-cased, without parameters ("" when the response had none)."""
        return (self.header("content-type") or "").split(";")[0].strip().lower()

    def header(self, name: str) -> str | None:
        """The first value of a response header (case-insensitive), or None."""
        lowered = name.lower()
        for key, value in self.headers:
            if key.lower() == lowered:
                return value
        return None


ProcessorOutput: TypeAlias = Item | Follow | Iterable[Item | Follow] | None
ProcessorResult: TypeAlias = ProcessorOutput | Awaitable[ProcessorOutput] | AsyncIterable[Item | Follow]


def as_outputs(value: object) -> Iterable[object]:
    """What a processor returned (not awaited) as an iterable: one item, one Follow, an iterable of them, or None.

    Iterables are not copied: a generator runs as the caller iterates, so what it yielded before
    it raised has been seen. The elements are not checked here (see `crawlspace.hooks.runtime`);
    a mapping is one item, never an iterable of its keys.
    """
    if value is None:
        return ()
    if isinstance(value, Mapping | Follow):
        return (value,)
    if isinstance(value, Iterable) and not isinstance(value, str | bytes):
        return value
    return (value,)


class PageProcessor(Protocol):
    """Called with each fetched page; emits items for the sinks and extra URLs for the frontier.

    Write it as any of:
    - a function returning an item, a `Follow`, a list of them or None, or a generator that
      `yield`s items and `Follow`s: it runs on the crawler's event loop, so it must be quick
      (reading a page's fields, a regex);
    - an `async def` returning the same, or an async generator: it is awaited in its own task, at most
      `processor_concurrency` pages at a time, while the fetchers go on; use it for I/O (an API, a
      database) with an async client;
    - anything CPU-heavy or blocking wrapped in `run_in_process(...)` or `run_in_thread(...)`.

    Exceptions are caught, reported once per distinct error with the URL and the traceback, and
    counted (stats.json `extensions`); the page's other processors still run and the crawl goes on.
    Items a processor emitted before it raised are kept. An async or pooled processor that takes
    longer than `processor_timeout` seconds for a page is abandoned for that page and counted.
    """

    def __call__(self, page: Page, /) -> ProcessorResult: ...


class UrlFilter(Protocol):
    """Decides whether a discovered URL may enter the frontier, after the built-in filters accepted it.

    Called for every link, redirect target, seed and `Follow` before duplicate elimination (a link
    the crawl knows it submitted recently is dropped as a repeat before the filters), so the same
    URL may be asked about more than once: answer from the URL (and its depth), quickly, and the
    same way each time. `entry.url` is normalized; `entry.depth` counts link hops from a seed,
    `entry.hops` redirect hops.

    Return True to accept, False to reject (counted under the filter's name in stats.json
    `filtered`), or a short reason string to reject with that reason (counted as `name:reason`).
    A filter that raises or returns anything else rejects the URL (failing closed keeps a broken
    filter from widening the crawl); the error is reported once and counted.
    """

    def __call__(self, entry: FrontierEntry, /) -> bool | str: ...


class ItemSink(Protocol):
    """Receives every item every processor emits, in emission order, on the event loop.

    Every sink is offered every item: one that wants only some checks them in `write` (the built-in
    sinks take `select=`). An int attribute `items`, if the sink has one, is reported in stats.json
    as the items it wrote. `write` should be quick (buffer, then write in batches); it is not
    retried: an exception loses that item for this sink only (raise `ItemsLost(message, count)`
    when a batch of them is lost), and is reported once per distinct error and counted. `close` is
    called once at the end of the crawl (after the last item), also when the crawl was stopped.
    A plain function `fn(item)` passed as a sink is wrapped in `FunctionSink`.
    """

    def write(self, item: Item, /) -> None: ...

    def close(self) -> None: ...


class ProtocolHandler(Protocol):
    """Fetches the URLs of one scheme (registered as `Crawler(handlers={"file": FileHandler(...)})`).

    `fetch` must not raise for anything the resource does: return a `FetchResult` whose `outcome`
    and `status` say what happened, with HTTP meaning (200 found, 403 refused, 404 missing), the
    response `headers` (at least Content-Type), `body` and `decoded` (the bytes), `started` (the
    wall-clock time) and `duration`. An exception is reported and counted as a network error.

    For schemes other than http and https, URLs are crawlable once a handler is registered (the
    normalizer and the scheme filter accept them); DNS and robots.txt do not apply, and `polite`
    says whether the frontier spaces requests to one host as for the web (True: a remote service)
    or not at all (False: local files). Results go through the same store, parser, processors and
    link pipeline as web pages. A handler registered for http or https replaces the built-in
    fetcher for pages (robots.txt is still fetched by the built-in one, and DNS, robots rules and
    politeness still apply); it then answers for its own network safety (private addresses).
    """

    @property
    def polite(self) -> bool: ...

    async def fetch(self, url: str, /) -> FetchResult: ...


def hook_name(hook: object) -> str:
    """How statistics and error reports name an extension: its `name`, its function name or its class name."""
    name = getattr(hook, "name", None)
    if isinstance(name, str) and name:
        return name
    function_name = getattr(hook, "__name__", None)
    if isinstance(function_name, str) and function_name != "<lambda>":
        return function_name
    return type(hook).__name__ if function_name is None else "lambda"


__all__ = [
    "Follow",
    "FrontierEntry",
    "Item",
    "ItemSink",
    "Page",
    "PageProcessor",
    "Prioritizer",
    "ProcessorOutput",
    "ProcessorResult",
    "ProtocolHandler",
    "UrlFilter",
    "as_outputs",
    "hook_name",
]
