"""A TCP proxy between one node and the test's redis-server that can hold a node's stream writes from a
chosen moment on: a kill "after the node has done X but before its writes reach Redis" without a race
against the node's own speed.

`CLIENT PAUSE WRITE` cannot do it: it pauses every client, so it must be issued after the node's last
write that has to pass (the resize barrier's SADD) and before the first that must not (the URL batches'
XADD), a window of a few milliseconds that a test polling from outside misses under load (CI lost it
once). The proxy sees the node's commands: once a client-to-server chunk carrying every part of
`trigger` (a command's name and its key, say) has passed, the first chunk on a connection that carries
an XADD is held, with everything after it on that connection; reads and other connections go on.
Held bytes are never delivered: the test kills the node.
"""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass, field

from tests.distributed.redis_server import free_port

OVERLAP = 64  # bytes of the previous chunk kept, so that a command name cut by a chunk's end is still seen


@dataclass
class HoldingProxy:
    upstream_port: int
    trigger: tuple[bytes, ...]
    port: int = field(default_factory=free_port)
    triggered: threading.Event = field(default_factory=threading.Event)
    held_chunks: int = 0
    _listener: socket.socket | None = None
    _sockets: list[socket.socket] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def url(self, password: str) -> str:
        return f"redis://:{password}@127.0.0.1:{self.port}/0"

    def start(self) -> None:
        listener = socket.create_server(("127.0.0.1", self.port))
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def close(self) -> None:
        with self._lock:
            sockets, self._sockets = self._sockets, []
        if self._listener is not None:
            self._listener.close()
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.upstream_port))
            with self._lock:
                self._sockets += [client, server]
            threading.Thread(target=self._commands, args=(client, server), daemon=True).start()
            threading.Thread(target=self._replies, args=(server, client), daemon=True).start()

    def _commands(self, source: socket.socket, target: socket.socket) -> None:
        tail = b""
        holding = False
        while True:
            try:
                chunk = source.recv(65536)
            except OSError:
                return
            if not chunk:
                return
            seen = (tail + chunk).upper()
            tail = chunk[-OVERLAP:]
            if not holding and self.triggered.is_set() and b"XADD" in seen:
                holding = True
            if holding:
                self.held_chunks += 1
                continue
            if all(part.upper() in seen for part in self.trigger):
                self.triggered.set()
            try:
                target.sendall(chunk)
            except OSError:
                return

    @staticmethod
    def _replies(source: socket.socket, target: socket.socket) -> None:
        while True:
            try:
                chunk = source.recv(65536)
                if not chunk:
                    return
                target.sendall(chunk)
            except OSError:
                return
