"""Executors: how the planned trials are spread out. `local` runs them as asyncio tasks in this
process; `ray` (optional extra) runs each as a Ray task on a cluster. The config's `executor`
chooses; Ray is imported only when it is chosen."""

from __future__ import annotations

from tbscale.config import Experiment
from tbscale.runner.executors.local import LocalExecutor


def executor_for(exp: Experiment):
    name = exp.executor.name
    if name == "local":
        return LocalExecutor(exp.concurrency)
    if name == "ray":
        from tbscale.runner.executors.ray import RayExecutor

        return RayExecutor(exp, **exp.executor.params())
    raise ValueError(f"unknown executor {name!r}")
