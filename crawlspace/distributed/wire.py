"""The messages between the partitions of a crawl, as bytes: one format for every transport between machines.

A unit on the wire (a stream entry, a key's value) is msgpack (msgspec) of `[version, [message...]]`,
each message `[kind, field...]`: the version first, so a node of a later release that changed a
message is told apart from garbage; several messages for one receiver travel in one unit (a stream
entry per receiver and write, not per message: the round trips are the transport's cost); each message
a typed struct (array-like, tagged by its kind), so a decoded unit has the types its handlers expect or
is refused whole. Never pickle: whoever can write to a stream could otherwise run code in every node.

`decode` raises `WireError` for anything that is not a message of this version (a truncated entry,
another program's data XADDed on a stream, a message of a newer release): the transport counts it,
logs it once and skips it; a node never crashes on what it reads. The Redis transport
(distributed.redisstreams) is the only user so far; the socket mesh's list frames map one to one
onto these structs, so it can move to them without changing its logic.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import msgspec

VERSION = 1

MAX_MESSAGE = 64 * 1024 * 1024  # far beyond a batch of 512 URLs; refuse before decoding what no sender writes


class WireError(ValueError):
    """Bytes that are not a message this version understands; the transport skips them."""


class UrlBatch(msgspec.Struct, array_like=True, tag="urls", frozen=True):
    """URLs for the receiver's hosts, journaled by the sender under (sender, number) until acknowledged.
    `forward`: hosts handed over for per-IP politeness, which the receiver keeps from now on."""

    sender: int
    number: int
    urls: list[tuple[str, int, int]]  # (url, depth, hops)
    forward: bool = False


class Ack(msgspec.Struct, array_like=True, tag="ack", frozen=True):
    """The receiver (`sender` of the ack) journaled these batches of the node it is sent to: that node may
    forget them. One message for every batch of one read, not one each."""

    sender: int
    numbers: list[int]


class ContentQuestion(msgspec.Struct, array_like=True, tag="cq", frozen=True):
    """ "Which URL had this body first?", to the fingerprint's owner (distributed.claims)."""

    sender: int
    number: int
    fingerprint: int
    url: str
    fetched_at: float


class ContentAnswer(msgspec.Struct, array_like=True, tag="ca", frozen=True):
    """The answer to question `number`: the first URL with the body and its fetch time."""

    number: int
    url: str
    fetched_at: float


class ContentSettle(msgspec.Struct, array_like=True, tag="cs", frozen=True):
    """`url`, the first with this body, was recorded: its page stored or not."""

    fingerprint: int
    url: str
    stored: bool


class NearQuestion(msgspec.Struct, array_like=True, tag="nq", frozen=True):
    """ "Is anything indexed under these band keys similar to this page?", to the owner of the keys
    (distributed.nearclaims.NearQuestion, whose checks the receiver applies when it rebuilds one)."""

    sender: int
    number: int
    url: str
    fetched_at: float
    asked_at: float
    signature: bytes  # the whole MinHash signature, uint16 little-endian
    bands: list[tuple[int, int]]  # (band number, band key) of the keys the receiver owns


class NearAnswer(msgspec.Struct, array_like=True, tag="na", frozen=True):
    """The owner's best candidate for near-duplicate question `number`, or None: nothing similar there."""

    number: int
    match: tuple[str, float, float] | None  # (url, fetched_at, estimated Jaccard)


class Outdated(msgspec.Struct, array_like=True, tag="od", frozen=True):
    """Pages of the sender that no longer have these bodies (distributed.outdated): the receiver drops
    its entries of them, then acknowledges. Each notice is (URL, old body fingerprint, time of the
    fetch that replaced it), checked again by the receiver (`outdated.checked_notice`)."""

    sender: int
    notices: list[tuple[str, int, float]]


class OutdatedAck(msgspec.Struct, array_like=True, tag="oda", frozen=True):
    """The receiver (`sender` of the ack) applied these notices (URL, time of the replacing fetch) durably."""

    sender: int
    keys: list[tuple[str, float]]


class ProbeReply(msgspec.Struct, array_like=True, tag="probe", frozen=True):
    """A node's answer to a termination round (distributed.termination.ProbeAnswer)."""

    round: int
    node: int
    idle: bool
    sent: int
    received: int


class Stop(msgspec.Struct, array_like=True, tag="stop", frozen=True):
    """The crawl stops, for `reason`, as decided by `node` (the termination leader, or a node that stopped)."""

    reason: str
    node: int


class HandoverPart(msgspec.Struct, array_like=True, tag="hand", frozen=True):
    """Part `number` of a resize's handover (distributed.resize), for the receiver that owns its hosts now:
    `part` is `resize.encode_part` bytes (decoded by the receiver: a damaged part is refused, not applied)."""

    sender: int
    number: int
    part: bytes


class HandoverAck(msgspec.Struct, array_like=True, tag="hack", frozen=True):
    """The receiver (`sender` of the ack) made these handover parts of the node it is sent to durable."""

    sender: int
    numbers: list[int]


Message = (
    UrlBatch
    | Ack
    | ContentQuestion
    | ContentAnswer
    | ContentSettle
    | NearQuestion
    | NearAnswer
    | Outdated
    | OutdatedAck
    | ProbeReply
    | Stop
    | HandoverPart
    | HandoverAck
)

_encoder = msgspec.msgpack.Encoder()
_envelope = msgspec.msgpack.Decoder(tuple[int, msgspec.Raw])
_messages: msgspec.msgpack.Decoder[list[Message]] = msgspec.msgpack.Decoder(list[Message])


def encode(messages: Sequence[Message]) -> bytes:
    """One unit of `messages` (at least one), in order."""
    return _encoder.encode((VERSION, messages))


Kind = TypeVar("Kind", bound=msgspec.Struct)


def decode(data: bytes | bytearray | memoryview | str) -> list[Message]:
    """The messages of one unit; WireError if it is not a unit of this version with at least one message."""
    if isinstance(data, str):  # a client that decodes responses
        data = data.encode("utf-8", "surrogateescape")
    if len(data) > MAX_MESSAGE:
        raise WireError(f"message of {len(data)} bytes (at most {MAX_MESSAGE})")
    try:
        version, body = _envelope.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise WireError(f"not a crawlspace message: {exc}") from None
    if version != VERSION:
        raise WireError(f"message of wire version {version}; this node speaks version {VERSION}")
    try:
        messages = _messages.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise WireError(f"malformed message: {exc}") from None
    if not messages:
        raise WireError("a unit without messages")
    return messages


def decode_one(data: bytes | bytearray | memoryview | str, expect: type[Kind]) -> Kind:
    """The single message of a unit that holds one of kind `expect` (a key's value: the stop, a probe reply)."""
    messages = decode(data)
    if len(messages) != 1 or not isinstance(messages[0], expect):
        kinds = ", ".join(type(message).__name__ for message in messages)
        raise WireError(f"expected one {expect.__name__} message, got {kinds}")
    return messages[0]
