"""What a run does not carry out as a task wrote it, and why (docs/tasks.md, "What is not enforced").

Defaults follow the reference harness: where this engine cannot do what a key asks and the
reference harness does not do it either (Harbor's Docker backend never applies `storage_mb`), the
task runs as the reference runs it; where the task file has a key the reference ignored (an
unknown key), tbscale ignores it too. Each such key is named once per run (`notice`), kept in the
manifest (`summary`) and on every trial line of the task (`not_enforced`), and shown by the report.
Refusing instead is opt-in: `environment.storage_limit: enforce`, `tasks.strict_keys: true`.
"""

from __future__ import annotations

from typing import Any

from tbscale.config import Experiment
from tbscale.environments import Backend, Capabilities, backend_name
from tbscale.tasks import Task
from tbscale.tasks.model import NotEnforced
from tbscale.types.manifest import NotEnforcedTasks


def capabilities(backend: Backend | None) -> Capabilities:
    """What the backend can give beyond running commands (GPUs, a storage quota, ...); none
    without a backend."""
    return backend.capabilities() if backend is not None else Capabilities()


def environment_tables(task: Task) -> list[tuple[str, Any]]:
    """(table name, EnvironmentSpec) of every environment the task starts."""
    envs: list[tuple[str, Any]] = [("[environment]", task.environment)]
    for label, verifier in [("[verifier.environment]", task.verifier)] + \
            [(f"[steps.verifier.environment] (step \"{s.name}\")", s.verifier) for s in task.steps]:
        if verifier.environment is not None:
            envs.append((label, verifier.environment))
    return envs


def not_enforced(task: Task, exp: Experiment, caps: Capabilities) -> list[NotEnforced]:
    """The task's keys this run does not carry out as written: those the loader set aside, and
    those this backend cannot give where the reference harness does not give them either."""
    out = list(task.not_enforced)
    if not caps.gpu_types:
        why = caps.reason("gpu_types", f"the {backend_name(exp.environment)} backend cannot pick a GPU model")
        out += [NotEnforced(f"{table}.gpu_types", f"{why}: any GPU it has is given (Harbor's Docker backend ignores "
                            "the key too)") for table, env in environment_tables(task) if env.gpus and env.gpu_types]
    if not caps.storage_quota and exp.environment.storage_limit != "enforce":
        why = caps.reason("storage_quota", f"the {backend_name(exp.environment)} backend cannot enforce a storage quota")
        for table, env in environment_tables(task):
            if env.storage_mb:
                out.append(NotEnforced(f"{table}.storage_mb", f"{why}: the task runs without it, as under Harbor's "
                                       "Docker backend, which never applies it (`--storage-limit enforce` refuses "
                                       "such tasks instead)"))
    return out


def summary(tasks: list[Task], exp: Experiment, caps: Capabilities) -> list[NotEnforcedTasks]:
    """For the manifest: one entry per (key, why) with the ids of the tasks it concerns."""
    groups: dict[tuple[str, str], list[str]] = {}
    for task in tasks:
        for item in not_enforced(task, exp, caps):
            groups.setdefault((item.key, item.why), []).append(task.id)
    return [NotEnforcedTasks(key=k, why=w, tasks=ids) for (k, w), ids in sorted(groups.items(), key=lambda x: -len(x[1]))]


def notice(entries: list[NotEnforcedTasks], limit: int = 8) -> list[str]:
    """The lines a run prints once, before it starts: each key, on how many tasks, and why."""
    if not entries:
        return []
    lines = []
    for e in entries[:limit]:
        ids = e.tasks
        which = ", ".join(ids[:3]) + (f" and {len(ids) - 3} more" if len(ids) > 3 else "")
        lines.append(f"not enforced here: {e.key} ({len(ids)} task{'s' if len(ids) > 1 else ''}: {which}): "
                     f"{e.why}")
    if len(entries) > limit:
        lines.append(f"not enforced here: {len(entries) - limit} more keys (manifest.json `not_enforced` lists all)")
    return lines
