"""Per-page cost of the crawl's compiled-call stages on the heavy web's pages, this checkout against another.

    .venv/bin/python bench/throughput/stages.py [--compare-with /path/to/other/checkout] [--pages 300]

Renders pages of the benchmark's heavy web in process (no server), then times `parse_html`,
`Shingler.signature` over the parser's text and `WarcWriter.write_exchange` (response, request and
metadata records, the outlinks in the metadata) on the same pages, one core, process CPU time. With
`--compare-with`, each stage's module is loaded from both checkouts (by file, under other names) and
the two are timed in alternation, so that load on a shared machine hits them alike; the medians of
the rounds are printed with their ratio. What the crawl adds around these calls (the event loop,
the fetch, the URL pipeline, the crawl table) is not here: run.py measures the whole.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import time
from collections.abc import Callable
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
    spec = importlib.util.spec_from_file_location(alias, path)
    assert spec is not None and spec.loader is not None, path
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[alias] = loaded
    spec.loader.exec_module(loaded)
    return loaded


def heavy_pages(count: int) -> list[tuple[str, bytes]]:
    web = SimWeb.generate(
        SimWebConfig(
            hosts=300, seed=1, mean_pages_per_host=50, max_pages_per_host=250, page_bytes=(500, 160_000),
            mean_page_bytes=16_000, mean_out_links=55.0, broken_link_fraction=0.2, include_trap=False,
            page_style="realistic",
        )
    )  # fmt: skip
    step = max(1, web.data.pages // count)
    nodes = list(range(0, web.data.pages, step))[:count]
    return [(web.url_of(node), web.renderer.node_response(node).body) for node in nodes]


def time_rounds(functions: list[Callable[[Any], object]], items: list[Any], rounds: int) -> list[float]:
    """Median ms per item of each function over `rounds`, the order of the functions alternating."""
    times: list[list[float]] = [[] for _ in functions]
    for round_number in range(rounds):
        order = list(range(len(functions)))
        if round_number % 2:
            order.reverse()
        for index in order:
            started = time.process_time()
            for item in items:
                functions[index](item)
            times[index].append(time.process_time() - started)
    return [sorted(values)[len(values) // 2] * 1000 / len(items) for values in times]


def stage_functions(
    checkout: Path, tag: str, pages: list[tuple[str, bytes]]
) -> dict[str, tuple[Callable[[Any], object], list[Any]]]:
    html = load(checkout, "crawlspace.parse.html", f"stage_html_{tag}")
    shingles = load(checkout, "crawlspace.seen.shingles", f"stage_shingles_{tag}")
    warc = load(checkout, "crawlspace.store.warc", f"stage_warc_{tag}")
    shingler = shingles.Shingler()
    writer = warc.WarcWriter(tempfile.mkdtemp(prefix="stages-"), max_file_bytes=1 << 40, prefix="stages")
    texts = [html.parse_html(body, url, "text/html").raw_text for url, body in pages]
    exchanges = []
    for url, body in pages:
        result = FetchResult(
            url, Outcome.OK, 200, "OK", [*RESPONSE_HEADERS, ("Content-Length", str(len(body)))], body,
            address="127.0.0.2", started=time.time(), duration=0.01, request_headers=REQUEST_HEADERS,
        )  # fmt: skip
        outlinks = [target for target, _, _ in page_outlinks(html.parse_html(body, url, "text/html"), url)]
        exchanges.append((result, warc.fetch_metadata(result, outlinks=outlinks, extra=[("hops-from-seed", "2")])))
    return {
        "parse_html": (
            lambda page: html.parse_html(page[1], page[0], "text/html; charset=utf-8", agent="crawlspace"),
            pages,
        ),
        "Shingler.signature": (shingler.signature, texts),
        "WarcWriter.write_exchange": (lambda pair: writer.write_exchange(pair[0], metadata=pair[1]), exchanges),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--compare-with", type=Path, help="another checkout of crawlspace, timed in alternation")
    parser.add_argument("--pages", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    pages = heavy_pages(args.pages)
    print(f"{len(pages)} heavy-web pages, {sum(len(body) for _, body in pages) / len(pages) / 1000:.1f} KB on average")
    ours = stage_functions(REPO, "this", pages)
    theirs = stage_functions(args.compare_with.resolve(), "other", pages) if args.compare_with else None
    for name, (function, items) in ours.items():
        if theirs is None:
            (ms,) = time_rounds([function], items, args.rounds)
            print(f"  {name:28} {ms:.3f} ms per page")
        else:
            other_ms, ms = time_rounds([theirs[name][0], function], items, args.rounds)
            print(f"  {name:28} other {other_ms:.3f} ms, this {ms:.3f} ms per page, other/this {other_ms / ms:.2f}x")


if __name__ == "__main__":
    main()
