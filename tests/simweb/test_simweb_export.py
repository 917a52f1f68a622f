"""Static export: files and an nginx config that serve the same bytes (checked with nginx when one is at hand)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from crawlspace.simweb import SimWeb, SimWebConfig, read_nginx_log
from crawlspace.simweb.export import export_static

NGINX = os.environ.get("CRAWLSPACE_NGINX") or shutil.which("nginx")
OCTET = 247  # outside the octets SimServer picks (16..239)


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[SimWeb, Path]:
    web = SimWeb.generate(SimWebConfig(hosts=12, seed=4, port=18080))
    directory = tmp_path_factory.mktemp("export")
    return web, export_static(web, directory, OCTET)


def test_files_and_config(exported: tuple[SimWeb, Path]) -> None:
    web, config = exported
    root = config.parent / "hosts"
    text = config.read_text()
    assert text.count("server {") == len(web.hosts)
    for url, status in web.all_urls().items():
        host, path = url.split("/")[2].split(":")[0], "/" + url.split("/", 3)[3]
        file = root / host / ("index.html" if path == "/" else path.lstrip("/"))
        assert file.exists() is (status == 200), url
        if status == 200:
            assert file.read_bytes() == web.body(url)
        elif status in (301, 302, 307, 308):
            assert f"location = {path} {{ return {status} {web.redirect_target(url)}; }}" in text
    assert (config.parent / "hosts.txt").read_text() == web.hosts_file_text(OCTET)


@pytest.mark.skipif(NGINX is None, reason="no nginx binary (set CRAWLSPACE_NGINX to one)")
def test_nginx_serves_the_export(exported: tuple[SimWeb, Path]) -> None:
    web, config = exported
    assert NGINX is not None
    directives = "daemon off; user root;" if os.geteuid() == 0 else "daemon off;"
    process = subprocess.Popen(
        [NGINX, "-c", str(config), "-p", str(config.parent), "-g", directives], stderr=subprocess.PIPE
    )
    requested: list[tuple[str, str, int]] = []
    try:
        urls = web.all_urls()
        for url in [*web.seeds(3), *[u for u, s in urls.items() if s != 200 and s != 404][:6]]:
            host = url.split("/")[2].split(":")[0]
            path = "/" + url.split("/", 3)[3]
            reply = _get(web.host_ip(host, OCTET), web.config.port, host, path)
            assert reply.startswith(f"HTTP/1.1 {urls[url]} ".encode()), (url, reply[:200])
            requested.append((host, path, urls[url]))
            if urls[url] == 200:
                assert reply.endswith(web.body(url))
    finally:
        process.terminate()
        process.wait(10)
    logged = read_nginx_log(config.parent / "access.log")
    assert [(entry.host, entry.path, entry.status) for entry in logged] == requested
    assert all(entry.arrived <= entry.finished for entry in logged)


def _get(ip: str, port: int, host: str, path: str) -> bytes:
    deadline = time.monotonic() + 5
    while True:
        try:
            connection = socket.create_connection((ip, port), timeout=5)
            break
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    with connection:
        connection.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        chunks = []
        while chunk := connection.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)
