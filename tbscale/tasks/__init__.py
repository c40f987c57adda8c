"""Task loaders: Harbor and Terminal-Bench legacy directories, and SWE-bench instances, all into
one Task model."""

from __future__ import annotations

from pathlib import Path

from tbscale.errors import TbscaleError
from tbscale.tasks.harbor import is_harbor_task, load_harbor_task
from tbscale.tasks.model import Task
from tbscale.tasks.terminal_bench import is_terminal_bench_task, load_terminal_bench_task

__all__ = ["Task", "load_task", "load_tasks", "discover_task_dirs"]


def load_task(path: Path) -> Task:
    path = Path(path)
    if is_harbor_task(path):
        return load_harbor_task(path)
    if is_terminal_bench_task(path):
        return load_terminal_bench_task(path)
    raise TbscaleError(f"{path}: not a task directory (no task.toml or task.yaml)")


def discover_task_dirs(root: Path) -> list[Path]:
    """A task directory itself, or the task directories directly below a folder."""
    root = Path(root)
    if not root.exists():
        raise TbscaleError(f"{root}: no such file or directory")
    if is_harbor_task(root) or is_terminal_bench_task(root):
        return [root]
    dirs = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    found = [p for p in dirs if is_harbor_task(p) or is_terminal_bench_task(p)]
    if not found:
        raise TbscaleError(f"{root}: no task directories found (looked for task.toml / task.yaml)")
    return found


def load_tasks(root: Path, include: list[str] | None = None, exclude: list[str] | None = None,
               on_error: str = "raise") -> tuple[list[Task], list[tuple[Path, str]]]:
    """Load every task under root. Returns (tasks, problems); with on_error="raise" the first
    broken task raises, with "collect" broken ones are returned as (path, message)."""
    tasks, problems = [], []
    for d in discover_task_dirs(root):
        if include is not None and d.name not in include:
            continue
        if exclude and d.name in exclude:
            continue
        try:
            tasks.append(load_task(d))
        except TbscaleError as e:
            if on_error == "raise":
                raise
            problems.append((d, str(e)))
    if include is not None:
        missing = sorted(set(include) - {t.id for t in tasks} - {p.name for p, _ in problems})
        if missing:
            raise TbscaleError(f"{root}: tasks named in `include` not found: {', '.join(missing)}")
    return tasks, problems
