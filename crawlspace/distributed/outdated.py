"""Telling the other partitions that a page's old version is gone (IIR 20.2.1, third point, across partitions).

Content seen is partitioned by value: the first URL of a body lives with the fingerprint's owner, a
page's LSH band entries with the owners of its band keys (distributed.claims, distributed.nearclaims).
When a refreshed page's body changes, its partition forgets the old version in its own content set;
the old entries on the others would still call a later copy of the old content a duplicate of a page
that no longer has it. So the page's partition sends every other partition an outdated notice (URL,
old body fingerprint, the time of the fetch that replaced it; `seen.content.OutdatedNotice`): a
partition owns some of a signature's 16 band keys whatever the count of partitions up to 16, so every
partition is told rather than only the owners, which would need each page's old signature kept.

Delivery at least once, applying idempotent:
- the notice is put in the sender's content set (its `outdated` table) in the same transaction as the
  forgetting it tells of, and sent only once that transaction is committed: never sent unless durable;
- the receiver applies it (`ContentSeen.forget_outdated`: removes an entry only if it still names that
  URL with a time before the replacing fetch, so a notice that arrives after the page was judged again
  changes nothing) and acknowledges it only once its own content set has committed the removal;
- the sender deletes the notice on the acknowledgement, and sends it again every `resend_after`
  seconds until then, and all of them after a restart (kill -9 included): a lost notice is resent, a
  repeated one is harmless.

What stays possible: a page that changes back to a body before its notice about that body arrived
(within the send interval, or while the receiver is down) loses the first place of that body there:
a later copy is then stored as new, a duplicate kept twice, never a page lost. A partition that
answered a copy from its own record of the first URL while the owner was unreachable keeps that
record until the owner's notice reaches it (every partition is told, so it does).

Pure bookkeeping, no transport, no clock of its own: `OutdatedDelivery` says which notices to send now
(new ones, and those unacknowledged for too long), the caller sends them and hands back acknowledgements.
"""

from __future__ import annotations

from collections.abc import Iterable

from crawlspace.seen.content import OutdatedNotice

RESEND_AFTER = 30.0  # seconds a notice waits for its acknowledgement before it is sent again
INTERVAL = 0.5  # seconds between the partition's rounds of commit, acknowledgements and notices

NoticeKey = tuple[int, str, float]
"""(peer, URL, time of the replacing fetch): one notice for one partition."""


class OutdatedNoticeError(ValueError):
    """A notice that is not one: a URL that is not text, a fingerprint out of 64 bits, a time not finite."""


def checked_notice(url: object, fingerprint: object, replaced_at: object) -> OutdatedNotice:
    """A notice as received, its fields checked (a malformed one is refused, never applied)."""
    if not isinstance(url, str) or not url:
        raise OutdatedNoticeError(f"outdated notice with URL {url!r:.80}")
    if not isinstance(fingerprint, int) or isinstance(fingerprint, bool) or not 0 <= fingerprint < 1 << 64:
        raise OutdatedNoticeError(f"outdated notice for {url}: fingerprint {fingerprint!r:.40}")
    if not isinstance(replaced_at, (int, float)) or isinstance(replaced_at, bool) or replaced_at != replaced_at:
        raise OutdatedNoticeError(f"outdated notice for {url}: time {replaced_at!r:.40}")
    if abs(replaced_at) == float("inf"):
        raise OutdatedNoticeError(f"outdated notice for {url}: time {replaced_at!r}")
    return OutdatedNotice(url, fingerprint, float(replaced_at))


class OutdatedDelivery:
    """The sender's side: which of the durable notices go out now, and which wait for an acknowledgement."""

    def __init__(self, *, resend_after: float = RESEND_AFTER) -> None:
        self.resend_after = resend_after
        self._sent_at: dict[NoticeKey, float] = {}  # notices sent, not yet acknowledged -> last sending
        self.sent = 0  # notices sent, resends included
        self.resent = 0
        self.acknowledged = 0

    def __repr__(self) -> str:
        return f"OutdatedDelivery({len(self._sent_at)} unacknowledged, {self.sent} sent, {self.acknowledged} acked)"

    def due(self, waiting: Iterable[tuple[int, OutdatedNotice]], now: float) -> dict[int, list[OutdatedNotice]]:
        """Of the notices waiting in the content set (durable, unacknowledged), those to send now, by
        peer: never sent by this process (new, or left by a run that was killed), or sent at least
        `resend_after` seconds ago. What they say is sent again as it was: the receiver drops repeats."""
        out: dict[int, list[OutdatedNotice]] = {}
        still: dict[NoticeKey, float] = {}
        for peer, notice in waiting:
            key = (peer, notice.url, notice.replaced_at)
            last = self._sent_at.get(key)
            if last is not None and now - last < self.resend_after:
                still[key] = last
                continue
            if last is not None:
                self.resent += 1
            still[key] = now
            out.setdefault(peer, []).append(notice)
            self.sent += 1
        self._sent_at = still  # acknowledged ones are no longer waiting: forgotten here too
        return out

    def acknowledged_by(self, peer: int, keys: Iterable[tuple[str, float]]) -> list[tuple[str, float]]:
        """`peer` made these notices durable: the ones to delete from the content set."""
        acknowledged = list(keys)  # all of them: one sent by a run before a restart is deleted too
        for url, replaced_at in acknowledged:
            self._sent_at.pop((peer, url, replaced_at), None)
        self.acknowledged += len(acknowledged)
        return acknowledged

    def resend_due(self, now: float) -> bool:
        """Is some notice unacknowledged for `resend_after` seconds (worth a scan of the waiting ones)?"""
        return any(now - last >= self.resend_after for last in self._sent_at.values())

    @property
    def unacknowledged(self) -> int:
        return len(self._sent_at)
