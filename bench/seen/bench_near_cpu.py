"""CPU per page of the content set's part of a 2-partition crawl, this checkout against another.

    .venv/bin/python bench/seen/bench_near_cpu.py [--compare-with /path/to/other/checkout]
        [--pages-per-round 150] [--rounds 8] [--prefill 25000]

Why in process: the near-duplicate test was about a tenth of a full-speed crawl's CPU (issue 17), spread
over the asker (the exact test, the signature, the questions, recording the verdict) and the owners of
the page's band keys (the question off the wire, the band lookups, the candidates' verification, the
indexing); on a shared 2-core machine only an alternated, in-process comparison tells a few percent apart.

What it does: renders heavy-web pages (bench/throughput/stages.py, with their exact and near copies) and
takes the parser's text; each tree gets two content sets, partitions 0 and 1, in RocksDB, prefilled with
`--prefill` synthetic pages each indexed in the band tables (a crawl's share half-way through 100,000
pages) and committed, so that lookups go to files, not only memtables. Each page then goes the crawl's
way: its asker (the URL's hash) runs `check`, `Shingler.signature`, `near_questions`; the question for
the other partition goes through msgpack and socketmesh's decoding, is answered by that owner's
`answer_near`, the answer comes back through msgpack; the asker answers its own question, takes
`best_match` and calls `record_near`. Commits happen as in a crawl (every `commit_every` changes).
Each round gives both trees the same next slice of pages (fresh to both), alternating which goes first;
process CPU time (RocksDB's threads included) per page, medians over the rounds, and the ratio.

The modules compared (seen.shingles and its C kernel, seen.contentstore, seen.content,
distributed.nearclaims, distributed.socketmesh) are loaded from each checkout's files under their own
names while that tree is loaded, so each tree runs its own code throughout; the rest is this checkout's.
"""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import msgspec
import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


import crawlspace.distributed.socketmesh  # noqa: E402  (the packages, before any module is swapped)
import crawlspace.seen  # noqa: E402,F401
from bench.throughput.stages import HEAVY_WEB, load_set  # noqa: E402
from crawlspace.parse.html import parse_html  # noqa: E402
from crawlspace.simweb import SimWeb  # noqa: E402
from crawlspace.urls.fingerprint import url_fingerprint  # noqa: E402

COMPARED = (
    "crawlspace.seen._minhash",
    "crawlspace.seen.shingles",
    "crawlspace.seen.contentstore",
    "crawlspace.seen.content",
    "crawlspace.distributed.nearclaims",
    "crawlspace.distributed.socketmesh",
)
PARTITIONS = 2


def crawl_pages(count: int, near_share: float) -> list[tuple[str, bytes]]:
    """Pages of the heavy web of bench/throughput/stages.py, spread over it as there, with `near_share` of
    them the web's planted near-copies each after its original (a sample spread so thin would hold no pair)."""
    web = SimWeb.generate(HEAVY_WEB)
    copies = np.flatnonzero(web.data.near_of >= 0)  # extra nodes, after the regular pages
    pairs = int(count * near_share / 2)
    step = max(1, web.data.pages // (count - 2 * pairs))
    nodes = [node for node in range(0, web.data.pages, step) if web.data.near_of[node] < 0][: count - 2 * pairs]
    rng = np.random.default_rng(7)
    for copy in rng.choice(copies, min(pairs, copies.size), replace=False).tolist():
        at = int(rng.integers(0, len(nodes) + 1))
        nodes.insert(at, int(web.data.near_of[copy]))
        nodes.insert(at + 1 + int(rng.integers(0, 50)), copy)
    return [(web.url_of(node), web.renderer.node_response(node).body) for node in nodes]


def load_tree(checkout: Path) -> dict[str, ModuleType]:
    """The compared modules from `checkout`'s files (so their imports of each other resolve to the same
    checkout), by their last names; the C shingler where that checkout built it."""

    def load_file(name: str) -> ModuleType | None:
        base = checkout / name.replace(".", "/")
        if name.endswith("_minhash"):
            built = sorted(base.parent.glob("_minhash*.so"))
            if not built:
                return None
            spec = importlib.util.spec_from_file_location(
                name, built[0], loader=importlib.machinery.ExtensionFileLoader(name, str(built[0]))
            )
        else:
            spec = importlib.util.spec_from_file_location(name, base.with_suffix(".py"))
        assert spec is not None and spec.loader is not None, base
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module

    return {name.rsplit(".", 1)[1]: module for name, module in load_set(COMPARED, load_file).items()}


@dataclass
class Page:
    url: str
    fingerprint: int
    text: str
    asker: int


class Tree:
    """One checkout's modules and its two partitions' content sets."""

    def __init__(self, modules: dict[str, ModuleType], prefilled: list[Path], workdir: Path) -> None:
        self.modules = modules
        self.content = modules["content"]
        self.near = modules["nearclaims"]
        self.mesh = modules["socketmesh"]
        self.sets = []
        for number, source in enumerate(prefilled):
            target = workdir / f"p{number}"
            shutil.copytree(source, target)
            self.sets.append(self.content.ContentSeen(target))
        self.encoder = msgspec.msgpack.Encoder()
        self.decoder = msgspec.msgpack.Decoder()
        self.asker_seconds = 0.0
        self.owner_seconds = 0.0
        self.near_pages = 0
        self.verdicts: list[tuple[str, str | None]] = []  # each page's original, to check both trees agree

    def crawl(self, pages: list[Page], clock: list[float]) -> None:
        near, mesh, encode, decode = self.near, self.mesh, self.encoder.encode, self.decoder.decode
        owner_seconds = 0.0
        started = time.process_time()
        for page in pages:
            content = self.sets[page.asker]
            fetched_at = clock[0]
            clock[0] += 0.001
            verdict = content.check(page.url, page.fingerprint, fetched_at)
            if verdict.kind != self.content.ContentKind.NEW:
                continue
            signature = content.shingler.signature(page.text)
            if signature is None:
                continue
            questions = near.near_questions(page.url, fetched_at, fetched_at, signature, content.rows, PARTITIONS)
            answers = {}
            for owner, question in questions.items():
                if owner == page.asker:
                    answers[owner] = near.answer_near(content, question, content.near_threshold)
                    continue
                owner_started = time.process_time()
                fields = decode(encode(["nq", page.asker, 1, *mesh._near_question_fields(question)]))
                index = self.sets[owner]
                match = near.answer_near(index, mesh._near_question(fields[3:]), index.near_threshold)
                sent = decode(
                    encode(["na", 1, None if match is None else [match.url, match.fetched_at, match.similarity]])
                )
                owner_seconds += time.process_time() - owner_started
                found = sent[2]
                answers[owner] = (
                    None if found is None else near.NearMatch(str(found[0]), float(found[1]), float(found[2]))
                )
            match = near.best_match(answers)
            is_near = match is not None and match.similarity >= content.near_threshold
            found = (match.url, match.fetched_at, match.similarity) if match is not None and is_near else None
            self.near_pages += found is not None
            self.verdicts.append((page.url, None if found is None else found[0]))
            content.record_near(page.url, found)
        self.owner_seconds += owner_seconds
        self.asker_seconds += time.process_time() - started - owner_seconds

    def close(self) -> None:
        for content in self.sets:
            content.close()


def prefill(modules: dict[str, ModuleType], directory: Path, count: int, seed: int) -> None:
    """`count` synthetic pages indexed in a partition's band table, as other partitions' questions leave them."""
    content = modules["content"].ContentSeen(directory, commit_every=10_000)
    near = modules["nearclaims"]
    rng = np.random.default_rng(seed)
    for number in range(count):
        signature = rng.integers(0, 1 << 16, 128, dtype=np.uint16)
        url = f"http://prefill{seed}.test/{number}"
        for owner, question in near.near_questions(url, number, number, signature, content.rows, PARTITIONS).items():
            if owner == seed:
                near.answer_near(content, question, content.near_threshold)
    content.close()


def time_rounds(trees: list[Tree], slices: list[list[Page]]) -> list[list[float]]:
    """Each tree's ms per page in every round, the order alternating."""
    per_round: list[list[float]] = [[] for _ in trees]
    clocks = [[1.7e9] for _ in trees]
    for number, pages in enumerate(slices):
        order = list(range(len(trees)))
        if number % 2:
            order.reverse()
        for index in order:
            started = time.process_time()
            trees[index].crawl(pages, clocks[index])
            per_round[index].append((time.process_time() - started) * 1000 / len(pages))
    return per_round


def median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--compare-with", type=Path, help="another checkout of crawlspace, timed in alternation")
    parser.add_argument("--pages-per-round", type=int, default=150)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--prefill", type=int, default=25_000, help="synthetic pages per partition before timing")
    parser.add_argument("--near-share", type=float, default=0.04, help="share of pages in near-copy pairs")
    parser.add_argument("--profile", type=Path, help="cProfile this checkout's rounds into this file")
    args = parser.parse_args()
    total = args.pages_per_round * (args.rounds + 1)  # one warm-up round
    rendered = crawl_pages(total, args.near_share)
    pages = []
    for url, body in rendered:
        text = parse_html(body, url, "text/html").raw_text
        fingerprint = int.from_bytes(body[:8].ljust(8, b"\0"), "little") ^ hash(body) & ((1 << 64) - 1)
        pages.append(Page(url, fingerprint, text, url_fingerprint(url) % PARTITIONS))
    print(f"{len(pages)} heavy-web pages, {sum(len(p.text) for p in pages) / len(pages):,.0f} characters of text")
    workdir = Path(tempfile.mkdtemp(prefix="bench-near-"))
    try:
        this = load_tree(REPO)
        checkouts: list[tuple[str, dict[str, ModuleType]]] = [("this", this)]
        if args.compare_with:
            checkouts.insert(0, ("other", load_tree(args.compare_with.resolve())))
        reference = checkouts[0][1]  # the prefill is built once, by the first tree's code, and copied
        prefilled = [workdir / f"prefill{number}" for number in range(PARTITIONS)]
        started = time.process_time()
        for number, directory in enumerate(prefilled):
            prefill(reference, directory, args.prefill, number)
        print(f"prefilled {args.prefill:,} pages per partition in {time.process_time() - started:.1f} s CPU")
        trees = [Tree(modules, prefilled, workdir / name) for name, modules in checkouts]
        size = args.pages_per_round
        slices = [pages[start : start + size] for start in range(0, len(pages), size)]
        time_rounds(trees, slices[:1])  # warm-up: caches, first commits
        for tree in trees:
            tree.asker_seconds = tree.owner_seconds = 0.0
        profile: Callable[[], Any] | None = None
        if args.profile:
            import cProfile

            profiler = cProfile.Profile()
            original = trees[-1].crawl

            def profiled(batch: list[Page], clock: list[float]) -> None:
                profiler.runcall(original, batch, clock)

            trees[-1].crawl = profiled  # type: ignore[method-assign]
            profile = lambda: profiler.dump_stats(str(args.profile))  # noqa: E731
        rounds = time_rounds(trees, slices[1:])
        if profile is not None:
            profile()
        timed = sum(len(s) for s in slices[1:])
        for (name, _), tree, values in zip(checkouts, trees, rounds, strict=True):
            print(
                f"  {name:5}: {median(values):.3f} ms per page (median of {len(values)} rounds;"
                f" asker {tree.asker_seconds * 1000 / timed:.3f}, remote owner {tree.owner_seconds * 1000 / timed:.3f}"
                f" ms per page on average), {tree.near_pages} near-duplicates"
            )
        if len(trees) == 2:
            same = trees[0].verdicts == trees[1].verdicts
            print(f"  the same near-duplicate verdicts, page by page: {'yes' if same else 'NO'}")
            ratios = sorted(a / b for a, b in zip(rounds[0], rounds[1], strict=True))
            print(
                f"  other/this: {median(rounds[0]) / median(rounds[1]):.2f}x of the medians;"
                f" per-round ratios {min(ratios):.2f}..{max(ratios):.2f}, median {median(ratios):.2f}x"
            )
        for tree in trees:
            tree.close()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
