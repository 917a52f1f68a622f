"""Near-duplicate clusters: MinHash-LSH band keys as map output, reduce by band key, connected
components of the candidate pairs verified by estimated Jaccard similarity (IIR 19.6).

map      `signature_rows`: each page with a 200 HTML body (an exact duplicate's read through the
         revisit) is parsed, its words shingled and MinHashed with the crawl's own shingler
         (`seen.shingles`: k = 4 words, 128 bins); the signatures are written as a table first, so
         the expensive parse runs once
map      `band_rows`: (band, key, url) for each of the signature's LSH bands (`choose_bands`: the
         band shape that makes a pair at the threshold a candidate with probability 0.999)
reduce   by (band, key): every two URLs of a bucket are a candidate pair (a chain through a bucket of
         more than 64: copies of one page, kept connected without a quadratic number of pairs),
         deduplicated
verify   the pairs joined to both signatures; kept when the estimated Jaccard >= threshold (0.9)
cluster  connected components of the verified pairs (scipy's csgraph), which are few: only they
         come to one process, never the pages

Exact copies have similarity 1, so a near-duplicate cluster holds the exact duplicates too.
Outputs: `signatures` (url, signature), `pairs` (a, b, similarity), `clusters` (cluster, size,
representative, urls) and `members` (url, cluster).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import dask.dataframe as dd
import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from crawlspace.jobs.context import JobContext, Piece, crawl_pages
from crawlspace.jobs.dedup import representative_of
from crawlspace.jobs.output import PendingOutput
from crawlspace.parse import parse_html
from crawlspace.seen.shingles import Shingler, band_keys, choose_bands, similarity
from crawlspace.store.reader import CrawlReader

NAME = "near"
THRESHOLD = 0.9
SHINGLE_WORDS = 4
NUM_PERM = 128
MAX_BUCKET_PAIRS_MEMBERS = 64
_HTML = frozenset({"text/html", "application/xhtml+xml"})

SIGNATURE_META = pd.DataFrame({"url": pd.Series(dtype=object), "signature": pd.Series(dtype=object)})
BAND_META = pd.DataFrame(
    {"band": pd.Series(dtype="int64"), "key": pd.Series(dtype="uint64"), "url": pd.Series(dtype=object)}
)
PAIR_META = pd.DataFrame({"a": pd.Series(dtype=object), "b": pd.Series(dtype=object)})
VERIFIED_META = PAIR_META.assign(similarity=pd.Series(dtype="float64"))


SIGNATURE_SCHEMA = pa.schema([("url", pa.string()), ("signature", pa.binary())])


def signature_rows(reader: CrawlReader, piece: Piece) -> pd.DataFrame:
    shingler = Shingler(shingle_words=SHINGLE_WORDS, num_perm=NUM_PERM)
    urls, signatures = [], []
    for page in crawl_pages(reader, piece):
        body = reader.body(page)
        if body is None or body.content_type not in _HTML:
            continue
        signature = shingler.signature(parse_html(body.content, page.url, body.content_type).raw_text)
        if signature is None:
            continue
        urls.append(page.url)
        signatures.append(signature.tobytes())
    return pd.DataFrame({"url": pd.Series(urls, dtype=object), "signature": pd.Series(signatures, dtype=object)})


def _signature(data: bytes) -> np.ndarray[Any, np.dtype[np.uint16]]:
    return np.frombuffer(data, np.uint16)


def band_rows(signatures: pd.DataFrame, rows: int) -> pd.DataFrame:
    bands: list[int] = []
    keys: list[npt.NDArray[np.uint64]] = []
    urls: list[str] = []
    for url, data in zip(signatures["url"], signatures["signature"], strict=True):
        found = band_keys(_signature(data), rows)
        bands.extend(range(found.size))
        keys.append(found)
        urls.extend([url] * found.size)
    key_array = np.concatenate(keys) if keys else np.zeros(0, np.uint64)
    return pd.DataFrame({"band": np.array(bands, np.int64), "key": key_array, "url": pd.Series(urls, dtype=object)})


def bucket_pairs(urls: list[str]) -> Iterator[tuple[str, str]]:
    """Candidate pairs of one bucket: every two URLs, or past `MAX_BUCKET_PAIRS_MEMBERS` a chain through
    the sorted URLs (a large bucket is mostly copies of one page, each pair verified along the chain keeps
    them connected while the pairs stay linear in the bucket's size)."""
    if len(urls) <= MAX_BUCKET_PAIRS_MEMBERS:
        return itertools.combinations(urls, 2)
    return itertools.pairwise(urls)


def candidate_pairs(buckets: pd.DataFrame) -> pd.DataFrame:
    """The reduce over one shuffled partition: URLs sharing a band bucket, as pairs a < b."""
    firsts, seconds = [], []
    for _, group in buckets.groupby(["band", "key"], sort=False):
        if len(group) < 2:
            continue
        for a, b in bucket_pairs(sorted(set(group["url"]))):
            firsts.append(a)
            seconds.append(b)
    return pd.DataFrame({"a": pd.Series(firsts, dtype=object), "b": pd.Series(seconds, dtype=object)})


def verified(pairs: pd.DataFrame, threshold: float) -> pd.DataFrame:
    scores = [
        similarity(_signature(left), _signature(right))
        for left, right in zip(pairs["signature_a"], pairs["signature_b"], strict=True)
    ]
    checked = pd.DataFrame({"a": pairs["a"], "b": pairs["b"], "similarity": np.array(scores, np.float64)})
    return checked[checked["similarity"] >= threshold].sort_values(["a", "b"]).reset_index(drop=True)


def near_pairs(ctx: JobContext, signatures: dd.DataFrame, threshold: float = THRESHOLD) -> dd.DataFrame:
    """The job's LSH and verification as Dask collections over a signature table: verified pairs."""
    _, rows = choose_bands(NUM_PERM, threshold)
    bands = signatures.map_partitions(band_rows, rows, meta=BAND_META)
    shuffled = bands.shuffle(on=["band", "key"], shuffle_method=ctx.shuffle_method)
    pairs = shuffled.map_partitions(candidate_pairs, meta=PAIR_META)
    pairs = pairs.drop_duplicates(shuffle_method=ctx.shuffle_method)
    joined = pairs.merge(
        signatures.rename(columns={"url": "a", "signature": "signature_a"}), on="a", shuffle_method=ctx.shuffle_method
    ).merge(
        signatures.rename(columns={"url": "b", "signature": "signature_b"}), on="b", shuffle_method=ctx.shuffle_method
    )
    return joined.map_partitions(verified, threshold, meta=VERIFIED_META)


def components(pairs: pd.DataFrame) -> pd.DataFrame:
    """Clusters of the verified pairs: connected components, one row each, URLs sorted."""
    if pairs.empty:
        return pd.DataFrame(
            {"cluster": pd.Series(dtype="int64"), "size": pd.Series(dtype="int64"),
             "representative": pd.Series(dtype=object), "urls": pd.Series(dtype=object)}
        )  # fmt: skip
    urls, codes = np.unique(np.concatenate([pairs["a"].to_numpy(), pairs["b"].to_numpy()]), return_inverse=True)
    half = len(pairs)
    graph = coo_matrix((np.ones(half), (codes[:half], codes[half:])), shape=(len(urls), len(urls)))
    count, labels = connected_components(graph, directed=False)
    groups: list[list[str]] = [[] for _ in range(count)]
    for url, label in zip(urls.tolist(), labels.tolist(), strict=True):
        groups[label].append(url)
    ordered = sorted((sorted(group) for group in groups), key=lambda group: group[0])
    return pd.DataFrame(
        {
            "cluster": np.arange(len(ordered), dtype=np.int64),
            "size": np.array([len(group) for group in ordered], np.int64),
            "representative": pd.Series([representative_of(group) for group in ordered], dtype=object),
            "urls": pd.Series(ordered, dtype=object),
        }
    )


def run(ctx: JobContext, pending: PendingOutput, *, threshold: float = THRESHOLD) -> dict[str, Any]:
    if not 0 < threshold <= 1:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    mapped = ctx.frame(signature_rows, SIGNATURE_META, None)
    signature_count, _ = ctx.compute(
        mapped.shape[0],
        mapped.to_parquet(pending.table("signatures"), write_index=False, compute=False, schema=SIGNATURE_SCHEMA),
    )
    signatures = ctx.read_parquet(pending.table("signatures")).astype({"url": object})
    (pairs,) = ctx.compute(near_pairs(ctx, signatures, threshold))
    pairs = pairs.sort_values(["a", "b"]).reset_index(drop=True)
    clusters = components(pairs)
    for name, frame in (("pairs", pairs), ("clusters", clusters)):
        pending.table(name).mkdir()
        frame.to_parquet(pending.table(name) / "part.0.parquet", index=False)
    members = clusters[["cluster", "urls"]].explode("urls").rename(columns={"urls": "url"})[["url", "cluster"]]
    pending.table("members").mkdir()
    members.sort_values("url").to_parquet(pending.table("members") / "part.0.parquet", index=False)
    return {
        "threshold": threshold,
        "signatures": int(signature_count),
        "verified_pairs": len(pairs),
        "clusters": len(clusters),
        "pages_in_clusters": int(clusters["size"].sum()) if len(clusters) else 0,
        "largest_cluster": int(clusters["size"].max()) if len(clusters) else 0,
    }
