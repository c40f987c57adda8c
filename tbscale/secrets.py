"""API keys in use, and their removal from anything written or shown.

Keys are read from the environment at call time; each one is registered here as it is read, so
that every line written (events, trial lines, crash logs) and every error shown passes through
`redact` first.
"""

from __future__ import annotations

import threading

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
