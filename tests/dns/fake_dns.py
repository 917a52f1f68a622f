"""A scripted DNS server on loopback UDP, so resolver tests never leave the machine.

Each name gets a behaviour: answer with addresses and a TTL, NXDOMAIN, SERVFAIL, no data, or
silence (the client times out). Every query is counted per name, so tests can assert from the
server's side how often the resolver really asked.
"""

from __future__ import annotations

import ipaddress
import socket
import struct
import threading
from collections import Counter
from dataclasses import dataclass, field

QTYPE_A, QTYPE_AAAA = 1, 28
RCODE_NOERROR, RCODE_SERVFAIL, RCODE_NXDOMAIN = 0, 2, 3


@dataclass
class Behaviour:
    kind: str = "answer"  # answer | nxdomain | servfail | drop
    addresses: list[str] = field(default_factory=list)
    ttl: int = 300


class FakeDNS:
    def __init__(self) -> None:
        self.names: dict[str, Behaviour] = {}
        self.queries: Counter[str] = Counter()  # name -> queries received (A and AAAA both count)
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.settimeout(0.1)
        self.address = f"127.0.0.1:{self._sock.getsockname()[1]}"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="fake-dns", daemon=True)

    def set(self, name: str, kind: str = "answer", addresses: list[str] | None = None, ttl: int = 300) -> None:
        self.names[name.lower()] = Behaviour(kind, addresses or [], ttl)

    def __enter__(self) -> FakeDNS:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sock.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                packet, peer = self._sock.recvfrom(4096)
            except TimeoutError:
                continue
            except OSError:
                return
            reply = self._reply(packet)
            if reply is not None:
                self._sock.sendto(reply, peer)

    def _reply(self, packet: bytes) -> bytes | None:
        query_id, flags = struct.unpack("!HH", packet[:4])
        labels, offset = [], 12
        while packet[offset]:
            length = packet[offset]
            labels.append(packet[offset + 1 : offset + 1 + length].decode("ascii"))
            offset += 1 + length
        qtype, _qclass = struct.unpack("!HH", packet[offset + 1 : offset + 5])
        question = packet[12 : offset + 5]
        name = ".".join(labels).lower()
        self.queries[name] += 1
        behaviour = self.names.get(name, Behaviour("nxdomain"))
        if behaviour.kind == "drop":
            return None
        rcode = {"nxdomain": RCODE_NXDOMAIN, "servfail": RCODE_SERVFAIL}.get(behaviour.kind, RCODE_NOERROR)
        answers = []
        if behaviour.kind == "answer":
            for address in behaviour.addresses:
                ip = ipaddress.ip_address(address)
                if (ip.version == 4) != (qtype == QTYPE_A) or qtype not in (QTYPE_A, QTYPE_AAAA):
                    continue
                answers.append(struct.pack("!HHHIH", 0xC00C, qtype, 1, behaviour.ttl, len(ip.packed)) + ip.packed)
        reply_flags = 0x8000 | (flags & 0x7900) | 0x0400 | 0x0080 | rcode  # QR, opcode+RD, AA, RA
        header = struct.pack("!HHHHHH", query_id, reply_flags, 1, len(answers), 0, 0)
        return header + question + b"".join(answers)
