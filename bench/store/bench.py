"""Store benchmark: the page store (WARC + crawl table) against writing the same pages with warcio alone.

Every contender writes the same pre-built fetches (25 KB HTML pages with 20 links each, Zipf
text: see pages.py) into a fresh directory, in one process pinned to one core (RocksDB's
background threads included), in rounds that alternate the contenders; medians are reported.

    python bench/store/bench.py                  # 3000 pages x 3 rounds
    python bench/store/bench.py --pages 10000 --rounds 3

Part 1, the WARC writer on its own (request + response + metadata records per page, one gzip
member per record): crawlspace's writer (ISA-L level 1, and the same code on zlib level 6),
fastwarc (GzipWriter with finish() per record, zlib level 6) and warcio (its defaults).
Part 2, the whole store: `PageStore.record` per page (WARC records, title/content/fetch cells,
one anchor cell per link on the target's row, batched commits, CDXJ on close) against warcio
writing the WARC records alone. Prints pages/s, records/s, table cells/s, bytes per page.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import shutil
import statistics
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from fastwarc.stream_io import GzipWriter
from fastwarc.warc import WarcRecord, WarcRecordType
from pages import PageFactory
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

import crawlspace.store.warc as warc_module
from crawlspace.fetch import FetchResult, Outcome
from crawlspace.parse import Link, ParsedPage
from crawlspace.store.pagestore import PageStore, StoreOptions
from crawlspace.store.warc import WarcWriter, fetch_metadata

TARGET_PAGES_PER_SECOND = 3000


def build_fetches(count: int, size: int, links: int) -> list[tuple[FetchResult, ParsedPage]]:
    factory = PageFactory(seed=11, hosts=max(10, count // 50), pages_per_host=200)
    templates = factory.pages(min(count, 300), size=size, links=links)
    fetches = []
    started = time.time()
    for number in range(count):
        template = templates[number % len(templates)]
        url = factory.url(number % factory.hosts, number // factory.hosts)
        body = template.html[:-12] + f"<!--{number:06d}-->".encode()  # distinct payloads, same size
        result = FetchResult(
            url=url,
            outcome=Outcome.OK,
            status=200,
            reason="OK",
            headers=[
                ("Server", "bench"),
                ("Content-Type", "text/html; charset=utf-8"),
                ("Content-Length", str(len(body))),
                ("ETag", f'"{number:x}"'),
                ("Last-Modified", "Mon, 02 Mar 2026 10:00:00 GMT"),
            ],
            body=body,
            address="127.0.0.1",
            started=started + number * 0.001,
            duration=0.02,
            request_headers=[("User-Agent", "crawlspace-bench/0.1"), ("Accept", "*/*"), ("Accept-Encoding", "gzip")],
        )
        page = ParsedPage(
            title=template.title,
            raw_text=template.text,
            links=[Link(target, text, False) for target, text in template.links],
        )
        fetches.append((result, page))
    return fetches


def directory_bytes(path: Path) -> int:
    return sum(entry.stat().st_size for entry in path.rglob("*") if entry.is_file())


# -- contenders -----------------------------------------------------------------------------


def ours_warc(directory: Path, fetches: list[tuple[FetchResult, ParsedPage]], level: int = 1) -> int:
    writer = WarcWriter(directory, compression_level=level)
    for result, page in fetches:
        writer.write_exchange(result, metadata=fetch_metadata(result, outlinks=[link.url for link in page.links]))
    writer.close()
    return writer.records_written


def ours_warc_zlib6(directory: Path, fetches: list[tuple[FetchResult, ParsedPage]]) -> int:
    """The same writer with zlib level 6 in place of ISA-L: what hand serialization costs without isal."""
    real = warc_module.isal_zlib
    warc_module.isal_zlib = SimpleNamespace(  # type: ignore[assignment]
        compressobj=lambda level, method, wbits: zlib.compressobj(6, method, wbits), DEFLATED=zlib.DEFLATED
    )
    try:
        return ours_warc(directory, fetches)
    finally:
        warc_module.isal_zlib = real


def _http_head(result: FetchResult) -> bytes:
    lines = [f"HTTP/1.1 {result.status} {result.reason}"] + [f"{k}: {v}" for k, v in result.headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _request_head(result: FetchResult) -> bytes:
    lines = ["GET / HTTP/1.1", "Host: bench"] + [f"{k}: {v}" for k, v in result.request_headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def fastwarc_writer(directory: Path, fetches: list[tuple[FetchResult, ParsedPage]]) -> int:
    records = 0
    with open(directory / "fastwarc.warc.gz", "wb") as handle:
        stream = GzipWriter(handle, compression_level=6)
        for result, page in fetches:
            response = WarcRecord()
            response.init_headers(record_type=WarcRecordType.response)
            response.headers.append("WARC-Target-URI", result.url)
            response.headers.append("WARC-IP-Address", result.address or "")
            response.headers.append("Content-Type", "application/http;msgtype=response")
            response.set_bytes_content(_http_head(result) + result.body)
            response.is_http = True
            response.write(stream, checksum_data=True, payload_digest=hashlib.sha1(result.body).digest())
            stream.finish()
            response_id = response.record_id or ""
            request = WarcRecord()
            request.init_headers(record_type=WarcRecordType.request)
            request.headers.append("WARC-Target-URI", result.url)
            request.headers.append("WARC-Concurrent-To", response_id)
            request.headers.append("Content-Type", "application/http;msgtype=request")
            request.set_bytes_content(_request_head(result))
            request.write(stream, checksum_data=True)
            stream.finish()
            metadata = WarcRecord()
            metadata.init_headers(record_type=WarcRecordType.metadata)
            metadata.headers.append("WARC-Target-URI", result.url)
            metadata.headers.append("WARC-Concurrent-To", response_id)
            metadata.headers.append("Content-Type", "application/warc-fields")
            fields = fetch_metadata(result, outlinks=[link.url for link in page.links])
            metadata.set_bytes_content("".join(f"{k}: {v}\r\n" for k, v in fields).encode())
            metadata.write(stream, checksum_data=True)
            stream.finish()
            records += 3
        stream.close()
    return records


def warcio_writer(directory: Path, fetches: list[tuple[FetchResult, ParsedPage]]) -> int:
    records = 0
    with open(directory / "warcio.warc.gz", "wb") as handle:
        writer = WARCWriter(handle, gzip=True)
        for result, page in fetches:
            http_headers = StatusAndHeaders(f"{result.status} {result.reason}", result.headers, protocol="HTTP/1.1")
            response = writer.create_warc_record(
                result.url,
                "response",
                payload=io.BytesIO(result.body),
                http_headers=http_headers,
                warc_headers_dict={"WARC-IP-Address": result.address or ""},
            )
            request_headers = StatusAndHeaders("GET / HTTP/1.1", result.request_headers, is_http_request=True)
            request = writer.create_warc_record(
                result.url, "request", payload=io.BytesIO(b""), http_headers=request_headers
            )
            fields = fetch_metadata(result, outlinks=[link.url for link in page.links])
            metadata = writer.create_warc_record(
                result.url,
                "metadata",
                payload=io.BytesIO("".join(f"{k}: {v}\r\n" for k, v in fields).encode()),
                warc_content_type="application/warc-fields",
            )
            writer.write_request_response_pair(request, response)
            writer.write_record(metadata)
            records += 3
    return records


class StoreRun:
    """The whole page store; remembers the table cells and the bytes of each part for the report."""

    cells = 0
    warc_bytes = 0
    table_bytes = 0

    def __init__(self, *, store_text: bool = True) -> None:
        self.store_text = store_text

    def __call__(self, directory: Path, fetches: list[tuple[FetchResult, ParsedPage]]) -> int:
        store = PageStore(directory, StoreOptions(store_text=self.store_text))
        for number, (result, page) in enumerate(fetches):
            store.record(result, page=page, fingerprint=number, depth=1)
        store.close()
        self.cells = store.table.cells_written
        self.warc_bytes = directory_bytes(directory / "warc")
        self.table_bytes = directory_bytes(directory / "table")
        return store.warc.records_written


# -- harness --------------------------------------------------------------------------------


def measure(
    name: str, run: Callable[[Path, list[tuple[FetchResult, ParsedPage]]], int], fetches: list[Any], root: Path
) -> dict[str, float]:
    directory = Path(tempfile.mkdtemp(prefix=name + "-", dir=root))
    cpu = time.process_time()
    wall = time.perf_counter()
    records = run(directory, fetches)
    wall = time.perf_counter() - wall
    cpu = time.process_time() - cpu
    size = directory_bytes(directory)
    shutil.rmtree(directory)
    return {"wall": wall, "cpu": cpu, "records": records, "bytes": size}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=3000)
    parser.add_argument("--page-bytes", type=int, default=25_000)
    parser.add_argument("--links", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--all-cores", action="store_true", help="Do not pin the process to one core.")
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()), help="Scratch directory.")
    args = parser.parse_args()
    if not args.all_cores and hasattr(os, "sched_setaffinity"):
        core = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {core})
        print(f"pinned to core {core} (RocksDB's background threads too)")
    fetches = build_fetches(args.pages, args.page_bytes, args.links)
    raw = sum(len(result.body) for result, _ in fetches) / len(fetches)
    text = sum(len(page.text) for _, page in fetches) / len(fetches)
    print(f"{args.pages} pages of {raw / 1000:.1f} KB, {args.links} links each, {args.rounds} rounds, medians\n")
    store_run = StoreRun()
    contenders: list[tuple[str, Callable[..., int]]] = [
        ("crawlspace WARC writer (isal 1)", ours_warc),
        ("crawlspace WARC writer on zlib 6", ours_warc_zlib6),
        ("fastwarc (zlib 6, finish/record)", fastwarc_writer),
        ("warcio (defaults)", warcio_writer),
        ("page store: WARC + crawl table", store_run),
        ("page store, text left in the WARC", StoreRun(store_text=False)),
    ]
    results: dict[str, list[dict[str, float]]] = {name: [] for name, _ in contenders}
    for _ in range(args.rounds):
        for name, run in contenders:
            results[name].append(measure(name.split()[0], run, fetches, args.out))

    def median(name: str, key: str) -> float:
        return statistics.median(result[key] for result in results[name])

    warcio_rate = args.pages / median("warcio (defaults)", "wall")
    print(f"{'':36s} {'pages/s':>8s} {'pages/CPU-s':>11s} {'records/s':>10s} {'B/page':>7s} {'vs warcio':>9s}")
    for name, _ in contenders:
        wall = median(name, "wall")
        rate = args.pages / wall
        print(
            f"{name:36s} {rate:8.0f} {args.pages / median(name, 'cpu'):11.0f} {median(name, 'records') / wall:10.0f}"
            f" {median(name, 'bytes') / args.pages:7.0f} {rate / warcio_rate:8.2f}x"
        )
    print(
        f"\npage store: {store_run.cells / median('page store: WARC + crawl table', 'wall'):,.0f} table cells/s"
        f" ({store_run.cells / args.pages:.0f} per page);"
        f" bytes per page: WARC {store_run.warc_bytes / args.pages:,.0f},"
        f" table {store_run.table_bytes / args.pages:,.0f} (body {raw:,.0f}, text {text:,.0f})"
    )
    for name in ("page store: WARC + crawl table", "page store, text left in the WARC"):
        wall, cpu = median(name, "wall"), median(name, "cpu")
        verdict = "met" if args.pages / cpu >= TARGET_PAGES_PER_SECOND else "NOT met"
        print(
            f"{name}: {args.pages / wall:,.0f} pages/s wall, {args.pages / cpu:,.0f} pages per CPU-second"
            f" (target {TARGET_PAGES_PER_SECOND:,} on one core: {verdict})"
        )


if __name__ == "__main__":
    main()
