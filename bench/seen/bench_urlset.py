"""URL-set benchmark: N fingerprints inserted, then N checks of which half are hits, batched.

Every variant runs in its own subprocess (so that its peak RSS is its own) on the same
workload, generated without storing it: fingerprint i is fmix64(i + salt), a bijection, so the
first phase inserts fmix64(0..N-1), hits are fmix64 of random i < N and misses fmix64 of fresh
i >= N. Both phases go through the crawler's path: `UrlSet.submit_many` (cache probe, buffer)
and `drain` (sort, batched test-and-set on the store, cache insert), with a checkpoint after
every drain (so that replaced runs are deleted as soon as they may be). The checks of the
second phase are test-and-set too, so the set ends with 1.5 N fingerprints.

Variants:
  runs     the sorted runs of crawlspace.seen.sortedruns (the crawler's)
  lmdb     LMDB behind the same cache and buffer: one put(overwrite=False) per fingerprint,
           one transaction per drain (durable commit)
  sqlite   SQLite behind the same cache and buffer: INTEGER PRIMARY KEY table, WAL, per drain a
           temporary table joined against it, then INSERT OR IGNORE ... SELECT
  pyset    a plain Python set, no cache, no buffer: `if fp not in seen: seen.add(fp)` per URL (the
           skeleton's UrlSet), the in-memory ceiling

Usage:
  python bench/seen/bench_urlset.py full      # 100 M runs + 20 M pyset + 20 M runs, side by side
  python bench/seen/bench_urlset.py stores    # 10 M: runs, lmdb, sqlite, pyset side by side
  python bench/seen/bench_urlset.py one --variant runs --n 1000000 [--cache-mb 256 --buffer 2000000]
Output: one JSON line per variant, then a table. Work files go to bench/out/seen (git-ignored).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from crawlspace.seen.shingles import fmix64  # noqa: E402
from crawlspace.seen.sortedruns import BoolArray, FpArray, RunStore  # noqa: E402
from crawlspace.seen.urlset import UrlSet  # noqa: E402

SALT = 0x5EED
SUBMIT_CHUNK = 1 << 20
OUT = ROOT / "bench" / "out" / "seen"


def fingerprints(indices: np.ndarray[Any, Any]) -> FpArray:
    return fmix64(indices.astype(np.uint64) + np.uint64(SALT))


def disk_bytes(directory: Path) -> int:
    return sum(path.stat().st_size for path in directory.rglob("*") if path.is_file())


class LmdbSet:
    def __init__(self, directory: Path) -> None:
        import lmdb

        directory.mkdir(parents=True, exist_ok=True)
        self.env = lmdb.open(str(directory), map_size=1 << 40, sync=True, metasync=True)
        self.count = 0

    def test_and_set(self, values: FpArray) -> BoolArray:
        new = np.zeros(values.size, np.bool_)
        keys = values.astype(">u8").tobytes()
        with self.env.begin(write=True) as txn:
            put = txn.put
            for i in range(values.size):
                new[i] = put(keys[8 * i : 8 * i + 8], b"", overwrite=False)
        self.count += int(new.sum())
        return new

    def contains(self, values: FpArray) -> BoolArray:
        keys = values.astype(">u8").tobytes()
        with self.env.begin() as txn:
            return np.array([txn.get(keys[8 * i : 8 * i + 8]) is not None for i in range(values.size)], np.bool_)

    def checkpoint(self) -> None:
        self.env.sync(True)

    def close(self) -> None:
        self.env.close()

    def __len__(self) -> int:
        return self.count


class SqliteSet:
    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(directory / "set.sqlite", isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("PRAGMA cache_size=-65536")
        self.db.execute("CREATE TABLE IF NOT EXISTS fp (k INTEGER PRIMARY KEY)")
        self.db.execute("CREATE TEMP TABLE batch (k INTEGER PRIMARY KEY)")
        self.count = 0

    def test_and_set(self, values: FpArray) -> BoolArray:
        signed = values.view(np.int64)
        db = self.db
        db.execute("BEGIN")
        db.executemany("INSERT INTO batch VALUES (?)", ((k,) for k in signed.tolist()))
        existing = np.array(
            [row[0] for row in db.execute("SELECT k FROM batch WHERE k IN (SELECT k FROM fp)")], np.int64
        )
        db.execute("INSERT OR IGNORE INTO fp SELECT k FROM batch")
        db.execute("DELETE FROM batch")
        db.execute("COMMIT")
        new = ~np.isin(signed, existing)
        self.count += int(new.sum())
        return new

    def contains(self, values: FpArray) -> BoolArray:
        raise NotImplementedError

    def checkpoint(self) -> None:
        self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def close(self) -> None:
        self.db.close()

    def __len__(self) -> int:
        return self.count


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_urlset(variant: str, n: int, cache_mb: int, buffer: int, directory: Path, seed: int) -> dict[str, Any]:
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    store: Any
    if variant == "runs":
        store = RunStore(directory, memtable_limit=buffer)
    elif variant == "lmdb":
        store = LmdbSet(directory)
    else:
        store = SqliteSet(directory)
    urls: UrlSet[int] = UrlSet(store, cache_bytes=cache_mb << 20, buffer_urls=buffer)
    rng = np.random.default_rng(seed)
    timings = {"submit": 0.0, "drain": 0.0, "checkpoint": 0.0}
    peak_disk = 0.0  # bytes per URL on disk, at its worst (after a drain's merges, before the checkpoint)
    new_total = 0

    def feed(values: FpArray, first_item: int) -> None:
        nonlocal peak_disk, new_total
        started = time.perf_counter()
        urls.submit_many(values, range(first_item, first_item + values.size))
        timings["submit"] += time.perf_counter() - started
        if urls.full:
            drain()

    def drain() -> None:
        nonlocal peak_disk, new_total
        started = time.perf_counter()
        new_total += len(urls.drain())
        timings["drain"] += time.perf_counter() - started
        peak_disk = max(peak_disk, disk_bytes(directory) / max(1, len(urls)))
        started = time.perf_counter()
        urls.checkpoint()
        timings["checkpoint"] += time.perf_counter() - started

    started = time.perf_counter()
    for start in range(0, n, SUBMIT_CHUNK):
        feed(fingerprints(np.arange(start, min(n, start + SUBMIT_CHUNK))), start)
    drain()
    insert_seconds = time.perf_counter() - started
    inserted_new = new_total
    hits_from_cache_phase1 = urls.cache_hits

    started = time.perf_counter()
    misses_next = n
    for start in range(0, n, SUBMIT_CHUNK):
        size = min(SUBMIT_CHUNK, n - start)
        hits = rng.integers(0, n, size=size // 2)
        misses = np.arange(misses_next, misses_next + size - size // 2)
        misses_next += misses.size
        batch = np.concatenate([hits, misses])
        rng.shuffle(batch)
        feed(fingerprints(batch), n + start)
    drain()
    lookup_seconds = time.perf_counter() - started
    lookup_new = new_total - inserted_new
    final = len(urls)
    final_disk = disk_bytes(directory)
    result = {
        "variant": variant,
        "n": n,
        "cache_mb": cache_mb,
        "buffer": buffer,
        "insert_checks_per_s": n / insert_seconds,
        "lookup_checks_per_s": n / lookup_seconds,
        "checks_per_s": 2 * n / (insert_seconds + lookup_seconds),
        "seconds": insert_seconds + lookup_seconds,
        "new_in_inserts": inserted_new,
        "new_in_lookups": lookup_new,
        "final_count": final,
        "cache_hit_rate_lookups": (urls.cache_hits - hits_from_cache_phase1) / n,
        "disk_bytes_per_url": final_disk / final,
        "peak_disk_bytes_per_url": max(peak_disk, final_disk / final),
        "peak_rss_mb": rss_mb(),
        "timings": timings,
        "runs": [info.count for info in store.runs] if variant == "runs" else None,
    }
    urls.close()
    shutil.rmtree(directory)
    assert inserted_new == n, f"{inserted_new} new of {n} distinct inserts"
    # hits are never new; misses always are (distinct, never inserted before)
    assert lookup_new == misses_next - n, f"{lookup_new} new among {misses_next - n} misses"
    return result


def run_pyset(n: int, seed: int) -> dict[str, Any]:
    """The skeleton's UrlSet: a Python set, one membership test and insert per URL."""
    seen: set[int] = set()
    rng = np.random.default_rng(seed)

    def check(values: list[int], first_item: int) -> int:
        new = []
        for item, fingerprint in enumerate(values, first_item):
            if fingerprint not in seen:
                seen.add(fingerprint)
                new.append(item)
        return len(new)

    started = time.perf_counter()
    generate = 0.0
    new_inserts = 0
    for start in range(0, n, SUBMIT_CHUNK):
        t = time.perf_counter()
        values = fingerprints(np.arange(start, min(n, start + SUBMIT_CHUNK))).tolist()
        generate += time.perf_counter() - t
        new_inserts += check(values, start)
    insert_seconds = time.perf_counter() - started - generate
    started = time.perf_counter()
    generate = 0.0
    misses_next = n
    new_lookups = 0
    for start in range(0, n, SUBMIT_CHUNK):
        t = time.perf_counter()
        size = min(SUBMIT_CHUNK, n - start)
        hits = rng.integers(0, n, size=size // 2)
        misses = np.arange(misses_next, misses_next + size - size // 2)
        misses_next += misses.size
        batch = np.concatenate([hits, misses])
        rng.shuffle(batch)
        values = fingerprints(batch).tolist()
        generate += time.perf_counter() - t
        new_lookups += check(values, n + start)
    lookup_seconds = time.perf_counter() - started - generate
    assert new_inserts == n
    return {
        "variant": "pyset",
        "n": n,
        "insert_checks_per_s": n / insert_seconds,
        "lookup_checks_per_s": n / lookup_seconds,
        "checks_per_s": 2 * n / (insert_seconds + lookup_seconds),
        "seconds": insert_seconds + lookup_seconds,
        "final_count": len(seen),
        "disk_bytes_per_url": 0.0,
        "peak_disk_bytes_per_url": 0.0,
        "peak_rss_mb": rss_mb(),
    }


def one(args: argparse.Namespace) -> None:
    if args.variant == "pyset":
        result = run_pyset(args.n, args.seed)
    else:
        result = run_urlset(
            args.variant, args.n, args.cache_mb, args.buffer, OUT / f"{args.variant}-{args.n}", args.seed
        )
    print(json.dumps(result), flush=True)


def spawn(variant: str, n: int, cache_mb: int, buffer: int) -> dict[str, Any]:
    command = [
        sys.executable,
        __file__,
        "one",
        "--variant",
        variant,
        "--n",
        str(n),
        "--cache-mb",
        str(cache_mb),
        "--buffer",
        str(buffer),
    ]
    print("$", " ".join(command[1:]), file=sys.stderr, flush=True)
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    print(json.dumps(result), flush=True)
    return result


def table(results: list[dict[str, Any]]) -> None:
    print(
        f"\n{'variant':8} {'N':>12} {'checks/s':>12} {'insert/s':>12} {'lookup/s':>12} {'RSS MB':>8} "
        f"{'B/URL':>6} {'peak B/URL':>10} {'cache hits':>10}"
    )
    for r in results:
        print(
            f"{r['variant']:8} {r['n']:>12,} {r['checks_per_s']:>12,.0f} {r['insert_checks_per_s']:>12,.0f} "
            f"{r['lookup_checks_per_s']:>12,.0f} {r['peak_rss_mb']:>8.0f} {r['disk_bytes_per_url']:>6.2f} "
            f"{r['peak_disk_bytes_per_url']:>10.2f} {r.get('cache_hit_rate_lookups', 0.0):>10.1%}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["full", "stores", "one"])
    parser.add_argument("--variant", choices=["runs", "lmdb", "sqlite", "pyset"], default="runs")
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--cache-mb", type=int, default=256)
    parser.add_argument("--buffer", type=int, default=2_000_000)
    parser.add_argument("--pyset-n", type=int, default=20_000_000, help="cap of the Python-set baseline (full)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    if args.mode == "one":
        one(args)
        return
    results: list[dict[str, Any]] = []
    if args.mode == "full":
        results.append(spawn("runs", 100_000_000, args.cache_mb, args.buffer))
        results.append(spawn("runs", args.pyset_n, args.cache_mb, args.buffer))
        results.append(spawn("pyset", args.pyset_n, 0, 0))
    else:
        for variant in ("runs", "lmdb", "sqlite", "pyset"):
            results.append(spawn(variant, args.n if args.n != 1_000_000 else 10_000_000, args.cache_mb, args.buffer))
    table(results)
    print(f"\nmachine: {os.cpu_count()} cores; python {sys.version.split()[0]}; numpy {np.__version__}")


if __name__ == "__main__":
    main()
