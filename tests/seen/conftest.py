"""Small block and buffer sizes, so that a few hundred fingerprints exercise multi-block reads and merges."""

from __future__ import annotations

import pytest

from crawlspace.seen import sortedruns


@pytest.fixture
def tiny_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sortedruns, "BLOCK_ENTRIES", 4)
    monkeypatch.setattr(sortedruns, "READ_BUFFER_BYTES", 8 * 16)
    monkeypatch.setattr(sortedruns, "MERGE_BUFFER_BYTES", 16 * 8 * 4)
