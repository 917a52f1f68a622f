"""The exact-duplicate oracle of the fingerprints one partition owns: "which URL had this body first?"

Content is partitioned by fingerprint value (`content_owner`), so every partition asks the same
owner about the same body and hears the same first URL, whichever partition fetched what. The
owner answers from its content set (`ContentOracle`, the engine's `ContentSeen`). One subtlety:
with `store_near_duplicates` off, the first URL's page may turn out not to be stored (it is a
near-duplicate of something else), and a copy must never become a revisit of a record never
written. Then the owner holds its answers to copies of that body until the first URL's partition
has said whether its page was stored (`settle`); if not, the first place is released and the next
waiting claim takes it.

Pure bookkeeping, for any transport: `claim` answers now or parks the question, `settle` returns the
parked questions it can answer now; the transport delivers the answers.
"""

from __future__ import annotations

from typing import Protocol

Answer = tuple[str, float]
"""The first URL with a body and its fetch time."""

Question = tuple[int, int, str, float]
"""Who asked (partition), their question number, their URL and its fetch time."""


class ContentOracle(Protocol):
    def claim_first(self, body_fingerprint: int, url: str, fetched_at: float) -> Answer:
        """The first URL with this body: `(url, fetched_at)` itself when there was none."""
        ...

    def release_first(self, body_fingerprint: int, url: str) -> None:
        """`url` was not stored after all: it is no body's first URL."""
        ...


class ContentClaims:
    def __init__(self, oracle: ContentOracle, *, hold_until_settled: bool) -> None:
        self._oracle = oracle
        self._hold = hold_until_settled  # store_near_duplicates off: a first page may not be stored
        self._unsettled: dict[int, list[Question]] = {}  # fingerprint -> questions waiting for `settle`

    def __repr__(self) -> str:
        return f"ContentClaims({len(self._unsettled)} unsettled, hold={self._hold})"

    def claim(self, asker: int, number: int, fingerprint: int, url: str, fetched_at: float) -> Answer | None:
        """The answer, or None when the question waits for the first URL to be settled."""
        waiting = self._unsettled.get(fingerprint)
        if waiting is not None:
            waiting.append((asker, number, url, fetched_at))
            return None
        first = self._oracle.claim_first(fingerprint, url, fetched_at)
        if self._hold and first[0] == url:
            self._unsettled[fingerprint] = []
        return first

    def settle(self, fingerprint: int, url: str, *, stored: bool) -> list[tuple[int, int, Answer]]:
        """`url`, the first with this body, is recorded (its page stored or not); returns (asker,
        number, answer) for the parked questions that have their answer now."""
        if not stored:
            self._oracle.release_first(fingerprint, url)
        answered: list[tuple[int, int, Answer]] = []
        for asker, number, other, fetched_at in self._unsettled.pop(fingerprint, []):
            first = self.claim(asker, number, fingerprint, other, fetched_at)
            if first is not None:
                answered.append((asker, number, first))
        return answered
