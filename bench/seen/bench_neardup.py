"""Near-duplicate detection benchmark: documents per second on one core, 25 KB pages.

Pages are 25 KB of text cut from the simulated web's corpus (Zipfian English-like words);
one page in ten is a near-copy of an earlier one with 1 to 5 words changed. Side by side, in
one process (one core), on the same pages:

  crawlspace       ContentSeen.check (exact, LMDB) + check_near (shingles, one-permutation
                   MinHash, LSH in LMDB, verification), checkpoint at the end included
  signature only   crawlspace.seen.shingles.Shingler.signature (no store)
  datasketch       datasketch MinHash(num_perm=128).update_batch over the 4-word shingles
                   (its default SHA-1 hashing) + MinHashLSH(threshold=0.9) query and insert
  xxh3 loop        only hashing every shingle with xxh3_64 in a Python loop (what a
                   "MinHash over xxhash shingle hashes" costs before any MinHash)

Usage: python bench/seen/bench_neardup.py [--pages 3000] [--datasketch-pages 600]
It also prints precision and recall of both detectors on the planted near-copies.
"""

from __future__ import annotations

import argparse
import random
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import xxhash  # noqa: E402

from crawlspace.seen.content import ContentKind, ContentSeen  # noqa: E402
from crawlspace.seen.shingles import Shingler  # noqa: E402
from crawlspace.simweb.text import Corpus  # noqa: E402

PAGE_BYTES = 25_000
WORD = re.compile(r"\w+")


def make_pages(count: int, seed: int) -> tuple[list[str], dict[int, int]]:
    """`count` texts of about 25 KB; every tenth a near-copy (1-5 words changed) of an earlier one."""
    corpus = Corpus.build()
    rng = random.Random(seed)
    pages: list[str] = []
    near_of: dict[int, int] = {}
    for index in range(count):
        if index % 10 == 9:
            original = rng.randrange(index)
            while original in near_of:
                original = rng.randrange(index)
            words = pages[original].split(" ")
            for _ in range(rng.randint(1, 5)):
                words[rng.randrange(len(words))] = rng.choice(corpus.words[300:3300])
            pages.append(" ".join(words))
            near_of[index] = original
            continue
        parts: list[str] = []
        size = 0
        # paragraphs drawn at random (a stride walk can make two pages share most paragraphs)
        for position in rng.sample(range(len(corpus.paragraphs)), 200):
            paragraph = corpus.paragraphs[position]
            parts.append(paragraph)
            size += len(paragraph) + 1
            if size >= PAGE_BYTES:
                break
        pages.append(" ".join(parts)[:PAGE_BYTES])
    return pages, near_of


def score(found: dict[int, int], near_of: dict[int, int], pages: int) -> tuple[float, float]:
    truth = {frozenset((copy, original)) for copy, original in near_of.items() if copy < pages}
    predicted = {frozenset(pair) for pair in found.items()}
    correct = len(truth & predicted)
    return correct / max(1, len(predicted)), correct / max(1, len(truth))


def bench_crawlspace(pages: list[str], near_of: dict[int, int]) -> tuple[float, float, float]:
    directory = Path(tempfile.mkdtemp(prefix="neardup-", dir=ROOT / "bench" / "out"))
    content = ContentSeen(directory)
    found: dict[int, int] = {}
    url_index: dict[str, int] = {}
    started = time.perf_counter()
    for index, text in enumerate(pages):
        url = f"http://h{index % 97}.test/p{index}"
        url_index[url] = index
        verdict = content.check(url, xxhash.xxh3_64_intdigest(text.encode()), float(index))
        if verdict.kind is ContentKind.NEW:
            verdict = content.check_near(url, text)
        if verdict.kind is ContentKind.NEAR and verdict.of_url is not None:
            found[index] = url_index[verdict.of_url]
    content.checkpoint()
    elapsed = time.perf_counter() - started
    content.close()
    shutil.rmtree(directory)
    precision, recall = score(found, near_of, len(pages))
    return len(pages) / elapsed, precision, recall


def bench_signature(pages: list[str]) -> float:
    shingler = Shingler()
    started = time.perf_counter()
    for text in pages:
        shingler.signature(text)
    return len(pages) / (time.perf_counter() - started)


def shingle_strings(text: str) -> list[bytes]:
    words = WORD.findall(text.lower())
    return [" ".join(words[i : i + 4]).encode() for i in range(max(1, len(words) - 3))]


def bench_datasketch(pages: list[str], near_of: dict[int, int]) -> tuple[float, float, float]:
    from datasketch import MinHash, MinHashLSH

    lsh = MinHashLSH(threshold=0.9, num_perm=128)
    found: dict[int, int] = {}
    signatures: dict[int, MinHash] = {}
    started = time.perf_counter()
    for index, text in enumerate(pages):
        minhash = MinHash(num_perm=128)
        minhash.update_batch(shingle_strings(text))
        candidates = lsh.query(minhash)
        best = max(candidates, key=lambda key: minhash.jaccard(signatures[key]), default=None)
        if best is not None and minhash.jaccard(signatures[best]) >= 0.9:
            found[index] = best
        else:
            lsh.insert(index, minhash)
            signatures[index] = minhash
    elapsed = time.perf_counter() - started
    precision, recall = score(found, near_of, len(pages))
    return len(pages) / elapsed, precision, recall


def bench_xxh3_loop(pages: list[str]) -> float:
    started = time.perf_counter()
    for text in pages:
        hash_ = xxhash.xxh3_64_intdigest
        [hash_(shingle) for shingle in shingle_strings(text)]
    return len(pages) / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=3000)
    parser.add_argument("--datasketch-pages", type=int, default=600)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    (ROOT / "bench" / "out").mkdir(parents=True, exist_ok=True)
    pages, near_of = make_pages(args.pages, args.seed)
    mean_bytes = sum(len(page.encode()) for page in pages) / len(pages)
    print(f"{len(pages)} pages of {mean_bytes / 1000:.1f} KB on average, {len(near_of)} near-copies (1-5 words)")
    rate, precision, recall = bench_crawlspace(pages, near_of)
    print(f"crawlspace (check + check_near, LMDB) {rate:10,.0f} docs/s   precision {precision:.3f} recall {recall:.3f}")
    print(f"signature only                        {bench_signature(pages):10,.0f} docs/s")
    subset = pages[: args.datasketch_pages]
    rate_ds, precision_ds, recall_ds = bench_datasketch(subset, near_of)
    print(
        f"datasketch MinHash + LSH ({len(subset)} pages) {rate_ds:10,.0f} docs/s   "
        f"precision {precision_ds:.3f} recall {recall_ds:.3f}"
    )
    print(f"xxh3 per shingle, Python loop only     {bench_xxh3_loop(subset):10,.0f} docs/s")
    print(f"ratio crawlspace / datasketch: {rate / rate_ds:.1f}x")


if __name__ == "__main__":
    main()
