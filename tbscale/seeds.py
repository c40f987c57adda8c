"""Seeds and stable hashes derived from labels, never from call order or process state.

Every seed in tbscale comes from here: a trial's seed from (experiment seed, task, trial index),
a verifier's coin from (turn seed, method, candidates), a judge's sample from (judge key, trial,
sample). Reruns and concurrent calls therefore agree.
"""

from __future__ import annotations

import hashlib
import random
from pathlib import Path
from typing import Any


def digest(*parts: Any) -> bytes:
    """SHA-256 of the parts joined with `|`."""
    return hashlib.sha256("|".join(map(str, parts)).encode()).digest()


def stable_hash(*parts: Any, length: int = 16) -> str:
    """Hex digest of the parts, cut to `length` characters (for keys and file names)."""
    return digest(*parts).hex()[:length]


def derive_seed(*parts: Any) -> int:
    """A non-negative 31-bit seed from the parts."""
    return int.from_bytes(digest(*parts)[:4], "big") % (2**31)


def derive_rng(*parts: Any) -> random.Random:
    """A random generator from the parts (64 bits of the digest)."""
    return random.Random(int.from_bytes(digest(*parts)[:8], "big"))


_dir_hash_cache: dict[str, tuple[tuple, str]] = {}


def hash_directory(path: Path) -> str:
    """Content hash of a folder: relative paths, modes and bytes of every file.

    Every attempt asks for its image tag, so the hash is kept per folder and recomputed only when
    a file's name, size, mode or mtime changes: a stat walk instead of reading every byte again.
    """
    files = sorted(p for p in Path(path).rglob("*") if p.is_file())
    stats = [(f, f.stat()) for f in files]
    signature = tuple((str(f), st.st_size, st.st_mode, st.st_mtime_ns) for f, st in stats)
    cached = _dir_hash_cache.get(str(path))
    if cached and cached[0] == signature:
        return cached[1]
    h = hashlib.sha256()
    for f, st in stats:
        rel = f.relative_to(path).as_posix()
        h.update(rel.encode() + b"\0" + oct(st.st_mode & 0o777).encode() + b"\0")
        h.update(f.read_bytes())
        h.update(b"\0")
    digest = h.hexdigest()[:16]
    _dir_hash_cache[str(path)] = (signature, digest)
    return digest


def hash_file(path: str | Path) -> str:
    """Content hash of one file (a prompt a setting names)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
