"""API keys in use, and their removal from anything written or shown.

Keys are read from the environment at call time; each one is registered here as it is read, so
that every line written (events, trial lines, crash logs) and every error shown passes through
`redact` first.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

_SECRETS: set[str] = set()
_lock = threading.Lock()
MIN_SECRET_LEN = 6  # shorter values would redact ordinary words


def register_secret(value: str | None) -> None:
    if value and len(value) >= MIN_SECRET_LEN:
        with _lock:
            _SECRETS.add(value)


def redact(text: str) -> str:
    for secret in tuple(_SECRETS):
        text = text.replace(secret, "***")
    return text


def redact_json(value: Any) -> Any:
    """`value` (JSON-shaped: dicts, lists, strings, numbers) with every string, key or value,
    passed through `redact`: for what this process hands to another that writes it (a Ray
    worker's trial result, written by the driver, which may not know this node's values)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact_json(k): redact_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_json(v) for v in value]
    return value


def redact_file(path: Path, chunk_bytes: int = 1 << 20) -> None:
    """Rewrite `path` with every registered secret replaced by `***`, byte for byte otherwise (a
    whole command output a trial keeps beside its log: it is bytes, of any size, read in chunks).
    A secret that straddles two chunks is still found: each chunk is searched with the end of the
    one before it, as long as the longest secret less one byte."""
    with _lock:
        secrets = sorted((s.encode() for s in _SECRETS), key=len, reverse=True)
    if not secrets:
        return
    keep = len(secrets[0]) - 1  # the longest
    hidden = path.with_name(path.name + ".redacting")
    with open(path, "rb") as src, open(hidden, "wb") as out:
        carry = b""
        while chunk := src.read(chunk_bytes):
            buf = carry + chunk
            for secret in secrets:
                buf = buf.replace(secret, b"***")
            # a secret that starts in the last `keep` bytes may end in the next chunk
            cut = max(0, len(buf) - keep)
            out.write(buf[:cut])
            carry = buf[cut:]
        out.write(carry)
    os.replace(hidden, path)
