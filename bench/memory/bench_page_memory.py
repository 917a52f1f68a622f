"""Peak resident memory of crawls of maximum-size pages, measured from outside the crawl process.

Each row is one `crawlspace crawl` (CLI, one crawl process) against the hostile test server
(tests/fetch/hostile_server.py), its peak RSS the kernel's high-water mark of the reaped child:

- `normal`: one small page (`/site/0`): the cost of a crawl process at all;
- `endless`, `huge`, `gzip-bomb`: one URL each of the hostile server's chunked body that never
  ends, 100 MB page with Content-Length, gzip bomb (1 GiB of zeros);
- `big-plain`, `big-chunked`, `big-gzip`: one `/big/` page of each kind (16 MiB of ordinary HTML:
  Content-Length, never-ending chunked, gzip-compressed as it is sent);
- `50 x big`: 50 such pages on 50 hosts, all fetched at once (concurrency 64, no delays), the
  three kinds in turn: what the memory bound in docs/architecture.md is stated for.

Default limits (max_body_bytes and max_decoded_bytes 10 MiB, ...) unless `--set KEY=VALUE` (TOML
values) changes them for every row.

Usage: .venv/bin/python bench/memory/bench_page_memory.py [--rows normal,endless,...] [--set KEY=VALUE]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.fetch.hostile_server import HostileServer  # noqa: E402
from tests.fetch.peak_rss import crawl_measured, loopback_config  # noqa: E402

KINDS = ("plain", "chunked", "gzip")
SINGLE = {
    "normal": "/site/0",
    "endless": "/endless",
    "huge": "/huge",
    "gzip-bomb": "/gzip-bomb",
    "big-plain": "/big/plain/0",
    "big-chunked": "/big/chunked/0",
    "big-gzip": "/big/gzip/0",
}
CONCURRENT = "50 x big"
PAGES = 50


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", default=",".join([*SINGLE, CONCURRENT]), help="comma-separated row names")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a config key for every row")
    args = parser.parse_args()
    overrides = tomllib.loads("\n".join(args.set))
    rows = [row.strip() for row in args.rows.split(",") if row.strip()]
    print(f"{'row':12s} {'peak RSS MB':>11s} {'seconds':>8s}  outcomes")
    with HostileServer("127.0.0.1", prebuild_bombs=True) as server, tempfile.TemporaryDirectory() as tmp:
        for row in rows:
            if row == CONCURRENT:
                seeds = [f"http://big{n}.test:{server.port}/big/{KINDS[n % 3]}/{n}" for n in range(PAGES)]
                hosts = [f"big{n}.test" for n in range(PAGES)]
            else:
                seeds, hosts = [f"http://one.test:{server.port}{SINGLE[row]}"], ["one.test"]
            out = Path(tmp) / row.replace(" ", "")
            measured = crawl_measured(seeds, out, loopback_config(hosts, **overrides))
            if measured.returncode != 0:
                raise SystemExit(f"{row}: crawl failed ({measured.returncode}):\n{measured.stderr[-2000:]}")
            stats = json.loads((out / "stats.json").read_text())
            print(f"{row:12s} {measured.peak_rss_mb:11.0f} {measured.seconds:8.1f}  {stats['outcomes']}", flush=True)


if __name__ == "__main__":
    main()
