"""Keeping a 100k-trial table small in memory: nested records packed, and the memory pandas'
string columns take given back as they are freed."""

from __future__ import annotations

import zlib
from contextlib import contextmanager
from typing import Any, Iterator

from pydantic_core import from_json, to_json

try:  # pandas keeps string columns in pyarrow buffers when pyarrow is installed
    import pyarrow
except ImportError:  # pragma: no cover - pandas then keeps Python strings
    pyarrow = None


def pack_json(value: Any) -> bytes:
    """`value` as JSON, deflated (level 1: fast; a staged trial's attempts and strategy record
    shrink about 4x, tens of MB over a large run)."""
    return zlib.compress(to_json(value), 1)


def unpack_json(packed: bytes | str) -> Any:
    """What pack_json packed (or plain JSON text, as a table built by hand may hold)."""
    return from_json(zlib.decompress(packed) if isinstance(packed, bytes) else packed)


@contextmanager
def system_allocator() -> Iterator[None]:
    """pyarrow's buffers allocated by the C library's allocator for the duration. pyarrow's
    default (mimalloc) keeps the pages of freed buffers for reuse; a table built a chunk at a time
    and then joined frees many, and held them (about 50 MB of a 100k-trial report's peak). Buffers
    remember their pool, so those made here are freed correctly after the default is restored."""
    if pyarrow is None:
        yield
        return
    previous = pyarrow.default_memory_pool()
    pyarrow.set_memory_pool(pyarrow.system_memory_pool())
    try:
        yield
    finally:
        pyarrow.set_memory_pool(previous)
