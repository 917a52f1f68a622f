"""The URL map: ids are the ranks of the URLs' row keys, every URL and id round-trips, absent URLs and damaged files
are refused with what and where."""

from __future__ import annotations

from pathlib import Path

import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from crawlspace.graph import GraphFormatError, UnknownURL, UrlMap, urlmap, write_url_map
from crawlspace.graph.urlmap import HEADER_BYTES, sort_by_row_key
from crawlspace.store.rowkey import row_key

LABEL = st.text("abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=8).filter(
    lambda label: not label.startswith("-") and not label.endswith("-")
)
HOST = st.one_of(
    st.builds(
        lambda labels, tld: ".".join([*labels, tld]),
        st.lists(LABEL, min_size=1, max_size=4),
        st.sampled_from(["test", "com", "org"]),
    ),
    st.builds(lambda a, b: f"127.0.{a}.{b}", st.integers(0, 255), st.integers(0, 255)),
)  # fmt: skip
PATH = st.text("abcdefghijklmnopqrstuvwxyz0123456789/._~-%", max_size=30)
URL = st.builds(
    lambda scheme, host, port, path, query: f"{scheme}://{host}{port}/{path}{query}",
    st.sampled_from(["http", "https"]),
    HOST,
    st.sampled_from(["", ":8080", ":1"]),
    PATH,
    st.sampled_from(["", "?a=1", "?", "?q=x/y"]),
)


def built(tmp_path: Path, urls: list[str], block_size: int) -> tuple[UrlMap, list[str]]:
    order, keys = sort_by_row_key(urls)
    write_url_map(tmp_path / "urls.fcmap", keys, block_size)
    return UrlMap(tmp_path / "urls.fcmap"), [urls[i] for i in order]


@settings(max_examples=150, deadline=None)
@given(urls=st.sets(URL, max_size=80), absent=st.lists(URL, max_size=5), block_size=st.sampled_from([1, 2, 3, 16]))
def test_round_trip(
    tmp_path_factory: pytest.TempPathFactory, urls: set[str], absent: list[str], block_size: int
) -> None:
    with built(tmp_path_factory.mktemp("map"), sorted(urls), block_size)[0] as url_map:
        in_id_order = sorted(urls, key=row_key)
        assert len(url_map) == len(urls) and list(url_map) == in_id_order
        for node, url in enumerate(in_id_order):
            assert url_map.id_of(url) == node and url_map.url_of(node) == url
        for url in absent:
            if url not in urls:
                with pytest.raises(UnknownURL):
                    url_map.id_of(url)
        with pytest.raises(IndexError):
            url_map.url_of(len(urls))
        with pytest.raises(IndexError):
            url_map.url_of(-1)


def test_front_coding_shrinks_a_host_s_urls(tmp_path: Path) -> None:
    urls = [f"http://www.example{h}.test/section/page-{p}.html" for h in range(20) for p in range(500)]
    url_map, ordered = built(tmp_path, urls, 16)
    assert url_map.url_of(0) == ordered[0] and url_map.id_of(ordered[-1]) == len(urls) - 1
    average = 8 * sum(len(url) for url in urls) / len(urls)
    assert url_map.bits_per_url < average / 3, (url_map.bits_per_url, average)


def test_an_unknown_url_names_itself(tmp_path: Path) -> None:
    url_map, _ = built(tmp_path, ["http://a.test/", "http://b.test/"], 16)
    for url, why in (
        ("http://a.test/x", "is not a page"),
        ("http://0.test/", "is not a page"),
        ("a.test", "is not an"),
    ):
        with pytest.raises(UnknownURL, match=why) as raised:
            url_map.id_of(url)
        assert raised.value.url == url and url in str(raised.value)


def test_an_empty_map(tmp_path: Path) -> None:
    url_map, _ = built(tmp_path, [], 16)
    assert len(url_map) == 0 and list(url_map) == []
    with pytest.raises(UnknownURL):
        url_map.id_of("http://a.test/")


def test_keys_must_increase(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="out of order or repeated"):
        write_url_map(tmp_path / "m", ["test.b/http/", "test.a/http/"])
    with pytest.raises(ValueError, match="cannot number"):
        sort_by_row_key(["http://A.test/"])  # its key is lowercase: the map could not give it back


def write_sample(tmp_path: Path) -> Path:
    built(tmp_path, [f"http://h{h}.test/p/{p}" for h in range(5) for p in range(40)], 16)[0].close()
    return tmp_path / "urls.fcmap"


@pytest.mark.parametrize("keep", [0, 10, HEADER_BYTES, HEADER_BYTES + 100, -8, -1])
def test_a_truncated_map_is_refused_with_its_name(tmp_path: Path, keep: int) -> None:
    path = write_sample(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[:keep])
    with pytest.raises(GraphFormatError, match=r"urls\.fcmap") as raised:
        UrlMap(path)
    assert raised.value.path == path and raised.value.byte is not None and raised.value.byte <= len(data)


def test_a_flipped_byte_is_caught_by_the_checksum(tmp_path: Path) -> None:
    path = write_sample(tmp_path)
    data = bytearray(path.read_bytes())
    data[HEADER_BYTES + 30] ^= 0x04
    path.write_bytes(bytes(data))
    with pytest.raises(GraphFormatError, match="checksum"):
        UrlMap(path)


def test_a_map_that_breaks_the_front_coding_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A block written wrongly but consistently with the header and checksum (a writer's bug, not a flipped bit)."""
    real = urlmap._front_coded

    def breaking(keys: list[bytes]) -> bytes:
        if not keys[0].startswith(b"test.h2/"):
            return real(keys)
        return real(keys[:1]) + b"\x7f\x01x" * (len(keys) - 1)  # each next key sharing 127 bytes of a shorter one

    monkeypatch.setattr(urlmap, "_front_coded", breaking)
    path = write_sample(tmp_path)
    url_map = UrlMap(path)
    assert url_map.url_of(0) == "http://h0.test/p/0"
    with pytest.raises(GraphFormatError, match=r"block \d+ breaks the front coding") as raised:
        for node in range(len(url_map)):
            url_map.url_of(node)
    assert raised.value.byte is not None and HEADER_BYTES < raised.value.byte < path.stat().st_size


def test_a_block_that_does_not_decompress_is_refused(tmp_path: Path) -> None:
    path = write_sample(tmp_path)
    data = bytearray(path.read_bytes())
    fields = list(urlmap.HEADER.unpack_from(data))
    blocks_at = HEADER_BYTES + fields[4]
    data[blocks_at : blocks_at + 8] = b"\xff" * 8  # the first block's zstd frame header
    fields[-1] = xxhash.xxh3_64_intdigest(bytes(data[HEADER_BYTES:]))
    urlmap.HEADER.pack_into(data, 0, *fields)
    path.write_bytes(bytes(data))
    with pytest.raises(GraphFormatError, match="block 0 does not decompress") as raised:
        UrlMap(path)  # each block's first key is read on opening
    assert raised.value.byte == blocks_at


def test_the_same_keys_make_the_same_file(tmp_path: Path) -> None:
    """The dictionary is trained deterministically: a job run again writes the same bytes."""
    keys = sorted(row_key(f"http://h{h}.test/section/p{p}.html") for h in range(40) for p in range(60))
    first = write_url_map(tmp_path / "a", keys).read_bytes()
    assert write_url_map(tmp_path / "b", keys).read_bytes() == first
    fields = urlmap.HEADER.unpack_from(first)
    assert fields[4] > 0  # 150 blocks: trained a dictionary
    with UrlMap(tmp_path / "a") as url_map:
        assert url_map.bits_per_url < 8 * len(keys[0]) / 2


def test_a_missing_map_and_a_foreign_file(tmp_path: Path) -> None:
    with pytest.raises(GraphFormatError, match="missing"):
        UrlMap(tmp_path / "urls.fcmap")
    (tmp_path / "other").write_bytes(b"x" * 200)
    with pytest.raises(GraphFormatError, match="not a crawlspace URL map"):
        UrlMap(tmp_path / "other")
