"""Which of a segment's candidate documents hold a phrase: its words at consecutive positions of one
field, compiled.

Why compiled: a phrase is checked after the flat query found the documents having all its words, and
for a phrase of common words that is most of the segment. Checked a document at a time in numpy, each
check decoded every word's block of doc ids, frequencies and positions again (a block of "the" holds
some 12,000 positions) with a dozen array calls: 2-3 s for one rare phrase of common words on 100,000
pages (`"the people of"`, bench/README.md's search section). Here the candidates are taken in doc-id
order, so each word's blocks are decoded once, straight from the stored codes (`topk`'s decoders), and
a document's check is a few binary searches over positions already in memory.

Positions are stored per (posting, field) group, the first absolute and the others as gaps
(`segment`'s build); they are summed back when a block is decoded.
"""

from __future__ import annotations

import numpy as np

from crawlspace.index.topk import BAD_BLOCK, BLOCK, OK, load_docs, load_freqs, varints
from crawlspace.jit import jit


@jit
def phrase_matches(
    doc_codes,
    doc_end,
    freq_codes,
    freq_end,
    sparse_codes,
    sparse_end,
    block_last_doc,
    position_codes,
    position_end,
    first,
    end,
    df,
    ndocs,
    fields,
    candidates,
):
    """(has, status): has[c] when the words whose blocks are [first[t], end[t]) (df[t] postings), in
    phrase order, stand at consecutive positions of one field of document candidates[c]; the
    candidates must ascend. A block that does not decode to its table's counts gives status != OK."""
    terms = first.size
    has = np.zeros(candidates.size, np.bool_)
    docs = np.empty((terms, BLOCK), np.int64)
    freqs = np.empty((terms, BLOCK, fields), np.int64)
    scratch = np.empty((1, 3 * BLOCK), np.int64)  # a block's frequency codes, then its sparse values
    counts = np.zeros(terms, np.int64)
    loaded = np.full(terms, -1, np.int64)  # the block whose postings docs[t] holds
    starts = np.zeros((terms, BLOCK * fields + 1), np.int64)  # where each (posting, field) group starts
    capacity = 4096
    positions = np.empty((terms, capacity), np.int64)
    rows = np.zeros(terms, np.int64)
    for c in range(candidates.size):
        doc = candidates[c]
        present = True
        for t in range(terms):
            block = first[t] + np.searchsorted(block_last_doc[first[t] : end[t]], doc)
            if block >= end[t]:
                present = False
                break
            if loaded[t] != block:
                if not load_docs(t, block, first[t], df[t], doc_codes, doc_end, block_last_doc, ndocs, docs, counts):
                    return has, BAD_BLOCK
                count = counts[t]
                if not load_freqs(t, block, count, freq_codes, freq_end, sparse_codes, sparse_end, freqs, scratch):
                    return has, BAD_BLOCK
                total = np.int64(0)
                for i in range(count):
                    for f in range(fields):
                        total += freqs[t, i, f]
                if total > capacity:
                    while capacity < total:
                        capacity *= 2
                    grown = np.empty((terms, capacity), np.int64)
                    grown[:, : positions.shape[1]] = positions
                    positions = grown
                start = np.int64(position_end[block - 1]) if block > 0 else np.int64(0)
                if not varints(position_codes, start, np.int64(position_end[block]), total, positions, t, 0):
                    return has, BAD_BLOCK
                at = 0
                for i in range(count):
                    for f in range(fields):
                        starts[t, i * fields + f] = at
                        running = np.int64(0)
                        for j in range(freqs[t, i, f]):
                            running += positions[t, at + j]
                            positions[t, at + j] = running
                        at += freqs[t, i, f]
                starts[t, count * fields] = at
                loaded[t] = block
            row = np.searchsorted(docs[t, : counts[t]], doc)
            if row >= counts[t] or docs[t, row] != doc:
                present = False
                break
            rows[t] = row
        if not present:
            continue
        for f in range(fields):
            lead = starts[0, rows[0] * fields + f]
            for i in range(freqs[0, rows[0], f]):
                wanted = positions[0, lead + i]
                found = True
                for t in range(1, terms):
                    low = starts[t, rows[t] * fields + f]
                    high = low + freqs[t, rows[t], f]
                    target = wanted + t
                    while low < high:
                        middle = (low + high) // 2
                        if positions[t, middle] < target:
                            low = middle + 1
                        else:
                            high = middle
                    if low == starts[t, rows[t] * fields + f] + freqs[t, rows[t], f] or positions[t, low] != target:
                        found = False
                        break
                if found:
                    has[c] = True
                    break
            if has[c]:
                break
    return has, OK
