"""WARC files: valid for two independent readers, rolling, CDXJ on close, recovery of a torn tail."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fastwarc.warc import ArchiveIterator as FastIterator
from fastwarc.warc import WarcRecordType
from warcio.archiveiterator import ArchiveIterator as WarcioIterator

from crawlspace.fetch.body import BodyBuffer, SpilledBytes
from crawlspace.store import warc
from crawlspace.store.cdxj import CdxjIndex, cdxj_path, cdxj_timestamp
from crawlspace.store.warc import (
    REVISIT_PROFILE,
    Capture,
    WarcWriter,
    _uuid4_ids,
    fetch_metadata,
    iter_records,
    read_record,
    rebuild_indexes,
    sha1_digest,
    warc_date,
)
from tests.killing import kill_at_first_line
from tests.store.builders import fetch_result, html_page

PAGE = html_page("Hello", "Some words " * 200, [("/b", "to b"), ("http://other.test/", "other")])


def write_sample(directory: Path, pages: int = 3, **options: object) -> tuple[WarcWriter, list[Capture]]:
    writer = WarcWriter(directory, **options)  # type: ignore[arg-type]
    captures = []
    for number in range(pages):
        result = fetch_result(f"http://www.example.test/p{number}", PAGE + str(number).encode())
        captures.append(writer.write_exchange(result, metadata=fetch_metadata(result, outlinks=["http://x.test/"])))
    duplicate = fetch_result("http://www.example.test/copy", PAGE + b"0")
    original = captures[0]
    captures.append(
        writer.write_revisit(
            duplicate, "http://www.example.test/p0", original.date, original=original, metadata=[("k", "v")]
        )
    )
    writer.close()
    return writer, captures


def warc_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.warc.gz"))


def test_records_read_back_with_warcio(tmp_path: Path) -> None:
    write_sample(tmp_path)
    (path,) = warc_files(tmp_path)
    records = []
    blocks = []
    with open(path, "rb") as handle:
        for record in WarcioIterator(handle, check_digests=True):
            records.append(record)
            blocks.append(record.content_stream().read())
    types = [record.rec_type for record in records]
    assert types[0] == "warcinfo"
    assert types[1:] == ["response", "request", "metadata"] * 3 + ["revisit", "request", "metadata"]
    by_id = {record.rec_headers.get_header("WARC-Record-ID"): record for record in records}
    warcinfo_id = records[0].rec_headers.get_header("WARC-Record-ID")
    for record in records[1:]:
        headers = record.rec_headers
        assert headers.get_header("WARC-Warcinfo-ID") == warcinfo_id
        assert headers.get_header("WARC-Target-URI").startswith("http://www.example.test/")
        assert headers.get_header("WARC-IP-Address") == "127.0.0.1"
        assert headers.get_header("WARC-Date").endswith("Z")
        assert headers.get_header("WARC-Block-Digest").startswith("sha1:")
        if record.rec_type in ("request", "metadata"):
            main = by_id[headers.get_header("WARC-Concurrent-To")]
            assert main.rec_type in ("response", "revisit")
            assert main.rec_headers.get_header("WARC-Target-URI") == headers.get_header("WARC-Target-URI")
    response = records[1]
    assert response.http_headers.get_statuscode() == "200"
    assert response.rec_headers.get_header("WARC-Payload-Digest") == sha1_digest(PAGE + b"0")
    assert blocks[1] == PAGE + b"0"
    metadata = blocks[3].decode()
    assert "outlink: http://x.test/" in metadata and "fetch-duration-ms: 12.0" in metadata
    revisit = records[10].rec_headers
    assert revisit.get_header("WARC-Profile") == REVISIT_PROFILE
    assert revisit.get_header("WARC-Refers-To") == records[1].rec_headers.get_header("WARC-Record-ID")
    assert revisit.get_header("WARC-Refers-To-Target-URI") == "http://www.example.test/p0"
    assert revisit.get_header("WARC-Refers-To-Date") == records[1].rec_headers.get_header("WARC-Date")
    assert revisit.get_header("WARC-Payload-Digest") == sha1_digest(PAGE + b"0")


def test_digests_verify_with_fastwarc(tmp_path: Path) -> None:
    write_sample(tmp_path)
    (path,) = warc_files(tmp_path)
    block_checked = 0
    for record in FastIterator(open(path, "rb"), parse_http=False):  # noqa: SIM115
        assert record.verify_block_digest(), record.record_id
        block_checked += 1
    payload_checked = 0
    for record in FastIterator(open(path, "rb"), parse_http=True, record_types=WarcRecordType.response):  # noqa: SIM115
        assert record.verify_payload_digest(), record.record_id
        payload_checked += 1
    assert block_checked == 13 and payload_checked == 3


def test_warcio_check_is_clean(tmp_path: Path) -> None:
    write_sample(tmp_path)
    (path,) = warc_files(tmp_path)
    check = subprocess.run(
        [sys.executable, "-m", "warcio.cli", "check", "-v", str(path)], capture_output=True, text=True, timeout=60
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.count("digest pass") == 12
    assert "fail" not in check.stdout


def test_each_record_is_one_gzip_member_readable_at_its_offset(tmp_path: Path) -> None:
    _, captures = write_sample(tmp_path)
    for capture in captures:
        record = read_record(tmp_path / capture.filename, capture.offset, capture.length)
        assert record.headers["warc-record-id"] == capture.record_id
        assert record.headers["warc-date"] == capture.date
    status, headers, body = read_record(tmp_path / captures[1].filename, captures[1].offset).http_parts()
    assert status == 200 and headers["content-type"].startswith("text/html") and body == PAGE + b"1"


def test_header_values_cannot_inject_fields(tmp_path: Path) -> None:
    writer = WarcWriter(tmp_path)
    result = fetch_result("http://evil.test/", b"x")
    result.address = "127.0.0.1\r\nWARC-Type: resource"
    writer.write_exchange(result)
    writer.close()
    (path,) = warc_files(tmp_path)
    with open(path, "rb") as handle:
        types = [record.rec_type for record in WarcioIterator(handle)]
    assert types == ["warcinfo", "response", "request"]


def test_metadata_values_cannot_forge_fields(tmp_path: Path) -> None:
    writer = WarcWriter(tmp_path)
    result = fetch_result("http://evil.test/", b"x")
    writer.write_exchange(result, metadata=[("outlink", "http://a.test/\r\nforged: yes"), ("via", "ok")])
    writer.close()
    (path,) = warc_files(tmp_path)
    metadata = next(record for record in iter_records(path) if record.type == "metadata")
    assert metadata.block == b"outlink: http://a.test/  forged: yes\r\nvia: ok\r\n"


def test_revisit_refuses_a_different_payload(tmp_path: Path) -> None:
    writer = WarcWriter(tmp_path)
    original = writer.write_exchange(fetch_result("http://a.test/", b"one"))
    with pytest.raises(ValueError, match="payload digest"):
        writer.write_revisit(fetch_result("http://b.test/", b"two"), "http://a.test/", original.date, original=original)
    writer.close()


def test_a_revisit_by_uri_and_date_alone_reads_back_with_both_readers(tmp_path: Path) -> None:
    """The original fetched by another process of the crawl: no record id to name (WARC-Refers-To is
    optional), the target URI and date identify it (WARC/1.1 §6.7.2)."""
    writer = WarcWriter(tmp_path)
    original = writer.write_exchange(fetch_result("http://a.test/", PAGE, started=1e9))
    writer.write_revisit(fetch_result("http://b.test/copy", PAGE, started=1e9 + 5), "http://a.test/", warc_date(1e9))
    writer.close()
    (path,) = warc_files(tmp_path)
    with open(path, "rb") as handle:
        (revisit,) = [r for r in WarcioIterator(handle, check_digests=True) if r.rec_type == "revisit"]
    headers = revisit.rec_headers
    assert headers.get_header("WARC-Refers-To") is None
    assert headers.get_header("WARC-Refers-To-Target-URI") == "http://a.test/"
    assert headers.get_header("WARC-Refers-To-Date") == original.date == "2001-09-09T01:46:40.000000Z"
    assert headers.get_header("WARC-Payload-Digest") == original.payload_digest
    assert revisit.http_headers.get_statuscode() == "200"
    with open(path, "rb") as handle:
        read = 0
        for fast in FastIterator(handle, record_types=WarcRecordType.revisit, parse_http=False):
            assert fast.verify_block_digest()
            assert fast.headers["WARC-Refers-To-Date"] == original.date
            read += 1
    assert read == 1


def test_files_roll_by_size_and_names_sort_by_time(tmp_path: Path) -> None:
    writer = WarcWriter(tmp_path, max_file_bytes=4000, prefix="job")
    for number in range(12):
        writer.write_exchange(fetch_result(f"http://www.example.test/{number}", os.urandom(1500)), metadata=[])
    writer.close()
    files = warc_files(tmp_path)
    assert len(files) >= 4
    assert files == writer.files  # creation order is name order
    for path in files:
        assert path.name.startswith("job-") and f"-{os.getpid()}~" in path.name
        assert cdxj_path(path).exists()
        with open(path, "rb") as handle:
            records = list(WarcioIterator(handle, check_digests=True))
        assert records[0].rec_type == "warcinfo"
        assert records[0].rec_headers.get_header("WARC-Filename") == path.name
        ids = {record.rec_headers.get_header("WARC-Record-ID") for record in records}
        for record in records:  # concurrent records stay in the file of their response
            concurrent = record.rec_headers.get_header("WARC-Concurrent-To")
            assert concurrent is None or concurrent in ids
    serials = [int(path.name.split("-")[2]) for path in files]
    assert serials == sorted(serials) == list(range(len(files)))


def test_a_second_writer_continues_the_serial(tmp_path: Path) -> None:
    write_sample(tmp_path, pages=1)
    write_sample(tmp_path, pages=1)
    names = [path.name for path in warc_files(tmp_path)]
    assert [name.split("-")[2] for name in names] == ["00000", "00001"]


def test_cdxj_finds_captures_by_url_and_time(tmp_path: Path) -> None:
    writer = WarcWriter(tmp_path, max_file_bytes=3000)
    base = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
    for day in range(3):
        for number in range(20):
            moment = (base + timedelta(days=day, seconds=number)).timestamp()
            writer.write_exchange(fetch_result(f"http://www.example.test/p{number}", b"v%d" % day, started=moment))
    writer.close()
    lines = cdxj_path(warc_files(tmp_path)[0]).read_text().splitlines()
    assert lines == sorted(lines)
    index = CdxjIndex(tmp_path)
    captures = index.captures("http://www.example.test/p7")
    assert [entry.timestamp for entry in captures] == ["20250301120007", "20250302120007", "20250303120007"]
    assert all(entry.key == "test,example)/p7" and entry.status == 200 for entry in captures)
    middle = index.closest("HTTP://WWW.EXAMPLE.TEST/p7", base + timedelta(days=1, hours=3))
    assert middle is not None and middle.timestamp == "20250302120007"
    record = read_record(tmp_path / middle.filename, middle.offset, middle.length)
    assert record.http_parts()[2] == b"v1"
    assert index.captures("http://www.example.test/p77") == []
    assert index.closest("http://www.example.test/p7").timestamp == "20250303120007"  # type: ignore[union-attr]


def test_rebuilt_indexes_equal_the_ones_written_on_close(tmp_path: Path) -> None:
    write_sample(tmp_path, pages=5)
    (path,) = warc_files(tmp_path)
    written = cdxj_path(path).read_text()
    cdxj_path(path).unlink()
    (result,) = rebuild_indexes(tmp_path)
    assert result.captures == 6 and result.records == 19 and result.problem == ""
    assert cdxj_path(path).read_text() == written


DEAD_PID = 4_999_999  # above Linux's largest pid_max: no such process


def dead_writers_name(path: Path) -> str:
    """The file name as if a process that no longer runs had written it (a crashed crawl)."""
    return path.name.replace(f"-{os.getpid()}~", f"-{DEAD_PID}~")


def torn_copy(source: Path, directory: Path, keep: int) -> Path:
    directory.mkdir()
    target = directory / dead_writers_name(source)
    target.write_bytes(source.read_bytes()[:keep])
    return target


def test_recovery_cuts_a_torn_last_record_at_any_point(tmp_path: Path) -> None:
    write_sample(tmp_path / "whole", pages=4)
    (source,) = warc_files(tmp_path / "whole")
    boundaries = [record.offset for record in iter_records(source)] + [source.stat().st_size]
    cuts = sorted({*range(boundaries[1] + 1, source.stat().st_size, 97), *boundaries[2:-1]})
    for number, keep in enumerate(cuts):
        path = torn_copy(source, tmp_path / f"cut{number}", keep)
        (report,) = WarcWriter.recover(path.parent)
        complete = max(b for b in boundaries if b <= keep)
        assert path.stat().st_size == complete, keep
        assert report.bytes_cut == keep - complete
        assert report.records == boundaries.index(complete)
        with open(path, "rb") as handle:
            assert len(list(WarcioIterator(handle, check_digests=True))) == report.records
        assert sum(1 for _ in FastIterator(open(path, "rb"), parse_http=False)) == report.records  # noqa: SIM115
        assert cdxj_path(path).exists()
        assert WarcWriter.recover(path.parent) == []  # closed now: nothing left to do


def test_recovery_cuts_garbage_after_the_last_record(tmp_path: Path) -> None:
    write_sample(tmp_path / "whole", pages=2)
    (source,) = warc_files(tmp_path / "whole")
    size = source.stat().st_size
    (tmp_path / "bad").mkdir()
    path = tmp_path / "bad" / dead_writers_name(source)
    path.write_bytes(source.read_bytes() + b"\x1f\x8b\x08\x00garbage" + b"\x00" * 100)
    (report,) = WarcWriter.recover(path.parent)
    assert path.stat().st_size == size and report.bytes_cut == 111 and report.problem


def test_recovery_removes_a_file_without_one_whole_record(tmp_path: Path) -> None:
    write_sample(tmp_path / "whole", pages=1)
    (source,) = warc_files(tmp_path / "whole")
    path = torn_copy(source, tmp_path / "stub", 40)
    (report,) = WarcWriter.recover(path.parent)
    assert report.removed and not path.exists() and not cdxj_path(path).exists()


def renamed(path: Path, pid: int, moment: datetime) -> Path:
    """`path` copied under the name a writer with `pid` would have given it at `moment`."""
    prefix, _, serial, rest = path.name.split("-", 3)
    host = rest.split("~", 1)[1]
    target = path.with_name(f"{prefix}-{moment.strftime('%Y%m%d%H%M%S%f')}-{serial}-{pid}~{host}")
    target.write_bytes(path.read_bytes())
    return target


def test_recovery_leaves_files_of_live_writers_alone(tmp_path: Path) -> None:
    writer = WarcWriter(tmp_path)
    writer.write_exchange(fetch_result("http://a.test/", b"x"))
    assert WarcWriter.recover(tmp_path) == []  # our own open file
    current = writer.current_file
    assert current is not None
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        time.sleep(0.1)
        live = renamed(current, sleeper.pid, datetime.now(UTC) + timedelta(seconds=5))
        reused = renamed(current, sleeper.pid, datetime.now(UTC) - timedelta(hours=1))
        assert [item.path for item in WarcWriter.recover(tmp_path)] == [reused]  # its pid was given to another
        skipped = [item for item in rebuild_indexes(tmp_path) if item.problem.startswith("skipped")]
        assert [item.path for item in skipped] == [live]
    finally:
        sleeper.kill()
        sleeper.wait()
    assert [item.path for item in WarcWriter.recover(tmp_path)] == [live]
    writer.close()


def test_read_record_rejects_a_wrong_offset(tmp_path: Path) -> None:
    _, captures = write_sample(tmp_path, pages=1)
    from crawlspace.store.warc import WarcFormatError

    with pytest.raises(WarcFormatError):
        read_record(tmp_path / captures[0].filename, captures[0].offset + 5)


def test_metadata_fields_of_a_fetch() -> None:
    result = fetch_result("http://a.test/", b"x")
    fields = dict(fetch_metadata(result, outlinks=["http://b.test/"], extra=[("hops-from-seed", "2")]))
    assert fields["outcome"] == "2xx" and fields["hops-from-seed"] == "2" and fields["outlink"] == "http://b.test/"


def test_kill_9_in_the_middle_of_a_write_is_cut_off(tmp_path: Path) -> None:
    """A writer killed while its last exchange is half on disk: recovery cuts exactly that half."""
    script = f"""
import os, sys, time
sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
from crawlspace.store import warc
from tests.store.builders import fetch_result
writer = warc.WarcWriter({str(tmp_path)!r})
for number in range(3):
    writer.write_exchange(fetch_result(f"http://a.test/{{number}}", os.urandom(20000)))
real_write = os.write
def slow_disk(fd, data):
    half = len(data) // 2
    real_write(fd, bytes(data[:half]))
    print(half, flush=True)
    time.sleep(60)
    return half
warc.os.write = slow_disk
warc.os.writev = lambda fd, parts: slow_disk(fd, b"".join(parts))
writer.write_exchange(fetch_result("http://a.test/torn", os.urandom(20000)))
"""
    torn = int(kill_at_first_line(script))
    (path,) = warc_files(tmp_path)
    size = path.stat().st_size
    (report,) = WarcWriter.recover(tmp_path)
    assert report.bytes_cut == torn and path.stat().st_size == size - torn
    assert report.records == 1 + 3 * 2  # warcinfo, then response + request per whole exchange
    with open(path, "rb") as handle:
        assert len(list(WarcioIterator(handle, check_digests=True))) == report.records
    assert all(record.verify_block_digest() for record in FastIterator(str(path), parse_http=False))
    assert [entry.url for entry in CdxjIndex(tmp_path).captures("http://a.test/torn")] == []
    assert len(CdxjIndex(tmp_path).captures("http://a.test/2")) == 1


def test_a_truncated_body_is_marked_with_its_reason(tmp_path: Path) -> None:
    writer = WarcWriter(tmp_path)
    result = fetch_result("http://big.test/", b"x" * 1000)
    result.truncated = "length"
    writer.write_exchange(result)
    result = fetch_result("http://slow.test/", b"y" * 10)
    result.truncated = "time"
    writer.write_exchange(result)
    writer.close()
    (path,) = warc_files(tmp_path)
    reasons = {
        record.headers["warc-target-uri"]: record.headers.get("warc-truncated")
        for record in iter_records(path)
        if record.type == "response"
    }
    assert reasons == {"http://big.test/": "length", "http://slow.test/": "time"}
    with open(path, "rb") as handle:
        assert len(list(WarcioIterator(handle, check_digests=True))) == 5


def test_a_spilled_body_is_written_as_it_would_be_from_memory(tmp_path: Path) -> None:
    """A body the fetcher kept in a file (crawlspace.fetch.body) is read in parts, digested and
    compressed part by part: the records are those of the same body in memory, digests included."""
    body = os.urandom(3 << 19).hex().encode()  # 3 MiB, more than one part
    buffer = BodyBuffer(1 << 16, tmp_path)
    for start in range(0, len(body), 1 << 16):
        buffer.append(body[start : start + (1 << 16)])
    spilled = buffer.finish()
    assert isinstance(spilled, SpilledBytes)
    writer = WarcWriter(tmp_path / "warc")
    in_memory = writer.write_exchange(fetch_result("http://a.test/memory", body))
    from_file = writer.write_exchange(fetch_result("http://a.test/spilled", spilled))
    revisit = writer.write_revisit(fetch_result("http://a.test/copy", spilled), in_memory, "http://a.test/memory")
    writer.close()
    assert from_file.payload_digest == in_memory.payload_digest == revisit.payload_digest == sha1_digest(body)
    (path,) = warc_files(tmp_path / "warc")
    for capture in (in_memory, from_file):
        record = read_record(path, capture.offset, capture.length)
        assert record.http_parts()[2] == body
    with open(path, "rb") as handle:
        assert len(list(WarcioIterator(handle, check_digests=True))) == 1 + 3 * 2


def test_record_ids_are_spelled_as_uuid_spells_version_4_ids() -> None:
    random = os.urandom(16 * 64) + bytes(16) + b"\xff" * 16
    expected = [f"<urn:uuid:{uuid.UUID(bytes=random[at : at + 16], version=4)}>" for at in range(0, len(random), 16)]
    assert _uuid4_ids(random) == expected


@pytest.mark.parametrize("timestamp", [0.0, 1.0000005, 1.5e9 + 0.9999995, 1_796_000_000.123456, 4e9 + 0.25])
def test_warc_dates_are_spelled_as_strftime_spells_them(timestamp: float) -> None:
    expected = datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert warc_date(timestamp) == expected
    assert warc_date(timestamp) == expected  # the second time from the cache
    assert cdxj_timestamp(expected) == "".join(ch for ch in expected if ch.isdigit())[:14]


def test_a_write_of_more_parts_than_one_call_gathers_is_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(warc, "_WRITEV_PARTS", 1)
    _, captures = write_sample(tmp_path)
    (path,) = warc_files(tmp_path)
    records = list(iter_records(path))
    assert not any(record.problem for record in records)
    assert len(records) == 1 + 4 * 3  # warcinfo, then 4 exchanges of 3 records each
    assert [read_record(path, capture.offset, capture.length).headers["warc-record-id"] for capture in captures] == [
        capture.record_id for capture in captures
    ]
