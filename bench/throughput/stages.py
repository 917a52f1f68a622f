"""Per-page cost of the crawl's compiled-call stages on the heavy web's pages, this checkout against another.

    .venv/bin/python bench/throughput/stages.py [--compare-with /path/to/other/checkout] [--pages 300]

Renders pages of the benchmark's heavy web in process (no server), then times `parse_html`,
`Shingler.signature` over the parser's text, `WarcWriter.write_exchange` (response, request and
metadata records, the outlinks in the metadata), `page_outlinks` and `PageStore.record` (those
records, the page's row and its anchor cells; every second page the unsynced table commit the
engine makes before each journal write, once per turn of its event loop, and every 100 pages a
flush without fsync: the store's CPU, not the disk's) on the same pages, one core, process CPU
time. `PageStore.record` runs twice: on an empty table made afresh (untimed) each round, as in a
first crawl, and on one that holds the pages already, as when a crawl fetches them again. With
`--compare-with`, each stage's module is loaded from both checkouts (by file, under other names;
the store's modules as a set, so that each checkout's page store writes through its own table and
WARC writer) and the two are timed in alternation, so that load on a shared machine hits them
alike; the medians of the rounds are printed with their ratio. What the crawl adds around these
calls (the event loop, the fetch, the URL pipeline) is not here: run.py measures the whole.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from crawlspace.fetch import FetchResult, Outcome  # noqa: E402
from crawlspace.simweb import SimWeb, SimWebConfig  # noqa: E402
from crawlspace.store.pagestore import page_outlinks  # noqa: E402

RESPONSE_HEADERS = [
    ("Server", "nginx/1.22.1"),
    ("Date", "Tue, 01 Dec 2026 11:00:00 GMT"),
    ("Content-Type", "text/html"),
    ("Last-Modified", "Tue, 01 Dec 2026 10:00:00 GMT"),
    ("Connection", "keep-alive"),
    ("ETag", '"5f1e-61a2"'),
    ("Accept-Ranges", "bytes"),
]
REQUEST_HEADERS = [("User-Agent", "crawlspace/0.1"), ("Accept", "*/*"), ("Accept-Encoding", "gzip, deflate")]


def load(checkout: Path, module: str, alias: str) -> ModuleType:
    """`module` (crawlspace.x.y) from `checkout`'s file, as a module named `alias` (its imports of other
    crawlspace modules resolve to this checkout's: only the stage itself is compared)."""
    path = checkout / (module.replace(".", "/") + ".py")
    package: list[str] | None = None
    if not path.exists():  # a package: its __init__
        path = path.with_suffix("") / "__init__.py"
        package = [str(path.parent)]
    spec = importlib.util.spec_from_file_location(alias, path, submodule_search_locations=package)
    assert spec is not None and spec.loader is not None, path
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[alias] = loaded
    spec.loader.exec_module(loaded)
    return loaded


STORE_MODULES = [
    "crawlspace.store.rowkey",
    "crawlspace.store.cdxj",
    "crawlspace.store.warc",
    "crawlspace.store.crawltable",
    "crawlspace.store.pagestore",
]


def load_set(names: Sequence[str], load_one: Callable[[str], ModuleType | None]) -> dict[str, ModuleType]:
    """Modules `names` of one checkout (`load_one` loads one from it, or says None: not there), each
    importing the ones before it from the same checkout: they stand under their real names in
    sys.modules while the next ones load, and the originals are put back."""
    saved = {name: sys.modules.get(name) for name in names}
    loaded: dict[str, ModuleType] = {}
    try:
        for name in names:
            module = load_one(name)
            if module is not None:
                loaded[name] = sys.modules[name] = module
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
    return loaded


PARSE_MODULES = ["crawlspace.urls.normalize", "crawlspace.urls", "crawlspace.parse.html"]  # the parser's joins too


def load_parser(checkout: Path, tag: str) -> ModuleType:
    """The parser from `checkout`, resolving its links with that checkout's `join`."""
    loaded = load_set(PARSE_MODULES, lambda name: load(checkout, name, f"stage_{name.replace('.', '_')}_{tag}"))
    return loaded["crawlspace.parse.html"]


def load_store(checkout: Path, tag: str) -> dict[str, ModuleType]:
    """The store's modules from `checkout`, each importing the others from the same checkout."""
    return load_set(STORE_MODULES, lambda name: load(checkout, name, f"stage_{name.rsplit('.', 1)[1]}_{tag}"))


HEAVY_WEB = SimWebConfig(
    hosts=300, seed=1, mean_pages_per_host=50, max_pages_per_host=250, page_bytes=(500, 160_000),
    mean_page_bytes=16_000, mean_out_links=55.0, broken_link_fraction=0.2, include_trap=False,
    page_style="realistic",
)  # fmt: skip
"""Pages like the heavy web's of run.py, on fewer hosts (bench/seen/bench_near_cpu.py renders them too)."""


def heavy_pages(count: int) -> list[tuple[str, bytes]]:
    web = SimWeb.generate(HEAVY_WEB)
    step = max(1, web.data.pages // count)
    nodes = list(range(0, web.data.pages, step))[:count]
    return [(web.url_of(node), web.renderer.node_response(node).body) for node in nodes]


Stage = tuple[Callable[[Any], object], list[Any], Callable[[], object] | None]


def time_rounds(stages: list[Stage], rounds: int) -> list[float]:
    """Median ms per item of each stage over `rounds`, the order of the stages alternating; a stage's
    setup, if any, runs untimed before each of its rounds."""
    times: list[list[float]] = [[] for _ in stages]
    for round_number in range(rounds):
        order = list(range(len(stages)))
        if round_number % 2:
            order.reverse()
        for index in order:
            function, items, setup = stages[index]
            if setup is not None:
                setup()
            started = time.process_time()
            for item in items:
                function(item)
            times[index].append(time.process_time() - started)
    return [sorted(values)[len(values) // 2] * 1000 / len(items) for values in times]


class StoreRounds:
    """A page store in a temporary directory for the `PageStore.record` stages: `fresh` replaces it with
    an empty one (a first crawl's every round), `filled` makes one holding the pages once (a recrawl)."""

    def __init__(self, pagestore: ModuleType, fetches: list[tuple[Any, Any]]) -> None:
        self.pagestore = pagestore
        self.fetches = fetches
        self.store: Any = None
        self.fingerprints = itertools.count()

    def _open(self) -> None:
        if self.store is not None:
            self.store.close()
        options = self.pagestore.StoreOptions(warc_max_bytes=1 << 40, flush_pages=100, sync=False)
        self.store = self.pagestore.PageStore(tempfile.mkdtemp(prefix="stages-store-"), options, clock=lambda: 0.0)

    def fresh(self) -> None:
        self._open()

    def filled(self) -> None:
        if self.store is None:
            self._open()
            for fetch in self.fetches:
                self.record(fetch)

    def record(self, fetch: tuple[Any, Any]) -> None:
        result, page = fetch
        number = next(self.fingerprints)
        self.store.record(result, page=page, fingerprint=number, depth=2)
        if number % 2:
            self.store.commit_unsynced()


def stage_functions(checkout: Path, tag: str, pages: list[tuple[str, bytes]]) -> dict[str, Stage]:
    html = load_parser(checkout, tag)
    shingles = load(checkout, "crawlspace.seen.shingles", f"stage_shingles_{tag}")
    store = load_store(checkout, tag)
    warc, pagestore = store["crawlspace.store.warc"], store["crawlspace.store.pagestore"]
    shingler = shingles.Shingler()
    writer = warc.WarcWriter(tempfile.mkdtemp(prefix="stages-"), max_file_bytes=1 << 40, prefix="stages")
    texts = [html.parse_html(body, url, "text/html").raw_text for url, body in pages]
    exchanges = []
    fetches = []
    for url, body in pages:
        result = FetchResult(
            url, Outcome.OK, 200, "OK", [*RESPONSE_HEADERS, ("Content-Length", str(len(body)))], body,
            address="127.0.0.2", started=time.time(), duration=0.01, request_headers=REQUEST_HEADERS,
        )  # fmt: skip
        page = html.parse_html(body, url, "text/html")
        outlinks = [target for target, _, _ in page_outlinks(page, url)]
        exchanges.append((result, warc.fetch_metadata(result, outlinks=outlinks, extra=[("hops-from-seed", "2")])))
        fetches.append((result, page))
    first, again = StoreRounds(pagestore, fetches), StoreRounds(pagestore, fetches)
    return {
        "parse_html": (
            lambda page: html.parse_html(page[1], page[0], "text/html; charset=utf-8", agent="crawlspace"),
            pages,
            None,
        ),
        "Shingler.signature": (shingler.signature, texts, None),
        "WarcWriter.write_exchange": (
            lambda pair: writer.write_exchange(pair[0], metadata=pair[1]),
            exchanges,
            None,
        ),
        "page_outlinks": (lambda fetch: pagestore.page_outlinks(fetch[1], fetch[0].url), fetches, None),
        "PageStore.record (first)": (first.record, fetches, first.fresh),
        "PageStore.record (again)": (again.record, fetches, again.filled),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--compare-with", type=Path, help="another checkout of crawlspace, timed in alternation")
    parser.add_argument("--pages", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--stages", nargs="*", help="time only the stages whose names contain one of these")
    args = parser.parse_args()
    pages = heavy_pages(args.pages)
    print(f"{len(pages)} heavy-web pages, {sum(len(body) for _, body in pages) / len(pages) / 1000:.1f} KB on average")
    ours = stage_functions(REPO, "this", pages)
    theirs = stage_functions(args.compare_with.resolve(), "other", pages) if args.compare_with else None
    for name, stage in ours.items():
        if args.stages and not any(word in name for word in args.stages):
            continue
        if theirs is None:
            (ms,) = time_rounds([stage], args.rounds)
            print(f"  {name:28} {ms:.3f} ms per page")
        else:
            other_ms, ms = time_rounds([theirs[name], stage], args.rounds)
            print(f"  {name:28} other {other_ms:.3f} ms, this {ms:.3f} ms per page, other/this {other_ms / ms:.2f}x")


if __name__ == "__main__":
    main()
