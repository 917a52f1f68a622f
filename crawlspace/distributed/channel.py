"""Framed messages between partitions over an asyncio stream (a socketpair between processes).

A frame is a 4-byte big-endian length and a msgpack body (msgspec). Writes are buffered by the
transport, so a sender never blocks the event loop on a slow peer; reads are one task per peer.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from typing import Any

import msgspec

_LENGTH = struct.Struct(">I")
MAX_FRAME = 256 * 1024 * 1024


class ChannelClosed(Exception):
    pass


class Channel:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._encoder = msgspec.msgpack.Encoder()
        self._decoder = msgspec.msgpack.Decoder()

    @classmethod
    async def over(cls, sock: socket.socket) -> Channel:
        sock.setblocking(False)
        reader, writer = await asyncio.open_connection(sock=sock, limit=MAX_FRAME)
        return cls(reader, writer)

    def send(self, message: list[Any]) -> None:
        if self._writer.is_closing():
            raise ChannelClosed("peer channel closed")
        body = self._encoder.encode(message)
        self._writer.write(_LENGTH.pack(len(body)) + body)

    async def receive(self) -> list[Any]:
        try:
            header = await self._reader.readexactly(_LENGTH.size)
            (length,) = _LENGTH.unpack(header)
            if length > MAX_FRAME:
                raise ChannelClosed(f"frame of {length} bytes")
            body = await self._reader.readexactly(length)
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            raise ChannelClosed(str(exc)) from None
        message = self._decoder.decode(body)
        if not isinstance(message, list) or not message:
            raise ChannelClosed(f"malformed message {message!r:.80}")
        return message

    async def drain(self) -> None:
        if not self._writer.is_closing():
            await self._writer.drain()

    def close(self) -> None:
        self._writer.close()
