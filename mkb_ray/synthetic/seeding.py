"""Seeds that are the same on every machine and Python: every synthetic draw is seeded from one of these."""
from __future__ import annotations

import hashlib


def stable_int(*parts: object) -> int:
    """A 64-bit integer from the parts' text (blake2b, unlike hash(), which Python salts per process)."""
    digest = hashlib.blake2b("\0".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")
