"""Known-item search quality (issue 19): does a query made from one page find that page in the top 3?

Two collections, each crawled over loopback by crawlspace itself and indexed by `crawlspace index`:
- the simulated web (`--hosts`, default 120: about 2,400 pages), crawled to the end;
- Debian's python3-doc HTML (/usr/share/doc/python3/html, `apt-get install python3-doc`) served by a
  static file server on 127.0.0.1 (the crawl needs allow_private_addresses), crawled from index.html.

From each collection `--sample` (500) indexed pages are drawn at random; each gets two queries:
    title    the words of its title, all required (a conjunctive query)
    phrase   the rarest 3-word phrase of its text (the window of 3 tokens with the largest sum of
             idf), quoted (positions must match)
and a query succeeds when the page is among the first 3 results (near-duplicates not collapsed;
the page's exact duplicates are indexed once, at their original, so only originals are sampled).
Printed: the share of successes per kind, both kinds, and the failures' reasons (found lower, or
tied with copies: several pages with the same title).

    .venv/bin/python bench/search/known_item.py [--hosts 120] [--sample 500] [--prior-weight 0]
        [--tier-cutoff C] [--only simweb|python-docs]
"""

from __future__ import annotations

import argparse
import functools
import http.server
import math
import shutil
import socket
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np

from crawlspace.api import Crawler
from crawlspace.config import CrawlConfig
from crawlspace.index import Bm25fParams, Index, tokenize
from crawlspace.jobs import run
from crawlspace.simweb import SimWeb, SimWebConfig, serve_in_background
from crawlspace.store.reader import CrawlReader

PYTHON_DOCS = Path("/usr/share/doc/python3/html")
TOP = 3


def crawl(seeds: list[str], out: Path, only: str, hosts_file: str | None = None) -> None:
    """A crawl that stays on loopback: URLs outside `only` (a regular expression) are never fetched."""
    config = CrawlConfig(
        min_delay=0.0, delay_factor=0.0, concurrency=16, allow_private_addresses=True, processes=1,
        max_seconds=600.0, include=[only], **({"hosts_file": hosts_file} if hosts_file else {}),
    )  # fmt: skip
    stats = Crawler(config, out=out, seeds=seeds, progress=False).run()
    print(f"  crawled {stats.pages_fetched} pages ({stats.termination})")


def crawl_simweb(hosts: int, root: Path) -> Path:
    web = SimWeb.generate(SimWebConfig(hosts=hosts, seed=19, robots_crawl_delay=0.0, include_trap=False))
    with serve_in_background(web, root / "server", seeds=5) as server:
        crawl(list(server.seeds), root / "crawl", r"^https?://[^/]*\.test(:\d+)?/", str(server.hosts_file))
    return root / "crawl"


def crawl_python_docs(root: Path) -> Path:
    if not (PYTHON_DOCS / "index.html").is_file():
        raise SystemExit(f"no {PYTHON_DOCS}/index.html: apt-get install python3-doc")
    handler = functools.partial(_QuietHandler, directory=str(PYTHON_DOCS.resolve()))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        crawl([f"http://127.0.0.1:{port}/index.html"], root / "crawl", rf"^http://127\.0\.0\.1:{port}/")
    finally:
        server.shutdown()
        server.server_close()
    return root / "crawl"


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def ngrams(tokens: list[str], length: int) -> set[tuple[str, ...]]:
    return {tuple(tokens[i : i + length]) for i in range(len(tokens) - length + 1)}


def rarest_phrase(
    tokens: list[str], phrase_df: dict[int, Counter[tuple[str, ...]]], df: dict[str, int]
) -> tuple[list[str], int] | None:
    """The page's phrase (3 words, else 4, else 5) that the fewest pages contain (ties: the rarest
    words, by the sum of their document frequencies' logs), with how many pages contain it."""
    best: tuple[int, float, tuple[str, ...]] | None = None
    for length in sorted(phrase_df):
        for gram in ngrams(tokens, length):
            rank = (phrase_df[length][gram], sum(math.log(df.get(t, 1)) for t in gram), gram)
            if best is None or rank < best:
                best = rank
        if best is not None and best[0] == 1:
            break
    return None if best is None else (list(best[2]), best[0])


def judge(
    name: str, crawl_dir: Path, sample: int, prior_weight: float, seed: int, tier_cutoff: float | None
) -> dict[str, float]:
    started = time.monotonic()
    options = {"index": {"shards": 2, "tier_cutoff": tier_cutoff}}
    run(crawl_dir, only=["graph", "pagerank", "near", "index"], options=options)
    print(f"  indexed in {time.monotonic() - started:.1f} s")
    with Index(crawl_dir / "jobs" / "index", params=Bm25fParams(prior_weight=prior_weight)) as index:
        urls = sorted(segment.url(doc) for segment in index.segments for doc in range(segment.docs))
        titles = {segment.url(doc): segment.title(doc) for segment in index.segments for doc in range(segment.docs)}
        df = dict(index.stats.items())
        rng = np.random.default_rng(seed)
        chosen = [urls[int(i)] for i in rng.choice(len(urls), size=min(sample, len(urls)), replace=False)]
        found: Counter[str] = Counter()
        asked: Counter[str] = Counter()
        reasons: Counter[str] = Counter()
        same_title = Counter(titles.values())
        tokens: dict[str, list[str]] = {}
        with CrawlReader(crawl_dir) as reader:
            for url in urls:
                page = reader.page(url)
                assert page is not None
                tokens[url] = tokenize(page.text if page.text is not None else (reader.parse(page) or page).text or "")
        phrase_df = {n: Counter(g for words in tokens.values() for g in ngrams(words, n)) for n in (3, 4, 5)}
        shared: Counter[str] = Counter()
        for url in chosen:
            title_terms = list(dict.fromkeys(tokenize(titles[url])))
            rare = rarest_phrase(tokens[url], phrase_df, df)
            phrase = None if rare is None else rare[0]
            if rare is not None:
                shared["unique" if rare[1] == 1 else f"in {min(rare[1], 5)}{'+' if rare[1] >= 5 else ''} pages"] += 1
            hit_any = False
            for kind, query in (
                ("title", " ".join(title_terms) if title_terms else None),
                ("phrase", f'"{" ".join(phrase)}"' if phrase else None),
            ):
                if query is None:
                    reasons[f"{kind}: no query (empty)"] += 1
                    asked[kind] += 1
                    continue
                asked[kind] += 1
                hits = index.search(query, TOP).hits
                if url in [hit.url for hit in hits]:
                    found[kind] += 1
                    hit_any = True
                else:
                    deeper = [hit.url for hit in index.search(query, 100).hits]
                    if kind == "title" and same_title[titles[url]] > TOP:
                        reasons[f"{kind}: {same_title[titles[url]]} pages share the title"] += 1
                    elif kind == "phrase" and rare is not None and rare[1] > TOP:
                        reasons[f"{kind}: its rarest phrase is in more than {TOP} pages"] += 1
                    elif url in deeper:
                        reasons[f"{kind}: found lower (rank {deeper.index(url) + 1})"] += 1
                    else:
                        reasons[f"{kind}: not in the top 100"] += 1
            found["either"] += hit_any
            asked["either"] += 1
    shares = {kind: found[kind] / asked[kind] for kind in ("title", "phrase", "either")}
    print(
        f"{name}: {len(urls)} pages indexed, {len(chosen)} sampled; in the top {TOP}: "
        + ", ".join(f"{kind} {found[kind]}/{asked[kind]} = {100 * shares[kind]:.1f} %" for kind in shares)
    )
    print("  the sampled pages' rarest phrase: " + ", ".join(f"{k} {v}" for k, v in sorted(shared.items())))
    for reason, count in reasons.most_common(8):
        print(f"    {count:4d}  {reason}")
    return shares


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hosts", type=int, default=120)
    parser.add_argument("--sample", type=int, default=500)
    parser.add_argument("--prior-weight", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--tier-cutoff", type=float, default=None, help="crawlspace index --tier-cutoff")
    parser.add_argument("--only", choices=["simweb", "python-docs"], default=None)
    args = parser.parse_args()
    settings = (args.sample, args.prior_weight, args.seed, args.tier_cutoff)
    root = Path(tempfile.mkdtemp(prefix="known-item-"))
    try:
        socket.setdefaulttimeout(30)
        if args.only in (None, "simweb"):
            print(f"simulated web, {args.hosts} hosts:")
            judge("simweb", crawl_simweb(args.hosts, root / "simweb"), *settings)
        if args.only in (None, "python-docs"):
            print("python3-doc:")
            judge("python3-doc", crawl_python_docs(root / "docs"), *settings)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
