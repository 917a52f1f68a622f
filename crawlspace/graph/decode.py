"""Decoding BVGraph successor lists, as WebGraph's `BVGraph.successors` reads them (compiled kernels).

A list is: the outdegree d; if the window is not 0, the reference r (the list copies from node x - r, or r = 0:
no copy); if r > 0 the block count and the copy blocks (copy the first B₁ successors of the reference, skip
B₂, copy B₃ ...; all but the first stored minus one; an even count copies the reference's remainder too);
then, for what is still missing, the interval count, each interval's left end (the first as a nat2int gap
from x, the next ones from the previous interval's end plus one) and its length minus the minimum interval
length; and the residuals, the first a nat2int gap from x, the next ones gaps minus one.

Every structural promise of the format is checked as it is read, so a damaged file is an error code with the
node and the bit where its bad code began, never a read outside the stream or a list that cannot be: an
outdegree above the node count, a reference beyond the window or before node 0, a reference chain longer
than `maxrefcount`, blocks that run past the reference's list, more copied and interval successors than the
outdegree, a successor outside 0..nodes-1, one successor twice, more or fewer arcs than the properties say.
Kernels report through `status` = [error, node, bit, 0]; `bvformat` turns that into a `GraphFormatError`.
"""

from __future__ import annotations

import numpy as np

from crawlspace.graph import eliasfano
from crawlspace.graph.bitstream import TOO_LONG, is_padding, nat2int, read_code, read_gamma
from crawlspace.jit import jit

# the layout of the int64 parameter array every kernel takes
P_NODES, P_WINDOW, P_MAX_REF, P_MIN_INTERVAL, P_ZETA_K = 0, 1, 2, 3, 4
P_OUTDEGREE_CODE, P_REFERENCE_CODE, P_BLOCK_COUNT_CODE, P_BLOCK_CODE, P_RESIDUAL_CODE = 5, 6, 7, 8, 9
PARAMETERS = 10

OK = 0
PAST_END = 1
CODE_TOO_LONG = 2
OUTDEGREE_TOO_LARGE = 3
REFERENCE_BEYOND_WINDOW = 4
REFERENCE_BEFORE_FIRST_NODE = 5
REFERENCE_CHAIN_TOO_LONG = 6
BLOCKS_PAST_REFERENCE = 7
MORE_SUCCESSORS_THAN_OUTDEGREE = 8
SUCCESSOR_OUT_OF_RANGE = 9
REPEATED_SUCCESSOR = 10
MORE_ARCS_THAN_PROPERTIES = 11
FEWER_ARCS_THAN_PROPERTIES = 12
DATA_AFTER_LAST_LIST = 13
OFFSET_OUT_OF_RANGE = 14

MESSAGES = {
    PAST_END: "the stream ends inside a code (truncated)",
    CODE_TOO_LONG: "a code too long for any value (corrupt)",
    OUTDEGREE_TOO_LARGE: "an outdegree larger than the number of nodes",
    REFERENCE_BEYOND_WINDOW: "a reference beyond the window size",
    REFERENCE_BEFORE_FIRST_NODE: "a reference to a node before node 0",
    REFERENCE_CHAIN_TOO_LONG: "a chain of references longer than maxrefcount",
    BLOCKS_PAST_REFERENCE: "copy blocks longer than the referenced list",
    MORE_SUCCESSORS_THAN_OUTDEGREE: "more copied and interval successors than the outdegree",
    SUCCESSOR_OUT_OF_RANGE: "a successor outside 0..nodes-1",
    REPEATED_SUCCESSOR: "the same successor twice in one list",
    MORE_ARCS_THAN_PROPERTIES: "more arcs than the properties say",
    FEWER_ARCS_THAN_PROPERTIES: "fewer arcs than the properties say",
    DATA_AFTER_LAST_LIST: "data after the last code (more than zero padding)",
    OFFSET_OUT_OF_RANGE: "an offset beyond the end of the graph",
}


@jit
def _fail(status, error, node, bit):
    status[0] = error
    status[1] = node
    status[2] = bit
    return np.int64(-1)


@jit
def _bad_read(status, pos, node, start):
    return _fail(status, CODE_TOO_LONG if pos == TOO_LONG else PAST_END, node, start)


@jit
def _merge(first, first_count, second, second_count, out):
    """Merges two increasing runs into `out`; False when they share an element."""
    i = 0
    j = 0
    o = 0
    while i < first_count and j < second_count:
        a = first[i]
        b = second[j]
        if a < b:
            out[o] = a
            i += 1
        elif b < a:
            out[o] = b
            j += 1
        else:
            return False
        o += 1
    while i < first_count:
        out[o] = first[i]
        i += 1
        o += 1
    while j < second_count:
        out[o] = second[j]
        j += 1
        o += 1
    return True


@jit
def read_header(words, nbits, pos, node, params, status):
    """(outdegree, reference, position after them) of the list at `pos`; position -1 on an error."""
    start = pos
    degree, pos = read_code(params[P_OUTDEGREE_CODE], params[P_ZETA_K], words, pos, nbits)
    if pos > nbits:
        return np.int64(0), np.int64(0), _bad_read(status, pos, node, start)
    if degree > params[P_NODES]:
        return np.int64(0), np.int64(0), _fail(status, OUTDEGREE_TOO_LARGE, node, start)
    reference = np.int64(0)
    if degree > 0 and params[P_WINDOW] > 0:
        start = pos
        reference, pos = read_code(params[P_REFERENCE_CODE], params[P_ZETA_K], words, pos, nbits)
        if pos > nbits:
            return np.int64(0), np.int64(0), _bad_read(status, pos, node, start)
        if reference > params[P_WINDOW]:
            return np.int64(0), np.int64(0), _fail(status, REFERENCE_BEYOND_WINDOW, node, start)
        if reference > node:
            return np.int64(0), np.int64(0), _fail(status, REFERENCE_BEFORE_FIRST_NODE, node, start)
    return degree, reference, pos


@jit
def read_body(words, nbits, pos, node, degree, reference, reference_list, out, scratch, params, status):
    """Decodes the rest of a list (after `read_header`) into `out[:degree]`; `scratch` holds >= 4 * degree.

    Returns the position after the list, or -1 on an error (then `status` says which).
    """
    nodes = params[P_NODES]
    k = params[P_ZETA_K]
    copied = scratch[:degree]
    expanded = scratch[degree : 2 * degree]
    residuals = scratch[2 * degree : 3 * degree]
    extras = scratch[3 * degree : 4 * degree]
    copied_count = 0
    if reference > 0:
        reference_length = len(reference_list)
        start = pos
        block_count, pos = read_code(params[P_BLOCK_COUNT_CODE], k, words, pos, nbits)
        if pos > nbits:
            return _bad_read(status, pos, node, start)
        if block_count > reference_length + 1:
            return _fail(status, BLOCKS_PAST_REFERENCE, node, start)
        used = 0
        for i in range(block_count):
            start = pos
            block, pos = read_code(params[P_BLOCK_CODE], k, words, pos, nbits)
            if pos > nbits:
                return _bad_read(status, pos, node, start)
            if i > 0:
                block += 1
            if block > reference_length - used:
                return _fail(status, BLOCKS_PAST_REFERENCE, node, start)
            if i % 2 == 0:
                if copied_count + block > degree:
                    return _fail(status, MORE_SUCCESSORS_THAN_OUTDEGREE, node, start)
                for j in range(block):
                    copied[copied_count + j] = reference_list[used + j]
                copied_count += block
            used += block
        if block_count % 2 == 0:
            rest = reference_length - used
            if copied_count + rest > degree:
                return _fail(status, MORE_SUCCESSORS_THAN_OUTDEGREE, node, pos)
            for j in range(rest):
                copied[copied_count + j] = reference_list[used + j]
            copied_count += rest
    extra_count = degree - copied_count
    interval_count_total = 0
    min_interval = params[P_MIN_INTERVAL]
    if extra_count > 0 and min_interval != 0:
        start = pos
        intervals, pos = read_gamma(words, pos, nbits)
        if pos > nbits:
            return _bad_read(status, pos, node, start)
        if intervals > extra_count or intervals * min_interval > extra_count:
            return _fail(status, MORE_SUCCESSORS_THAN_OUTDEGREE, node, start)
        previous = np.int64(0)
        for i in range(intervals):
            start = pos
            gap, pos = read_gamma(words, pos, nbits)
            if pos > nbits:
                return _bad_read(status, pos, node, start)
            left = node + nat2int(gap) if i == 0 else previous + gap + 1
            length, pos = read_gamma(words, pos, nbits)
            if pos > nbits:
                return _bad_read(status, pos, node, start)
            length += min_interval
            if length > extra_count - interval_count_total:
                return _fail(status, MORE_SUCCESSORS_THAN_OUTDEGREE, node, start)
            if left < 0 or left + length > nodes:
                return _fail(status, SUCCESSOR_OUT_OF_RANGE, node, start)
            for j in range(length):
                expanded[interval_count_total + j] = left + j
            interval_count_total += length
            previous = left + length
    residual_count = extra_count - interval_count_total
    if residual_count > 0:
        code = params[P_RESIDUAL_CODE]
        start = pos
        gap, pos = read_code(code, k, words, pos, nbits)
        if pos > nbits:
            return _bad_read(status, pos, node, start)
        successor = node + nat2int(gap)
        if successor < 0 or successor >= nodes:
            return _fail(status, SUCCESSOR_OUT_OF_RANGE, node, start)
        residuals[0] = successor
        for i in range(1, residual_count):
            start = pos
            gap, pos = read_code(code, k, words, pos, nbits)
            if pos > nbits:
                return _bad_read(status, pos, node, start)
            successor += gap + 1
            if successor >= nodes:
                return _fail(status, SUCCESSOR_OUT_OF_RANGE, node, start)
            residuals[i] = successor
    if interval_count_total == 0:
        extras = residuals
    elif residual_count == 0:
        extras = expanded
    elif not _merge(expanded, interval_count_total, residuals, residual_count, extras):
        return _fail(status, REPEATED_SUCCESSOR, node, pos)
    if not _merge(copied, copied_count, extras, extra_count, out):
        return _fail(status, REPEATED_SUCCESSOR, node, pos)
    return pos


@jit
def decode_all(words, nbits, params, arcs, pointers, successors, starts, status):
    """Reads every list in order into CSR form (`pointers`, `successors`) and each list's first bit into `starts`.

    `successors` is grown as needed, never beyond the `arcs` the properties promise; the copy source of a list
    is the already decoded list of its reference node. Returns the successors (an empty array on an error).
    """
    nodes = params[P_NODES]
    cycle = params[P_WINDOW] + 1
    chain = np.zeros(cycle, np.int64)
    scratch = np.empty(256, np.int64)
    empty = successors[:0]
    pos = np.int64(0)
    total = np.int64(0)
    pointers[0] = 0
    for node in range(nodes):
        starts[node] = pos
        degree, reference, pos = read_header(words, nbits, pos, node, params, status)
        if pos < 0:
            return successors[:0]
        if total + degree > arcs:
            _fail(status, MORE_ARCS_THAN_PROPERTIES, node, starts[node])
            return successors[:0]
        if total + degree > len(successors):
            grown = np.empty(min(arcs, max(2 * len(successors), total + degree)), np.int32)
            grown[:total] = successors[:total]
            successors = grown
        if degree == 0:
            chain[node % cycle] = 0
            pointers[node + 1] = total
            continue
        if reference > 0:
            depth = chain[(node - reference) % cycle] + 1
            if depth > params[P_MAX_REF]:
                _fail(status, REFERENCE_CHAIN_TOO_LONG, node, starts[node])
                return successors[:0]
            source = node - reference
            reference_list = successors[pointers[source] : pointers[source + 1]]
        else:
            depth = 0
            reference_list = empty
        chain[node % cycle] = depth
        if len(scratch) < 4 * degree:
            scratch = np.empty(max(8 * degree, 2 * len(scratch)), np.int64)
        pos = read_body(
            words, nbits, pos, node, degree, reference, reference_list, successors[total : total + degree],
            scratch, params, status,
        )  # fmt: skip
        if pos < 0:
            return successors[:0]
        total += degree
        pointers[node + 1] = total
    starts[nodes] = pos
    if total != arcs:
        _fail(status, FEWER_ARCS_THAN_PROPERTIES, nodes, pos)
    elif not is_padding(words, pos, nbits):
        _fail(status, DATA_AFTER_LAST_LIST, nodes, pos)
    return successors[:total]


@jit
def successors_of(words, nbits, upper, lower, samples, low_bits, params, node, status):
    """The list of one node by random access: its reference chain is followed down to a list without a
    reference and decoded back up, each list copying from the one below. The lists' first bits are the
    Elias-Fano list (upper, lower, samples, low_bits) of `eliasfano`."""
    chain = np.empty((8, 4), np.int64)  # per level: node, outdegree, reference, position after the header
    empty = np.empty(0, np.int32)
    depth = 0
    current = node
    while True:
        pos = eliasfano.get(upper, lower, samples, low_bits, current)
        if pos > nbits:
            _fail(status, OFFSET_OUT_OF_RANGE, current, pos)
            return empty
        degree, reference, pos = read_header(words, nbits, pos, current, params, status)
        if pos < 0:
            return empty
        if depth == len(chain):
            chain = np.concatenate((chain, chain))
        chain[depth, 0] = current
        chain[depth, 1] = degree
        chain[depth, 2] = reference
        chain[depth, 3] = pos
        if reference == 0:
            break
        if depth == params[P_MAX_REF]:
            _fail(status, REFERENCE_CHAIN_TOO_LONG, node, eliasfano.get(upper, lower, samples, low_bits, node))
            return empty
        depth += 1
        current -= reference
    below = empty
    for level in range(depth, -1, -1):
        degree = chain[level, 1]
        out = np.empty(degree, np.int32)
        if degree > 0:
            scratch = np.empty(4 * degree, np.int64)
            pos = read_body(
                words, nbits, chain[level, 3], chain[level, 0], degree, chain[level, 2], below, out, scratch, params,
                status,
            )  # fmt: skip
            if pos < 0:
                return empty
        below = out
    return below


@jit
def outdegree_of(words, nbits, upper, lower, samples, low_bits, params, node, status):
    pos = eliasfano.get(upper, lower, samples, low_bits, node)
    if pos > nbits:
        return _fail(status, OFFSET_OUT_OF_RANGE, node, pos)
    degree, _, pos = read_header(words, nbits, pos, node, params, status)
    return degree


@jit
def decode_offsets(words, nbits, count, code, limit, offsets, status):
    """The `.offsets` file: `count` gaps (γ or δ) summed into bit offsets, none beyond `limit` (the graph's
    length in bits); returns the position after them."""
    pos = np.int64(0)
    total = np.int64(0)
    for i in range(count):
        start = pos
        gap, pos = read_code(code, 0, words, pos, nbits)
        if pos > nbits:
            return _bad_read(status, pos, i, start)
        total += gap
        if total > limit:
            return _fail(status, OFFSET_OUT_OF_RANGE, i, start)
        offsets[i] = total
    return pos


@jit
def offset_entry_position(words, nbits, index, code):
    """The bit at which the `.offsets` file's entry `index` begins (to say where a wrong offset is)."""
    pos = np.int64(0)
    for _ in range(index):
        _, pos = read_code(code, 0, words, pos, nbits)
    return pos
