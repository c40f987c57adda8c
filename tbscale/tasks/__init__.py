"""Task loaders: Harbor and Terminal-Bench legacy directories, and SWE-bench instances, all into
one Task model. Discovery (folders at any depth, registry.json, dataset.toml) is in discover.py."""

from __future__ import annotations

from pathlib import Path

from tbscale.errors import TbscaleError
from tbscale.tasks.discover import Discovery, FoundTask, discover, is_task_dir
from tbscale.tasks.harbor import is_harbor_task, load_harbor_task
from tbscale.tasks.model import Task
from tbscale.tasks.terminal_bench import is_terminal_bench_task, load_terminal_bench_task, load_terminal_bench_tasks

__all__ = ["Task", "load_task", "load_task_variants", "load_tasks", "discover_task_dirs", "discover", "Discovery", "FoundTask", "is_task_dir"]


def load_task(path: Path, task_id: str | None = None, strict: bool = False) -> Task:
    """One task: a Harbor folder's, or one of a task.yaml folder's (the variant `task_id` names,
    else its base task). `strict` refuses keys the reference harness would have ignored."""
    path = Path(path)
    _check_task_dir(path)
    if is_harbor_task(path):
        return load_harbor_task(path, task_id, strict=strict)
    return load_terminal_bench_task(path, task_id, strict=strict)


def load_task_variants(path: Path, task_id: str | None = None, strict: bool = False) -> list[Task]:
    """Every task a folder makes: one, or (task.yaml with `descriptions`) one per entry."""
    path = Path(path)
    _check_task_dir(path)
    if is_harbor_task(path):
        return [load_harbor_task(path, task_id, strict=strict)]
    return load_terminal_bench_tasks(path, task_id, strict=strict)


def _check_task_dir(path: Path) -> None:
    if is_harbor_task(path):
        if is_terminal_bench_task(path):
            raise TbscaleError(f"{path}: has both task.toml and task.yaml; keep the one this task is written in")
        return
    if is_terminal_bench_task(path):
        return
    if path.is_file():
        raise TbscaleError(f"{path}: is a file; a task is a folder with task.toml or task.yaml")
    raise TbscaleError(f"{path}: not a task directory (no task.toml or task.yaml)")


def discover_task_dirs(root: Path) -> list[Path]:
    """The task folders `root` names: itself, the task folders below it at any depth, or the
    entries of a registry.json / dataset.toml that are on disk."""
    return [f.path for f in discover(root).tasks]


def _wanted(f: FoundTask, include: list[str] | None) -> bool:
    """Whether a folder may hold a task `include` names (its id, folder name, or a variant id)."""
    if include is None:
        return True
    return any(name in (f.id, f.path.name) or name.startswith(f"{f.id}.") or name.startswith(f"{f.path.name}.")
               for name in include)


def load_tasks(root: Path, include: list[str] | None = None, exclude: list[str] | None = None,
               on_error: str = "raise", dataset: str | None = None,
               strict: bool = False) -> tuple[list[Task], list[tuple[Path, str]]]:
    """Load every task under root. Returns (tasks, problems); with on_error="raise" the first
    broken task raises, with "collect" broken ones are returned as (path, message). `include` and
    `exclude` match task ids (the folder name, `<folder>.<key>` for a task.yaml variant, or the
    relative path when names clash); a folder name also matches every task of that folder that
    no id matches exactly. Registry / manifest entries that are not on disk are problems too.
    `strict` refuses keys the reference harness would have ignored."""
    found = discover(root, dataset=dataset)
    tasks, problems = [], []
    for label, msg in found.missing:
        if on_error == "raise":
            raise TbscaleError(f"{root}: {msg}")
        problems.append((Path(label), msg))
    loaded: list[tuple[FoundTask, Task]] = []
    for f in found.tasks:
        if not _wanted(f, include):
            continue
        try:
            loaded += [(f, t) for t in load_task_variants(f.path, f.id, strict=strict)]
        except TbscaleError as e:
            if on_error == "raise":
                raise
            problems.append((f.path, str(e)))
    ids = {t.id for _, t in loaded}

    def matches(f: FoundTask, t: Task, names: list[str]) -> bool:
        folder = {f.id, f.path.name} - ids  # a folder name that is no task's own id
        return t.id in names or bool(folder & set(names))

    selected = set()
    for f, t in loaded:
        if include is not None and not matches(f, t, include):
            continue
        if exclude and matches(f, t, exclude):
            continue
        selected |= {t.id, f.id, f.path.name}
        tasks.append(t)
    if include is not None:
        missing = sorted(set(include) - selected)
        if missing:
            # Named by a config's `tasks.include`, `run --tasks` or `tasks show`: the message says
            # which names match nothing and which ids there are to choose from.
            known = sorted({f.id for f in found.tasks})  # the folders found (variants are not loaded unless named)
            listed = ", ".join(known[:8]) + (f", ... ({len(known)} in all)" if len(known) > 8 else "")
            raise TbscaleError(f"{root}: no task named {', '.join(missing)} here"
                               + (f"; its tasks: {listed}" if known else "; it holds no task"))
    return tasks, problems
