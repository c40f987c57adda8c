"""Resolving a loaded experiment against the registries: every agent, policy, trajectory
strategy, environment backend and executor named in the config must exist and take the parameters
given, and every model a setting refers to must be a key of `models`. Problems are one line naming
the file and the key. The config layer itself knows no registry; this is the step after it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tbscale.agent.agents import agent_names, uses_model
from tbscale.config import Experiment, ModelConfig, Setting, read_experiment
from tbscale.environments import BackendOptionsError, backend_name, backend_names
from tbscale.environments.registry import environment_options
from tbscale.errors import TbscaleError
from tbscale.strategies import validate_component

EXECUTORS = ("local", "ray")


def setting_roles(exp: Experiment, setting: Setting) -> dict[str, str]:
    """role -> key of `models`, for every model a setting refers to (generator first)."""
    roles: dict[str, str] = {}
    if setting.generator and uses_model(setting.agent):
        roles["generator"] = setting.generator
    for kind in ("policy", "trajectory"):
        spec = getattr(setting, kind)
        try:
            params = validate_component(kind, spec.name, spec.params(), exp.models)
        except ValueError:
            continue  # reported by resolve_experiment
        for field, ref in params.model_refs().items():
            roles.setdefault(field, ref or setting.generator)
    return {role: key for role, key in roles.items() if key}


def referenced_models(exp: Experiment) -> dict[str, ModelConfig]:
    """The models some setting uses (key -> ModelConfig): what a run will call."""
    keys = {key for s in exp.settings for key in setting_roles(exp, s).values()}
    return {k: exp.models[k] for k in sorted(keys) if k in exp.models}


def simulated_roles(exp: Experiment, setting: Setting) -> list[str]:
    return sorted(role for role, key in setting_roles(exp, setting).items()
                  if key in exp.models and exp.models[key].is_simulated)


def resolve_experiment(exp: Experiment, path: Path | str) -> Experiment:
    known_agents = agent_names()
    for i, s in enumerate(exp.settings):
        where = f"{path}: settings[{i}]"
        if s.agent not in known_agents:
            raise TbscaleError(f"{where}.agent: unknown agent {s.agent!r} (known: {', '.join(known_agents)})")
        if uses_model(s.agent):
            if not s.generator:
                raise TbscaleError(f"{where}.generator: required for the {s.agent} agent")
            if s.generator not in exp.models:
                raise TbscaleError(f"{where}.generator: '{s.generator}' is not a key of `models`")
        for kind in ("policy", "trajectory"):
            spec = getattr(s, kind)
            try:
                validate_component(kind, spec.name, spec.params(), exp.models)
            except ValueError as e:
                raise TbscaleError(f"{where}.{kind}.{e}") from None
        _check_mixed(exp, s, where)
    if exp.environment.backend is not None and exp.environment.backend not in backend_names():
        raise TbscaleError(f"{path}: environment.backend: unknown backend {exp.environment.backend!r} "
                           f"(known: {', '.join(backend_names())})")
    try:
        environment_options(exp.environment)
    except BackendOptionsError as e:
        raise TbscaleError(f"{path}: environment.{e}") from None
    # The manifest records the backend the run used, by name, even when the config left it unset.
    exp.environment.backend = backend_name(exp.environment)
    if exp.executor.name not in EXECUTORS:
        raise TbscaleError(f"{path}: executor.name: unknown executor {exp.executor.name!r} "
                           f"(known: {', '.join(EXECUTORS)})")
    return exp


def _check_mixed(exp: Experiment, setting: Setting, where: str) -> None:
    """A simulated role beside real ones lets an answer key choose a real model's actions (or
    judge them): refused unless the config says it knows."""
    roles = setting_roles(exp, setting)
    sim = {r: k for r, k in roles.items() if exp.models[k].is_simulated}
    real = {r: k for r, k in roles.items() if not exp.models[k].is_simulated}
    if sim and real and not exp.allow_simulated_roles:
        names = lambda d: ", ".join(f"{r} '{k}' ({exp.models[k].model})" for r, k in d.items())  # noqa: E731
        raise TbscaleError(f"{where}: simulated roles ({names(sim)}) beside real ones ({names(real)}); set "
                           "`allow_simulated_roles: true` to run it anyway (every report then marks them)")


def load_experiment(path: str | Path, overrides: dict[str, Any] | None = None) -> Experiment:
    """Read an experiment YAML and resolve its names; every problem is a one-line TbscaleError."""
    return resolve_experiment(read_experiment(path, overrides), path)
