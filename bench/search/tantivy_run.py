"""The tantivy side of compare_tantivy.py, run in bench/.venv-search (tantivy is never a dependency of
crawlspace). Input (pickle): the pages' tokens (crawlspace's tokenizer, joined by spaces: tantivy's
whitespace tokenizer then sees the same terms) and the queries; output (pickle): build seconds, index
bytes, per query and mode the top 10 (page number, score) and the latencies."""

from __future__ import annotations

import os
import pickle
import sys
import tempfile
import time
from pathlib import Path

import tantivy


def main() -> None:
    source, target, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with open(source, "rb") as file:
        texts, queries = pickle.load(file)
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("text", stored=False, tokenizer_name="whitespace", index_option="position")
    builder.add_integer_field("id", stored=True, fast=True)
    schema = builder.build()
    with tempfile.TemporaryDirectory() as directory:
        started = time.perf_counter()
        index = tantivy.Index(schema, path=directory)
        writer = index.writer(heap_size=400_000_000, num_threads=threads)
        for number, text in enumerate(texts):
            writer.add_document(tantivy.Document(text=text, id=number))
        writer.commit()
        writer.wait_merging_threads()
        built = time.perf_counter() - started
        size = sum(p.stat().st_size for p in Path(directory).rglob("*") if p.is_file())
        index.reload()
        searcher = index.searcher()
        ids = {}
        results: dict[str, list[list[tuple[int, float]]]] = {}
        latencies: dict[str, list[float]] = {}
        for mode in ("and", "or"):
            occur = tantivy.Occur.Must if mode == "and" else tantivy.Occur.Should
            for name, group in queries.items():
                key = f"{name}/{mode}"
                results[key], latencies[key] = [], []
                for terms in group:
                    started = time.perf_counter()
                    query = tantivy.Query.boolean_query(
                        [(occur, tantivy.Query.term_query(schema, "text", term)) for term in terms]
                    )
                    hits = searcher.search(query, 10).hits
                    latencies[key].append(time.perf_counter() - started)
                    top = []
                    for score, address in hits:
                        where = (address.segment_ord, address.doc)
                        if where not in ids:
                            ids[where] = int(searcher.doc(address)["id"][0])
                        top.append((ids[where], float(score)))
                    results[key].append(top)
    with open(target, "wb") as file:
        output = {"built": built, "bytes": size, "results": results, "latencies": latencies, "cpus": os.cpu_count()}
        pickle.dump(output, file)


if __name__ == "__main__":
    main()
