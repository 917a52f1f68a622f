"""One segment's top k for a flat query, compiled: block-max MaxScore (disjunctive) and a lead-term
intersection with block-max skips (conjunctive), document at a time over the postings blocks.

Why compiled: a query of two common words touches every block of both terms; in numpy each block's
doc ids, frequencies and scores were a dozen array calls of 128 elements, whose call overhead, not
the arithmetic, was most of the 20 ms (the profile in bench/README.md's search section). Here a
block is decoded straight from its variable-byte codes (`codec`'s format) into a small buffer, and a
posting costs a few nanoseconds. The kernel holds no GIL (`nogil`), so the segments searched in
threads run on all cores.

The algorithm (Ding and Suel's block-max idea on Turtle and Flood's MaxScore):
- every term has a cursor: its current block, decoded when the cursor lands in it, and a "shallow"
  pointer that finds the block a doc id would be in without decoding it;
- each block has a bound, idf * m / (m + k1) with m its largest tfn (`scoring.block_max_tfn`),
  times `1 + 1e-9` against rounding; a term's bound is its largest block bound;
- disjunctive: terms sorted by bound; those whose bounds (with the largest prior) add up to less
  than the threshold theta (the k-th best score so far) are non-essential: the candidates are the
  essential terms' documents, and a non-essential term is looked up for a candidate only while the
  partial score plus the bounds still to come reach theta;
- conjunctive: the rarest term leads, the others are advanced to its documents;
- both: before a candidate is aligned or scored, the sum of the block bounds at its doc id is
  compared with theta; below it (with the largest prior), every document up to the first block
  end among the terms is skipped without decoding a block; below it with the candidate's prior,
  the candidate alone is skipped.

Exactness: a candidate's score is the sum of its term scores in query order plus its prior,
computed as `scoring.BM25F` computes it (same operations in the same order), whatever path found
it; only bounds strictly below theta prune, and every document scoring at least the final theta is
returned (ties at the k-th place included, for the caller to break by URL). `prune=False` scores
every matching posting: the exhaustive reference.

A block whose codes do not decode to its table's counts (a damaged segment that passed its
checksums) stops the search with `status` != 0, which the caller turns into `SegmentFormatError`.
"""

from __future__ import annotations

import numpy as np

from crawlspace.jit import jit

OK = 0
BAD_BLOCK = 1

_END = np.int64(1 << 62)
"""The doc id of an exhausted cursor: above every real one."""
BLOCK = 128


@jit
def varints(codes, start, stop, count, out, row, offset):
    """Decodes `count` LEB128 values of codes[start:stop] into out[row, offset:]; False unless they
    fill it exactly (a row and offset, not a view: a view costs reference counting in the loop)."""
    at = start
    for n in range(count):
        value = np.int64(0)
        shift = 0
        while True:
            if at >= stop or shift > 56:
                return False
            byte = np.int64(codes[at])
            at += 1
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                break
            shift += 7
        out[row, offset + n] = value
    return at == stop


@jit
def load_docs(t, block, first, df, doc_codes, doc_end, block_last_doc, ndocs, docs, counts):
    """Decodes block `block` of term t (whose blocks start at `first`) into docs[t]."""
    count = BLOCK if block < first + (df + BLOCK - 1) // BLOCK - 1 else df - (block - first) * BLOCK
    start = np.int64(doc_end[block - 1]) if block > 0 else np.int64(0)
    if count <= 0 or count > BLOCK or not varints(doc_codes, start, np.int64(doc_end[block]), count, docs, t, 0):
        return False
    previous = np.int64(-1) if block == first else np.int64(block_last_doc[block - 1])
    for i in range(count):
        if docs[t, i] <= 0:  # every gap is at least 1 (the first of a term's from doc -1)
            return False
        previous += docs[t, i]
        docs[t, i] = previous
    counts[t] = count
    return previous == np.int64(block_last_doc[block]) and previous < ndocs


@jit
def load_freqs(t, block, count, freq_codes, freq_end, sparse_codes, sparse_end, freqs, scratch):
    """Decodes the frequencies per field (title, text, anchor) of block `block` into freqs[t]: a
    code per posting (text frequency << 2 | title present << 1 | anchor present), then the title
    and anchor frequencies present, in posting order."""
    start = np.int64(freq_end[block - 1]) if block > 0 else np.int64(0)
    if not varints(freq_codes, start, np.int64(freq_end[block]), count, scratch, 0, 0):
        return False
    at = np.int64(sparse_end[block - 1]) if block > 0 else np.int64(0)
    stop = np.int64(sparse_end[block])
    sparse = 0
    for i in range(count):
        sparse += (scratch[0, i] >> 1) & 1
        sparse += scratch[0, i] & 1
    if not varints(sparse_codes, at, stop, sparse, scratch, 0, count):
        return False
    taken = count
    for i in range(count):
        main = scratch[0, i]
        freqs[t, i, 1] = main >> 2
        freqs[t, i, 0] = 0
        freqs[t, i, 2] = 0
        if main & 2:
            freqs[t, i, 0] = scratch[0, taken]
            taken += 1
        if main & 1:
            freqs[t, i, 2] = scratch[0, taken]
            taken += 1
    return True


@jit
def _advance(
    t, target, first, end, df, doc_codes, doc_end, block_last_doc, ndocs, docs, counts, block, position, current
):
    """Moves term t's cursor to its first doc id >= target, decoding only the block it lands in:
    the blocks decoded (0 or 1), or -1 for a block that does not decode."""
    if current[t] >= target:
        return 0
    loaded = 0
    if np.int64(block_last_doc[block[t]]) < target:
        b = block[t] + 1
        while b < end[t] and np.int64(block_last_doc[b]) < target:
            b += 1
        if b == end[t]:
            current[t] = _END
            return 0
        if not load_docs(t, b, first[t], df[t], doc_codes, doc_end, block_last_doc, ndocs, docs, counts):
            return -1
        loaded = 1
        block[t] = b
        position[t] = 0
    p = position[t]
    while docs[t, p] < target:
        p += 1
    position[t] = p
    current[t] = docs[t, p]
    return loaded


@jit
def top_k(
    doc_codes,
    doc_end,
    freq_codes,
    freq_end,
    sparse_codes,
    sparse_end,
    block_last_doc,
    block_max_tfn,
    norms,
    weights,
    k1,
    first,
    end,
    df,
    idf,
    allowed,
    prior,
    prior_max,
    conjunctive,
    prune,
    k,
    slack,
):
    """(docs, scores, postings scored, blocks decoded, status): every document of the segment scoring
    at least the k-th best score, for the terms whose blocks are [first[t], end[t]) (df[t] postings,
    idf[t]); `allowed` (empty: all) and `prior` (empty: none, else per document, at most `prior_max`)."""
    terms = first.size
    ndocs = norms.shape[0]
    fields = norms.shape[1]
    has_allowed = allowed.size > 0
    has_prior = prior.size > 0
    out_docs = np.empty(ndocs, np.int64)
    out_scores = np.empty(ndocs, np.float64)
    found = 0
    heap = np.empty(max(k, 1), np.float64)
    held = 0
    theta = -np.inf
    scored = 0
    decoded = 0

    docs = np.empty((terms, BLOCK), np.int64)
    freqs = np.empty((terms, BLOCK, fields), np.int64)
    scratch = np.empty((1, 3 * BLOCK), np.int64)  # a block's codes, then its sparse values
    counts = np.zeros(terms, np.int64)
    block = first.copy()
    freqs_of = np.full(terms, -1, np.int64)  # the block whose frequencies freqs[t] holds
    position = np.zeros(terms, np.int64)
    current = np.full(terms, _END, np.int64)
    shallow = first.copy()
    bound = np.zeros(terms, np.float64)
    term_score = np.zeros(terms, np.float64)

    for t in range(terms):
        for b in range(first[t], end[t]):
            m = block_max_tfn[b]
            bound[t] = max(bound[t], idf[t] * (m / (m + k1)) * slack)
        if first[t] < end[t]:
            if not load_docs(t, first[t], first[t], df[t], doc_codes, doc_end, block_last_doc, ndocs, docs, counts):
                return out_docs[:0], out_scores[:0], scored, decoded, BAD_BLOCK
            decoded += 1
            current[t] = docs[t, 0]

    order = np.argsort(bound)  # weakest first
    below = np.zeros(terms, np.float64)  # below[i]: the bounds of order[0..i] added up
    running = 0.0
    for i in range(terms):
        running += bound[order[i]]
        below[i] = running
    essential = 0  # order[essential:] are the essential terms (disjunctive)
    lead = int(np.argmin(df))

    while True:
        # the candidate doc id
        if conjunctive:
            d = current[lead]
        else:
            if prune:
                while essential < terms and below[essential] + prior_max < theta:
                    essential += 1
                if essential == terms:
                    break
            d = _END
            for i in range(essential, terms):
                d = min(d, current[order[i]])
        if d >= _END:
            break

        # block-max: the bounds of the blocks d falls in, found without decoding
        skip_to = np.int64(-1)
        if prune and theta > -np.inf:
            total_bound = 0.0
            nearest = _END
            for t in range(terms):
                while shallow[t] < end[t] and np.int64(block_last_doc[shallow[t]]) < d:
                    shallow[t] += 1
                if shallow[t] < end[t]:
                    m = block_max_tfn[shallow[t]]
                    total_bound += idf[t] * (m / (m + k1)) * slack
                    nearest = min(nearest, np.int64(block_last_doc[shallow[t]]))
                elif conjunctive:
                    total_bound = -np.inf  # a required term has no more postings
            if total_bound + prior_max < theta:
                skip_to = nearest + 1 if total_bound > -np.inf else _END
            elif has_prior and total_bound + prior[d] < theta:
                skip_to = d + 1

        # align the cursors on d (conjunctive: every term must have it)
        candidate = skip_to < 0 and (not has_allowed or allowed[d])
        if candidate and conjunctive:
            for t in range(terms):
                if t == lead:
                    continue
                moved = 0
                if current[t] < d and np.int64(block_last_doc[block[t]]) >= d:  # within its block
                    p = position[t]
                    while docs[t, p] < d:
                        p += 1
                    position[t] = p
                    current[t] = docs[t, p]
                elif current[t] < d:
                    moved = _advance(
                        t, d, first, end, df, doc_codes, doc_end, block_last_doc, ndocs, docs, counts, block, position,
                        current,
                    )  # fmt: skip
                if moved < 0:
                    return out_docs[:0], out_scores[:0], scored, decoded, BAD_BLOCK
                decoded += moved
                if current[t] != d:
                    candidate = False
                    skip_to = current[t]  # the lead jumps to the next doc id this term has
                    break

        if candidate:
            partial = prior[d] if has_prior else 0.0
            for t in range(terms):
                term_score[t] = 0.0
            start = 0 if conjunctive else essential
            for i in range(start, terms):
                t = order[i]
                if current[t] == d:
                    if freqs_of[t] != block[t]:
                        if not load_freqs(
                            t, block[t], counts[t], freq_codes, freq_end, sparse_codes, sparse_end, freqs, scratch
                        ):
                            return out_docs[:0], out_scores[:0], scored, decoded, BAD_BLOCK
                        freqs_of[t] = block[t]
                    tfn = 0.0  # as scoring.BM25F.tfn and .saturate: the same operations in the same order
                    for f in range(fields):
                        if weights[f] != 0.0:
                            tfn += weights[f] * (freqs[t, position[t], f] / norms[d, f])
                    term_score[t] = idf[t] * (tfn / (tfn + k1))
                    partial += term_score[t]
                    scored += 1
            if not conjunctive:
                for i in range(essential - 1, -1, -1):
                    if prune and partial + below[i] < theta:
                        candidate = False
                        break
                    t = order[i]
                    moved = 0
                    if current[t] < d and np.int64(block_last_doc[block[t]]) >= d:  # within its block
                        p = position[t]
                        while docs[t, p] < d:
                            p += 1
                        position[t] = p
                        current[t] = docs[t, p]
                    elif current[t] < d:
                        moved = _advance(
                            t, d, first, end, df, doc_codes, doc_end, block_last_doc, ndocs, docs, counts, block,
                            position, current,
                        )  # fmt: skip
                    if moved < 0:
                        return out_docs[:0], out_scores[:0], scored, decoded, BAD_BLOCK
                    decoded += moved
                    if current[t] == d:
                        if freqs_of[t] != block[t]:
                            if not load_freqs(
                                t, block[t], counts[t], freq_codes, freq_end, sparse_codes, sparse_end, freqs, scratch
                            ):
                                return out_docs[:0], out_scores[:0], scored, decoded, BAD_BLOCK
                            freqs_of[t] = block[t]
                        tfn = 0.0  # as scoring.BM25F.tfn and .saturate: the same operations in the same order
                        for f in range(fields):
                            if weights[f] != 0.0:
                                tfn += weights[f] * (freqs[t, position[t], f] / norms[d, f])
                        term_score[t] = idf[t] * (tfn / (tfn + k1))
                        partial += term_score[t]
                        scored += 1
        if candidate:
            score = 0.0
            for t in range(terms):  # query order: the same sum whichever path found the document
                score += term_score[t]
            if has_prior:
                score += prior[d]
            if score >= theta or not prune:
                out_docs[found] = d
                out_scores[found] = score
                found += 1
                if held < k:  # a min-heap of the k best scores: its root is theta
                    at = held
                    heap[at] = score
                    held += 1
                    while at > 0 and heap[(at - 1) // 2] > heap[at]:
                        parent = (at - 1) // 2
                        heap[at], heap[parent] = heap[parent], heap[at]
                        at = parent
                    if held == k:
                        theta = heap[0]
                elif score > heap[0]:
                    heap[0] = score
                    at = 0
                    while True:
                        left = 2 * at + 1
                        smallest = at
                        if left < k and heap[left] < heap[smallest]:
                            smallest = left
                        if left + 1 < k and heap[left + 1] < heap[smallest]:
                            smallest = left + 1
                        if smallest == at:
                            break
                        heap[at], heap[smallest] = heap[smallest], heap[at]
                        at = smallest
                    theta = heap[0]

        # move the cursors past d (or to skip_to)
        target = max(d + 1, skip_to)
        movers_from = 0 if not conjunctive else lead
        movers_to = terms if not conjunctive else lead + 1
        for i in range(movers_from, movers_to):
            t = i if conjunctive else order[i]
            if not conjunctive and i < essential:
                continue
            moved = 0
            if current[t] < target and np.int64(block_last_doc[block[t]]) >= target:  # within its block
                p = position[t]
                while docs[t, p] < target:
                    p += 1
                position[t] = p
                current[t] = docs[t, p]
            elif current[t] < target:
                moved = _advance(
                    t, target, first, end, df, doc_codes, doc_end, block_last_doc, ndocs, docs, counts, block, position,
                    current,
                )  # fmt: skip
            if moved < 0:
                return out_docs[:0], out_scores[:0], scored, decoded, BAD_BLOCK
            decoded += moved

    keep = 0
    for i in range(found):
        if out_scores[i] >= theta:
            out_docs[keep] = out_docs[i]
            out_scores[keep] = out_scores[i]
            keep += 1
    return out_docs[:keep], out_scores[:keep], scored, decoded, OK
