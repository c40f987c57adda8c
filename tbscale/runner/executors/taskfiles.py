"""Task files for machines that do not have them: a trial on another node needs the task's folders
(environment, tests, solution, steps, and whatever else the task names). The driver packs every
folder a task refers to, once per task and run; a node unpacks them once per content hash under the
cache folder, unless it already sees the same folders with the same content (one machine, or a
shared filesystem), and the task's paths are rewritten to the copies."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import os
import shutil
import tarfile
import uuid
from pathlib import Path
from typing import Any, Iterator


def _digest(path: Path) -> str:
    from tbscale.seeds import hash_directory

    return hash_directory(path) if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def _paths(obj: Any) -> Iterator[Path]:
    """Every Path held by a task: its fields, and those of the dataclasses, lists and dicts in them."""
    if isinstance(obj, Path):
        yield obj
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            yield from _paths(getattr(obj, f.name))
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            yield from _paths(x)
    elif isinstance(obj, dict):
        for x in obj.values():
            yield from _paths(x)


def _remap(obj: Any, moves: dict[Path, Path]) -> Any:
    """`obj` with every Path under a key of `moves` moved under its value."""
    if isinstance(obj, Path):
        here = _abs(obj)
        for old, new in moves.items():
            if here == old or old in here.parents:
                return new / here.relative_to(old)
        return obj
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        changes = {f.name: _remap(getattr(obj, f.name), moves) for f in dataclasses.fields(obj) if f.init}
        return dataclasses.replace(obj, **changes)
    if isinstance(obj, list):
        return [_remap(x, moves) for x in obj]
    if isinstance(obj, tuple):
        return tuple(_remap(x, moves) for x in obj)
    if isinstance(obj, dict):
        return {k: _remap(v, moves) for k, v in obj.items()}
    return obj


def _abs(p: Path) -> Path:
    return Path(os.path.abspath(p))


def task_roots(task) -> list[Path]:
    """The folders (and lone files) a task reads on this machine: its own folder, and whatever it
    names outside it (a Terminal-Bench task's staged tests, say). Shallow paths (`/tmp`, `/app`:
    container paths that happen to exist here) are never taken for task files."""
    base = _abs(task.path) if getattr(task, "path", None) else None
    roots: list[Path] = [base] if base is not None and base.is_dir() else []
    for p in map(_abs, _paths(task)):
        if len(p.parts) < 3 or not p.exists() or any(p == r or r in p.parents for r in roots):
            continue
        if base is not None and p in base.parents:
            continue
        roots = [r for r in roots if p not in r.parents] + [p]
    return roots


def pack_task(task) -> list[tuple[str, str, bool, bytes]]:
    """The task's folders and files as (path here, content hash, is a folder, tar.gz bytes), so a
    worker on another machine can rebuild them."""
    packed = []
    for root in task_roots(task):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            tar.add(str(root), arcname="." if root.is_dir() else root.name)
        packed.append((str(root), _digest(root), root.is_dir(), buf.getvalue()))
    return packed


def materialize_task(task, packed: list[tuple[str, str, bool, bytes]], root: Path | None = None):
    """The task with paths this machine can read: the originals when they are here with the same
    content, else copies unpacked (once per content hash) under the cache folder."""
    from tbscale.environments.base import cache_dir

    root = root or cache_dir() / "ray-tasks"
    moves: dict[Path, Path] = {}
    for original, digest, is_dir, data in packed:
        here = Path(original)
        if here.exists() and _digest(here) == digest:
            continue
        target = root / f"{here.name}-{digest}"
        if not target.exists():
            tmp = root / f".{target.name}.{uuid.uuid4().hex[:8]}"
            tmp.mkdir(parents=True)
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
                tar.extractall(tmp, filter="tar")  # keeps modes: the image tag hashes them
            src = tmp if is_dir else tmp / here.name
            try:
                src.rename(target)
            except OSError:  # another worker on this node unpacked it first
                pass
            shutil.rmtree(tmp, ignore_errors=True)
        moves[here] = target
    return _remap(task, moves) if moves else task
