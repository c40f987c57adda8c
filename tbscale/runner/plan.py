"""From an experiment and its tasks to the plan of trials: every (setting, task, trial index),
with stable keys and paired seeds."""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from pathlib import Path

from tbscale.config import Experiment, Setting
from tbscale.runner.identity import setting_key, task_hash, trial_key, trial_seed
from tbscale.tasks import Task, load_tasks


@dataclass
class TrialSpec:
    setting: Setting
    setting_key: str
    task: Task
    trial: int
    seed: int
    key: str
    task_hash: str = ""

    @property
    def trajectory_relpath(self) -> str:
        return f"trajectories/{self.task.id}/{self.setting.name}__t{self.trial}__{self.key}.jsonl"


def plan_trials(exp: Experiment, tasks: list[Task]) -> list[TrialSpec]:
    """Every (setting, task, trial). A trial's seed depends on the task and trial index only, so
    two settings see the same seeds (a paired design); its key adds the setting's identity and the
    task's content."""
    hashes = {t.id: task_hash(t) for t in tasks}
    specs = []
    for setting in exp.settings:
        skey = setting_key(exp, setting)
        for task in tasks:
            for i in range(exp.trials):
                seed = trial_seed(exp.seed, task.id, i)
                specs.append(TrialSpec(setting, skey, task, i, seed,
                                       trial_key(task.id, hashes[task.id], skey, i, seed), hashes[task.id]))
    return specs


def swebench_tasks(source, include: list[str] | None = None, exclude: list[str] | None = None, *,
                   build: bool = True, log=None, before_build=None, backend=None) -> list[Task]:
    """One Task per selected SWE-bench instance; with `build`, their images are built first when the
    source says `build: docker` or `build: swebench` (after `before_build(tasks)`, if given), by
    `backend` (default: the one an `environment:` left out opens)."""
    from tbscale.tasks.swebench import load_swebench_tasks

    src, rows, tasks = load_swebench_tasks(source, include=include, exclude=exclude)
    if before_build is not None:
        before_build(tasks)
    if build and src.build != "none":
        if backend is None:
            from tbscale.config.experiment import EnvironmentConfig
            from tbscale.environments import open_backend

            backend = open_backend(EnvironmentConfig())
        backend.build_swebench_images(rows, {t.id: t.image for t in tasks}, src,
                                      log or (lambda m: print(m, file=sys.stderr)))
    return tasks


def experiment_dataset(exp: Experiment, log=None):
    """The registry dataset the experiment names (`tasks.dataset`), pulled into the cache at its
    pinned commits (tasks/registry.py); None for task folders and SWE-bench."""
    if exp.tasks.dataset is None:
        return None
    from tbscale.tasks.registry import pull_by_name

    return pull_by_name(exp.tasks.dataset, exp.tasks.registry, log=log)


def experiment_tasks(exp: Experiment, only: list[str] | None = None, *, build_images: bool = True,
                     log=None, dataset=None, before_build=None, backend=None) -> list[Task]:
    """The tasks an experiment names: task folders, a registry dataset (pulled first, unless
    `dataset` is the pulled one), or SWE-bench instances (whose images are built first when the
    config says so). `only` narrows them to some task ids. `before_build(tasks)`, when given, sees
    the tasks before any image is built (the checks of runner/checks.py). `backend` builds the
    SWE-bench images (default: the one the config's `environment:` opens)."""
    include = only or exp.tasks.include
    if exp.tasks.swebench is not None:
        from tbscale.environments import open_backend

        return swebench_tasks(exp.tasks.swebench, include, exp.tasks.exclude, build=build_images, log=log,
                              before_build=before_build, backend=backend or open_backend(exp.environment))
    if exp.tasks.dataset is not None:
        root = (dataset or experiment_dataset(exp, log=log)).path
    else:
        root = Path(exp.tasks.path)
    tasks, _ = load_tasks(root, include=include, exclude=exp.tasks.exclude, strict=exp.tasks.strict_keys)
    with_reward_key(tasks, exp.tasks.reward_key)
    if before_build is not None:
        before_build(tasks)
    return tasks


def with_reward_key(tasks: list[Task], key: str | None) -> list[Task]:
    """`tasks.reward_key`: the key of reward.json each task's verdict is read from (tasks whose
    reward comes from a reward file; a legacy parser's verdict has no keys)."""
    if key is not None:
        for task in tasks:
            if task.reward.source == "file":
                task.reward = replace(task.reward, primary_key=key)
    return tasks
