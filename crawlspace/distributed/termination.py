"""When is a partitioned crawl over? A four-counter test (Mattern) for at-least-once channels, as a pure function.

No partition can tell alone: an idle one may be sent a batch of URLs any moment by a busy one,
and a batch may be in transit while every partition looks idle. So the coordinator probes every
partition in rounds; each answers (idle, batches sent, batches received).

`idle` means: nothing to fetch, nothing in flight, and every batch it sent acknowledged by its
owner, who acknowledges only once the batch is journaled and queued there (it is no longer idle
then). So a batch in transit keeps its sender busy, and a round in which every partition is idle
(*settled*) has nothing in transit that it could see. This replaces Mattern's balance of sent
and received counts, which a transport that repeats a message (at-least-once delivery: a resend
after a reconnect, a redelivered stream entry) would break forever, and which a lost message
would break until it is sent again.

One settled round is not enough: partition B can answer "idle" just before a batch reaches it,
and its sender A "idle" just after the acknowledgement reached A. The counters catch that: B's
received count moves before its next answer. The crawl is over when two consecutive rounds are
settled with identical answers: nothing moved in between (Mattern 1987, "Algorithms for
distributed termination detection", the four-counter method).

The transport (socket mesh, Redis streams) carries the probes; this module only decides.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ProbeAnswer:
    """One partition's answer to one round's probe."""

    idle: bool  # nothing to fetch or in flight, every batch it sent acknowledged
    sent: int  # URL batches transmitted so far, resends included
    received: int  # URL batch deliveries journaled so far, repeats included


def settled(answers: Mapping[int, ProbeAnswer]) -> bool:
    """Every partition idle (so every batch sent was acknowledged), as far as this round saw."""
    return all(answer.idle for answer in answers.values())


def crawl_over(previous: Mapping[int, ProbeAnswer] | None, current: Mapping[int, ProbeAnswer], partitions: int) -> bool:
    """Two consecutive complete rounds, both settled, with the same answers: the crawl has ended.

    `previous` is the last complete round kept by the caller (only a settled one is worth keeping:
    pass None otherwise); a round missing a partition's answer decides nothing."""
    if len(current) != partitions or previous is None or len(previous) != partitions:
        return False
    return settled(current) and dict(previous) == dict(current)
