"""When is a partitioned crawl over? Mattern's four-counter method, as a pure function.

No partition can tell alone: an idle one may be sent a batch of URLs any moment by a busy one,
and a batch may be in transit while every partition looks idle. So the coordinator probes every
partition in rounds; each answers (idle, batches sent, batches received), counting every batch it
sent (resends included) and every batch it received and journaled. A round is *settled* when
every partition is idle and the sums of sent and received are equal (nothing in transit that
this round could see). One settled round is not enough: a batch can be received between two
partitions' answers, so its receiver says idle after it has already been woken and gone quiet
again, while its sender counted it. The crawl is over when two consecutive rounds are settled
with identical answers: nothing moved in between (Mattern 1987, "Algorithms for distributed
termination detection", the four-counter method).

The transport (socket mesh, Redis streams) carries the probes; this module only decides.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ProbeAnswer:
    """One partition's answer to one round's probe."""

    idle: bool  # nothing to fetch, nothing in flight, nothing of its own waiting to be sent
    sent: int  # URL batches sent so far, resends included
    received: int  # URL batches received and journaled so far


def settled(answers: Mapping[int, ProbeAnswer]) -> bool:
    """Every partition idle and every batch sent also received, as far as this round saw."""
    return all(answer.idle for answer in answers.values()) and sum(a.sent for a in answers.values()) == sum(
        a.received for a in answers.values()
    )


def crawl_over(
    previous: Mapping[int, ProbeAnswer] | None, current: Mapping[int, ProbeAnswer], partitions: int
) -> bool:
    """Two consecutive complete rounds, both settled, with the same answers: the crawl has ended.

    `previous` is the last complete round kept by the caller (only a settled one is worth keeping:
    pass None otherwise); a round missing a partition's answer decides nothing."""
    if len(current) != partitions or previous is None or len(previous) != partitions:
        return False
    return settled(current) and dict(previous) == dict(current)
