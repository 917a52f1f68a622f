"""Resident memory of the content set (seen.ContentSeen) over many pages, in one process, by kind of mapping.

Feeds PAGES synthetic pages (300 words of a 5,000-word vocabulary each: all new, so every page is
shingled and indexed in the LSH bands, the costliest path) through `check` and `check_near`,
checkpointing every 5,000 pages as a crawl does, and prints after every 10,000 the process's PSS by
kind of mapping from /proc/self/smaps: [heap] (glibc's brk heap), [anon] (other anonymous memory:
Python's arenas, large mallocs), [map] (a memory-mapped store file such as LMDB's data.mdb),
[libs]. Then the CPU per page (of the whole process while it is in the content set's calls: its store's
threads included) and the size
on disk.

`--checkout DIR` runs another checkout's crawlspace (e.g. main's, with main's .venv python) so that
two versions compare side by side:

    .venv/bin/python bench/seen/bench_content_memory.py --pages 50000
    /work/main/.venv/bin/python bench/seen/bench_content_memory.py --pages 50000 --checkout /work/main
"""

from __future__ import annotations

import argparse
import collections
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KINDS = {".so": "[libs]", "data.mdb": "[map]"}


def pss_by_kind() -> dict[str, float]:
    """MB of PSS per kind of mapping of this process."""
    totals: collections.Counter[str] = collections.Counter()
    name = "[anon]"
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            parts = line.split()
            if len(parts) >= 5 and "-" in parts[0] and ":" in parts[3]:
                path = parts[5] if len(parts) > 5 else "[anon]"
                name = next((kind for mark, kind in KINDS.items() if mark in path), path)
                if name.startswith("/"):
                    name = "[other files]"
            elif parts[0] == "Pss:":
                totals[name] += int(parts[1])
    return {kind: round(kb / 1024, 1) for kind, kb in totals.most_common(5)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=50_000)
    parser.add_argument("--checkpoint-every", type=int, default=5_000)
    parser.add_argument("--checkout", type=Path, default=Path(__file__).resolve().parents[2])
    args = parser.parse_args()
    sys.path.insert(0, str(args.checkout.resolve()))
    from crawlspace.seen.content import ContentSeen
    from crawlspace.urls.fingerprint import content_fingerprint

    rng = random.Random(1)
    vocabulary = ["".join(rng.choices("abcdefghijklmnop", k=6)) for _ in range(5_000)]
    with tempfile.TemporaryDirectory() as directory:
        content = ContentSeen(Path(directory) / "content")
        print(f"{args.checkout}: {content!r}")
        print(f"{'pages':>8}  PSS MB by mapping")
        cpu = 0.0
        for number in range(args.pages):
            text = " ".join(rng.choices(vocabulary, k=300))
            url = f"http://site{number % 1000}.test/page/{number}"
            started = time.process_time()
            if content.check(url, content_fingerprint(text.encode()), 1000.0 + number).kind.name == "NEW":
                content.check_near(url, text)
            if (number + 1) % args.checkpoint_every == 0:
                content.checkpoint()
            cpu += time.process_time() - started
            if (number + 1) % 10_000 == 0:
                print(f"{number + 1:>8}  {pss_by_kind()}", flush=True)
        content.checkpoint()
        print(f"CPU {1e6 * cpu / args.pages:.0f} us/page; on disk {content.disk_bytes() / 2**20:.0f} MB")
        print(subprocess.run(["du", "-sh", directory], capture_output=True, text=True).stdout.strip())
        content.close()


if __name__ == "__main__":
    main()
