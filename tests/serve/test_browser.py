"""The dashboard in a real browser: Debian's chromium driven by Playwright (no browser download).

Screenshots go to the test's temporary directory (printed; `pytest -s` shows the path)."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from crawlspace.jobs import run as run_jobs
from crawlspace.serve.security import Guard
from crawlspace.serve.server import BackgroundDashboard
from crawlspace.simweb import RunningServer
from tests.serve.hostile import ANCHOR_PAYLOAD, ATTRIBUTE_PAYLOAD, TITLE_PAYLOAD, add_hostile_hosts
from tests.serve.live import live_crawl

CHROMIUM = Path("/usr/bin/chromium")


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    assert CHROMIUM.exists(), "the browser tests need Debian's chromium: apt-get install -y chromium (.ci/run does)"
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        yield launched
        launched.close()


def _shots(tmp_path: Path) -> Path:
    shots = tmp_path / "screenshots"
    shots.mkdir(exist_ok=True)
    print(f"\nscreenshots: {shots}")
    return shots


def _number(page: Page, selector: str) -> int:
    return int(page.text_content(selector) or "0")


def _reloaded(page: Page) -> Page:
    page.reload()
    return page


def _until(page: Page, check: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    """Poll what the page shows (the dashboard's CSP forbids the eval that wait_for_function needs)."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        page.wait_for_timeout(100)


@pytest.mark.slow
def test_watch_a_live_crawl_open_a_host_and_a_page_search_pause_and_resume(
    browser: Browser, served_small_web: RunningServer, tmp_path: Path
) -> None:
    shots = _shots(tmp_path)
    with live_crawl(served_small_web, tmp_path / "crawl", "--min-delay", "0.3", "--max-seconds", "120") as crawl:
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        page.goto(crawl.url)
        first = _number(page, "#pages")
        _until(page, lambda: _number(page, "#pages") > first + 5, "the page count to rise on screen")
        assert page.text_content("#state") == "running"
        page.wait_for_selector("#chart polyline")  # the chart drew the pages/s series
        assert _number(page, "#pages") > first
        page.screenshot(path=str(shots / "overview.png"), full_page=True)

        page.click("text=Hosts")
        _until(page, lambda: _reloaded(page).locator("#hosts-table tbody tr").count() > 0, "the hosts table")
        # the server's order: most pages first
        counts = [int(text) for text in page.locator("#hosts-table tbody td:nth-child(2)").all_text_contents()]
        assert counts == sorted(counts, reverse=True) and counts[0] > 0
        page.screenshot(path=str(shots / "hosts.png"), full_page=True)
        host = page.locator("#hosts-table tbody tr:first-child td:first-child a").text_content()
        page.click("#hosts-table tbody tr:first-child td:first-child a")
        assert page.text_content("#host-name") == host
        assert page.locator("#recent tbody tr").count() > 0
        page.screenshot(path=str(shots / "host.png"), full_page=True)

        page.click("#recent tbody tr:first-child td:nth-child(2) a")
        page.wait_for_selector("#history tbody tr")
        assert page.text_content("#page-url") == page.url.split("url=", 1)[1].replace("%3A", ":").replace("%2F", "/")
        page.screenshot(path=str(shots / "page.png"), full_page=True)

        page.click("text=Search")
        page.fill("#q", "page")
        page.click("#search-button")
        assert "crawlspace jobs" in (page.text_content("#no-index") or "")  # a live crawl has no index yet
        page.screenshot(path=str(shots / "search.png"), full_page=True)

        page.click("text=Overview")
        expect(page.locator("#state")).to_have_text("running")
        page.click("#control-pause")
        expect(page.locator("#state")).to_have_text("paused", timeout=10_000)
        assert page.is_disabled("#control-pause") and page.is_enabled("#control-resume")
        page.screenshot(path=str(shots / "paused.png"), full_page=True)
        held = crawl.wait_for(lambda o: o["in_flight"] == 0, what="in-flight fetches to end")["pages"]
        page.wait_for_timeout(2000)
        assert _number(page, "#pages") == held
        page.click("#control-resume")
        expect(page.locator("#state")).to_have_text("running", timeout=10_000)
        _until(page, lambda: _number(page, "#pages") > held, "pages after the resume")
        crawl.control("stop")
        crawl.assert_ended_cleanly()


@pytest.mark.slow
def test_a_two_process_crawl_shows_its_partitions_caches_and_host_delays(
    browser: Browser, served_small_web: RunningServer, tmp_path: Path
) -> None:
    shots = _shots(tmp_path)
    options = ("--min-delay", "0.5", "--max-seconds", "120")
    with live_crawl(served_small_web, tmp_path / "crawl", *options, processes=2) as crawl:
        api = crawl.wait_for(lambda o: len(o["partitions"]) == 2 and o["pages"] > 10, what="two partitions")
        assert [row["partition"] for row in api["partitions"]] == [0, 1]
        assert {row["state"] for row in api["partitions"]} == {"running"}
        assert sum(row["pages"] for row in api["partitions"]) >= api["pages"] - 2 * 5  # each reports on its own beat
        page = browser.new_page(viewport={"width": 1280, "height": 1100})
        page.goto(crawl.url)
        rows = page.locator("#partitions tbody tr")
        _until(page, lambda: rows.count() == 2, "a row per partition")
        assert page.is_visible("#partitions-section")
        _until(page, lambda: rows.nth(1).locator("td").nth(1).text_content() == "running", "partition 1 running")
        _until(page, lambda: int(rows.nth(0).locator("td").nth(2).text_content() or 0) > 0, "partition 0's pages")
        robots = page.text_content("#robots-hit-rate") or ""
        assert robots.endswith(")") and "%" in robots, robots  # e.g. "81.2% (178 / 41)"
        _until(page, lambda: (page.text_content("#delay-causes") or "–") != "–", "the hosts' delay causes")
        page.screenshot(path=str(shots / "overview-2-processes.png"), full_page=True)

        page.click("text=Hosts")
        queued = page.locator("#hosts-table td.queued")
        _until(
            page,
            lambda: _reloaded(page).locator("#hosts-table td.queued[data-value='-1']").count() < queued.count(),
            "live rows",
        )
        with page.expect_navigation():
            page.click("#hosts-table th[data-column=queued] a")  # sorted on the server: most queued first
        values = [
            int(v)
            for v in page.locator("#hosts-table td.queued").evaluate_all("cells => cells.map(c => c.dataset.value)")
        ]
        assert values == sorted(values, reverse=True) and values[0] > 0
        causes = set(page.locator("#hosts-table tbody tr:first-child td.cause").all_text_contents())
        assert causes <= {"crawl-delay", "min-delay", "10x-rule", "backoff"} and causes
        page.screenshot(path=str(shots / "hosts-2-processes.png"), full_page=True)
        page.click("#hosts-table tbody tr:first-child td:first-child a")
        assert page.text_content("#live-cause") in ("crawl-delay", "min-delay", "10x-rule", "backoff")
        crawl.control("stop")
        crawl.assert_ended_cleanly()


def test_payloads_in_titles_urls_anchors_and_robots_never_run(
    browser: Browser, hostile_crawl: Path, tmp_path: Path
) -> None:
    """With the Content-Security-Policy bypassed, so that escaping alone must hold."""
    shots = _shots(tmp_path)
    indexed = tmp_path / "indexed"
    shutil.copytree(hostile_crawl, indexed)
    run_jobs(indexed, only=["index"], scheduler="synchronous")
    listed = add_hostile_hosts(indexed, count=3)  # host names that would run, and enough hosts for pages of 2
    dashboard = BackgroundDashboard(indexed, "127.0.0.1", 0, Guard(token=None))
    base = dashboard.start().url
    try:
        context = browser.new_context(bypass_csp=True)
        page = context.new_page()
        messages: list[str] = []
        page.on("console", lambda message: messages.append(message.text))
        page.on("pageerror", lambda error: messages.append(str(error)))

        def visit(path: str, shot: str) -> None:
            page.goto(base.rstrip("/") + path)
            page.wait_for_load_state("networkidle")
            assert page.evaluate("typeof window.__pwned") == "undefined", f"a payload ran on {path}"
            injected = page.evaluate("document.querySelectorAll('[onerror], [onload], svg:not(#chart), img').length")
            assert injected == 0, f"markup from the crawl became elements on {path}"
            assert page.evaluate("document.querySelectorAll('script:not([src])').length") == 0
            page.screenshot(path=str(shots / shot), full_page=True)

        visit("/", "xss-overview.png")
        visit("/hosts?per=2", "xss-hosts.png")
        with page.expect_navigation():
            page.click("#hosts-table th[data-column=host] a")  # sorted on the server, A to Z
        assert "sort=host" in page.url and page.get_attribute("th[data-column=host]", "data-sorted") == "asc"
        names = page.locator("#hosts-table tbody td:first-child a")
        first = names.all_text_contents()
        with page.expect_navigation():
            page.click("#pager-top a.next")
        visit(page.url.split(base.rstrip("/"), 1)[1], "xss-hosts-2.png")
        assert page.text_content("#pager-top .page-number") == "2"
        shown = first + names.all_text_contents()
        assert shown == sorted(shown) and len(shown) == 4 and set(listed[:2]) <= set(shown)  # the names, as text
        visit("/hosts", "xss-hosts-all.png")
        page.click("#hosts-table tbody tr:first-child td:first-child a")
        visit(page.url.split(base.rstrip("/"), 1)[1], "xss-host.png")
        assert "Disallow: /private<script>window.__pwned='robots'</script>" in (page.text_content("pre.robots") or "")
        page.click("#recent a[href$='%2F']")  # the home page: the title and anchor payloads
        visit(page.url.split(base.rstrip("/"), 1)[1], "xss-page.png")
        assert page.text_content("#page-title") == TITLE_PAYLOAD
        assert ANCHOR_PAYLOAD in page.locator("#outlinks .anchor-text").all_text_contents()
        assert ATTRIBUTE_PAYLOAD in page.locator("#outlinks .anchor-text").all_text_contents()
        odd = page.locator("#outlinks a", has_text="svg")
        odd.first.click()
        visit(page.url.split(base.rstrip("/"), 1)[1], "xss-odd-url.png")
        assert "<svg onload=window.__pwned='url'>" in (page.text_content("#page-title") or "")
        visit("/search?q=hostile", "xss-search.png")
        assert page.text_content("#results .result-title") == TITLE_PAYLOAD
        assert page.locator("#results mark").count() >= 1
        assert not [text for text in messages if "pwned" in text or "Content Security Policy" in text]
        context.close()
    finally:
        dashboard.stop()
