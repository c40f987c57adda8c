"""docs/architecture.md's walk through one attempt stays true: every file it names exists, and every
`Class.method` and `module.py` `function` it names is there."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"


def _walk() -> str:
    text = DOC.read_text()
    start = text.index("## One attempt, from config to trial line")
    end = text.index("\n## ", start + 10)
    return text[start:end]


def _module(path: str) -> str | None:
    for base in (ROOT / "tbscale", ROOT):
        if (base / path).is_file():
            rel = (base / path).relative_to(ROOT).with_suffix("")
            return ".".join(rel.parts)
    return None


def test_every_file_the_walk_names_exists() -> None:
    paths = set(re.findall(r"`((?:[a-z_]+/)+[a-z_]+\.py)`", _walk()))
    assert len(paths) >= 15
    assert sorted(p for p in paths if _module(p) is None) == []


def test_every_function_and_method_the_walk_names_is_there() -> None:
    walk = _walk()
    modules = [importlib.import_module(m) for m in
               (_module(p) for p in re.findall(r"`((?:[a-z_]+/)+[a-z_]+\.py)`", walk)) if m]
    # `path.py` `name`: a function or class of that module.
    missing = [f"{path} {name}" for path, name in re.findall(r"`((?:[a-z_]+/)+[a-z_]+\.py)`\s+`([A-Za-z_][\w.]*)`",
                                                              walk)
               if not _resolves(importlib.import_module(_module(path)), name)]
    # `Class.method`: defined in one of the modules the walk names.
    for name in set(re.findall(r"`([A-Z]\w+\.\w+)`", walk)):
        if not any(_resolves(m, name) for m in modules):
            missing.append(name)
    assert missing == []


def _resolves(module, dotted: str) -> bool:
    obj = module
    for part in dotted.split("."):
        if not hasattr(obj, part):
            return False
        obj = getattr(obj, part)
    return True
