"""One task as a run would give it (`tbscale tasks show`): the instruction exactly as the agent gets
it, and the environment resolved the way the run time resolves it (runner/environment.py): the image, the
limits, the network of every phase, the users, the working folder, the verifier, the artifacts, the
steps, and the keys not enforced on this engine. Plain data, so `--json` and the text say the same."""

from __future__ import annotations

from typing import Any

from typing_extensions import NotRequired, TypedDict

from tbscale.config import Experiment
from tbscale.environments import Capabilities
from tbscale.runner.enforcement import not_enforced
from tbscale.runner.repository_history import repository_paths
from tbscale.tasks import Task
from tbscale.tasks.model import (DEFAULT_AGENT_TIMEOUT_SEC, EnvironmentSpec, NetworkPolicy, VerifierSpec,
                                 environment_of, uses_compose)


CopiedIn = TypedDict("CopiedIn", {"from": str, "to": str})  # `from` is a keyword: spelled the functional way


class ImageInfo(TypedDict, total=False):
    """Where an environment's image comes from, and how it runs (compose project or one container)."""

    image: str
    built: bool
    dockerfile: str
    context: str
    compose_file: str
    services: list[str]
    main_service: str | None
    runs_as: str
    copied_into_workdir: str
    copied_in: list[CopiedIn]


class Resources(TypedDict):
    cpus: float | str  # "no limit" when none is set
    memory_mb: int | str
    storage_mb: str | None
    gpus: int | None
    gpu_types: list[str] | None
    tpu: str | None  # "<type> (<topology>)"
    pids_limit: int | None
    build_timeout_sec: float | None


class EnvironmentInfo(ImageInfo, total=False):
    workdir: str
    env: list[str]  # the variables' names (values may be secrets)
    resources: Resources
    healthcheck: dict[str, Any] | None  # the task's HealthcheckSpec, dumped
    skills_dir: str | None
    mcp_servers: list[dict[str, Any]]  # each server's spec, dumped, its headers' names only


class CollectHookInfo(TypedDict):
    command: str
    service: str
    timeout_sec: float
    user: str | int | None


class VerifierInfo(TypedDict):
    mode: str
    timeout_sec: float
    command: str | None
    user: str | int
    cwd: str
    network: str
    env: list[str]
    reward: str
    tests: NotRequired[list[str]]  # shared mode: what is mounted where
    environment: NotRequired[ImageInfo]  # separate mode: the verifier's own environment
    collect: NotRequired[list[CollectHookInfo]]


class AgentInfo(TypedDict):
    user: str | int
    timeout_sec: float
    timeout_note: str | None


class SolutionInfo(TypedDict):
    folder: str | None
    command: str | None
    env: list[str]
    commands: list[str]  # a terminal-bench task's solution.yaml commands


class ArtifactInfo(TypedDict):
    source: str
    destination: str | None
    exclude: list[str]
    service: str | None


class StepInfo(TypedDict):
    name: str
    instruction: str
    agent_timeout_sec: float | None
    agent_user: str | int | None
    agent_network: str
    verifier: VerifierInfo
    min_reward: float | None
    setup: str | None
    artifacts: list[str]


class LegacyInfo(TypedDict):
    parser: str | None
    tests_user: str | int
    test_env: dict[str, str]
    run_tests_in_same_shell: bool


class TaskDescription(TypedDict):
    """Everything `tasks show` prints (and `--json` writes), in this order."""

    id: str
    format: str
    path: str | None
    config: str | None
    name: str | None
    variant: str | None
    metadata: dict[str, Any]  # the task's own metadata table, as its file has it
    instruction: str | None
    environment: EnvironmentInfo
    network: dict[str, str]  # phase (environment, agent, verifier) -> its policy in words
    agent: AgentInfo
    verifier: VerifierInfo
    solution: SolutionInfo
    artifacts: list[ArtifactInfo]
    steps: list[StepInfo]
    multi_step_reward_strategy: str | None
    not_enforced: list[dict[str, str]]  # {key, why}
    legacy: NotRequired[LegacyInfo]
    repositories: NotRequired[RepositoriesInfo]


def _policy(policy: NetworkPolicy) -> str:
    if policy.mode == "allowlist":
        return "allowlist: " + (", ".join(policy.allowed_hosts) or "(empty: no network)")
    return {"public": "public (the internet and the task's services)",
            "no-network": "no-network (nothing, not even the task's services)"}[policy.mode]


def _image(task: Task, env: EnvironmentSpec) -> ImageInfo:
    out: ImageInfo = {}
    if env.image:
        out["image"] = env.image
        out["built"] = False
    elif env.dockerfile is not None:
        out["dockerfile"] = str(env.dockerfile)
        out["context"] = str(env.context_dir)
        out["built"] = True
    if env.compose_file is not None:
        out["compose_file"] = str(env.compose_file)
        out["services"] = list(env.services)
        out["main_service"] = env.main_service
        out["runs_as"] = "a compose project" if uses_compose(task, env) else "one container"
    if env.upload_dir is not None:
        out["copied_into_workdir"] = str(env.upload_dir)
    for local, target in env.copy_in:
        out.setdefault("copied_in", []).append({"from": str(local), "to": target})
    return out


def _resources(env: EnvironmentSpec, exp: Experiment, caps: Capabilities | None) -> Resources:
    cfg = exp.environment
    cpus, memory = cfg.cpus or env.cpus, cfg.memory_mb or env.memory_mb
    if env.storage_mb is None:
        storage = None
    elif caps is None:
        storage = f"{env.storage_mb} MB if the engine can enforce a quota (no engine was asked)"
    elif caps.storage_quota:
        storage = f"{env.storage_mb} MB (a quota on this engine)"
    elif cfg.storage_limit == "enforce":
        storage = f"{env.storage_mb} MB: refused here (this engine has no quota; storage_limit: enforce)"
    else:
        storage = f"{env.storage_mb} MB: not enforced here (this engine has no quota), as under Harbor's Docker backend"
    return {"cpus": cpus if cpus else "no limit", "memory_mb": memory if memory else "no limit",
            "storage_mb": storage, "gpus": env.gpus, "gpu_types": env.gpu_types,
            "tpu": f"{env.tpu.type} ({env.tpu.topology})" if env.tpu is not None else None, "pids_limit": cfg.pids_limit,
            "build_timeout_sec": cfg.build_timeout_sec or env.build_timeout_sec}


def _verifier(task: Task, v: VerifierSpec) -> VerifierInfo:
    out: VerifierInfo = {
        "mode": v.mode, "timeout_sec": v.timeout_sec, "command": v.command,
        "user": v.user if v.user is not None else "the container's default user",
        "cwd": v.cwd or "the workdir", "network": _policy(v.network),
        "env": sorted(v.env.raw), "reward": (f"the {task.reward.parser_name} parser on the test output"
                                             if task.reward.source == "parser"
                                             else "/logs/verifier/reward.json, else reward.txt"),
    }
    if v.mode == "shared":
        out["tests"] = [f"{d} -> {v.tests_mount}" for d in v.tests_dirs] + \
                       [f"{f} -> {v.tests_mount}/{name}" for name, f in v.tests_files.items()]
    elif v.environment is not None:
        out["environment"] = _image(task, v.environment)
    if v.collect:
        out["collect"] = [{"command": c.command, "service": c.service, "timeout_sec": c.timeout_sec,
                           "user": c.user} for c in v.collect]
    return out


# With no engine asked, nothing is said to be left out for want of it, but what no engine may give.
_UNASKED = Capabilities(storage_quota=True, gpus=True,
                        why_not={"gpu_types": "no engine was asked whether it can pick a GPU model"})


class RepositoriesInfo(TypedDict):
    """The repositories the agent is asked to fix (runner/repository_history.py), checked before its
    first command for commits made after their HEAD, and what the run does with those."""

    paths: list[str]
    history: str  # environment.repository_history: keep or scrub


def describe(task: Task, exp: Experiment, caps: Capabilities | None = None) -> TaskDescription:
    """Everything `tasks show` prints; `caps` is the engine's (None: no engine was asked)."""
    env = environment_of(task)
    agent_timeout = exp.limits.agent_timeout_sec or task.agent.timeout_sec or task.agent_timeout_sec
    info: TaskDescription = {
        "id": task.id, "format": task.format, "path": str(task.path) if task.path else None,
        "config": str(task.config_path) if task.config_path else None, "name": task.name,
        "variant": task.variant, "metadata": task.metadata,
        "instruction": task.instruction if not task.steps else None,
        "environment": {**_image(task, env), "workdir": env.workdir or "the image's WORKDIR",
                        "env": sorted(env.env.raw), "resources": _resources(env, exp, caps),
                        "healthcheck": env.healthcheck.model_dump() if env.healthcheck else None,
                        "skills_dir": env.skills_dir,
                        "mcp_servers": [s.model_dump(exclude={"headers"}) | {"headers": sorted(s.headers)}
                                        for s in env.mcp_servers]},
        "network": {"environment": _policy(env.network), "agent": _policy(task.agent.network),
                    "verifier": _policy(task.verifier.network)},
        "agent": {"user": task.agent.user if task.agent.user is not None else "the image's USER",
                  "timeout_sec": agent_timeout,
                  "timeout_note": None if (task.agent.timeout_sec or exp.limits.agent_timeout_sec) else
                  f"the task sets none; tbscale bounds an attempt at {DEFAULT_AGENT_TIMEOUT_SEC:.0f} s"},
        "verifier": _verifier(task, task.verifier),
        "solution": {"folder": str(task.solution.dir) if task.solution.dir else None,
                     "command": task.solution.command if task.solution.dir else None,
                     "env": sorted(task.solution.env.raw),
                     "commands": [c["command"] for c in task.legacy.solution_commands] if task.legacy else []},
        "artifacts": [{"source": a.source, "destination": a.destination, "exclude": list(a.exclude),
                       "service": a.service} for a in task.artifacts],
        "steps": [{"name": s.name, "instruction": s.instruction, "agent_timeout_sec": s.agent.effective_timeout_sec,
                   "agent_user": s.agent.user, "agent_network": _policy(s.agent.network),
                   "verifier": _verifier(task, s.verifier), "min_reward": s.min_reward,
                   "setup": str(s.setup_script) if s.setup_script else None,
                   "artifacts": [a.source for a in s.artifacts]} for s in task.steps],
        "multi_step_reward_strategy": task.reward_strategy if task.steps else None,
        "not_enforced": [x.as_dict() for x in not_enforced(task, exp, caps or _UNASKED)],
    }
    if paths := repository_paths(task):
        info["repositories"] = {"paths": paths, "history": exp.environment.repository_history}
    if task.legacy is not None:
        info["legacy"] = {"parser": task.legacy.parser_name, "tests_user": task.legacy.test_user or "the agent's user",
                          "test_env": dict(task.legacy.test_env),
                          "run_tests_in_same_shell": task.legacy.run_tests_in_same_shell}
    return info


def as_text(info: TaskDescription) -> str:
    """The description as plain lines: `key: value`, nested tables indented, the instruction last
    and verbatim between rules."""
    lines: list[str] = []

    def emit(key: str, value: Any, depth: int) -> None:
        pad = "  " * depth
        if value is None or value == [] or value == {}:
            return
        if isinstance(value, dict):
            lines.append(f"{pad}{key}:")
            for k, v in value.items():
                emit(k, v, depth + 1)
        elif isinstance(value, list) and all(isinstance(x, dict) for x in value):
            lines.append(f"{pad}{key}:")
            for item in value:
                first = True
                for k, v in item.items():
                    if v is None or v == [] or v == {}:
                        continue
                    text = f"{v}" if not isinstance(v, (dict, list)) else repr(v)
                    lines.append(f"{pad}  {'- ' if first else '  '}{k}: {text}")
                    first = False
        elif isinstance(value, list):
            lines.append(f"{pad}{key}: {', '.join(str(x) for x in value)}")
        else:
            lines.append(f"{pad}{key}: {value}")

    for key, value in info.items():
        if key in ("instruction", "steps"):
            continue
        emit(key, value, 0)
    rule = "-" * 72
    for step in info.get("steps") or []:
        lines += [rule, f"step {step['name']}: the instruction the agent receives, verbatim:", rule,
                  step["instruction"]]
        emit(f"step {step['name']}", {k: v for k, v in step.items() if k not in ("name", "instruction")}, 0)
    if info.get("instruction") is not None:
        lines += [rule, "the instruction the agent receives, verbatim:", rule, info["instruction"], rule]
    return "\n".join(lines)
