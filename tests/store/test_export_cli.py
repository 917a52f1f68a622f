"""Export (JSON Lines, Parquet) and the store's CLI commands: table get/scan, warc index/find, export."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from crawlspace.cli import main
from crawlspace.store.cdxj import cdxj_path
from crawlspace.store.export import ExportError, export, page_records
from crawlspace.store.pagestore import PageStore, StoreOptions
from tests.conftest import run_cli
from tests.store.builders import fetch_result, html_page, parsed

HOME = "http://www.example.test/"
PAGES = {
    HOME: ("Home", [("http://www.example.test/a", "first article"), ("http://www.example.test/b", "second")]),
    "http://www.example.test/a": ("Article A", [("http://www.example.test/b", "see B"), (HOME, "home")]),
    "http://blog.example.test/post": ("Post", [("http://www.example.test/b", "great B")]),
    "http://www.example.test/b": ("Article B", [(HOME, "home")]),
}


def make_crawl(directory: Path, *, store_text: bool = True) -> None:
    with PageStore(directory, StoreOptions(store_text=store_text)) as store:
        for number, (url, (title, links)) in enumerate(PAGES.items()):
            body = html_page(title, f"The text of {title}.", links)
            store.record(
                fetch_result(url, body, started=1.7e9 + number),
                page=parsed(title, f"{title} The text of {title}.", links),
                fingerprint=number,
            )
        store.record(fetch_result("http://www.example.test/gone", b"", status=404, started=1.7e9 + 9))


@pytest.mark.parametrize("store_text", [True, False])
def test_jsonl_export_has_every_fetched_page(tmp_path: Path, store_text: bool) -> None:
    make_crawl(tmp_path, store_text=store_text)
    count, where = export(tmp_path, "jsonl")
    assert count == 5 and where == str(tmp_path / "export.jsonl")
    records = [json.loads(line) for line in (tmp_path / "export.jsonl").read_text().splitlines()]
    by_url = {record["url"]: record for record in records}
    assert set(by_url) == {*PAGES, "http://www.example.test/gone"}  # link targets never fetched are not pages
    article = by_url["http://www.example.test/a"]
    assert article["status"] == 200 and article["title"] == "Article A"
    assert article["fetch_time"] == "2023-11-14T22:13:21Z"
    assert "The text of Article A." in article["text"]  # from the table, or parsed again from the WARC
    assert article["outlinks"] == ["http://www.example.test/b", HOME]
    assert (
        by_url["http://www.example.test/gone"]["status"] == 404
        and by_url["http://www.example.test/gone"]["text"] is None
    )
    assert [record["url"] for record in records] == [
        "http://blog.example.test/post",
        HOME,
        "http://www.example.test/a",
        "http://www.example.test/b",
        "http://www.example.test/gone",
    ]


def test_parquet_export_reads_back(tmp_path: Path) -> None:
    make_crawl(tmp_path)
    count, _ = export(tmp_path, "parquet", tmp_path / "pages.parquet", batch_rows=2)
    table = pq.read_table(tmp_path / "pages.parquet")
    assert count == table.num_rows == 5
    assert table.schema.field("outlinks").type.value_type == "string"
    assert table.schema.field("fetch_time").type.tz == "UTC"
    rows = {row["url"]: row for row in table.to_pylist()}
    assert rows[HOME]["title"] == "Home" and rows[HOME]["outlinks"] == [
        "http://www.example.test/a",
        "http://www.example.test/b",
    ]


def test_export_errors_are_specific(tmp_path: Path) -> None:
    with pytest.raises(ExportError, match="no crawl table"):
        list(page_records(tmp_path))
    make_crawl(tmp_path)
    with pytest.raises(ExportError, match="unknown export format"):
        export(tmp_path, "csv")
    with pytest.raises(ExportError, match="stdout"):
        export(tmp_path, "parquet", "-")


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.output


def test_cli_table_get_shows_a_page_with_its_anchors(tmp_path: Path) -> None:
    make_crawl(tmp_path)
    code, output = run("table", "get", str(tmp_path), "http://www.example.test/b")
    assert code == 0
    lines = output.splitlines()
    assert lines[0] == "test.example.www/http/b    (http://www.example.test/b)"
    assert any(line.startswith("  title:") and '"Article B"' in line for line in lines)
    anchors = [line.split()[0] + " " + line.split("  ")[-1] for line in lines if line.startswith("  anchor:")]
    assert anchors == [
        'anchor:http://blog.example.test/post "great B"',
        'anchor:http://www.example.test/ "second"',
        'anchor:http://www.example.test/a "see B"',
    ]
    code, output = run("table", "get", str(tmp_path), "http://www.example.test/b", "--json", "--family", "anchor")
    assert code == 0 and set(json.loads(output)["families"]) == {"anchor"}
    code, output = run("table", "get", str(tmp_path), "http://nothing.test/")
    assert code == 1 and "no row for http://nothing.test/" in output


def test_cli_table_scan_in_row_key_order(tmp_path: Path) -> None:
    make_crawl(tmp_path)
    code, output = run("table", "scan", str(tmp_path), "test.example", "--keys")
    assert code == 0
    assert output.split() == [
        "test.example.blog/http/post",
        "test.example.www/http/",
        "test.example.www/http/a",
        "test.example.www/http/b",
        "test.example.www/http/gone",
    ]
    code, output = run("table", "scan", str(tmp_path), "test.example.www/", "--limit", "2")
    assert code == 0 and output.count("(http://") == 2
    code, output = run("table", "scan", str(tmp_path / "missing"), "x")
    assert code == 2 and "no crawl table" in output


def test_cli_warc_index_and_find(tmp_path: Path) -> None:
    make_crawl(tmp_path)
    (warc,) = sorted((tmp_path / "warc").glob("*.warc.gz"))
    cdxj_path(warc).unlink()
    code, output = run("warc", "index", str(tmp_path))
    assert code == 0 and "5 captures, 16 records" in output and cdxj_path(warc).exists()
    code, output = run("warc", "find", str(tmp_path), "http://www.example.test/a")
    assert code == 0 and output.startswith("test,example)/a 20231114221321 {")
    assert json.loads(output.split(" ", 2)[2])["filename"] == warc.name


def test_cli_export(tmp_path: Path) -> None:
    make_crawl(tmp_path)
    code, output = run("export", str(tmp_path), "--format", "jsonl", "-o", str(tmp_path / "out.jsonl"))
    assert code == 0 and "5 pages written" in output
    assert len((tmp_path / "out.jsonl").read_text().splitlines()) == 5


def test_a_crawl_into_a_directory_in_use_fails_clearly(tmp_path: Path) -> None:
    from crawlspace.store import CrawlTable

    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://a.test/\n")
    with CrawlTable(tmp_path / "crawl" / "table"):
        # one process: the table is DIR/table (several processes each write DIR/workers/K/table)
        done = run_cli("crawl", str(seeds), "--out", str(tmp_path / "crawl"), "--processes", "1", timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"crawlspace: error: crawl table {tmp_path / 'crawl' / 'table'} is in use by another writer"
        " (is a crawl running in this directory?)"
    ]


def test_two_crawls_in_one_directory_is_a_clear_error(tmp_path: Path) -> None:
    import fcntl

    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://a.test/\n")
    out = tmp_path / "crawl"
    out.mkdir()
    with (out / ".lock").open("w") as held:  # as a running crawl holds it
        fcntl.flock(held, fcntl.LOCK_EX)
        done = run_cli("crawl", str(seeds), "--out", str(out), timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"crawlspace: error: crawl directory {out} is in use by another crawl (lock held on .lock)"
    ]
