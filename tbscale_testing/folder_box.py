"""An environment whose filesystem is a folder on this machine, copied out of as a backend copies
out of a container (links kept, never followed): for the checks that read files from outside."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from tbscale.errors import SandboxError


class FolderBox:
    def __init__(self, root: Path) -> None:
        self.root = root

    def _p(self, path: str) -> Path:
        return self.root / path.lstrip("/")

    def write(self, path: str, data: bytes | str) -> None:
        p = self._p(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data.encode() if isinstance(data, str) else data)

    def _size(self, p: Path) -> int:
        files = [p] if p.is_file() else list(p.rglob("*"))
        return sum(f.stat().st_size for f in files if f.is_file() and not f.is_symlink())

    def _bounded(self, path: str, limit: int | None) -> Path:
        p = self._p(path)
        if limit is not None and (p.exists() and not p.is_symlink()) and self._size(p) > limit:
            raise SandboxError(f"{path} is over {limit} bytes")
        return p

    def read_file(self, path: str, limit: int | None = None) -> bytes | None:
        p = self._bounded(path, limit)
        return p.read_bytes() if p.is_file() and not p.is_symlink() else None

    def get_dir(self, path: str, local: Path, limit: int | None = None) -> bool:
        p = self._bounded(path, limit)
        if p.is_dir() and not p.is_symlink():
            shutil.copytree(p, local / p.name, symlinks=True)
        elif p.is_file() and not p.is_symlink():
            shutil.copy(p, local / p.name)
        else:
            return False
        return True

    def read_tree(self, path: str, limit: int | None = None) -> dict[str, str] | None:
        p = self._bounded(path, limit)
        if not p.exists() and not p.is_symlink():
            return None
        out = {}
        for f in [p, *(p.rglob("*") if p.is_dir() and not p.is_symlink() else [])]:
            out["/" + f.relative_to(self.root).as_posix()] = (
                "link:" + os.readlink(f) if f.is_symlink() else "dir" if f.is_dir()
                else "file:" + hashlib.sha256(f.read_bytes()).hexdigest())
        return out
