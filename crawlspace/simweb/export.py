"""Export of a web as static files behind nginx, for throughput benchmarks of the crawler.

The Python server is cheap, but a benchmark of a fast crawler wants a server that costs next
to nothing: nginx serving files. Every 200 body is written under `hosts/<name>/<path>`
(`/` as `index.html`), and `nginx.conf` has one server block per host listening on the host's
own address; redirects, 5xx URLs and 5xx robots.txt are `return` rules. Not exported: the
trap's calendar (it is infinite), latency and bandwidth.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from crawlspace.simweb.model import ExtraKind

_TEMP_PATHS = ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
"""nginx's temporary directories, kept inside the export so that it runs without root's /var/lib/nginx."""

NGINX_LOG_FORMAT = "\\t".join(
    [
        "$msec",
        "$request_time",
        "$connection",
        "$server_addr",
        "$host",
        "$request_uri",
        "$status",
        "$body_bytes_sent",
        "$request_method",
    ]
)
"""The access log as the fields of `LogEntry`: nginx logs the end time and the duration, not the arrival."""

if TYPE_CHECKING:
    from crawlspace.simweb.generator import SimWeb


def export_static(web: SimWeb, directory: str | Path, octet: int = 1) -> Path:
    """Write files, `hosts` (a hosts file) and `nginx.conf` under `directory`; return the config's path."""
    data = web.data
    directory = Path(directory).resolve()
    servers: list[str] = []
    for index, name in enumerate(web.hosts):
        root = directory / "hosts" / name
        root.mkdir(parents=True, exist_ok=True)
        rules: list[str] = []
        robots_status, robots_body = web.robots_txt(name)
        if robots_status == 200:
            (root / "robots.txt").write_text(robots_body)
        elif robots_status >= 500:
            rules.append(f"        location = /robots.txt {{ return {robots_status}; }}\n")
        for path, node in sorted(web.routes(index).items()):
            status = data.status_of(node)
            if status == 200:
                target = root / ("index.html" if path == "/" else path.lstrip("/"))
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(web.renderer.node_response(node).body)
            elif node >= data.pages and data.extra_kind[node - data.pages] == ExtraKind.REDIRECT:
                location = data.url_of(int(data.extra_target[node - data.pages]))
                rules.append(f"        location = {path} {{ return {status} {location}; }}\n")
            elif status >= 500:
                rules.append(f"        location = {path} {{ return {status}; }}\n")
        servers.append(
            "    server {\n"
            f"        listen {web.host_ip(name, octet)}:{web.config.port};\n"
            f"        server_name {name};\n"
            f"        root {root};\n"
            "        index index.html;\n"
            "        default_type text/html;\n" + "".join(rules) + "    }\n"
        )
    (directory / "tmp").mkdir(exist_ok=True)
    (directory / "hosts.txt").write_text(web.hosts_file_text(octet))
    config = directory / "nginx.conf"
    config.write_text(
        "worker_processes 1;\n"
        f"pid {directory / 'nginx.pid'};\n"
        f"error_log {directory / 'error.log'};\n"
        "events { worker_connections 16384; }\n"
        "http {\n"
        f"    log_format crawl '{NGINX_LOG_FORMAT}';\n"
        f"    access_log {directory / 'access.log'} crawl buffer=256k flush=1s;\n"
        "    keepalive_requests 1000000;\n"
        "    server_names_hash_max_size 131072;\n"
        "    server_names_hash_bucket_size 128;\n"
        "    sendfile on;\n"
        "    types { text/html html; text/plain txt; }\n"
        + "".join(f"    {kind}_temp_path {directory / 'tmp' / kind};\n" for kind in _TEMP_PATHS)
        + "".join(servers)
        + "}\n"
    )
    return config
