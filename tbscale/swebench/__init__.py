"""SWE-bench in tbscale: instances as Tasks, their images, patches, and grading with the swebench
package (pinned in pyproject.toml; see docs/swebench.md).

Importing this package registers the "swebench" verifier; swebench itself and `datasets` are
imported only when instances are loaded or graded (they take seconds to import).
"""

from __future__ import annotations

import sys
from typing import Any

from tbscale.swebench.config import SWEbenchSource, parse_source
from tbscale.tasks.model import Task
from tbscale.verify import VerifierResult, register_verifier

__all__ = ["load_swebench_tasks", "select_instances", "SWEbenchSource", "verify"]


def verify(task, box, timeout_sec: float) -> VerifierResult:
    from tbscale.swebench.grading import verify_swebench

    return verify_swebench(task, box, timeout_sec)


register_verifier("swebench", verify)


def select_instances(source: dict[str, Any] | SWEbenchSource, include: list[str] | None = None,
                     exclude: list[str] | None = None) -> tuple[SWEbenchSource, list[dict[str, Any]]]:
    """The configured instances (rows), filtered and checked."""
    from tbscale.swebench import dataset

    src = parse_source(source)
    rows = dataset.load_instances(src)
    rows = dataset.select(rows, src, include, exclude)
    dataset.check_columns(rows, src.dataset or src.task_repo)
    return src, rows


def load_swebench_tasks(source: dict[str, Any] | SWEbenchSource, include: list[str] | None = None,
                        exclude: list[str] | None = None, *, build: bool = True, log=None) -> list[Task]:
    """One Task per selected instance. With build (the default) the images are built first when
    the config says `build: docker` or `build: swebench`."""
    from tbscale.swebench.images import prepare_images, resolve_image
    from tbscale.swebench.tasks import make_task

    src, rows = select_instances(source, include, exclude)
    images = {r["instance_id"]: resolve_image(r, src) for r in rows}
    if build:
        prepare_images(rows, images, src, log=log or (lambda m: print(m, file=sys.stderr)))
    tasks = [make_task(r, images[r["instance_id"]], src) for r in rows]
    if src.task_repo:
        for t in tasks:
            t.extra["grading"]["task_repo"] = src.task_repo
    return tasks

