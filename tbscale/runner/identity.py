"""What identifies a setting and a trial, so that resuming never mixes two configurations.

A setting's key covers exactly what determines its trials: the models it refers to (not the
others in `models`), its agent, policy and trajectory strategy with their parameters, the limits,
the behaviour-changing part of the environment, the contents of every prompt file it uses, and the
experiment seed. A trial's key adds the task, the task's content hash, and the trial index and
seed. Adding a setting or a model therefore never touches finished trials; editing a prompt file,
the seed or a model's parameters changes the key, and `tbscale run` names what changed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tbscale.config import Experiment, Setting
from tbscale.runner.resolve import setting_roles
from tbscale.seeds import derive_seed, hash_directory, hash_file, stable_hash
from tbscale.strategies import entry
from tbscale.tasks import Task

# Model settings that change how calls are made, not what comes back.
_CALL_ONLY = {"timeout_sec", "max_retries", "retry_backoff_sec", "circuit_breaker_tries", "api_key_env"}
# Environment settings that change where attempts run, not what they do: the backend and its own
# options, under `options:` or spelt flat beside the section's keys (a backend that cannot run a
# task as written refuses it, never runs it otherwise).
_PLACE_ONLY = {"backend", "options"}


def _file_digest(path: str) -> str:
    p = Path(path)
    return hash_file(p) if p.is_file() else f"missing:{path}"


def _environment_identity(exp: Experiment) -> dict[str, Any]:
    env = exp.environment.model_dump(mode="json", exclude=_PLACE_ONLY | set(exp.environment.model_extra or {}))
    # `auto` (the default) and `enforce` run every task they do not refuse the same way, and a
    # refusal is an infrastructure error, never a result; leaving them out keeps the keys of runs
    # made before the option existed, or when `enforce` was its default.
    if env.get("storage_limit") in ("auto", "enforce"):
        env.pop("storage_limit")
    if env.get("agent_processes") == "stop":  # the default, likewise
        env.pop("agent_processes")
    if env.get("file_checks") == "inside":  # the default, likewise
        env.pop("file_checks")
    if env.get("repository_history") == "keep":  # the default, likewise; `scrub` changes what the agent is given
        env.pop("repository_history")
    return env


def setting_identity(exp: Experiment, setting: Setting) -> dict[str, Any]:
    models = {role: {"key": key, **exp.models[key].model_dump(mode="json", exclude=_CALL_ONLY)}
              for role, key in sorted(setting_roles(exp, setting).items()) if key in exp.models}
    prompt_files = {f"prompts.{name}": _file_digest(path) for name, path in sorted(exp.prompts.items())}
    for kind in ("policy", "trajectory"):
        spec = getattr(setting, kind)
        params = entry(kind, spec.name).params.model_validate(spec.params())
        for field, path in sorted(params.file_refs().items()):
            prompt_files[f"{kind}.{field}"] = _file_digest(path)
    # The reward key decides the verdict; it is named only when given, so that runs made before it
    # existed keep their keys.
    reward = {"reward_key": exp.tasks.reward_key} if exp.tasks.reward_key is not None else {}
    return {
        "name": setting.name, "agent": setting.agent, "action_format": setting.action_format,
        "policy": setting.policy.model_dump(mode="json"), "trajectory": setting.trajectory.model_dump(mode="json"),
        "models": models, "limits": exp.limits.model_dump(mode="json"),
        "environment": _environment_identity(exp),
        "prompt_files": prompt_files, "seed": exp.seed, **reward,
    }


def key_of(identity: dict[str, Any]) -> str:
    return stable_hash(json.dumps(identity, sort_keys=True), length=12)


def setting_key(exp: Experiment, setting: Setting) -> str:
    return key_of(setting_identity(exp, setting))


def identity_changes(old: dict[str, Any], new: dict[str, Any], prefix: str = "") -> list[str]:
    """Dotted paths where two identities differ (`models.generator.temperature`, `seed`)."""
    out = []
    for k in sorted(set(old) | set(new)):
        path = f"{prefix}{k}"
        a, b = old.get(k), new.get(k)
        if isinstance(a, dict) and isinstance(b, dict):
            out += identity_changes(a, b, path + ".")
        elif a != b:
            out.append(path)
    return out


def task_hash(task: Task) -> str:
    """Content hash of a task: its folder's files, or its instance row (SWE-bench)."""
    if task.path is not None and Path(task.path).is_dir():
        return hash_directory(Path(task.path))
    return stable_hash(task.id, json.dumps(task.extra.get("instance", {}), sort_keys=True, default=str))


def trial_seed(experiment_seed: int, task_id: str, trial: int) -> int:
    """The same for every setting: settings are compared on paired seeds."""
    return derive_seed(experiment_seed, task_id, trial)


def trial_key(task_id: str, task_digest: str, skey: str, trial: int, seed: int) -> str:
    return stable_hash(task_id, task_digest, skey, trial, seed)
