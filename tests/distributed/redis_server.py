"""A redis-server of the test's own: a free loopback port, a temporary directory, AOF on (`appendonly yes`,
`appendfsync everysec`, what the how-to asks of a cluster's server), ended by its PID. Never the
system's service. `kill` (SIGKILL) and `start` again on the same directory is a crash and restart.

The binary: $CRAWLSPACE_REDIS_SERVER (set by .ci/run), else redis-server on PATH or /usr/bin.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path


def redis_server_binary() -> str | None:
    configured = os.environ.get("CRAWLSPACE_REDIS_SERVER")
    if configured:
        return configured
    found = shutil.which("redis-server")
    return found or ("/usr/bin/redis-server" if os.path.exists("/usr/bin/redis-server") else None)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class RedisServer:
    directory: Path
    password: str = "s3cret-pw"
    port: int = field(default_factory=free_port)
    tls: tuple[Path, Path, Path] | None = None  # (CA, server certificate, server key): rediss:// on `port`
    unix_socket: bool = False  # also listen on DIR/redis.sock (`unix_url`: one machine without TCP)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        scheme = "rediss" if self.tls else "redis"
        query = f"?ssl_ca_certs={self.tls[0]}" if self.tls else ""
        return f"{scheme}://:{self.password}@127.0.0.1:{self.port}/0{query}"

    @property
    def unix_url(self) -> str:
        return f"unix://:{self.password}@{self.directory / 'redis.sock'}?db=0"

    def start(self, timeout: float = 20.0) -> None:
        binary = redis_server_binary()
        assert binary, "redis-server is not installed (.ci/run installs Debian's)"
        self.directory.mkdir(parents=True, exist_ok=True)
        args = [
            binary, "--bind", "127.0.0.1", "--dir", str(self.directory), "--appendonly", "yes",
            "--appendfsync", "everysec", "--save", "", "--requirepass", self.password, "--daemonize", "no",
            "--logfile", str(self.directory / "redis.log"),
        ]  # fmt: skip
        if self.unix_socket:
            args += ["--unixsocket", str(self.directory / "redis.sock"), "--unixsocketperm", "700"]
        if self.tls:
            ca, cert, key = self.tls
            args += ["--port", "0", "--tls-port", str(self.port), "--tls-cert-file", str(cert),
                     "--tls-key-file", str(key), "--tls-ca-cert-file", str(ca), "--tls-auth-clients", "no"]  # fmt: skip
        else:
            args += ["--port", str(self.port)]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process.poll() is None, (self.directory / "redis.log").read_text(errors="replace")[-2000:]
            if self._answers():
                return
            time.sleep(0.05)
        raise AssertionError(f"redis-server did not start on port {self.port}")

    def _answers(self) -> bool:
        import redis

        client = redis.Redis.from_url(self.url, socket_timeout=1, socket_connect_timeout=1)
        try:
            return bool(client.ping())
        except (redis.exceptions.RedisError, OSError):
            return False
        finally:
            client.close()

    def kill(self) -> None:
        """SIGKILL, by its PID: what the last second of AOF writes survives is the server's business."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
