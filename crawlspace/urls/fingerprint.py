"""64-bit fingerprints of URLs and bodies (xxh3_64: 15 M URLs/s, see DESIGN.md §6)."""

from collections.abc import Iterable

import xxhash


def url_fingerprint(normalized_url: str) -> int:
    """Fingerprint of an already normalized URL; equal URLs give equal fingerprints."""
    return xxhash.xxh3_64_intdigest(normalized_url.encode("utf-8", "surrogatepass"))


def content_fingerprint(body: bytes) -> int:
    return xxhash.xxh3_64_intdigest(body)


def content_fingerprint_of_parts(parts: Iterable[bytes]) -> int:
    """`content_fingerprint` of the parts' concatenation, without joining them (a body in a file)."""
    hasher = xxhash.xxh3_64()
    for part in parts:
        hasher.update(part)
    return int(hasher.intdigest())
