"""Fetched pages handed to the user's page processors (crawlspace.hooks), and what they emit back.

Every page response is handed over, exact duplicates included: the crawler does not follow a
duplicate's links again, but a processor sees every page the crawl fetched (robots.txt and sitemap
files are not pages). Processors run off the crawl loop (hooks.runtime.Extensions: a bounded
queue, so a slow processor slows the fetches instead of piling pages up); the URLs they emit take
the way of links, resolved against their page.
"""

from __future__ import annotations

from collections.abc import Callable

from crawlspace.crawl.links import LinkPipeline, Links
from crawlspace.crawl.recorder import FetchRecorder
from crawlspace.fetch import FetchResult
from crawlspace.frontier import FrontierEntry
from crawlspace.hooks.protocols import Page
from crawlspace.hooks.runtime import Extensions
from crawlspace.parse import ParsedPage


class PageHandOff:
    def __init__(
        self,
        extensions: Extensions,
        recorder: FetchRecorder,
        links: LinkPipeline,
        *,
        max_body_bytes: int,
        wake: Callable[[], None],
    ) -> None:
        self._extensions = extensions
        self._recorder = recorder
        self._links = links
        self._max_body_bytes = max_body_bytes
        self._wake = wake

    def __repr__(self) -> str:
        return f"PageHandOff({self._extensions!r})"

    def page_done(self, result: FetchResult, entry: FrontierEntry, parsed: ParsedPage | None) -> None:
        """Hand a fetched response to the processors.

        `parsed` is the recorder's parse, None where it did not parse the body: not 2xx, not a parsed
        type, or an exact duplicate of a page seen before; those of a parsed type are parsed here.
        """
        if not self._extensions.processes_pages or not result.status:
            return
        body = result.content(self._max_body_bytes)
        if parsed is None and self._recorder.parseable(result):
            parsed = self._recorder.parse(result, body)
        page = Page(
            url=result.url,
            status=result.status,
            headers=tuple(result.headers),
            body=body,
            depth=entry.depth,
            fetched_at=result.started,
            truncated=result.truncated,
            title=parsed.title if parsed else "",
            text=parsed.text if parsed else "",
            links=tuple(parsed.links) if parsed else (),
            canonical=parsed.canonical if parsed else None,
            noindex=parsed.meta_noindex if parsed else False,
        )
        task = self._extensions.submit(page, self._follow_emitted)
        task.add_done_callback(lambda _: self._wake())  # the crawl may end once processors are done

    def _follow_emitted(self, page: Page, hrefs: list[str]) -> None:
        """URLs a processor emitted: resolved against the page, then the path of its links."""
        self._links.follow(Links([(href, page.depth + 1, 0) for href in hrefs], page.url, resolve=True))
