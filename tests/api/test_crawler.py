"""The Crawler's contract: how it starts, what it refuses before starting, run() and await crawl(), stop(),
resume, signals, and the wiring of prioritizers and processors into the loop. Most crawls here are of local
files (FileHandler): no sockets, a fraction of a second each; the CLI's resume crawls the simulated web."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import signal
import threading
from pathlib import Path

import pytest

from crawlspace import ConfigError, CrawlConfig, Crawler, CrawlError, CrawlStats
from crawlspace.api import SeedsError
from crawlspace.crawl.workers import GC_THRESHOLDS, crawl_gc
from crawlspace.fetch import FetchResult
from crawlspace.hooks import FileHandler, Follow, FrontierEntry, Item, Page, run_in_thread
from crawlspace.simweb import RunningServer, SimWeb, judge_crawl
from tests.conftest import run_cli


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """index -> a, b; a -> c; b -> missing; c -> index (a cycle); plus an unlinked file."""
    root = tmp_path / "site"
    root.mkdir()
    pages = {
        "index.html": '<title>Index</title><a href="a.html">a</a> <a href="b.html">b</a>',
        "a.html": '<title>A</title><a href="c.html">c</a>',
        "b.html": '<title>B</title><a href="missing.html">gone</a>',
        "c.html": '<title>C</title><a href="index.html">home</a> <a href="./">home again</a>',
        "unlinked.html": "<title>Alone</title>",
    }
    for name, html in pages.items():
        (root / name).write_text(html)
    return root


def crawler_for(site: Path, tmp_path: Path, **options: object) -> Crawler:
    handler = FileHandler(site)
    config = options.pop("config", CrawlConfig(scope="prefix"))
    return Crawler(
        config,  # type: ignore[arg-type]
        out=tmp_path / "crawl",
        seeds=[handler.url_of(site)],
        handlers={"file": handler},
        progress=False,
        **options,  # type: ignore[arg-type]
    )


def titles(page: Page) -> Item:
    return {"url": page.url.rsplit("/", 1)[1], "status": page.status, "title": page.title, "depth": page.depth}


def test_run_crawls_and_writes_its_directory(site: Path, tmp_path: Path) -> None:
    seen: list[Item] = []
    stats = crawler_for(site, tmp_path, processors=[titles], sinks=[seen.append]).run()
    assert isinstance(stats, CrawlStats) and stats.termination == "frontier-empty"
    assert {(item["url"], item["status"], item["title"]) for item in seen} == {
        ("", 200, "Index"),
        ("a.html", 200, "A"),
        ("b.html", 200, "B"),
        ("c.html", 200, "C"),
        ("missing.html", 404, ""),
        ("index.html", 200, "Index"),  # the same file at another URL: an exact duplicate, still a page
    }
    out = tmp_path / "crawl"
    document = json.loads((out / "stats.json").read_text())
    assert document["pages_fetched"] == 6 and document["duplicate_content"] == 1
    assert document["extensions"]["processors"]["titles"]["items"] == 6
    assert json.loads((out / "config.json").read_text())["scope"] == "prefix"
    assert list((out / "warc").glob("*.warc.gz"))  # file: pages are stored like web pages


def test_await_crawl_inside_a_running_loop(site: Path, tmp_path: Path) -> None:
    async def application() -> tuple[CrawlStats, str]:
        crawler = crawler_for(site, tmp_path)
        with pytest.raises(CrawlError, match=r"await crawler\.crawl"):
            crawler.run()  # would block the application's loop
        stats = await crawler.crawl()
        with pytest.raises(CrawlError, match="runs once"):
            await crawler.crawl()
        return stats, repr(crawler)

    stats, text = asyncio.run(application())
    assert stats.pages_fetched == 6 and "finished" in text


def test_prioritizer_is_the_frontiers(site: Path, tmp_path: Path) -> None:
    asked: list[tuple[str, int]] = []

    class Recording:
        levels = 3

        def priority(self, entry: FrontierEntry) -> int:
            asked.append((entry.url.rsplit("/", 1)[1], entry.depth))
            return 7  # out of range: clamped by the frontier

    stats = crawler_for(site, tmp_path, prioritizer=Recording()).run()
    assert stats.pages_fetched == 6
    assert sorted(asked) == sorted(
        [("", 0), ("a.html", 1), ("b.html", 1), ("c.html", 2), ("missing.html", 2), ("index.html", 3)]
    )  # every URL once, as it enters the frontier


def test_follow_links_off_leaves_the_choice_to_processors(site: Path, tmp_path: Path) -> None:
    def only_a(page: Page) -> list[Follow]:
        return [Follow(link.url) for link in page.links if link.url.endswith("/a.html")] + [Follow("unlinked.html")]

    seen: list[Item] = []
    config = CrawlConfig(scope="prefix", follow_links=False)
    crawler_for(site, tmp_path, config=config, processors=[only_a, titles], sinks=[seen.append]).run()
    assert sorted(str(item["url"]) for item in seen) == ["", "a.html", "unlinked.html"]
    assert {item["url"]: item["depth"] for item in seen}["unlinked.html"] == 1  # relative to the page, depth + 1


def test_stop_from_a_processor(site: Path, tmp_path: Path) -> None:
    seen: list[str] = []

    def stop_after_first(page: Page) -> None:
        seen.append(page.url)
        crawler.stop()

    crawler = crawler_for(site, tmp_path, processors=[stop_after_first])
    stats = crawler.run()
    assert stats.termination == "stopped" and stats.pages_fetched < 6 and len(seen) == stats.pages_fetched


def test_stop_before_the_crawl_starts(site: Path, tmp_path: Path) -> None:
    crawler = crawler_for(site, tmp_path)
    crawler.stop()
    assert crawler.stats is None
    stats = crawler.run()
    assert stats.termination == "stopped" and stats.pages_fetched == 0


def test_seeds_from_arguments_and_a_file(tmp_path: Path) -> None:
    seeds_file = tmp_path / "seeds.txt"
    seeds_file.write_text("# the seeds\nhttp://a.test/\n\nnot a url\nftp://b.test/\n  https://c.test/x  \n")
    crawler = Crawler(
        out=tmp_path / "out", seeds=["http://d.test/", "mailto:x@y.test"], seeds_file=seeds_file, progress=False
    )
    assert crawler.seeds == ["http://d.test/", "http://a.test/", "https://c.test/x"]
    assert [str(problem).split(":")[0] + ":" + str(problem.line) for problem in crawler.seed_problems] == [
        "seeds:2",
        f"{seeds_file}:4",
        f"{seeds_file}:5",
    ]
    with pytest.raises(SeedsError, match="no valid seed URL in") as raised:
        Crawler(out=tmp_path / "out", seeds=["file:///tmp/x"])  # file: only with a handler
    assert len(raised.value.problems) == 1
    with pytest.raises(CrawlError, match="does not exist"):
        Crawler(out=tmp_path / "out", seeds_file=tmp_path / "missing.txt")


def test_refused_before_starting(tmp_path: Path) -> None:
    seeds = ["http://a.test/"]
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(CrawlError, match="not writable"):
        Crawler(out=blocker / "out", seeds=seeds)
    with pytest.raises(CrawlError, match="hosts file"):
        Crawler(CrawlConfig(hosts_file=str(tmp_path / "none")), out=tmp_path / "out", seeds=seeds)
    with pytest.raises(TypeError, match="CrawlConfig"):
        Crawler({"min_delay": 1}, out=tmp_path / "out", seeds=seeds)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="processor must be callable"):
        Crawler(out=tmp_path / "out", seeds=seeds, processors=["module.Class"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="prioritizer"):
        Crawler(out=tmp_path / "out", seeds=seeds, prioritizer=object())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not an item sink"):
        Crawler(out=tmp_path / "out", seeds=seeds, sinks=["out.jsonl"])  # type: ignore[list-item]


@pytest.mark.parametrize(("key", "value"), [("processor_concurrency", 0), ("processor_timeout", -1.0)])
def test_new_keys_validated_alike_from_keywords_and_toml(tmp_path: Path, key: str, value: object) -> None:
    with pytest.raises(ConfigError, match=key) as from_keywords:
        CrawlConfig(**{key: value})  # type: ignore[arg-type]
    path = tmp_path / "crawl.toml"
    path.write_text(f"{key} = {value}\n")
    with pytest.raises(ConfigError, match=key) as from_toml:
        CrawlConfig.load(path)
    assert str(from_toml.value) == f"{path}: {from_keywords.value}"  # one validation, one message
    with pytest.raises(ConfigError, match="did you mean 'processor_concurrency'"):
        CrawlConfig.load(None, processor_concurency=3)


def test_run_stops_gracefully_on_sigterm(site: Path, tmp_path: Path) -> None:
    def terminate(page: Page) -> None:
        os.kill(os.getpid(), signal.SIGTERM)

    stats = crawler_for(site, tmp_path, processors=[terminate]).run()
    assert stats.termination == "interrupted" and 1 <= stats.pages_fetched < 6


def test_crawl_leaves_the_applications_signal_handlers_alone(site: Path, tmp_path: Path) -> None:
    received: list[int] = []

    def terminate(page: Page) -> None:
        if page.depth == 0:
            os.kill(os.getpid(), signal.SIGTERM)

    async def application() -> CrawlStats:
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, received.append, 1)
        stats = await crawler_for(site, tmp_path, processors=[terminate]).crawl()
        await asyncio.sleep(0)
        return stats

    stats = asyncio.run(application())
    assert received == [1]  # the application's handler got it, before and after the crawl
    assert stats.termination == "frontier-empty" and stats.pages_fetched == 6


class CountingFileHandler(FileHandler):
    def __init__(self, root: Path, fetched: list[str]) -> None:
        super().__init__(root)
        self.fetched = fetched

    async def fetch(self, url: str) -> FetchResult:
        self.fetched.append(url)
        return await super().fetch(url)


def test_resume_continues_without_fetching_twice(site: Path, tmp_path: Path) -> None:
    fetched: list[str] = []
    handler = CountingFileHandler(site, fetched)
    seeds = [handler.url_of(site)]
    first = Crawler(
        CrawlConfig(scope="prefix", max_pages=2), out=tmp_path / "crawl", seeds=seeds, handlers={"file": handler}
    ).run()
    assert first.termination == "max-pages" and len(fetched) == 2

    with pytest.raises(CrawlError, match="no crawl to resume"):
        Crawler(out=tmp_path / "elsewhere", resume=True)
    resumed = Crawler(
        CrawlConfig(scope="prefix"), out=tmp_path / "crawl", resume=True, handlers={"file": handler}, progress=False
    )
    assert resumed.config_changes == {"max_pages": (2, None)} and resumed.seeds == []
    stats = resumed.run()
    assert stats.termination == "frontier-empty"
    assert len(fetched) == len(set(fetched)) == 6  # the rest of the site, nothing twice
    assert stats.pages_fetched == 6  # counted across both runs


def test_cli_resume(served_small_web: RunningServer, small_web: SimWeb, tmp_path: Path) -> None:
    out = tmp_path / "crawl"
    common = ["--hosts-file", str(served_small_web.hosts_file), "--allow-private-addresses", "--no-progress"]
    first = run_cli("crawl", str(served_small_web.seeds_file), "--out", str(out), "--max-pages", "25",
                    "--min-delay", "0.02", *common)  # fmt: skip
    assert first.returncode == 0, first.stderr
    assert json.loads((out / "stats.json").read_text())["termination"] == "max-pages"
    second = run_cli("crawl", "--resume", str(out), "--max-pages", "100000", *common)
    assert second.returncode == 0, second.stderr
    assert "resuming with max_pages = 100000 (was 25)" in second.stderr
    served_small_web.stop()
    verdict = judge_crawl(small_web, served_small_web.read_log(), served_small_web.seeds, min_delay=0.02)
    assert verdict.ok, verdict.summary()  # complete, nothing fetched twice, polite across the restart
    assert json.loads((out / "stats.json").read_text())["pages_fetched"] == len(verdict.expected)

    missing = run_cli("crawl", "--resume", str(tmp_path / "nothing-here"))
    assert missing.returncode == 2 and "no crawl to resume" in missing.stderr
    neither = run_cli("crawl", "--out", str(tmp_path / "x"))
    assert neither.returncode == 2 and "--resume DIR" in neither.stderr


def test_stop_from_a_worker_thread(site: Path, tmp_path: Path) -> None:
    def stop_from_thread(page: Page) -> None:
        assert threading.current_thread() is not threading.main_thread()
        crawler.stop()

    crawler = crawler_for(site, tmp_path, processors=[run_in_thread(stop_from_thread, workers=1)])
    stats = crawler.run()
    assert stats.termination == "stopped" and stats.pages_fetched < 6


def test_a_crawl_runs_at_its_collector_thresholds_and_gives_the_callers_back(site: Path, tmp_path: Path) -> None:
    """The crawl runs the cyclic collector at `GC_THRESHOLDS` (a worker of a parallel crawl enters the same
    `crawl_gc`); the process that called `run` has its own thresholds again afterwards, also after an error."""

    def thresholds(page: Page) -> Item:
        return {"url": page.url, "thresholds": list(gc.get_threshold())}

    seen: list[Item] = []
    before = gc.get_threshold()
    crawler_for(site, tmp_path, processors=[thresholds], sinks=[seen.append]).run()
    assert len(seen) == 6 and {tuple(item["thresholds"]) for item in seen} == {GC_THRESHOLDS}
    assert gc.get_threshold() == before != GC_THRESHOLDS
    with pytest.raises(RuntimeError, match="inside"), crawl_gc():
        assert gc.get_threshold() == GC_THRESHOLDS
        raise RuntimeError("inside")
    assert gc.get_threshold() == before
