"""Stable content hashes for request keys and params sections."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def stable_hash(obj: Any, n: int = 24) -> str:
    """sha256 of canonical JSON (sorted keys, no whitespace), first `n` hex digits."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str).encode()).hexdigest()[:n]
