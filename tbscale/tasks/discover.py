"""Finding tasks: a task folder, a folder holding task folders at any depth, a Harbor registry.json,
or a dataset manifest (dataset.toml).

Rules (docs/tasks.md):
* A task folder is one with task.toml (Harbor) or task.yaml (Terminal-Bench legacy). The walk does
  not look inside a task folder (its environment/, tests/, steps/ ...) and skips hidden folders
  (".name") and __pycache__.
* A task's id is its folder name. When two discovered tasks share a folder name, both get their
  path relative to the discovery root instead (e.g. "static/e" and "dynamic/e"), so ids stay
  unique and stable.
* registry.json: Harbor's dataset registry, a list of {name, version, description, metrics, tasks:
  [{name, path, git_url, git_commit_id}]}. A task's `path` is resolved relative to the registry
  file; an entry whose folder is not on disk is reported by name (with its git_url and commit when
  it has them: clone it there first). Every dataset is included unless one is selected.
* dataset.toml: a Harbor dataset manifest ([dataset], [[tasks]] {name = "org/name", digest},
  [[files]]). Its tasks are matched by package name ([task].name in task.toml) against the task
  folders below the manifest; the digest is carried, not checked.
* Any other file is an error, and so is a folder with no task below it.
"""

from __future__ import annotations

import json
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tbscale.errors import TbscaleError
from tbscale.tasks.files import read_text

SKIP_DIRS = {"__pycache__", "node_modules"}


@dataclass
class FoundTask:
    id: str
    path: Path
    dataset: str | None = None  # "name@version" for registry / manifest entries
    digest: str | None = None  # dataset.toml pin


@dataclass
class Discovery:
    root: Path
    tasks: list[FoundTask] = field(default_factory=list)
    # Entries named by a registry or manifest that are not on disk: (label, message).
    missing: list[tuple[str, str]] = field(default_factory=list)


def is_task_dir(path: Path) -> bool:
    return (path / "task.toml").is_file() or (path / "task.yaml").is_file()


def walk_task_dirs(root: Path) -> list[Path]:
    """Task folders at any depth below root (root itself if it is one), sorted by path."""
    if is_task_dir(root):
        return [root]
    found: list[Path] = []
    for current, dirs, _ in os.walk(root, followlinks=False):
        here = Path(current)
        keep = []
        for name in sorted(dirs):
            if name.startswith(".") or name in SKIP_DIRS:
                continue
            sub = here / name
            if is_task_dir(sub):
                found.append(sub)
            else:
                keep.append(name)
        dirs[:] = keep  # never descend into a task folder
    return sorted(found)


def _assign_ids(root: Path, paths: list[Path]) -> list[FoundTask]:
    by_name: dict[str, list[Path]] = {}
    for p in paths:
        by_name.setdefault(p.name, []).append(p)
    out = []
    for p in paths:
        if len(by_name[p.name]) == 1:
            out.append(FoundTask(p.name, p))
        else:
            try:
                rel = p.relative_to(root).as_posix()
            except ValueError:
                rel = p.as_posix()
            out.append(FoundTask(rel, p))
    return out


def _registry(path: Path, dataset: str | None) -> Discovery:
    try:
        data = json.loads(read_text(path))
    except json.JSONDecodeError as e:
        raise TbscaleError(f"{path}: not valid JSON ({e.msg} at line {e.lineno})") from None
    if not isinstance(data, list) or not all(isinstance(d, dict) and isinstance(d.get("tasks"), list) for d in data):
        raise TbscaleError(f"{path}: not a Harbor dataset registry (expected a JSON list of datasets, each with "
                           "name, version and tasks)")
    disc = Discovery(path.parent)
    names = [f"{d.get('name')}@{d.get('version')}" for d in data]
    if dataset is not None and not any(dataset in (n, n.split("@")[0]) for n in names):
        raise TbscaleError(f"{path}: no dataset {dataset!r} (datasets: {', '.join(names)})")
    paths: list[tuple[Path, str]] = []
    for d, label in zip(data, names):
        if dataset is not None and dataset not in (label, label.split("@")[0]):
            continue
        for i, entry in enumerate(d["tasks"]):
            if not isinstance(entry, dict) or not isinstance(entry.get("path", entry.get("name")), str):
                raise TbscaleError(f"{path}: dataset {label}: tasks[{i}] needs a `path` (or `name`)")
            rel = entry.get("path") or entry["name"]
            local = (path.parent / rel).resolve()
            name = entry.get("name") or Path(rel).name
            if is_task_dir(local):
                if local not in [p for p, _ in paths]:
                    paths.append((local, label))
                continue
            if entry.get("git_url"):
                commit = entry.get("git_commit_id") or "HEAD"
                msg = (f"task {name!r} of {label} is not on disk at {local}: it lives in {entry['git_url']} "
                       f"@ {commit}, path {rel!r} (`tbscale datasets pull {label} --registry {path}` fetches "
                       "the dataset)")
            else:
                msg = f"task {name!r} of {label}: {local} is not a task folder (no task.toml or task.yaml)"
            disc.missing.append((f"{label}/{name}", msg))
    found = _assign_ids(path.parent, [p for p, _ in paths])
    for f, (_, label) in zip(found, paths):
        f.dataset = label
    disc.tasks = found
    return disc


def _package_name(task_dir: Path) -> str | None:
    toml_path = task_dir / "task.toml"
    if not toml_path.is_file():
        return None
    try:
        data = tomllib.loads(read_text(toml_path))
    except (tomllib.TOMLDecodeError, TbscaleError):
        return None
    task = data.get("task")
    return task.get("name") if isinstance(task, dict) and isinstance(task.get("name"), str) else None


def _manifest(path: Path) -> Discovery:
    try:
        data: dict[str, Any] = tomllib.loads(read_text(path))
    except tomllib.TOMLDecodeError as e:
        raise TbscaleError(f"{path}: not valid TOML ({e})") from None
    unknown = sorted(set(data) - {"dataset", "tasks", "files"})
    if unknown:
        raise TbscaleError(f"{path}: unknown top-level key `{unknown[0]}` (a dataset manifest has [dataset], "
                           "[[tasks]] and [[files]])")
    ds = data.get("dataset")
    if not isinstance(ds, dict) or not isinstance(ds.get("name"), str):
        raise TbscaleError(f"{path}: [dataset].name is missing")
    label = f"{ds['name']}@{ds.get('version', '')}".rstrip("@")
    entries = data.get("tasks", [])
    if not isinstance(entries, list):
        raise TbscaleError(f"{path}: `tasks` must be a list of [[tasks]] tables")
    local = {}
    for d in walk_task_dirs(path.parent):
        local.setdefault(_package_name(d) or d.name, d)
        local.setdefault(d.name, d)
    disc = Discovery(path.parent)
    chosen: list[tuple[Path, str | None]] = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise TbscaleError(f"{path}: tasks[{i}] needs a `name` (\"org/name\")")
        unknown = sorted(set(entry) - {"name", "digest"})
        if unknown:
            raise TbscaleError(f"{path}: unknown key [[tasks]].{unknown[0]} (entry {i + 1})")
        name = entry["name"]
        d = local.get(name) or local.get(name.split("/")[-1])
        if d is None:
            disc.missing.append((name, f"task {name!r} of {label} is not on disk below {path.parent} (a published "
                                       "package: download it into this folder first)"))
        elif d not in [p for p, _ in chosen]:
            chosen.append((d, entry.get("digest")))
    disc.tasks = _assign_ids(path.parent, [p for p, _ in chosen])
    for f, (_, digest) in zip(disc.tasks, chosen):
        f.dataset, f.digest = label, digest
    return disc


def discover(root: Path, dataset: str | None = None) -> Discovery:
    """Everything `root` names (see the module doc). `dataset` picks one dataset of a registry
    ("name" or "name@version")."""
    root = Path(root)
    if not root.exists():
        raise TbscaleError(f"{root}: no such file or directory")
    if root.is_file():
        if root.name == "registry.json":
            disc = _registry(root, dataset)
        elif root.name == "dataset.toml":
            disc = _manifest(root)
        else:
            raise TbscaleError(f"{root}: is a file; give a task folder, a folder of tasks, a registry.json or a "
                               "dataset.toml")
        if not disc.tasks and not disc.missing:
            raise TbscaleError(f"{root}: lists no tasks")
        return disc
    paths = walk_task_dirs(root)
    if not paths:
        raise TbscaleError(f"{root}: no task directories found (looked for task.toml / task.yaml at any depth)")
    return Discovery(root, _assign_ids(root, paths))
