"""The index job (crawlspace.jobs.index) on a crawl of the simulated web: every page with its own body
is indexed once, with the anchor text of the links to it and its PageRank; known-item queries find
their page; another number of shards, another scheduler and other crawl partitions give the same
results to 1e-9."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from crawlspace.index import Index, parse_query, tokenize
from crawlspace.jobs import read_table, run
from crawlspace.jobs.output import jobs_dir
from crawlspace.simweb import SimWeb
from crawlspace.store.reader import CrawlReader
from tests.conftest import run_cli
from tests.jobs.test_jobs_e2e import crawl
from tests.store.test_duplicates_e2e import WEB


@pytest.fixture(scope="module")
def crawled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory, _ = crawl(SimWeb.generate(WEB), tmp_path_factory.mktemp("index-job"), 1)
    return directory


@pytest.fixture(scope="module")
def built(crawled: Path) -> dict[str, Any]:
    return run(crawled, only=["index"], options={"index": {"shards": 3, "segment_docs": 100}})


def own_pages(directory: Path) -> dict[str, Any]:
    with CrawlReader([directory]) as reader:
        return {
            page.url: page
            for page in reader.pages(text=True)
            if page.fetch.status == 200
            and not (page.fetch.duplicate_of and page.fetch.duplicate_of != page.url)
            and not page.url.endswith("/robots.txt")
            and (page.text or page.title)
        }


def test_every_page_with_its_own_body_is_indexed_once(crawled: Path, built: dict[str, Any]) -> None:
    pages = own_pages(crawled)
    assert built["index"]["documents"] == len(pages) > 100
    with Index(jobs_dir(crawled) / "index") as index:
        assert index.shards == 3 and len(index.segments) > 3  # segments of at most 100 pages
        urls = [segment.url(doc) for segment in index.segments for doc in range(segment.docs)]
        assert sorted(urls) == sorted(pages)
        assert index.stats.doc_count == len(pages)


def test_anchor_text_and_pagerank_reach_the_documents(crawled: Path, built: dict[str, Any]) -> None:
    anchors = read_table(crawled, "graph", "anchors")
    ranks = dict(
        zip(
            *(read_table(crawled, "pagerank", "ranks", columns=["url", "pagerank"])[c] for c in ("url", "pagerank")),
            strict=True,
        )
    )
    texts = {target: " ".join(t) for target, t in zip(anchors["target"], anchors["texts"], strict=True)}
    with Index(jobs_dir(crawled) / "index") as index:
        checked = 0
        for segment in index.segments:
            for doc in range(segment.docs):
                url = segment.url(doc)
                assert int(segment.field_lengths[doc][2]) == len(tokenize(texts.get(url, "")))
                assert float(segment.prior[doc]) == pytest.approx(ranks[url], rel=1e-6)
                checked += 1
        assert checked and any(texts.values())


def test_a_phrase_finds_exactly_the_pages_that_have_it(crawled: Path, built: dict[str, Any]) -> None:
    """Judged against the pages' own terms: the simulated web reuses paragraphs, so a phrase of one page is
    often in a few; a phrase of one page only is that page's known-item query and must rank it first."""
    pages = own_pages(crawled)
    fields = {url: [tokenize(page.title or ""), tokenize(page.text or "")] for url, page in pages.items()}
    having_phrase: dict[tuple[str, ...], set[str]] = {}  # every 5 words in a row of a field: the pages having them
    for url, page_fields in fields.items():
        for words in page_fields:
            for start in range(len(words) - 4):
                having_phrase.setdefault(tuple(words[start : start + 5]), set()).add(url)
    unique = checked = 0
    with Index(jobs_dir(crawled) / "index") as index:
        for url in sorted(pages):
            words = fields[url][1]
            if len(words) < 40:
                continue
            phrase = words[20:25]
            having = having_phrase[tuple(phrase)]
            hits = index.search(f'"{" ".join(phrase)}"', 1000).hits
            assert {hit.url for hit in hits} == having, phrase
            checked += 1
            if having == {url}:
                unique += 1
                assert hits[0].url == url
    assert checked > 100 and unique > 10, (checked, unique)


def test_another_build_ranks_the_same(crawled: Path, built: dict[str, Any], tmp_path: Path) -> None:
    queries = ["the of", "water OR people", '"of the"', "people -water", "site:site0001.test the"]
    with Index(jobs_dir(crawled) / "index") as index:
        expected = {q: [(h.url, h.score) for h in index.search(q, 20).hits] for q in queries}
    assert all(expected.values())
    run(crawled, only=["index"], out=tmp_path, scheduler="threads", partitions=5, options={"index": {"shards": 1}})
    with Index(jobs_dir(tmp_path) / "index") as index:
        for query in queries:
            got = [(h.url, h.score) for h in index.search(parse_query(query), 20).hits]
            assert [u for u, _ in got] == [u for u, _ in expected[query]]
            assert [s for _, s in got] == pytest.approx([s for _, s in expected[query]], abs=1e-9)


def test_cli_search(crawled: Path, built: dict[str, Any], tmp_path: Path) -> None:
    with Index(jobs_dir(crawled) / "index") as index:
        expected = index.search("water OR people", 5).hits
    shown = run_cli("search", str(crawled), "water OR people", "-k", "5", "--json")
    assert shown.returncode == 0, shown.stderr
    listed = json.loads(shown.stdout)
    assert [(row["url"], row["title"]) for row in listed] == [(hit.url, hit.title) for hit in expected]
    assert [row["score"] for row in listed] == pytest.approx([hit.score for hit in expected], rel=1e-12)
    assert all(("water" in row["snippet"].lower() or "people" in row["snippet"].lower()) for row in listed)
    text = run_cli("search", str(crawled), "water OR people", "-k", "2")
    assert text.returncode == 0 and expected[0].url in text.stdout.splitlines()[0]
    explained = run_cli("search", str(crawled), "water people", "-k", "2", "--explain")
    assert explained.returncode == 0, explained.stderr
    assert explained.stdout.count("PageRank prior:") == 2 and "= idf " in explained.stdout
    assert "postings scored:" in explained.stderr and "tiers searched: 1 of 1" in explained.stderr
    missing = run_cli("search", str(tmp_path), "water")
    assert missing.returncode == 2 and "no manifest.json" in missing.stderr and "crawlspace index" in missing.stderr


def test_near_duplicates_share_a_group_and_a_search_shows_one_of_them(crawled: Path, built: dict[str, Any]) -> None:
    members = read_table(crawled, "near", "members")
    cluster_of = dict(zip(members["url"], members["cluster"], strict=True))
    with Index(jobs_dir(crawled) / "index") as index:
        group_of = {s.url(d): int(s.doc_group[d]) for s in index.segments for d in range(s.docs)}
        clusters: dict[Any, set[int]] = {}
        for url, cluster in cluster_of.items():
            if url in group_of:
                clusters.setdefault(cluster, set()).add(group_of[url])
        shared = [groups for groups in clusters.values() if groups]
        assert shared and all(len(groups) == 1 for groups in shared)
        indexed = [url for url in cluster_of if url in group_of]
        assert len(indexed) > len(shared)  # some clusters have several pages in the index
        assert len({next(iter(groups)) for groups in shared}) == len(shared)  # one key per cluster
        alone = [group for url, group in group_of.items() if url not in cluster_of]
        assert len(set(alone)) == len(alone)
        hits = index.search("the OR of", 20, collapse=True).hits
        assert len({hit.group for hit in hits}) == len(hits) == 20


def test_the_opensearch_export_is_a_bulk_request_of_the_indexed_pages(
    crawled: Path, built: dict[str, Any], tmp_path: Path
) -> None:
    from crawlspace.index.opensearch import document_id

    target = tmp_path / "bulk.ndjson"
    done = run_cli("export", str(crawled), "--format", "opensearch", "-o", str(target), "--index-name", "crawl-1")
    assert done.returncode == 0, done.stderr
    raw = target.read_bytes()
    assert raw.endswith(b"\n")  # the _bulk API wants the last line ended too
    lines = raw.split(b"\n")[:-1]
    assert len(lines) % 2 == 0
    pages = own_pages(crawled)
    assert len(lines) // 2 == len(pages) == built["index"]["documents"]
    anchors = read_table(crawled, "graph", "anchors")
    texts = {target: list(t) for target, t in zip(anchors["target"], anchors["texts"], strict=True)}
    ranks = read_table(crawled, "pagerank", "ranks", columns=["url", "pagerank"])
    rank_of = dict(zip(ranks["url"], ranks["pagerank"], strict=True))
    ids = set()
    for action_line, document_line in zip(lines[::2], lines[1::2], strict=True):
        action, document = json.loads(action_line), json.loads(document_line)
        assert list(action) == ["index"] and set(action["index"]) == {"_index", "_id"}
        assert action["index"]["_index"] == "crawl-1" and action["index"]["_id"] == document_id(document["url"])
        ids.add(action["index"]["_id"])
        page = pages[document["url"]]
        assert document["title"] == (page.title or "") and document["text"] == (page.text or "")
        assert document["anchors"] == texts.get(document["url"], [])
        assert document["pagerank"] == pytest.approx(rank_of[document["url"]], rel=1e-12)
        assert document["fetch_time"].endswith("Z") and set(document) == {
            "url", "title", "text", "anchors", "pagerank", "fetch_time", "content_type"
        }  # fmt: skip
    assert len(ids) == len(pages)
    again = tmp_path / "again.ndjson"
    repeated = run_cli("export", str(crawled), "--format", "opensearch", "-o", str(again), "--index-name", "crawl-1")
    assert repeated.returncode == 0
    assert again.read_bytes() == raw  # the same crawl, the same ids and lines
    bad = run_cli("export", str(crawled), "--format", "opensearch", "--index-name", "Bad Name")
    assert bad.returncode == 2 and "index name 'Bad Name'" in bad.stderr
