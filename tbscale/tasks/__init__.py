"""Task loaders: Harbor and Terminal-Bench legacy directories, and SWE-bench instances, all into
one Task model. Discovery (folders at any depth, registry.json, dataset.toml) is in discover.py."""

from __future__ import annotations

from pathlib import Path

from tbscale.errors import TbscaleError
from tbscale.tasks.discover import Discovery, FoundTask, discover, is_task_dir
from tbscale.tasks.harbor import is_harbor_task, load_harbor_task
from tbscale.tasks.model import Task
from tbscale.tasks.terminal_bench import is_terminal_bench_task, load_terminal_bench_task

__all__ = ["Task", "load_task", "load_tasks", "discover_task_dirs", "discover", "Discovery", "FoundTask", "is_task_dir"]


def load_task(path: Path, task_id: str | None = None) -> Task:
    path = Path(path)
    if is_harbor_task(path):
        if is_terminal_bench_task(path):
            raise TbscaleError(f"{path}: has both task.toml and task.yaml; keep the one this task is written in")
        return load_harbor_task(path, task_id)
    if is_terminal_bench_task(path):
        return load_terminal_bench_task(path, task_id)
    if path.is_file():
        raise TbscaleError(f"{path}: is a file; a task is a folder with task.toml or task.yaml")
    raise TbscaleError(f"{path}: not a task directory (no task.toml or task.yaml)")


def discover_task_dirs(root: Path) -> list[Path]:
    """The task folders `root` names: itself, the task folders below it at any depth, or the
    entries of a registry.json / dataset.toml that are on disk."""
    return [f.path for f in discover(root).tasks]


def load_tasks(root: Path, include: list[str] | None = None, exclude: list[str] | None = None,
               on_error: str = "raise", dataset: str | None = None) -> tuple[list[Task], list[tuple[Path, str]]]:
    """Load every task under root. Returns (tasks, problems); with on_error="raise" the first
    broken task raises, with "collect" broken ones are returned as (path, message). `include` and
    `exclude` match task ids (the folder name, or the relative path when names clash) or folder
    names. Registry / manifest entries that are not on disk are problems too."""
    found = discover(root, dataset=dataset)
    tasks, problems = [], []
    for label, msg in found.missing:
        if on_error == "raise":
            raise TbscaleError(f"{root}: {msg}")
        problems.append((Path(label), msg))
    selected = set()
    for f in found.tasks:
        names = {f.id, f.path.name}
        if include is not None and not names & set(include):
            continue
        if exclude and names & set(exclude):
            continue
        selected |= names
        try:
            tasks.append(load_task(f.path, f.id))
        except TbscaleError as e:
            if on_error == "raise":
                raise
            problems.append((f.path, str(e)))
    if include is not None:
        missing = sorted(set(include) - selected)
        if missing:
            raise TbscaleError(f"{root}: tasks named in `include` not found: {', '.join(missing)}")
    return tasks, problems
