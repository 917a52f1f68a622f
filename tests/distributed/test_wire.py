"""The wire format: every message round-trips; anything else is one WireError, never another exception."""

from __future__ import annotations

import pickle

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from crawlspace.distributed import wire

MESSAGES: list[wire.Message] = [
    wire.UrlBatch(2, 17, [("http://a.test/", 1, 0), ("http://b.test/x?é", 3, 2)]),
    wire.UrlBatch(0, 1, [], forward=True),
    wire.Ack(1, [2**40, 3]),
    wire.ContentQuestion(1, 5, 2**64 - 1, "http://a.test/", 1.7e9),
    wire.ContentAnswer(5, "http://b.test/", 1.5),
    wire.ContentSettle(123, "http://a.test/", False),
    wire.NearQuestion(2, 8, "http://a.test/é", 1.7e9, 1.7e9 + 1, bytes(range(256)), [(0, 2**64 - 1), (15, 3)]),
    wire.NearAnswer(8, ("http://b.test/", 1.5, 0.875)),
    wire.NearAnswer(9, None),
    wire.ProbeReply(9, 2, True, 100, 99),
    wire.Stop("max-seconds", 1),
    wire.HandoverPart(2, 7, b"\x00\xff" * 100),
    wire.HandoverAck(0, [1, 2**40]),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda message: type(message).__name__)
def test_every_message_round_trips_with_its_type(message: wire.Message) -> None:
    data = wire.encode([message])
    assert wire.decode(data) == [message]
    assert type(wire.decode_one(data, type(message))) is type(message)
    assert wire.decode(bytearray(data)) == wire.decode(memoryview(data)) == [message]


def test_one_unit_carries_several_messages_in_order() -> None:
    assert wire.decode(wire.encode(MESSAGES)) == MESSAGES
    with pytest.raises(wire.WireError, match="expected one Stop message, got Ack, Stop"):
        wire.decode_one(wire.encode([wire.Ack(1, [2]), wire.Stop("x", 1)]), wire.Stop)


def test_the_version_comes_first_and_another_version_is_refused() -> None:
    data = wire.encode([wire.Ack(1, [2])])
    assert msgspec.msgpack.decode(data)[0] == wire.VERSION
    later = msgspec.msgpack.encode([wire.VERSION + 1, [["ack", 1, [2]]]])
    with pytest.raises(wire.WireError, match="version 2"):
        wire.decode(later)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\xc1",  # never used in msgpack
        b"garbage that is not msgpack at all",
        msgspec.msgpack.encode({"v": 1}),
        msgspec.msgpack.encode([1]),
        msgspec.msgpack.encode([1, []]),  # no message
        msgspec.msgpack.encode([1, ["ack", 1, [2]]]),  # a message, not a list of them
        msgspec.msgpack.encode([1, [["nope", 1]]]),  # an unknown kind
        msgspec.msgpack.encode([1, [["ack", "one", [2]]]]),  # a field of the wrong type
        msgspec.msgpack.encode([1, [["ack", 1]]]),  # a field missing
        msgspec.msgpack.encode([1, [["urls", 1, 2, [["http://a/", "deep", 0]]]]]),
        msgspec.msgpack.encode([1, [["ack", 1, [2]], ["stop"]]]),  # one bad message spoils the unit
        msgspec.msgpack.encode([1, [["cq", 1, 2, -1, "u", 0.0]]])[:-3],  # truncated
        pickle.dumps([wire.Ack(1, [2])]),  # never unpickled
    ],
)
def test_malformed_or_foreign_bytes_raise_wire_error(data: bytes) -> None:
    with pytest.raises(wire.WireError):
        wire.decode(data)


def test_a_message_of_another_kind_than_expected_is_refused() -> None:
    with pytest.raises(wire.WireError, match="expected one Stop message, got Ack"):
        wire.decode_one(wire.encode([wire.Ack(1, [2])]), wire.Stop)


def test_an_oversized_message_is_refused_before_decoding() -> None:
    with pytest.raises(wire.WireError, match="bytes"):
        wire.decode(b"\x00" * (wire.MAX_MESSAGE + 1))


@given(st.binary(max_size=200))
def test_no_input_raises_anything_but_wire_error(data: bytes) -> None:
    try:
        wire.decode(data)
    except wire.WireError:
        pass
