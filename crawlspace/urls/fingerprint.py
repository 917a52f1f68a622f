"""64-bit fingerprints of URLs and bodies (xxh3_64: 15 M URLs/s, see DESIGN.md §6).

Two spellings of a URL's fingerprint for the URL-seen set, recorded with each crawl directory
(`UrlFingerprints`):

- `FLAT`: xxh3_64 of the URL, what every crawl before resizable partitions was made with.
- `HOST_BUCKET`: Mercator's trick (Heydon & Najork 1999): the top `HOST_BUCKET_BITS` bits are a
  hash of the URL's host (its *bucket*), the other 48 a hash of the URL. A sorted set of such
  fingerprints is grouped by host bucket, so a partition's URL set splits by the owner of each
  bucket in one scan, without knowing any URL (resizing a crawl, distributed.resize). The
  collision rate over a whole crawl is that of 64 uniform bits as long as hosts are spread over
  the buckets; one huge host's URLs share 48 bits (10 M URLs of one host: ~0.2 expected collisions,
  each a URL wrongly taken as seen).

`url_fingerprint` stays the flat hash: the content set, the resume's done set and the ordering
policies key URLs by it, and none of them is split by host.
"""

import enum
from collections.abc import Callable, Iterable

import xxhash

from crawlspace.urls.normalize import host_of

HOST_BUCKET_BITS = 16
HOST_BUCKETS = 1 << HOST_BUCKET_BITS
_URL_BITS = 64 - HOST_BUCKET_BITS
_URL_MASK = (1 << _URL_BITS) - 1


def url_fingerprint(normalized_url: str) -> int:
    """Fingerprint of an already normalized URL; equal URLs give equal fingerprints."""
    return xxhash.xxh3_64_intdigest(normalized_url.encode("utf-8", "surrogatepass"))


def host_bucket(host: str) -> int:
    """The bucket of a host (`host[:port]`, or an IP address) in `range(HOST_BUCKETS)`, the same everywhere."""
    return xxhash.xxh3_64_intdigest(host.encode("utf-8", "surrogatepass")) >> _URL_BITS


def host_bucket_fingerprint(normalized_url: str) -> int:
    """The URL's host bucket in the top bits, a hash of the whole URL below."""
    host = host_of(normalized_url)
    return (host_bucket(host) << _URL_BITS) | (url_fingerprint(normalized_url) & _URL_MASK)


def bucket_of_fingerprint(fingerprint: int) -> int:
    """The host bucket of a `HOST_BUCKET` fingerprint."""
    return fingerprint >> _URL_BITS


class UrlFingerprints(enum.Enum):
    """How a crawl directory's URL set spells fingerprints (recorded with it, never changed)."""

    FLAT = "flat"
    HOST_BUCKET = "host-bucket/1"

    @property
    def function(self) -> Callable[[str], int]:
        return host_bucket_fingerprint if self is UrlFingerprints.HOST_BUCKET else url_fingerprint

    @property
    def splits_by_host(self) -> bool:
        return self is UrlFingerprints.HOST_BUCKET


def content_fingerprint(body: bytes) -> int:
    return xxhash.xxh3_64_intdigest(body)


def content_fingerprint_of_parts(parts: Iterable[bytes]) -> int:
    """`content_fingerprint` of the parts' concatenation, without joining them (a body in a file)."""
    hasher = xxhash.xxh3_64()
    for part in parts:
        hasher.update(part)
    return int(hasher.intdigest())
