"""Page processors: an async one awaited beside the fetchers, a CPU-heavy one in worker processes.

    python examples/processors.py [OUT]         # default OUT: ./processors

- `link_report` is `async`: it stands for a call to an outside service (an API, a database) and
  awaits 50 ms per page; up to `processor_concurrency` pages wait at once while the crawl goes on.
- `word_statistics` is CPU work (every word of the page counted, 5-word shingles hashed into a
  MinHash signature); wrapped in `run_in_process`, it runs in two worker processes, off the
  crawler's own thread.
Each writes its own kind of item; the sinks pick theirs with `select`.
"""

import asyncio
import json
import os
import re
import sys
from collections import Counter
from pathlib import Path

import xxhash

from crawlspace import CrawlConfig, Crawler, CrawlStats
from crawlspace.hooks import JsonlSink, Page, ParquetSink, run_in_process
from crawlspace.simweb import SimWeb, SimWebConfig, serve_in_background

WEB = SimWebConfig(
    hosts=20, seed=5, mean_pages_per_host=8, max_pages_per_host=40, robots_crawl_delay=0.05, include_trap=False
)
SHINGLE = 5
PERMUTATIONS = 16


async def link_report(page: Page):
    if not page.ok or not page.links:
        return None
    await asyncio.sleep(0.05)  # the outside service's latency
    host = page.url.split("/")[2]
    internal = sum(1 for link in page.links if link.url.split("/")[2:3] == [host])
    return {"kind": "links", "url": page.url, "internal": internal, "external": len(page.links) - internal}


def word_statistics(page: Page):
    words = re.findall(r"\w+", page.text.lower())
    if not page.ok or not words:
        return None
    shingles = {" ".join(words[i : i + SHINGLE]) for i in range(max(1, len(words) - SHINGLE + 1))}
    signature = [min(xxhash.xxh3_64_intdigest(s.encode(), seed=k) for s in shingles) for k in range(PERMUTATIONS)]
    word, count = Counter(words).most_common(1)[0]
    return {
        "kind": "words",
        "url": page.url,
        "words": len(words),
        "distinct": len(set(words)),
        "top_word": word,
        "top_count": count,
        "minhash": [str(value) for value in signature],
        "pid": os.getpid(),
    }


def main(out: Path) -> CrawlStats:
    with serve_in_background(SimWeb.generate(WEB), out / "simweb", seeds=5) as web:
        config = CrawlConfig(hosts_file=str(web.hosts_file), allow_private_addresses=True, min_delay=0.05)
        crawler = Crawler(
            config,
            out=out / "crawl",
            seeds=web.seeds,
            processors=[link_report, run_in_process(word_statistics, workers=2)],
            sinks=[
                JsonlSink(out / "links.jsonl", select=lambda item: item["kind"] == "links"),
                ParquetSink(out / "words.parquet", select=lambda item: item["kind"] == "words"),
            ],
        )
        stats = crawler.run()
    (out / "crawler.json").write_text(json.dumps({"pid": os.getpid()}) + "\n")
    return stats


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "processors")
    stats = main(out)
    print(json.dumps(stats.sections["extensions"]["processors"], indent=2))
