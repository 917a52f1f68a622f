"""Host ownership: deterministic everywhere, even, and (rendezvous) stable when the cluster is resized."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import pytest
import xxhash

from crawlspace.distributed.assignment import ModuloAssignment, RendezvousAssignment, content_owner

HOSTS = [f"site{i:05d}.test" for i in range(20_000)]


@pytest.mark.parametrize("kind", [ModuloAssignment, RendezvousAssignment])
def test_owners_are_even_and_in_range(kind: type[ModuloAssignment] | type[RendezvousAssignment]) -> None:
    assignment = kind(4)
    counts = Counter(assignment.owner(host) for host in HOSTS)
    assert set(counts) == {0, 1, 2, 3}
    assert max(counts.values()) < 1.1 * len(HOSTS) / 4  # within 10% of even
    assert kind(1).owner("anything") == 0


def test_modulo_is_the_partitioning_existing_crawls_were_made_with() -> None:
    """xxh3_64 of the host's UTF-8 mod N: a resumed crawl finds every host in its partition."""
    assignment = ModuloAssignment(3)
    assert all(assignment.owner(host) == xxhash.xxh3_64_intdigest(host.encode()) % 3 for host in HOSTS[:2000])


def test_rendezvous_moves_few_hosts_when_a_partition_is_added_or_removed() -> None:
    for n in (2, 4, 8):
        before, after = RendezvousAssignment(n), RendezvousAssignment(n + 1)
        moved = [host for host in HOSTS if before.owner(host) != after.owner(host)]
        assert all(after.owner(host) == n for host in moved)  # only to the new partition
        assert len(moved) < 1.15 * len(HOSTS) / (n + 1)  # about 1/(N+1) of them
        modulo_moved = sum(ModuloAssignment(n).owner(h) != ModuloAssignment(n + 1).owner(h) for h in HOSTS)
        assert modulo_moved > 1.8 * len(moved)  # the default rule moves N/(N+1) instead of 1/(N+1)


def test_the_same_owner_in_another_process() -> None:
    """Python's own hash is salted per process: an assignment must not depend on it."""
    code = (
        "from crawlspace.distributed.assignment import RendezvousAssignment, ModuloAssignment;"
        "print([RendezvousAssignment(5).owner(h) for h in ('a.test','b.test','c.test:8080')],"
        "[ModuloAssignment(5).owner(h) for h in ('a.test','b.test','c.test:8080')])"
    )
    printed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    here = [RendezvousAssignment(5).owner(h) for h in ("a.test", "b.test", "c.test:8080")]
    modulo = [ModuloAssignment(5).owner(h) for h in ("a.test", "b.test", "c.test:8080")]
    assert printed.strip() == f"{here} {modulo}"


def test_content_owner_and_bad_sizes() -> None:
    assert {content_owner(fp, 3) for fp in range(30)} == {0, 1, 2}
    with pytest.raises(ValueError):
        ModuloAssignment(0)
    with pytest.raises(ValueError):
        RendezvousAssignment(0)
