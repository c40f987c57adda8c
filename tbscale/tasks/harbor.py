"""Harbor task folders (task.toml schema 1.0 to 1.4) into a Task.

Single-step layout: instruction.md, task.toml, environment/ (Dockerfile and/or docker-compose.yaml,
or [environment].docker_image), tests/test.sh (writes /logs/verifier/reward.txt or reward.json),
solution/solve.sh. Multi-step layout: [[steps]] in task.toml and steps/<name>/{instruction.md,
tests/, solution/, workdir/ (+ setup.sh)}, with an optional shared tests/.

Every key of the file is either carried into the Task or refused with a one-line error naming the
file and the key (docs/tasks.md lists which). Checks that depend on the machine the task runs on
(a GPU on the engine, host variables for ${VAR} templates) are left to run time.
"""

from __future__ import annotations

import copy
import difflib
import re
import tomllib
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from tbscale.errors import TbscaleError
from tbscale.tasks.envvars import EnvTable
from tbscale.tasks.files import find_compose_file, read_compose, read_instruction, read_text
from tbscale.tasks.model import (
    DEFAULT_CPUS,
    DEFAULT_MEMORY_MB,
    AgentSpec,
    EnvironmentSpec,
    NetworkPolicy,
    NotEnforced,
    RewardSpec,
    SolutionSpec,
    StepSpec,
    Task,
    TpuRequest,
    VerifierSpec,
)
from tbscale.tasks.schema import (
    MAIN_SERVICE,
    AgentConfig,
    Artifact,
    EnvironmentConfig,
    StepConfig,
    TaskConfig,
    VerifierConfig,
)


def is_harbor_task(path: Path) -> bool:
    return (path / "task.toml").is_file()


# ---- reading and validating task.toml ------------------------------------------------------------

_UNION_TAG = re.compile(r"^(float|int|str|bool|none|dict\[.*\]|list\[.*\]|function-.*|literal\[.*\]|"
                        r"Artifact|TaskConfig)$")


def _model_at(loc: list[str | int]) -> type[BaseModel] | None:
    """The schema model that holds the last key of `loc` (for "did you mean" hints)."""
    model: type[BaseModel] | None = TaskConfig
    for part in loc[:-1]:
        if isinstance(part, int) or model is None:
            continue
        field = model.model_fields.get(part)
        if field is None:
            return None
        model = _find_model(field.annotation)
    return model


def _find_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _find_model(arg)
        if found is not None:
            return found
    return None


def _where(loc: list[str | int], data: dict, key_is_table: bool = True) -> str:
    """A TOML-style name for a location: `[environment.healthcheck].retries`,
    `[steps.verifier].timeout_sec (step "implement")`, `artifacts[2].destination`."""
    notes, tables, key = [], [], None
    node: Any = data
    for i, part in enumerate(loc):
        last = i == len(loc) - 1
        if isinstance(part, int):
            if tables == ["steps"] and isinstance(node, list) and part < len(node) and isinstance(node[part], dict):
                notes.append(f"step \"{node[part].get('name', part + 1)}\"")
            elif tables and tables[-1] in ("artifacts", "collect", "mcp_servers", "authors"):
                notes.append(f"entry {part + 1}")
            elif tables:
                tables[-1] += f"[{part}]"
        elif last:
            key = part
        else:
            tables.append(part)
        node = node[part] if isinstance(node, (dict, list)) and _has(node, part) else None
    if key_is_table and key is not None and isinstance(node, dict):  # an error about a whole table
        tables.append(key)
        key = None
    if tables and tables[-1] == "artifacts":
        text = ".".join(tables) + (f".{key}" if key else "")
    elif tables:
        text = f"[{'.'.join(tables)}]" + (f".{key}" if key else "")
    else:
        text = key or "(top level)"
    return text + (f" ({', '.join(notes)})" if notes else "")


def _has(node: Any, part: str | int) -> bool:
    if isinstance(node, dict):
        return part in node
    return isinstance(part, int) and 0 <= part < len(node)


def _unknown_key_name(e: dict, data: dict) -> tuple[list[str | int], str]:
    """(location, `unknown key [table].key (did you mean ...)` text) of an extra_forbidden error."""
    loc = [p for p in e["loc"] if not (isinstance(p, str) and _UNION_TAG.match(p))]
    where = _where(loc, data, key_is_table=False)
    hint = ""
    model = _model_at(loc)
    if model is not None and isinstance(loc[-1], str):
        close = difflib.get_close_matches(loc[-1], list(model.model_fields), n=1)
        if close:
            hint = f" (did you mean `{close[0]}`?)"
    return loc, (f"{where}{hint}" if len(loc) > 1 else f"`{where}`{hint}")


def _validation_message(err: ValidationError, data: dict) -> str:
    errors = err.errors(include_url=False)
    # Prefer the most specific error: unknown keys first, then the deepest location.
    errors.sort(key=lambda e: (e["type"] != "extra_forbidden", -len(e["loc"])))
    e = errors[0]
    loc = [p for p in e["loc"] if not (isinstance(p, str) and _UNION_TAG.match(p))]
    if e["type"] == "extra_forbidden":
        unknown = [_unknown_key_name(x, data)[1] for x in errors if x["type"] == "extra_forbidden"]
        unknown = list(dict.fromkeys(unknown))
        label = "unknown key" if len(loc) > 1 or len(unknown) > 1 else "unknown top-level key"
        msg = f"{label}{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}"
        more = len([x for x in errors if x["type"] != "extra_forbidden"])
    else:
        where = _where(loc, data, key_is_table=True)
        text = e["msg"].removeprefix("Value error, ")
        if e["type"] not in ("value_error", "assertion_error", "missing") and "input" in e:
            text += f", got {e['input']!r}"
        msg = f"{where}: {text}" if loc else text
        more = len(errors) - 1
    return msg + (f" (and {more} more problem{'s' if more > 1 else ''})" if more else "")


def _drop(data: Any, loc: list[str | int]) -> bool:
    node = data
    for part in loc[:-1]:
        if not _has(node, part) if isinstance(node, (dict, list)) else True:
            return False
        node = node[part]
    if isinstance(node, dict) and loc and loc[-1] in node:
        del node[loc[-1]]
        return True
    return False


def read_task_config(toml_path: Path, strict: bool = False) -> tuple[TaskConfig, dict, list[NotEnforced]]:
    """The validated task.toml, its raw data, and the unknown keys left out. Harbor's TaskConfig
    ignores keys it does not know, so tbscale does too and names them; `strict` refuses them, all
    in one message."""
    text = read_text(toml_path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise TbscaleError(f"{toml_path}: not valid TOML ({e})") from None
    _refuse_windows(data, toml_path)  # before validation: such files may use Windows paths
    ignored: list[NotEnforced] = []
    work = copy.deepcopy(data)
    for _ in range(20):  # each pass removes the unknown keys pydantic reports
        try:
            return TaskConfig.model_validate(work), data, ignored
        except ValidationError as e:
            errors = e.errors(include_url=False)
            unknown = [x for x in errors if x["type"] == "extra_forbidden"]
            if strict or not unknown:
                raise TbscaleError(f"{toml_path}: {_validation_message(e, work)}") from None
            for x in unknown:
                loc, name = _unknown_key_name(x, work)
                key, _, hint = name.partition(" (did you mean ")
                if _drop(work, loc):
                    ignored.append(NotEnforced(key.strip("`"), "not a key of Harbor's task.toml: ignored, as Harbor "
                                               "ignores it" + (f" (did you mean {hint}" if hint else "")))
    raise TbscaleError(f"{toml_path}: could not read the task configuration")


# ---- refusals that are not schema errors -------------------------------------------------------

def _refuse_windows(data: dict, toml_path: Path) -> None:
    tables: list[tuple[str, Any]] = [("[environment]", data.get("environment"))]
    verifier = data.get("verifier")
    if isinstance(verifier, dict):
        tables.append(("[verifier.environment]", verifier.get("environment")))
    for step in data.get("steps") or []:
        if isinstance(step, dict) and isinstance(step.get("verifier"), dict):
            tables.append((f"[steps.verifier.environment] (step \"{step.get('name')}\")",
                           step["verifier"].get("environment")))
    for table, env in tables:
        if isinstance(env, dict) and isinstance(env.get("os"), str) and env["os"].lower() == "windows":
            raise TbscaleError(f"{toml_path}: {table}.os = \"{env['os']}\": windows tasks are not supported "
                               "(tbscale runs Linux containers)")


# ---- building the Task ---------------------------------------------------------------------------

def _policy(mode: str, hosts: list[str] | None) -> NetworkPolicy:
    return NetworkPolicy(mode, tuple(hosts or ()))  # type: ignore[arg-type]


def _explicit(cfg: AgentConfig | VerifierConfig | None) -> NetworkPolicy | None:
    if cfg is None or cfg.network_mode is None:
        return None
    return _policy(cfg.network_mode, cfg.allowed_hosts)


def _environment_spec(cfg: EnvironmentConfig, folder: Path | None, where: str, table: str,
                      what: str) -> EnvironmentSpec:
    """An EnvironmentSpec from an [environment]-shaped table and the folder that holds its build
    files (environment/ for the agent, tests/ for a separate verifier)."""
    has_folder = folder is not None and folder.is_dir()
    dockerfile = folder / "Dockerfile" if has_folder and (folder / "Dockerfile").is_file() else None
    compose = find_compose_file(folder) if has_folder else None
    services = read_compose(compose) if compose else {}
    main = services.get(MAIN_SERVICE, {})
    if not (cfg.docker_image or dockerfile or main.get("image") or main.get("build")):
        if compose:
            raise TbscaleError(f"{compose}: services.main sets no image or build, and there is no "
                               f"{folder / 'Dockerfile'} nor {table}.docker_image ({what})")
        shown = folder / "Dockerfile" if folder is not None else "Dockerfile"
        raise TbscaleError(f"{shown}: missing, and {where} sets no {table}.docker_image and there is no "
                           f"docker-compose.yaml ({what})")
    upload = None
    if cfg.docker_image and not dockerfile and not compose and has_folder and any(folder.iterdir()):
        upload = folder  # Harbor: a prebuilt image's environment files are copied into the workdir
    mode, hosts = cfg.baseline_network()
    return EnvironmentSpec(
        context_dir=folder if (dockerfile or compose) else None,
        dockerfile=dockerfile,
        image=cfg.docker_image,
        compose_file=compose,
        main_service=MAIN_SERVICE,
        services=list(services),
        upload_dir=upload,
        os=cfg.os,
        build_timeout_sec=cfg.build_timeout_sec,
        cpus=cfg.cpus,
        memory_mb=cfg.memory_mb,
        storage_mb=cfg.storage_mb,
        gpus=cfg.gpus,
        gpu_types=list(cfg.gpu_types) if cfg.gpu_types is not None else None,
        tpu=TpuRequest(cfg.tpu.type, cfg.tpu.topology) if cfg.tpu is not None else None,
        network=_policy(mode, hosts),
        healthcheck=cfg.healthcheck,
        env=EnvTable(cfg.env, where=f"{where}: {table.rstrip(']')}.env]"),
        skills_dir=cfg.skills_dir,
        mcp_servers=list(cfg.mcp_servers),
        workdir=cfg.workdir,
    )


def _check_services(env: EnvironmentSpec, artifacts: list[Artifact], hooks, where: str, label: str) -> None:
    """Artifacts and collect hooks that name a sidecar need that service in the compose file."""
    named = [(f"{label}artifacts", a.effective_service) for a in artifacts]
    named += [(f"{label}[[verifier.collect]]", h.service) for h in hooks]
    for what, service in named:
        if service == MAIN_SERVICE:
            continue
        if env.compose_file is None:
            raise TbscaleError(f"{where}: {what} names service {service!r}, but the task has no "
                               "environment/docker-compose.yaml")
        if service not in env.services:
            raise TbscaleError(f"{where}: {what} names service {service!r}, which {env.compose_file} does not "
                               f"declare (services: {', '.join(env.services)})")


def _agent_spec(task: AgentConfig, step: AgentConfig | None, baseline: NetworkPolicy) -> AgentSpec:
    override = _explicit(step) or _explicit(task)
    timeout = step.timeout_sec if step is not None and step.timeout_sec is not None else task.timeout_sec
    user = step.user if step is not None and step.user is not None else task.user
    return AgentSpec(timeout_sec=timeout, user=user, network=override or baseline, network_override=override)


def _verifier_spec(cfg: TaskConfig, step: StepConfig | None, path: Path, agent_env: EnvironmentSpec,
                   where: str) -> VerifierSpec:
    tv, sv = cfg.verifier, (step.verifier if step is not None else None)
    label = f" (step \"{step.name}\")" if step is not None else ""

    def explicit_mode(v: VerifierConfig | None) -> str | None:
        if v is None:
            return None
        return v.environment_mode or ("separate" if v.environment is not None else None)

    mode = explicit_mode(sv) or explicit_mode(tv) or "shared"
    task_tests = path / "tests" if (path / "tests").is_dir() else None
    step_tests = None
    if step is not None and (path / "steps" / step.name / "tests").is_dir():
        step_tests = path / "steps" / step.name / "tests"
    tests_dirs = [d for d in (task_tests, step_tests) if d is not None]
    test_script = None
    for d in (step_tests, task_tests):
        if d is not None and (d / "test.sh").is_file():
            test_script = d / "test.sh"
            break

    env = EnvTable(tv.env, where=f"{where}: [verifier.env]")
    if sv is not None and sv.env:
        env = env.merged(sv.env, where=f"{where}: [verifier.env] + [steps.verifier.env]{label}")

    separate_env = None
    if mode == "separate":
        if sv is not None and sv.environment is not None:
            env_cfg, table = sv.environment, "[steps.verifier.environment]"
        elif tv.environment is not None:
            env_cfg, table = tv.environment, "[verifier.environment]"
        else:
            env_cfg, table = cfg.environment, "[environment]"
        context = step_tests or task_tests
        if context is None:
            raise TbscaleError(f"{path / 'tests'}: missing (a separate verifier environment{label} is built "
                               "from the tests folder)")
        separate_env = _environment_spec(env_cfg, context, where, table,
                                         f"the separate verifier environment{label} is built from "
                                         f"{context.relative_to(path)}/")
        baseline = separate_env.network
    else:
        if test_script is None:
            expected = f"{path / 'steps' / step.name / 'tests' / 'test.sh'} or " if step is not None else ""
            raise TbscaleError(f"{expected}{path / 'tests' / 'test.sh'}: missing (the verifier entry point{label})")
        baseline = agent_env.network
    override = _explicit(sv) or _explicit(tv)
    timeout = sv.timeout_sec if sv is not None and sv.timeout_sec is not None else tv.timeout_sec
    user = sv.user if sv is not None and sv.user is not None else tv.user
    hooks = list(tv.collect) + (list(sv.collect) if sv is not None else [])
    return VerifierSpec(
        timeout_sec=timeout, env=env, user=user, mode=mode, environment=separate_env,  # type: ignore[arg-type]
        network=override or baseline, network_override=override, collect=hooks,
        tests_dirs=tests_dirs, test_script=test_script, upload_tests=(mode == "shared"),
    )


def _step_spec(cfg: TaskConfig, step: StepConfig, path: Path, environment: EnvironmentSpec,
               where: str) -> StepSpec:
    step_dir = path / "steps" / step.name
    if not step_dir.is_dir():
        raise TbscaleError(f"{step_dir}: missing (task.toml declares step \"{step.name}\")")
    instruction = read_instruction(step_dir / "instruction.md", f"the instruction of step \"{step.name}\"",
                                   allow_empty=True)
    verifier = _verifier_spec(cfg, step, path, environment, where)
    artifacts = list(cfg.artifacts) + list(step.artifacts)
    _check_services(environment, step.artifacts, step.verifier.collect, where, f"[[steps]] \"{step.name}\" ")
    solution = step_dir / "solution" if (step_dir / "solution").is_dir() else None
    if solution is None and (path / "solution").is_dir():
        solution = path / "solution"
    workdir = step_dir / "workdir" if (step_dir / "workdir").is_dir() else None
    setup = workdir / "setup.sh" if workdir is not None and (workdir / "setup.sh").is_file() else None
    return StepSpec(
        name=step.name, dir=step_dir, instruction=instruction,
        agent=_agent_spec(cfg.agent, step.agent, environment.network), verifier=verifier,
        tests_dir=step_dir / "tests" if (step_dir / "tests").is_dir() else None,
        solution_dir=solution, workdir_dir=workdir, setup_script=setup, healthcheck=step.healthcheck,
        min_reward=step.min_reward, artifacts=artifacts,
        trajectory=step_dir / "trajectory.json" if (step_dir / "trajectory.json").is_file() else None,
    )


def load_harbor_task(path: Path, task_id: str | None = None, strict: bool = False) -> Task:
    path = Path(path)
    toml_path = path / "task.toml"
    where = str(toml_path)
    cfg, _, ignored = read_task_config(toml_path, strict)

    environment = _environment_spec(cfg.environment, path / "environment", where, "[environment]",
                                    "the agent's environment")
    _check_services(environment, cfg.artifacts, cfg.verifier.collect, where, "")
    multi_step = bool(cfg.steps)
    if multi_step:
        declared = {s.name for s in cfg.steps or []}
        if (path / "steps").is_dir():
            for d in sorted((path / "steps").iterdir()):
                if d.is_dir() and not d.name.startswith(".") and d.name not in declared:
                    raise TbscaleError(f"{d}: not declared as a [[steps]] entry in {toml_path}")
        # Each step has its own instruction; a top-level instruction.md is not read. The flat
        # `instruction` (for code that knows one instruction per task) is the first step's.
        steps = [_step_spec(cfg, s, path, environment, where) for s in cfg.steps or []]
        instruction = steps[0].instruction
    else:
        instruction = read_instruction(path / "instruction.md", allow_empty=True)
        steps = []
    verifier = _verifier_spec(cfg, None, path, environment, where) if not multi_step else \
        _task_level_verifier(cfg, path, environment, where)
    agent = _agent_spec(cfg.agent, None, environment.network)

    solution_dir = path / "solution"
    solution = SolutionSpec(dir=solution_dir if (solution_dir / "solve.sh").is_file() else None,
                            env=EnvTable(cfg.solution.env, where=f"{where}: [solution.env]"))
    tests_dir = path / "tests" if (path / "tests").is_dir() else None
    flat_image = cfg.environment.docker_image
    if flat_image is None and environment.dockerfile is None and environment.compose_file is not None:
        main_image = read_compose(environment.compose_file).get(MAIN_SERVICE, {}).get("image")
        if isinstance(main_image, str) and "$" not in main_image:
            flat_image = main_image
    return Task(
        id=task_id or path.name,
        format="harbor",
        instruction=instruction,
        path=path,
        environment_dir=environment.context_dir if flat_image is None else None,
        image=flat_image,
        tests_dir=tests_dir,
        test_command="bash /tests/test.sh",
        solution_dir=solution.dir,
        solution_command=solution.command,
        solution_script=solution.script,
        workdir=cfg.environment.workdir,
        agent_timeout_sec=agent.effective_timeout_sec,
        verifier_timeout_sec=verifier.timeout_sec,
        build_timeout_sec=cfg.environment.build_timeout_sec,
        cpus=float(cfg.environment.cpus) if cfg.environment.cpus is not None else DEFAULT_CPUS,
        memory_mb=cfg.environment.memory_mb if cfg.environment.memory_mb is not None else DEFAULT_MEMORY_MB,
        allow_internet=environment.network.internet,
        metadata=dict(cfg.metadata),
        extra={"verifier_env": verifier.env},
        config_path=toml_path,
        name=cfg.task.name if cfg.task is not None else path.name,
        package=cfg.task,
        schema_version=cfg.schema_version,
        source=cfg.source,
        environment=environment,
        agent=agent,
        verifier=verifier,
        solution=solution,
        artifacts=list(cfg.artifacts),
        steps=steps,
        multi_step_reward_strategy=cfg.multi_step_reward_strategy,
        reward=RewardSpec(),
        trajectory=path / "trajectory.json" if not multi_step and (path / "trajectory.json").is_file() else None,
        not_enforced=ignored + _empty_instructions(path, instruction, steps, strict),
    )


def _empty_instructions(path: Path, instruction: str, steps: list[StepSpec], strict: bool) -> list[NotEnforced]:
    """Harbor runs a task whose instruction.md is empty (the agent gets an empty instruction); so
    does tbscale, saying so; strict key checking refuses it."""
    empty = [f"steps/{s.name}/instruction.md" for s in steps if not s.instruction] if steps else \
        (["instruction.md"] if not instruction else [])
    if empty and strict:
        raise TbscaleError(f"{path / empty[0]}: empty instruction")
    return [NotEnforced(e, "empty: the agent is given an empty instruction, as Harbor gives it") for e in empty]


def _task_level_verifier(cfg: TaskConfig, path: Path, environment: EnvironmentSpec, where: str) -> VerifierSpec:
    """For a multi-step task, the task-level [verifier] as the steps inherit it (no test script
    is required at this level: each step has its own or falls back to tests/test.sh)."""
    tv = cfg.verifier
    override = _explicit(tv)
    mode = tv.environment_mode or ("separate" if tv.environment is not None else "shared")
    task_tests = path / "tests" if (path / "tests").is_dir() else None
    return VerifierSpec(
        timeout_sec=tv.timeout_sec, env=EnvTable(tv.env, where=f"{where}: [verifier.env]"), user=tv.user,
        mode=mode, environment=None, network=override or environment.network,  # type: ignore[arg-type]
        network_override=override, collect=list(tv.collect), tests_dirs=[task_tests] if task_tests else [],
        test_script=task_tests / "test.sh" if task_tests and (task_tests / "test.sh").is_file() else None,
        upload_tests=(mode == "shared"),
    )
