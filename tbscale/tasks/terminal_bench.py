"""Terminal-Bench legacy task folders (task.yaml, terminal-bench 0.x) into a Task.

Layout: task.yaml, Dockerfile, docker-compose.yaml (optional here: without it the task is built
from its Dockerfile as the legacy template compose file did), run-tests.sh, tests/, solution.sh
(or solution.yaml, a list of commands).

Every task.yaml key is read or refused (docs/tasks.md). At run time the legacy harness copied
run-tests.sh and tests/ into /tests after the agent, ran `bash /tests/run-tests.sh` as root in the
image WORKDIR with TEST_DIR=/tests, with the internet on, and judged the test output with the
task's parser (tbscale.tasks.test_output); the Task carries exactly that (`legacy`, `verifier`,
`reward`).
"""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import yaml

from tbscale.errors import TbscaleError
from tbscale.tasks.envvars import EnvTable
from tbscale.tasks.files import read_compose, read_text, strip_canary
from tbscale.tasks.model import (
    AgentSpec,
    EnvironmentSpec,
    LegacySpec,
    NetworkPolicy,
    RewardSpec,
    SolutionSpec,
    Task,
    VerifierSpec,
)
from tbscale.tasks.schema import parse_size_mb
from tbscale.tasks.test_output import PARSERS

LEGACY_AGENT_TIMEOUT_SEC = 360.0
LEGACY_TEST_TIMEOUT_SEC = 60.0
DIFFICULTIES = ("easy", "medium", "hard", "unknown")
# What the legacy harness put in the environment of `docker compose` (compose files refer to them).
COMPOSE_VALUES = {
    "T_BENCH_TEST_DIR": "/tests",
    "T_BENCH_CONTAINER_LOGS_PATH": "/logs",
    "T_BENCH_CONTAINER_AGENT_LOGS_PATH": "/agent-logs",
}
METADATA_KEYS = ("author_name", "author_email", "author", "difficulty", "category", "tags",
                 "expert_time_estimate_min", "junior_time_estimate_min", "estimated_duration_sec")
KNOWN_KEYS = {"instruction", "descriptions", "parser_name", "max_agent_timeout_sec", "max_test_timeout_sec",
              "run_tests_in_same_shell", "disable_asciinema", *METADATA_KEYS}
LEGACY_COMPOSE_VOLUME = re.compile(r"^\$\{T_BENCH_TASK_(AGENT_)?LOGS_PATH\}:")


def is_terminal_bench_task(path: Path) -> bool:
    return (path / "task.yaml").is_file()


def _staged_tests(path: Path) -> Path:
    """Terminal-Bench copies run-tests.sh beside the tests; stage both in one folder."""
    stage = Path(tempfile.mkdtemp(prefix=f"tbscale-tbtests-{path.name}-"))
    if (path / "tests").is_dir():
        shutil.copytree(path / "tests", stage, dirs_exist_ok=True)
    shutil.copy2(path / "run-tests.sh", stage / "run-tests.sh")
    return stage


def _instruction(meta: dict, where: str) -> str:
    """`instruction`, or (older tasks) the entry of `descriptions` whose key is `instruction`'s
    value or, without `instruction`, "base"."""
    instruction = meta.get("instruction")
    descriptions = meta.get("descriptions")
    if descriptions is not None:
        if not isinstance(descriptions, list) or not all(
                isinstance(d, dict) and set(d) <= {"key", "description"} and isinstance(d.get("description"), str)
                for d in descriptions):
            raise TbscaleError(f"{where}: `descriptions` must be a list of {{key, description}} entries")
        by_key = {d.get("key"): d["description"] for d in descriptions}
        wanted = instruction if isinstance(instruction, str) and instruction.strip() in by_key else "base"
        wanted = wanted.strip() if isinstance(wanted, str) else wanted
        if wanted in by_key:
            instruction = by_key[wanted]
        elif instruction is None and by_key:
            instruction = next(iter(by_key.values()))
    if not isinstance(instruction, str) or not instruction.strip():
        raise TbscaleError(f"{where}: `instruction` is missing or empty")
    return strip_canary(instruction).strip()


def _number(meta: dict, key: str, default: float, where: str) -> float:
    value = meta.get(key, default)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
        raise TbscaleError(f"{where}: `{key}` must be a positive number, got {value!r}")
    return float(value)


def _check_types(meta: dict, where: str) -> None:
    def need(key: str, ok: bool, what: str) -> None:
        if key in meta and not ok:
            raise TbscaleError(f"{where}: `{key}` must be {what}, got {meta[key]!r}")

    for key in ("author_name", "author_email", "author", "category"):
        need(key, isinstance(meta.get(key), str), "a string")
    need("tags", isinstance(meta.get("tags"), list) and all(isinstance(t, str) for t in meta.get("tags", [])),
         "a list of strings")
    need("difficulty", meta.get("difficulty") in DIFFICULTIES, f"one of {', '.join(DIFFICULTIES)}")
    for key in ("run_tests_in_same_shell", "disable_asciinema"):
        need(key, isinstance(meta.get(key), bool), "true or false")
    for key in ("expert_time_estimate_min", "junior_time_estimate_min"):
        need(key, meta.get(key) is None or (isinstance(meta.get(key), int) and not isinstance(meta.get(key), bool)),
             "a whole number of minutes")
    need("estimated_duration_sec", meta.get("estimated_duration_sec") is None or (
        isinstance(meta.get("estimated_duration_sec"), (int, float)) and not isinstance(meta.get("estimated_duration_sec"), bool)),
        "a number")


def _compose_value(value: str) -> str:
    for name, resolved in COMPOSE_VALUES.items():
        value = value.replace("${" + name + "}", resolved)
    return value


def _environment(path: Path, where: str) -> tuple[EnvironmentSpec, dict[str, str]]:
    """The client container: from docker-compose.yaml's `client` service (or its first service),
    else the task's Dockerfile."""
    compose = path / "docker-compose.yaml"
    if not compose.is_file():
        compose = path / "docker-compose.yml" if (path / "docker-compose.yml").is_file() else None
    context, dockerfile_name, image, workdir, env, cpus, memory_mb = path, "Dockerfile", None, None, {}, None, None
    services: dict[str, dict[str, Any]] = {}
    main = "client"
    if compose is not None:
        services = read_compose(compose)
        main = "client" if "client" in services else next(iter(services))
        client = services[main]
        build = client.get("build")
        if isinstance(build, str):
            context = (compose.parent / build).resolve()
        elif isinstance(build, dict):
            context = (compose.parent / str(build.get("context", "."))).resolve()
            dockerfile_name = str(build.get("dockerfile", "Dockerfile"))
        elif isinstance(client.get("image"), str) and "$" not in client["image"]:
            image = client["image"]
        if isinstance(client.get("working_dir"), str):
            workdir = client["working_dir"]
        raw_env = client.get("environment") or {}
        if isinstance(raw_env, list):
            raw_env = dict(item.split("=", 1) if "=" in item else (item, "${" + item + "}") for item in raw_env)
        env = {str(k): _compose_value(str(v)) for k, v in raw_env.items() if v is not None}
        limits = ((client.get("deploy") or {}).get("resources") or {}).get("limits") or {}
        if limits.get("cpus") is not None:
            cpus = float(limits["cpus"])
        if isinstance(limits.get("memory"), str):
            try:
                memory_mb = parse_size_mb(limits["memory"].rstrip("bB"), "memory")
            except ValueError:
                raise TbscaleError(f"{compose}: services.{main}.deploy.resources.limits.memory = "
                                   f"{limits['memory']!r} is not a size like \"2g\" or \"512m\"") from None
    dockerfile = context / dockerfile_name
    if image is None and not dockerfile.is_file():
        raise TbscaleError(f"{dockerfile}: missing")
    env.pop("TEST_DIR", None)  # always given to run-tests.sh (LegacySpec.test_env)
    spec = EnvironmentSpec(
        context_dir=context if image is None else None,
        dockerfile=dockerfile if image is None else None,
        image=image,
        compose_file=compose,
        main_service=main,
        services=list(services),
        workdir=workdir,
        cpus=cpus,
        memory_mb=memory_mb,
        network=NetworkPolicy("public"),  # the legacy harness had no network option: internet on
        env=EnvTable(env, where=f"{compose}: services.{main}.environment"),
    )
    return spec, dict(COMPOSE_VALUES)


def _solution_yaml(path: Path) -> list[dict[str, Any]]:
    try:
        data = yaml.safe_load(read_text(path))
    except yaml.YAMLError as e:
        raise TbscaleError(f"{path}: not valid YAML ({getattr(e, 'problem', None) or e})") from None
    allowed = {"command", "min_timeout_sec", "max_timeout_sec", "block", "append_enter"}
    if not isinstance(data, list) or not all(isinstance(d, dict) and isinstance(d.get("command"), str)
                                             and set(d) <= allowed for d in data):
        raise TbscaleError(f"{path}: must be a list of {{command, min_timeout_sec, max_timeout_sec, block, "
                           "append_enter}} entries")
    return data


def load_terminal_bench_task(path: Path, task_id: str | None = None) -> Task:
    path = Path(path)
    yaml_path = path / "task.yaml"
    where = str(yaml_path)
    try:
        meta = yaml.safe_load(read_text(yaml_path)) or {}
    except yaml.YAMLError as e:
        raise TbscaleError(f"{yaml_path}: not valid YAML ({getattr(e, 'problem', e)})") from None
    if not isinstance(meta, dict):
        raise TbscaleError(f"{yaml_path}: the top level must be a mapping")
    unknown = sorted(str(k) for k in meta if k not in KNOWN_KEYS)
    if unknown:
        raise TbscaleError(f"{where}: unknown key `{unknown[0]}` (task.yaml keys: {', '.join(sorted(KNOWN_KEYS))})")
    instruction = _instruction(meta, where)
    parser_name = meta.get("parser_name", "pytest")
    if parser_name not in PARSERS:
        raise TbscaleError(f"{where}: parser_name: unknown parser {parser_name!r} (known parsers: "
                           f"{', '.join(PARSERS)})")
    agent_timeout = _number(meta, "max_agent_timeout_sec", LEGACY_AGENT_TIMEOUT_SEC, where)
    test_timeout = _number(meta, "max_test_timeout_sec", LEGACY_TEST_TIMEOUT_SEC, where)
    _check_types(meta, where)
    if not (path / "run-tests.sh").is_file():
        raise TbscaleError(f"{path / 'run-tests.sh'}: missing (the verifier entry point)")
    environment, compose_env = _environment(path, where)

    same_shell = bool(meta.get("run_tests_in_same_shell", False))
    legacy = LegacySpec(
        parser_name=parser_name,
        test_user=None if same_shell else "root",
        run_tests_in_same_shell=same_shell,
        disable_asciinema=bool(meta.get("disable_asciinema", False)),
        estimated_duration_sec=meta.get("estimated_duration_sec"),
        compose_env=compose_env,
        solution_yaml=path / "solution.yaml" if (path / "solution.yaml").is_file() else None,
    )
    if legacy.solution_yaml is not None:
        legacy.solution_commands = _solution_yaml(legacy.solution_yaml)
    staged = _staged_tests(path)
    solution = SolutionSpec(dir=path if (path / "solution.sh").is_file() else None, script="solution.sh",
                            command="bash /solution/solution.sh")
    verifier = VerifierSpec(
        timeout_sec=test_timeout,
        env=EnvTable(dict(legacy.test_env), where=f"{where}: (legacy test environment)"),
        user=None if same_shell else "root",
        mode="shared",
        network=environment.network,
        tests_dirs=[staged],
        test_script=staged / "run-tests.sh",
        command="bash /tests/run-tests.sh",
    )
    metadata = {k: meta[k] for k in METADATA_KEYS if k in meta}
    return Task(
        id=task_id or path.name,
        format="terminal-bench",
        instruction=instruction,
        path=path,
        environment_dir=environment.context_dir,
        dockerfile=(environment.dockerfile.relative_to(environment.context_dir).as_posix()
                    if environment.dockerfile else "Dockerfile"),
        image=environment.image,
        tests_dir=staged,
        test_command="bash /tests/run-tests.sh",
        solution_dir=solution.dir,
        solution_command=solution.command,
        solution_script=solution.script,
        workdir=environment.workdir,
        agent_timeout_sec=agent_timeout,
        verifier_timeout_sec=test_timeout,
        cpus=environment.cpus or 1.0,
        memory_mb=environment.memory_mb or 2048,
        allow_internet=True,
        metadata=metadata,
        extra={"parser_name": parser_name},
        config_path=yaml_path,
        name=path.name,
        environment=environment,
        agent=AgentSpec(timeout_sec=agent_timeout, user=None, network=environment.network),
        verifier=verifier,
        solution=solution,
        reward=RewardSpec(source="parser", parser_name=parser_name),
        legacy=legacy,
    )
