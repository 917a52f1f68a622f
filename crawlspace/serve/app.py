"""The dashboard's HTTP side (aiohttp.web): pages, the JSON API they use, /metrics, the controls.

Every page is rendered on the server by Jinja2 with autoescaping on, so whatever a crawl brought
back (titles, URLs, anchor text, robots.txt) reaches the browser as text, never as markup; the
pages' own script (static/dashboard.js) only ever sets `textContent`. A Content-Security-Policy
that allows scripts from this server alone is a second line, not the first. The `CrawlView` is read
on one worker thread of its own (its reads block: RocksDB, files), so the event loop, which may be
the crawl's, never waits on the disk.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, urlencode

import jinja2
from aiohttp import web

from crawlspace.crawl.control import COMMANDS, send_command
from crawlspace.refresh.querylog import SearchLog
from crawlspace.serve.hosttable import COLUMNS, HostPage, HostQuery, HostQueryError
from crawlspace.serve.metrics import CONTENT_TYPE, exposition, registry_for
from crawlspace.serve.security import CSRF_FIELD, CSRF_HEADER, TOKEN_COOKIE, Guard, Request
from crawlspace.serve.view import CrawlView

T = TypeVar("T")
HERE = Path(__file__).parent
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
VIEW_KEY = web.AppKey("view", CrawlView)
GUARD_KEY = web.AppKey("guard", Guard)


class Dashboard:
    """The view, the guard, the templates, the one thread the view is read on, and where the searches
    made are logged (`search_log`: the query log the user-experience refresh policy reads)."""

    def __init__(self, view: CrawlView, guard: Guard, search_log: SearchLog | None = None) -> None:
        self.view = view
        self.guard = guard
        self.search_log = search_log
        self.registry = registry_for(view)
        self.templates = jinja2.Environment(
            loader=jinja2.FileSystemLoader(HERE / "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
        )
        self.templates.filters["when"] = _when
        self.templates.filters["size"] = _size
        self.templates.globals["quote"] = functools.partial(quote, safe="")
        self._thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="crawlspace-serve")
        self._refreshed = 0.0

    async def read(self, call: Callable[..., T], *args: Any) -> T:
        """`call(*args)` on the view's thread, the progress files read first (at most every 0.2 s)."""

        def run() -> T:
            now = time.monotonic()
            if now - self._refreshed >= 0.2:
                self.view.refresh()
                self._refreshed = now
            return call(*args)

        return await asyncio.get_running_loop().run_in_executor(self._thread, run)

    async def search(self, query: str, top: int) -> dict[str, Any]:
        """The search, logged first (on the view's thread: a write to a file)."""

        def run() -> dict[str, Any]:
            if self.search_log is not None:
                self.search_log.append(query)
            return self.view.search(query, top)

        return await self.read(run)

    def render(self, name: str, **values: Any) -> web.Response:
        page = self.templates.get_template(name).render(
            csrf=self.guard.csrf_secret, directory=str(self.view.directory), **values
        )
        return web.Response(text=page, content_type="text/html", charset="utf-8")

    def close(self) -> None:
        self._thread.shutdown(wait=True)
        self.view.close()
        if self.search_log is not None:
            self.search_log.close()


DASHBOARD_KEY = web.AppKey("dashboard", Dashboard)


def _when(value: float | None) -> str:
    return "" if not value else time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(value)) + " UTC"


def _size(value: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(value) < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return str(value)


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def guarded(request: web.Request, handler: Handler) -> web.StreamResponse:
    guard = request.app[GUARD_KEY]
    csrf = request.headers.get(CSRF_HEADER, "")
    if not csrf and request.method == "POST" and request.content_type == "application/x-www-form-urlencoded":
        csrf = str((await request.post()).get(CSRF_FIELD, ""))
    verdict = guard.check(
        Request(
            method=request.method,
            host=request.host,
            authorization=request.headers.get("Authorization", ""),
            cookie_token=request.cookies.get(TOKEN_COOKIE, ""),
            query_token=request.query.get("token", ""),
            csrf=csrf,
            origin=request.headers.get("Origin", ""),
        )
    )
    if not verdict.allowed:
        response: web.StreamResponse = web.json_response({"error": verdict.reason}, status=verdict.status)
    elif verdict.set_cookie and not _is_api(request.path):  # a browser: the token becomes a cookie
        query = {key: value for key, value in request.query.items() if key != "token"}
        response = web.Response(status=303, headers={"Location": str(request.rel_url.with_query(query))})
        response.set_cookie(TOKEN_COOKIE, guard.token or "", httponly=True, samesite="Strict", path="/")
    else:
        try:
            response = await handler(request)
        except web.HTTPException as exc:  # answered here, so that it carries the headers below too
            response = web.Response(status=exc.status, text=exc.text, headers=exc.headers)
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["Cache-Control"] = "no-store"
    return response


def _is_api(path: str) -> bool:
    """A request of a program (the JSON API, a Prometheus scrape), which keeps no cookie."""
    return path.startswith("/api/") or path == "/metrics"


def _dashboard(request: web.Request) -> Dashboard:
    return request.app[DASHBOARD_KEY]


# -- pages ---------------------------------------------------------------------------------------


async def overview_page(request: web.Request) -> web.Response:
    dashboard = _dashboard(request)
    overview = await dashboard.read(_overview_with_figures, dashboard.view)
    return dashboard.render("overview.html", page="overview", overview=overview, commands=COMMANDS)


def _host_query(request: web.Request) -> HostQuery:
    """The hosts page's or API's query (serve/hosttable.py); raises HostQueryError."""
    return HostQuery.parse({name: request.query.getall(name) for name in request.query})


def _hosts_link(path: str, query: HostQuery, **changes: Any) -> str:
    """The address of another page or order of the hosts table (defaults left out)."""
    params = query.params(**changes)
    return path + ("?" + urlencode(params, quote_via=quote) if params else "")


async def hosts_page(request: web.Request) -> web.Response:
    dashboard = _dashboard(request)
    try:
        query = _host_query(request)
    except HostQueryError as exc:
        raise web.HTTPBadRequest(text=str(exc)) from None
    hosts, report = await dashboard.read(_hosts_with_report, dashboard.view, query)
    return dashboard.render(
        "hosts.html", page="hosts", hosts=hosts, report=report, columns=COLUMNS.values(),
        link=functools.partial(_hosts_link, "/hosts", query),
    )  # fmt: skip


async def host_page(request: web.Request) -> web.Response:
    dashboard = _dashboard(request)
    host = await dashboard.read(dashboard.view.host, request.match_info["host"])
    if host is None:
        raise web.HTTPNotFound(text=f"no fetch of host {request.match_info['host']!r} in this crawl")
    return dashboard.render("host.html", page="hosts", host=host)


async def page_page(request: web.Request) -> web.Response:
    dashboard = _dashboard(request)
    url = request.query.get("url", "")
    found = await dashboard.read(dashboard.view.page, url) if url else None
    if found is None:
        raise web.HTTPNotFound(text=f"no fetched page {url!r} in this crawl")
    return dashboard.render("page.html", page="page", row=found)


async def record_page(request: web.Request) -> web.Response:
    dashboard = _dashboard(request)
    url = request.query.get("url", "")
    record = await dashboard.read(dashboard.view.record, url) if url else None
    if record is None:
        raise web.HTTPNotFound(text=f"no WARC record of {url!r}")
    return web.Response(text=record, content_type="text/plain", charset="utf-8")


async def search_page(request: web.Request) -> web.Response:
    dashboard = _dashboard(request)
    query = request.query.get("q", "").strip()
    result = await dashboard.search(query, _top(request)) if query else None
    return dashboard.render("search.html", page="search", query=query, result=result)


def _top(request: web.Request) -> int:
    try:
        return max(1, min(100, int(request.query.get("k", "10"))))
    except ValueError:
        raise web.HTTPBadRequest(text="k must be a number of results (1 to 100)") from None


def _hosts_with_report(view: CrawlView, query: HostQuery) -> tuple[HostPage, dict[str, Any]]:
    return view.hosts(query), view.host_files().summary()


def _overview_with_figures(view: CrawlView, series_since: float | None = None) -> dict[str, Any]:
    view.figures()  # content types and sizes: scanned again only when the last scan is old enough
    return view.overview(series_since)


# -- the JSON API ----------------------------------------------------------------------------------


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(
        text=json.dumps(data, ensure_ascii=False, allow_nan=False, default=str),
        status=status,
        content_type="application/json",
        charset="utf-8",
    )


async def api_overview(request: web.Request) -> web.Response:
    """`?since=T`: the chart's points after time T only (the page's script has the earlier ones)."""
    dashboard = _dashboard(request)
    try:
        since = float(request.query["since"]) if "since" in request.query else None
    except ValueError:
        return _json({"error": "since must be a time (seconds since the epoch)"}, 400)
    return _json(await dashboard.read(_overview_with_figures, dashboard.view, since))


async def api_hosts(request: web.Request) -> web.Response:
    """`?sort=COLUMN&order=asc|desc&q=PART&page=N&per=M`: one page of the hosts table, with the
    addresses of the pages before and after it (None at either end)."""
    dashboard = _dashboard(request)
    try:
        query = _host_query(request)
    except HostQueryError as exc:
        return _json({"error": str(exc)}, 400)
    found = await dashboard.read(dashboard.view.hosts, query)
    return _json(
        found.to_dict()
        | {
            "previous": _hosts_link("/api/hosts", query, page=query.page - 1) if query.page > 1 else None,
            "next": _hosts_link("/api/hosts", query, page=query.page + 1) if query.page < found.pages else None,
        }
    )


async def api_host(request: web.Request) -> web.Response:
    dashboard = _dashboard(request)
    host = await dashboard.read(dashboard.view.host, request.match_info["host"])
    return _json(host) if host is not None else _json({"error": "no such host in this crawl"}, 404)


async def api_page(request: web.Request) -> web.Response:
    dashboard = _dashboard(request)
    url = request.query.get("url", "")
    found = await dashboard.read(dashboard.view.page, url) if url else None
    return _json(found) if found is not None else _json({"error": "no such page in this crawl"}, 404)


async def api_search(request: web.Request) -> web.Response:
    dashboard = _dashboard(request)
    query = request.query.get("q", "").strip()
    if not query:
        return _json({"error": "give a query: ?q=words"}, 400)
    return _json(await dashboard.search(query, _top(request)))


async def api_control(request: web.Request) -> web.Response:
    dashboard = _dashboard(request)
    command = request.match_info["command"]
    if command not in COMMANDS:
        return _json({"error": f"unknown command {command!r}; one of {', '.join(COMMANDS)}"}, 404)
    state = await dashboard.read(dashboard.view.state)
    if state not in ("running", "paused", "starting"):
        return _json({"error": f"the crawl is {state}: there is nothing to {command}"}, 409)
    given = send_command(dashboard.view.directory, command)
    return _json({"command": given.command, "at": given.at, "state": state}, 202)


async def metrics(request: web.Request) -> web.Response:
    dashboard = _dashboard(request)
    body = await dashboard.read(exposition, dashboard.registry)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})


def make_app(view: CrawlView, guard: Guard, search_log: SearchLog | None = None) -> web.Application:
    """The dashboard's routes; `search_log`: every search made on it is appended there (it owns it
    from here: closed with the app)."""
    app = web.Application(middlewares=[guarded])
    dashboard = Dashboard(view, guard, search_log)
    app[VIEW_KEY] = view
    app[GUARD_KEY] = guard
    app[DASHBOARD_KEY] = dashboard

    async def close(_app: web.Application) -> None:
        dashboard.close()

    app.on_cleanup.append(close)
    app.router.add_get("/", overview_page)
    app.router.add_get("/hosts", hosts_page)
    app.router.add_get("/hosts/{host}", host_page)
    app.router.add_get("/page", page_page)
    app.router.add_get("/record", record_page)
    app.router.add_get("/search", search_page)
    app.router.add_get("/api/overview", api_overview)
    app.router.add_get("/api/hosts", api_hosts)
    app.router.add_get("/api/hosts/{host}", api_host)
    app.router.add_get("/api/page", api_page)
    app.router.add_get("/api/search", api_search)
    app.router.add_post("/api/control/{command}", api_control)
    app.router.add_get("/metrics", metrics)
    app.router.add_static("/static", HERE / "static", append_version=False)
    return app
