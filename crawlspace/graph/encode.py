"""Encoding successor lists as WebGraph's `BVGraph.store` does (compiled kernels).

For each node the encoder prices every list in the window as the copy source (reference 0: none), skipping
empty lists and lists whose own reference chain is already `maxrefcount` long, and writes the cheapest; a
tie goes to the nearer reference, as in WebGraph's `CompressionThread`, so for the same parameters the bit
stream is WebGraph's own. The copy blocks, the intervals (maximal runs of at least `minintervallength`
consecutive successors among those not copied) and the residual gaps are computed by one function that
either counts the bits or writes them (`bitstream.emit_*`), so the price is the length written.

Statistics (WebGraph's `bitsfor*`, `*arcs`, `avgref`, `avgdist`, gap histograms) are gathered while writing,
into `stats`, indexed by the `S_*` constants.
"""

from __future__ import annotations

import numpy as np

from crawlspace.graph.bitstream import emit_code, emit_gamma, int2nat, most_significant_bit
from crawlspace.graph.decode import (
    P_BLOCK_CODE,
    P_BLOCK_COUNT_CODE,
    P_MAX_REF,
    P_MIN_INTERVAL,
    P_NODES,
    P_OUTDEGREE_CODE,
    P_REFERENCE_CODE,
    P_RESIDUAL_CODE,
    P_WINDOW,
    P_ZETA_K,
)
from crawlspace.jit import jit

S_BITS_OUTDEGREES, S_BITS_REFERENCES, S_BITS_BLOCKS, S_BITS_INTERVALS, S_BITS_RESIDUALS = 0, 1, 2, 3, 4
S_COPIED_ARCS, S_INTERVALISED_ARCS, S_RESIDUAL_ARCS, S_TOTAL_REF, S_TOTAL_DIST, S_ARCS = 5, 6, 7, 8, 9, 10
S_SUCCESSOR_GAPS = 16
"""32 counters: successor gaps binned by ⌊log₂⌋ (the first as int2nat of its distance from the node)."""
S_RESIDUAL_GAPS = 48
STATS = 80

INPUT_OK = 0
INPUT_NOT_INCREASING = 1
INPUT_OUT_OF_RANGE = 2


@jit
def _bin_gaps(node, values, count, stats, base):
    for i in range(count - 1):
        stats[base + most_significant_bit(values[i + 1] - values[i])] += 1
    first = int2nat(np.int64(values[0]) - node)
    if first != 0:
        stats[base + most_significant_bit(first)] += 1


@jit
def _list_cost_or_write(buffer, pos, write, node, reference, reference_list, current, params, scratch, stats):
    """Writes (or, without `write`, prices) everything of a list after its outdegree; returns the new position."""
    k = params[P_ZETA_K]
    degree = len(current)
    reference_length = len(reference_list) if reference != 0 else 0
    blocks = scratch[0]
    extras = scratch[1]
    lefts = scratch[2]
    lengths = scratch[3]
    residuals = scratch[4]
    block_count = 0
    extra_count = 0
    j = 0
    r = 0
    block_length = 0
    copying = True
    while j < degree and r < reference_length:
        a = current[j]
        b = reference_list[r]
        if copying:
            if a > b:
                blocks[block_count] = block_length
                block_count += 1
                copying = False
                block_length = 0
            elif a < b:
                extras[extra_count] = a
                extra_count += 1
                j += 1
            else:
                j += 1
                r += 1
                block_length += 1
        elif a < b:
            extras[extra_count] = a
            extra_count += 1
            j += 1
        elif a > b:
            r += 1
            block_length += 1
        else:
            blocks[block_count] = block_length
            block_count += 1
            copying = True
            block_length = 0
    if copying and r < reference_length:
        blocks[block_count] = block_length
        block_count += 1
    while j < degree:
        extras[extra_count] = current[j]
        extra_count += 1
        j += 1

    if params[P_WINDOW] > 0:
        start = pos
        pos = emit_code(params[P_REFERENCE_CODE], k, buffer, pos, reference, write)
        if write:
            stats[S_BITS_REFERENCES] += pos - start
    if reference != 0:
        start = pos
        pos = emit_code(params[P_BLOCK_COUNT_CODE], k, buffer, pos, block_count, write)
        for i in range(block_count):
            pos = emit_code(params[P_BLOCK_CODE], k, buffer, pos, blocks[i] - (1 if i > 0 else 0), write)
        if write:
            stats[S_BITS_BLOCKS] += pos - start
            stats[S_COPIED_ARCS] += degree - extra_count
    if extra_count == 0:
        return pos
    min_interval = params[P_MIN_INTERVAL]
    residual_count = extra_count
    residual_source = extras
    if min_interval != 0:
        interval_count = 0
        residual_count = 0
        i = 0
        while i < extra_count:
            run = 1
            while i + run < extra_count and extras[i + run - 1] + 1 == extras[i + run]:
                run += 1
            if run >= min_interval and run >= 2:  # as WebGraph's intervalize, even when minintervallength is 1
                lefts[interval_count] = extras[i]
                lengths[interval_count] = run
                interval_count += 1
                i += run
            else:
                residuals[residual_count] = extras[i]
                residual_count += 1
                i += 1
        start = pos
        pos = emit_gamma(buffer, pos, interval_count, write)
        previous = np.int64(0)
        for i in range(interval_count):
            gap = int2nat(lefts[i] - node) if i == 0 else lefts[i] - previous - 1
            pos = emit_gamma(buffer, pos, gap, write)
            previous = lefts[i] + lengths[i]
            pos = emit_gamma(buffer, pos, lengths[i] - min_interval, write)
        if write:
            stats[S_BITS_INTERVALS] += pos - start
            stats[S_INTERVALISED_ARCS] += extra_count - residual_count
        residual_source = residuals
    if residual_count > 0:
        code = params[P_RESIDUAL_CODE]
        start = pos
        pos = emit_code(code, k, buffer, pos, int2nat(residual_source[0] - node), write)
        for i in range(1, residual_count):
            pos = emit_code(code, k, buffer, pos, residual_source[i] - residual_source[i - 1] - 1, write)
        if write:
            stats[S_BITS_RESIDUALS] += pos - start
            stats[S_RESIDUAL_ARCS] += residual_count
            _bin_gaps(node, residual_source, residual_count, stats, S_RESIDUAL_GAPS)
    return pos


@jit
def check_lists(pointers, successors, nodes):
    """(problem, node): each list must be strictly increasing and inside 0..nodes-1."""
    for node in range(len(pointers) - 1):
        previous = np.int64(-1)
        for i in range(pointers[node], pointers[node + 1]):
            successor = np.int64(successors[i])
            if successor < 0 or successor >= nodes:
                return INPUT_OUT_OF_RANGE, node
            if successor <= previous:
                return INPUT_NOT_INCREASING, node
            previous = successor
    return INPUT_OK, -1


@jit
def encode_all(pointers, successors, params, starts, stats):
    """The graph's bit stream (buffer, length in bits), each list's first bit into `starts` (n + 1 entries)."""
    nodes = params[P_NODES]
    window = params[P_WINDOW]
    cycle = window + 1
    max_degree = 0
    for node in range(nodes):
        max_degree = max(max_degree, pointers[node + 1] - pointers[node])
    scratch = np.empty((5, max_degree + 1), np.int64)
    reference_counts = np.zeros(cycle, np.int64)
    buffer = np.zeros(max(1024, (pointers[nodes] * 4 + nodes * 2) // 64), np.uint64)
    pos = np.int64(0)
    for node in range(nodes):
        starts[node] = pos
        current = successors[pointers[node] : pointers[node + 1]]
        degree = len(current)
        best_cost = np.int64(1) << 62
        best_reference = 0
        slot = node % cycle
        if degree > 0:
            reference_counts[slot] = -1
            for reference in range(min(cycle, node + 1)):
                candidate = node - reference
                if reference > 0 and (
                    reference_counts[candidate % cycle] >= params[P_MAX_REF]
                    or pointers[candidate + 1] == pointers[candidate]
                ):
                    continue
                reference_list = successors[pointers[candidate] : pointers[candidate + 1]]
                cost = _list_cost_or_write(
                    buffer, np.int64(0), False, node, reference, reference_list, current, params, scratch, stats
                )
                if cost < best_cost:
                    best_cost = cost
                    best_reference = reference
            reference_counts[slot] = reference_counts[(node - best_reference) % cycle] + 1
        else:
            best_cost = 0
        needed = (pos + best_cost + 192) // 64 + 1
        if needed > len(buffer):
            grown = np.zeros(max(needed, 2 * len(buffer)), np.uint64)
            grown[: len(buffer)] = buffer
            buffer = grown
        start = pos
        pos = emit_code(params[P_OUTDEGREE_CODE], params[P_ZETA_K], buffer, pos, degree, True)
        stats[S_BITS_OUTDEGREES] += pos - start
        if degree == 0:
            continue
        _bin_gaps(node, current, degree, stats, S_SUCCESSOR_GAPS)
        candidate = node - best_reference
        pos = _list_cost_or_write(
            buffer, pos, True, node, best_reference, successors[pointers[candidate] : pointers[candidate + 1]],
            current, params, scratch, stats,
        )  # fmt: skip
        stats[S_ARCS] += degree
        stats[S_TOTAL_REF] += reference_counts[slot]
        stats[S_TOTAL_DIST] += best_reference
    starts[nodes] = pos
    return buffer, pos


@jit
def encode_offsets(starts, code):
    """The `.offsets` stream: the gaps between consecutive list starts (the first is 0), γ- or δ-coded."""
    buffer = np.zeros(1, np.uint64)
    bits = np.int64(0)
    previous = np.int64(0)
    for value in starts:
        bits = emit_code(code, 0, buffer, bits, value - previous, False)
        previous = value
    buffer = np.zeros(bits // 64 + 2, np.uint64)
    pos = np.int64(0)
    previous = np.int64(0)
    for value in starts:
        pos = emit_code(code, 0, buffer, pos, value - previous, True)
        previous = value
    return buffer, pos
