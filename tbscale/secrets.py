"""API keys in use, and their removal from anything written or shown.

Keys are read from the environment at call time; each one is registered here as it is read, so
that every line written (events, trial lines, crash logs) and every error shown passes through
`redact` first.
"""

from __future__ import annotations

import threading
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
