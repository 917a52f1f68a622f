"""64-bit fingerprints of URLs and bodies (xxh3_64: 15 M URLs/s, see DESIGN.md §6)."""

import xxhash


def url_fingerprint(normalized_url: str) -> int:
    """Fingerprint of an already normalized URL; equal URLs give equal fingerprints."""
    return xxhash.xxh3_64_intdigest(normalized_url.encode("utf-8", "surrogatepass"))


def content_fingerprint(body: bytes) -> int:
    return xxhash.xxh3_64_intdigest(body)
