"""The server over real loopback sockets: statuses, keep-alive, pipelining, virtual hosting, the log."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import aiohttp
import pytest
from click.testing import CliRunner

from crawlspace.simweb import SimWeb, SimWebConfig
from crawlspace.simweb.cli import simweb
from crawlspace.simweb.server import SimServer, default_port, new_event_loop, read_log, serve_in_background

T = TypeVar("T")
PORT = default_port()


def run(function: Callable[[], Awaitable[T]]) -> T:
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(function())  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def small() -> SimWeb:
    return SimWeb.generate(SimWebConfig(hosts=30, seed=5, shared_ip_hosts=3, port=PORT))


class Reply:
    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body


async def read_reply(reader: asyncio.StreamReader, head_only: bool = False) -> Reply:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines[1:] if line)}
    body = b"" if head_only else await reader.readexactly(int(headers["content-length"]))
    return Reply(status, headers, body)


def request(host: str, path: str, method: str = "GET", extra: str = "") -> bytes:
    return f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: test\r\n{extra}\r\n".encode()


def path_of(url: str) -> str:
    return "/" + url.split("/", 3)[3]


def test_every_status_over_http(small: SimWeb, tmp_path: Path) -> None:
    urls = small.all_urls()
    by_status: dict[int, list[str]] = {}
    for url, status in urls.items():
        by_status.setdefault(status, []).append(url)
    sample = [group[0] for group in by_status.values()] + small.seeds(3)
    trap = small.trap_host
    assert trap is not None

    async def scenario() -> None:
        server = SimServer(small, log_path=tmp_path / "log.tsv")
        await server.start()
        try:
            for url in sample:
                host = url.split("/")[2].split(":")[0]
                reader, writer = await asyncio.open_connection(server.host_address[small.host_index(host)], PORT)
                writer.write(request(host, path_of(url)) + request(host, "/robots.txt"))
                reply = await read_reply(reader)
                assert reply.status == urls[url], url
                if reply.status == 200:
                    assert reply.body == small.body(url)
                if 300 <= reply.status < 400:
                    assert reply.headers["location"]
                robots = await read_reply(reader)
                assert robots.status == small.robots_status(host)
                assert robots.body.decode() == small.robots_txt(host)[1] or robots.status != 200
                writer.close()
            reader, writer = await asyncio.open_connection(server.host_address[small.host_index(trap)], PORT)
            writer.write(request(trap, "/cal/2031/02/") + request(trap, "/cal/2031/13/"))
            assert (await read_reply(reader)).status == 200
            assert (await read_reply(reader)).status == 404
            writer.close()
        finally:
            await server.stop()

    run(scenario)


def test_keep_alive_pipelining_and_the_log(small: SimWeb, tmp_path: Path) -> None:
    log = tmp_path / "requests.tsv"
    host = small.hosts[0]
    pages = [path_of(url) for url in list(small.all_urls())[:3] if url.startswith(small.origin(host))]

    async def scenario() -> str:
        server = SimServer(small, log_path=log)
        await server.start()
        address = server.host_address[0]
        try:
            reader, writer = await asyncio.open_connection(address, PORT)
            writer.write(b"".join(request(host, path) for path in pages))  # pipelined
            for path in pages:
                assert (await read_reply(reader)).body == small.body(small.origin(host) + path)
            writer.write(request(host, "/", extra="Connection: close\r\n"))
            await read_reply(reader)
            assert await reader.read() == b""  # the server closed the connection
            reader, writer = await asyncio.open_connection(address, PORT)
            writer.write(request(host, "/", method="HEAD"))
            head = await read_reply(reader, head_only=True)
            assert int(head.headers["content-length"]) == len(small.body(small.origin(host) + "/"))
            writer.close()
            await asyncio.sleep(0.05)
        finally:
            await server.stop()
        return address

    address = run(scenario)
    entries = read_log(log)
    assert [entry.path for entry in entries] == [*pages, "/", "/"]
    assert len({entry.connection for entry in entries[:4]}) == 1
    assert entries[4].connection != entries[0].connection
    assert entries[4].method == "HEAD" and entries[4].bytes == 0
    assert all(entry.server_ip == address and entry.host == host and entry.status == 200 for entry in entries)
    assert all(entry.arrived <= entry.finished <= time.time() for entry in entries)
    assert entries[0].bytes == len(small.body(small.origin(host) + pages[0]))


def test_virtual_hosting(small: SimWeb) -> None:
    addresses: dict[str, list[str]] = {}
    for name in small.hosts:
        addresses.setdefault(small.host_ip(name, 1), []).append(name)
    shared = next(names for names in addresses.values() if len(names) > 1)
    alone = next(names[0] for names in addresses.values() if len(names) == 1)
    tilde = next(url for url in small.all_urls() if "/~user/" in url)
    tilde_host = tilde.split("/")[2]

    async def scenario() -> None:
        server = SimServer(small)
        await server.start()
        try:
            ip = server.host_address[small.host_index(shared[0])]
            reader, writer = await asyncio.open_connection(ip, PORT)
            for name in shared:  # several hosts behind one address
                writer.write(request(name, "/"))
                assert (await read_reply(reader)).body == small.body(small.origin(name) + "/")
            writer.write(request(alone, "/"))  # a host that lives on another address
            assert (await read_reply(reader)).status == 421
            writer.write(request("nowhere.test", "/"))
            assert (await read_reply(reader)).status == 404
            writer.write(request(shared[0].upper() + f":{PORT}", "/"))
            assert (await read_reply(reader)).status == 200
            writer.write(request(shared[0], "/", method="POST", extra="Content-Length: 4\r\n") + b"abcd")
            assert (await read_reply(reader)).status == 405
            writer.write(f"GET http://{shared[0]}/ HTTP/1.1\r\nHost: x\r\n\r\n".encode())  # absolute form
            assert (await read_reply(reader)).status == 200
            writer.close()
            reader, writer = await asyncio.open_connection(server.host_address[small.host_index(tilde_host)], PORT)
            writer.write(request(tilde_host, path_of(tilde).replace("~", "%7E").replace("/p", "/%70")))
            assert (await read_reply(reader)).body == small.body(tilde)
            writer.write(b"garbage\r\n\r\n")
            assert (await read_reply(reader)).status == 400
            writer.close()
        finally:
            await server.stop()

    run(scenario)


def test_latency_and_bandwidth(tmp_path: Path) -> None:
    slow = SimWeb.generate(SimWebConfig(hosts=3, seed=1, latency=0.1, bandwidth=200_000, port=PORT))
    host = slow.hosts[0]

    async def scenario() -> float:
        server = SimServer(slow, log_path=tmp_path / "log.tsv")
        await server.start()
        try:
            reader, writer = await asyncio.open_connection(server.host_address[0], PORT)
            started = time.perf_counter()
            writer.write(request(host, "/") + request(host, "/robots.txt"))
            assert (await read_reply(reader)).body == slow.body(slow.origin(host) + "/")
            await read_reply(reader)
            writer.close()
            return time.perf_counter() - started
        finally:
            await server.stop()

    elapsed = run(scenario)
    size = len(slow.body(slow.origin(slow.hosts[0]) + "/"))
    expected = 2 * slow.latency(host) + size / slow.bandwidth(host)
    assert elapsed >= 0.8 * expected
    entries = read_log(tmp_path / "log.tsv")
    assert entries[0].finished - entries[0].arrived >= slow.latency(host)


def test_servers_side_by_side_take_different_octets(small: SimWeb) -> None:
    async def scenario() -> tuple[int, int]:
        first, second = SimServer(small), SimServer(small)
        await first.start()
        await second.start()
        try:
            return first.octet, second.octet
        finally:
            await first.stop()
            await second.stop()

    a, b = run(scenario)
    assert a != b


def test_serve_in_background(small: SimWeb, tmp_path: Path) -> None:
    with serve_in_background(small, tmp_path, seeds=4) as running:
        assert running.seeds == small.seeds(4)
        assert running.seeds_file.read_text().split() == running.seeds
        assert running.hosts_file.read_text() == small.hosts_file_text(running.octet)
        host = small.hosts[1]

        async def fetch() -> tuple[int, bytes]:
            async with aiohttp.ClientSession() as session:
                url = f"http://{running.host_ip(host)}:{running.port}/"
                async with session.get(url, headers={"Host": host}) as response:
                    return response.status, await response.read()

        status, body = asyncio.run(fetch())
        assert status == 200 and body == small.body(small.origin(host) + "/")
    assert running.process.returncode == 0
    entries = running.read_log()
    assert [(entry.host, entry.path, entry.status) for entry in entries] == [(host, "/", 200)]


def test_cli_truth() -> None:
    result = CliRunner().invoke(simweb, ["truth", "--hosts", "20", "--seed", "3", "--seeds", "3"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    web = SimWeb.generate(SimWebConfig(hosts=20, seed=3))
    assert summary["fingerprint"] == web.fingerprint()
    assert summary["expected_fetches"] == len(web.expected_fetches(web.seeds(3)))
    assert summary["seeds"] == web.seeds(3)
    bad = CliRunner().invoke(simweb, ["truth", "--hosts", "0"])
    assert bad.exit_code != 0 and "hosts" in bad.output
