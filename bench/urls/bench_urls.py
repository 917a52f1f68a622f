"""Throughput per core of the URL and HTML hot paths, side by side with baselines, in one run.

    python bench/urls/bench_urls.py [--pages N] [--repeat R] [--json PATH]

Measures, on one core (the process is pinned to one CPU when the OS allows it):
1. join + normalize of the hrefs of simulated-web pages (every link form of crawlspace.simweb:
   relative, ../, //host, %-escapes, fragments, upper-case hosts, explicit ports), against
   urllib.parse (urljoin + urldefrag) and yarl (URL.join), which do less (no WHATWG parsing, no
   RFC 3986 normalization) and so bound what the extra work costs;
2. link extraction (parse_html: links with anchor text, base href, robots directives,
   canonical, page text) on the same pages, against a bare selectolax loop that only collects
   `a[href]` values (the ceiling for anything built on lexbor), and on a 30 KB page (DESIGN.md's
   reference size);
3. robots.txt matching (RobotsRules.allowed) on a real 30-rule file, against Protego.can_fetch.

Each figure is the best of R timed repetitions; ratios compare figures from this same run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import urllib.parse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import yarl
from protego import Protego
from selectolax.lexbor import LexborHTMLParser

from crawlspace.parse import parse_html
from crawlspace.robots import parse as parse_robots
from crawlspace.simweb import SimWeb, SimWebConfig
from crawlspace.urls import InvalidURL, Normalizer, join, normalize

ROBOTS_SAMPLE = Path("/work/shared/conformance/robots_realworld_sample/www.colorado.edu.robots.txt")


MIN_RUN_SECONDS = 0.4


def rates(functions: dict[str, Callable[[], int]], repeat: int) -> dict[str, float]:
    """Items per second of each function (which returns its item count): the best of `repeat` runs.

    The functions take turns (A B C A B C ...), so that a change of load on the shared machine
    hits them alike, and each run calls its function until MIN_RUN_SECONDS have passed.
    """
    best = dict.fromkeys(functions, 0.0)
    for _ in range(repeat):
        for name, function in functions.items():
            done = 0
            started = time.perf_counter()
            while True:
                done += function()
                elapsed = time.perf_counter() - started
                if elapsed >= MIN_RUN_SECONDS:
                    break
            best[name] = max(best[name], done / elapsed)
    return best


def corpus(pages: int) -> tuple[list[tuple[str, bytes]], list[tuple[str, str]]]:
    """HTML pages of a simulated web and the (base, href) pairs they contain."""
    web = SimWeb.generate(SimWebConfig(hosts=max(20, pages // 20), seed=1))
    urls = [url for url, status in web.all_urls().items() if status == 200][:pages]
    documents = [(url, web.body(url)) for url in urls]
    pairs: list[tuple[str, str]] = []
    for url, body in documents:
        tree = LexborHTMLParser(body.decode("utf-8", "replace"))
        base_node = tree.css_first("base[href]")
        base = url if base_node is None else join(url, base_node.attributes.get("href") or "")
        pairs += [(base, node.attributes.get("href") or "") for node in tree.css("a[href]")]
    return documents, pairs


def bench_urls(pairs: Sequence[tuple[str, str]], repeat: int) -> dict[str, float]:
    normalizer = Normalizer()
    sorting = Normalizer(strip_session_ids=True, strip_tracking=True, sort_query=True)

    def ours() -> int:
        for base, href in pairs:
            try:
                normalizer.join(base, href)
            except InvalidURL:
                pass
        return len(pairs)

    def ours_all_options() -> int:
        for base, href in pairs:
            try:
                sorting.join(base, href)
            except InvalidURL:
                pass
        return len(pairs)

    def ours_parsing_twice() -> int:
        for base, href in pairs:
            try:
                normalizer(join(base, href))
            except InvalidURL:
                pass
        return len(pairs)

    def join_only() -> int:
        for base, href in pairs:
            try:
                join(base, href)
            except InvalidURL:
                pass
        return len(pairs)

    absolute = []
    for base, href in pairs:
        try:
            absolute.append(join(base, href))
        except InvalidURL:
            pass

    def normalize_only() -> int:
        for url in absolute:
            try:
                normalize(url)
            except InvalidURL:
                pass
        return len(absolute)

    def stdlib() -> int:
        for base, href in pairs:
            urllib.parse.urldefrag(urllib.parse.urljoin(base, href))
        return len(pairs)

    bases = {base: yarl.URL(base) for base, _ in pairs}

    def yarl_join() -> int:
        for base, href in pairs:
            try:
                str(bases[base].join(yarl.URL(href)).with_fragment(None))
            except ValueError:
                pass
        return len(pairs)

    return rates(
        {
            "join+normalize": ours,
            "join+normalize (all options)": ours_all_options,
            "normalize(join()) (parses twice)": ours_parsing_twice,
            "join only": join_only,
            "normalize only": normalize_only,
            "urllib.parse urljoin+urldefrag": stdlib,
            "yarl join (bases parsed once)": yarl_join,
        },
        repeat,
    )


def bench_html(documents: Sequence[tuple[str, bytes]], repeat: int) -> dict[str, float]:
    volume = sum(len(body) for _, body in documents)

    def ours() -> int:
        for url, body in documents:
            parse_html(body, url, "text/html; charset=utf-8", agent="crawlspace")
        return len(documents)

    def bare() -> int:
        for _, body in documents:
            tree = LexborHTMLParser(body.decode("utf-8"))
            [node.attributes.get("href") for node in tree.css("a[href]")]
        return len(documents)

    links = sum(len(parse_html(body, url).links) for url, body in documents)
    page_30k = _page_of_30_kb(documents)

    def ours_30k() -> int:
        parse_html(page_30k, "http://site0001.test/s1/p1.html", "text/html")
        return 1

    measured = rates({"ours": ours, "bare": bare, "30k": ours_30k}, repeat)
    return {
        "parse_html pages/s": measured["ours"],
        "parse_html MB/s": measured["ours"] * volume / len(documents) / 1e6,
        "parse_html links/s": measured["ours"] * links / len(documents),
        "bare selectolax a[href] pages/s": measured["bare"],
        f"parse_html pages/s on a {len(page_30k) / 1000:.0f} KB page": measured["30k"],
        "mean page bytes": volume / len(documents),
        "mean links per page": links / len(documents),
    }


def _page_of_30_kb(documents: Sequence[tuple[str, bytes]]) -> bytes:
    return min((body for _, body in documents), key=lambda body: abs(len(body) - 30_000))


def bench_robots(pairs: Sequence[tuple[str, str]], repeat: int) -> dict[str, float]:
    body = ROBOTS_SAMPLE.read_bytes()
    ours = parse_robots(body)
    theirs = Protego.parse(body.decode("utf-8", "replace"))
    urls = [normalize(base) for base, _ in pairs[:20_000]]

    def ours_allowed() -> int:
        for url in urls:
            ours.allowed(url, "crawlspace")
        return len(urls)

    def protego_allowed() -> int:
        for url in urls:
            theirs.can_fetch(url, "crawlspace")
        return len(urls)

    measured = rates({"ours": ours_allowed, "protego": protego_allowed}, repeat)
    return {"RobotsRules.allowed URLs/s": measured["ours"], "Protego.can_fetch URLs/s": measured["protego"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=2000, help="simulated-web pages in the corpus")
    parser.add_argument("--repeat", type=int, default=5, help="timed repetitions (the best is kept)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[-1]})
    documents, pairs = corpus(args.pages)
    report: dict[str, Any] = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "pages": len(documents),
        "hrefs": len(pairs),
        "urls": bench_urls(pairs, args.repeat),
        "html": bench_html(documents, args.repeat),
        "robots": bench_robots(pairs, args.repeat),
    }
    urls, html, robots = report["urls"], report["html"], report["robots"]
    report["ratios"] = {
        "join+normalize / urllib.parse": urls["join+normalize"] / urls["urllib.parse urljoin+urldefrag"],
        "join+normalize / yarl": urls["join+normalize"] / urls["yarl join (bases parsed once)"],
        "parse_html / bare selectolax": html["parse_html pages/s"] / html["bare selectolax a[href] pages/s"],
        "RobotsRules / Protego": robots["RobotsRules.allowed URLs/s"] / robots["Protego.can_fetch URLs/s"],
    }
    print(f"corpus: {report['pages']} simulated-web pages, {report['hrefs']} hrefs (one core)")
    for section in ("urls", "html", "robots", "ratios"):
        print(f"\n{section}")
        for name, value in report[section].items():
            print(f"  {name:<42} {value:>14,.2f}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
