"""Tests wait on conditions, not on the clock: poll a predicate until it holds or a generous bound
passes (at least 10x the quiet time of what it waits for)."""

from __future__ import annotations

import time
from typing import Callable


def wait_for(predicate: Callable[[], object], timeout: float = 300.0, every: float = 0.2) -> bool:
    """Whether `predicate()` became true within `timeout` seconds, asked every `every` seconds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(every)
    return False
