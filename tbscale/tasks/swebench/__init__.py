"""SWE-bench instances as Tasks (see docs/swebench.md): rows from `datasets` or a swebench task
repo, filtered as the config says, each with its image name and grading data. Building images
and grading live in the environment and verifier layers. swebench itself and `datasets` are
imported only when instances are loaded (they take seconds to import)."""

from __future__ import annotations

from typing import Any

from tbscale.tasks.model import Task
from tbscale.tasks.swebench.config import SWEbenchSource, parse_source
from tbscale.tasks.swebench.row import SWEbenchRow

__all__ = ["SWEbenchSource", "load_swebench_tasks", "parse_source", "select_instances"]


def select_instances(source: dict[str, Any] | SWEbenchSource, include: list[str] | None = None,
                     exclude: list[str] | None = None) -> tuple[SWEbenchSource, list[SWEbenchRow]]:
    """The configured instances (rows), filtered and checked."""
    from tbscale.tasks.swebench import dataset

    src = parse_source(source)
    rows = dataset.load_instances(src)
    rows = dataset.select(rows, src, include, exclude)
    dataset.check_columns(rows, src.dataset or src.task_repo)
    return src, rows


def load_swebench_tasks(source: dict[str, Any] | SWEbenchSource, include: list[str] | None = None,
                        exclude: list[str] | None = None) -> tuple[SWEbenchSource, list[SWEbenchRow], list[Task]]:
    """One Task per selected instance, with the rows they came from (image building needs them)."""
    from tbscale.tasks.swebench.images import resolve_image
    from tbscale.tasks.swebench.instances import make_task

    src, rows = select_instances(source, include, exclude)
    tasks = [make_task(r, resolve_image(r, src), src) for r in rows]
    if src.task_repo:
        for t in tasks:
            t.extra["grading"]["task_repo"] = src.task_repo
    return src, rows, tasks
