"""Terminal-Bench legacy task folders (task.yaml, terminal-bench 0.x) into Tasks.

Layout: task.yaml, Dockerfile, docker-compose.yaml (optional here: without it the task is built
from its Dockerfile as the legacy template compose file did), run-tests.sh, tests/, solution.sh
(or solution.yaml, a list of commands).

Read as the legacy harness read it (docs/tasks.md):
* `descriptions` (the older form): every entry is a task of its own, as the harness that read
  `descriptions` made them: the entry keyed `base` has the folder's name as its id, any other
  `<folder>.<key>` (`crack-7z-hash.easy`), and that entry's text is its instruction.
* Every key some version of the harness accepted loads. A key none knew was ignored by the
  harness (its pydantic model dropped it); tbscale ignores it too and names it (Task.not_enforced),
  or, with `strict`, refuses the task naming every such key in one message.
* The compose file's client service: legacy_compose.py.

At run time the legacy harness copied run-tests.sh and tests/ into /tests after the agent, ran
`bash /tests/run-tests.sh` as root in the image WORKDIR with TEST_DIR=/tests, with the internet
on, and judged the test output with the task's parser (tbscale.tasks.test_output); the Task
carries exactly that (`legacy`, `verifier`, `reward`). Nothing is copied at load time: the tests
go into the container straight from the task folder.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import yaml

from tbscale.errors import TbscaleError
from tbscale.tasks.envvars import EnvTable
from tbscale.tasks.files import read_compose, read_text, strip_canary
from tbscale.tasks.legacy_compose import COMPOSE_VALUES, read_client
from tbscale.tasks.model import (
    AgentSpec,
    EnvironmentSpec,
    LegacySpec,
    NetworkPolicy,
    NotEnforced,
    RewardSpec,
    SolutionCommand,
    SolutionSpec,
    Task,
    VerifierSpec,
)
from tbscale.tasks.test_output import PARSERS

LEGACY_AGENT_TIMEOUT_SEC = 360.0
LEGACY_TEST_TIMEOUT_SEC = 60.0
DIFFICULTIES = ("easy", "medium", "hard", "unknown")
METADATA_KEYS = ("author_name", "author_email", "author", "difficulty", "category", "tags",
                 "expert_time_estimate_min", "junior_time_estimate_min", "estimated_duration_sec")
# Every key of task.yaml some version of the legacy harness read (`env_name`: the descriptions-era
# harness's shared environments, in terminal-bench's own repository).
KNOWN_KEYS = {"instruction", "descriptions", "parser_name", "max_agent_timeout_sec", "max_test_timeout_sec",
              "run_tests_in_same_shell", "disable_asciinema", "env_name", *METADATA_KEYS}
BASE_KEY = "base"


def is_terminal_bench_task(path: Path) -> bool:
    return (path / "task.yaml").is_file()


def _descriptions(meta: dict, where: str) -> list[tuple[str, str]]:
    """(key, text) of every `descriptions` entry, in order; the key defaults to "base"."""
    descriptions = meta["descriptions"]
    if not isinstance(descriptions, list) or not descriptions or not all(
            isinstance(d, dict) and set(d) <= {"key", "description"} and isinstance(d.get("description"), str)
            and isinstance(d.get("key", BASE_KEY), str) for d in descriptions):
        raise TbscaleError(f"{where}: `descriptions` must be a non-empty list of {{key, description}} entries")
    entries = [(str(d.get("key", BASE_KEY)).strip(), d["description"]) for d in descriptions]
    keys = [k for k, _ in entries]
    repeated = sorted({k for k in keys if keys.count(k) > 1})
    if repeated:
        raise TbscaleError(f"{where}: `descriptions` repeats the key {', '.join(map(repr, repeated))} (each key is "
                           "a task of its own)")
    bad = [k for k in keys if not k or "/" in k or k != k.strip()]
    if bad:
        raise TbscaleError(f"{where}: `descriptions` key {bad[0]!r} cannot be part of a task id")
    return entries


def _instructions(meta: dict, where: str, strict: bool = False) -> list[tuple[str | None, str, list[NotEnforced]]]:
    """(variant key or None, instruction, notes) for each task the file makes."""
    if meta.get("descriptions") is not None:
        entries = _descriptions(meta, where)
        notes = []
        if "instruction" in meta:
            notes.append(NotEnforced("instruction", "not read: the file gives `descriptions`, and the harness "
                                     "that read `descriptions` made one task of each entry and ignored "
                                     "`instruction`"))
        out = []
        for key, text in entries:
            text = strip_canary(text).strip()
            if not text:
                raise TbscaleError(f"{where}: `descriptions` entry {key!r} is empty")
            out.append((key, text, list(notes)))
        return out
    instruction = meta.get("instruction")
    if not isinstance(instruction, str):
        raise TbscaleError(f"{where}: `instruction` is missing (or not text)")
    text = strip_canary(instruction).strip()
    if not text:  # the legacy harness's `instruction: str` took an empty one
        if strict:
            raise TbscaleError(f"{where}: `instruction` is empty")
        return [(None, text, [NotEnforced("instruction", "empty: the agent is given an empty instruction, as the "
                                                         "legacy harness gave it")])]
    return [(None, text, [])]


def _unknown_keys(meta: dict, where: str, strict: bool) -> list[NotEnforced]:
    unknown = sorted(str(k) for k in meta if k not in KNOWN_KEYS)
    if not unknown:
        return []
    named = []
    for key in unknown:
        close = difflib.get_close_matches(key, sorted(KNOWN_KEYS), n=1)
        named.append(f"`{key}`" + (f" (did you mean `{close[0]}`?)" if close else ""))
    if strict:
        raise TbscaleError(f"{where}: unknown key{'s' if len(unknown) > 1 else ''} {', '.join(named)} (the legacy "
                           "harness ignored keys it did not know; strict key checking refuses them)")
    return [NotEnforced(key, "not a terminal-bench task.yaml key: ignored, as the legacy harness ignored it")
            for key in unknown]


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


def _environment(path: Path, where: str) -> tuple[EnvironmentSpec, dict[str, str], list[NotEnforced]]:
    """The client container: from docker-compose.yaml's `client` service (or its first service),
    else the task's Dockerfile."""
    compose = path / "docker-compose.yaml"
    if not compose.is_file():
        compose = path / "docker-compose.yml" if (path / "docker-compose.yml").is_file() else None
    services: dict[str, dict[str, Any]] = {}
    main = "client"
    client = None
    if compose is not None:
        services = read_compose(compose)
        main = "client" if "client" in services else next(iter(services))
        client = read_client(compose, services, main, single=len(services) == 1)
    context = client.context if client else path
    image = client.image if client else None
    dockerfile = context / (client.dockerfile_name if client else "Dockerfile")
    if image is None and not dockerfile.is_file():
        raise TbscaleError(f"{dockerfile}: missing")
    env = dict(client.env) if client else {}
    env.pop("TEST_DIR", None)  # always given to run-tests.sh (LegacySpec.test_env)
    spec = EnvironmentSpec(
        context_dir=context if image is None else None,
        dockerfile=dockerfile if image is None else None,
        image=image,
        compose_file=compose,
        main_service=main,
        services=list(services),
        workdir=client.workdir if client else None,
        cpus=client.cpus if client else None,
        memory_mb=client.memory_mb if client else None,
        network=NetworkPolicy("public"),  # the legacy harness had no network option: internet on
        env=EnvTable(env, where=f"{compose}: services.{main}.environment"),
        copy_in=list(client.copy_in) if client else [],
        tty=bool(client and client.tty),
        stdin_open=bool(client and client.stdin_open),
        compose_required=bool(client and client.compose_required),
    )
    notes = list(client.notes) if client else []
    if client and client.compose_required:
        notes.append(NotEnforced(f"services.{main} ({', '.join(client.compose_required)})",
                                 "carried out by docker compose: the task runs as a compose project, as the legacy "
                                 "harness ran it, not as a single container"))
    return spec, dict(COMPOSE_VALUES), notes


def _solution_yaml(path: Path) -> list[SolutionCommand]:
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


def load_terminal_bench_tasks(path: Path, task_id: str | None = None, strict: bool = False) -> list[Task]:
    """Every task of a task.yaml folder: one, or one per `descriptions` entry. `task_id` is the id
    of the folder's base task (default: the folder name); variants add `.<key>`."""
    path = Path(path)
    yaml_path = path / "task.yaml"
    where = str(yaml_path)
    try:
        meta = yaml.safe_load(read_text(yaml_path)) or {}
    except yaml.YAMLError as e:
        raise TbscaleError(f"{yaml_path}: not valid YAML ({getattr(e, 'problem', e)})") from None
    if not isinstance(meta, dict):
        raise TbscaleError(f"{yaml_path}: the top level must be a mapping")
    ignored = _unknown_keys(meta, where, strict)
    variants = _instructions(meta, where, strict)
    parser_name = meta.get("parser_name", "pytest")
    if parser_name not in PARSERS:
        raise TbscaleError(f"{where}: parser_name: unknown parser {parser_name!r} (known parsers: "
                           f"{', '.join(PARSERS)})")
    agent_timeout = _number(meta, "max_agent_timeout_sec", LEGACY_AGENT_TIMEOUT_SEC, where)
    test_timeout = _number(meta, "max_test_timeout_sec", LEGACY_TEST_TIMEOUT_SEC, where)
    _check_types(meta, where)
    if meta.get("env_name") is not None:
        raise TbscaleError(f"{where}: env_name = {meta['env_name']!r}: names a shared environment of terminal-bench's "
                           "own repository (shared/environments/<name>), which is not part of the task folder; give "
                           "the task its own Dockerfile or docker-compose.yaml")
    if not (path / "run-tests.sh").is_file():
        raise TbscaleError(f"{path / 'run-tests.sh'}: missing (the verifier entry point)")
    environment, compose_env, compose_notes = _environment(path, where)

    same_shell = bool(meta.get("run_tests_in_same_shell", False))
    solution_commands = _solution_yaml(path / "solution.yaml") if (path / "solution.yaml").is_file() else []
    tests = path / "tests" if (path / "tests").is_dir() else None
    base_id = task_id or path.name
    out = []
    for key, instruction, notes in variants:
        legacy = LegacySpec(
            parser_name=parser_name,
            test_user=None if same_shell else "root",
            run_tests_in_same_shell=same_shell,
            disable_asciinema=bool(meta.get("disable_asciinema", False)),
            estimated_duration_sec=meta.get("estimated_duration_sec"),
            compose_env=dict(compose_env),
            solution_yaml=path / "solution.yaml" if (path / "solution.yaml").is_file() else None,
            solution_commands=[dict(c) for c in solution_commands],
        )
        solution = SolutionSpec(dir=path if (path / "solution.sh").is_file() else None, script="solution.sh",
                                command="bash /solution/solution.sh")
        verifier = VerifierSpec(
            timeout_sec=test_timeout,
            env=EnvTable(dict(legacy.test_env), where=f"{where}: (legacy test environment)"),
            user=None if same_shell else "root",
            mode="shared",
            network=environment.network,
            tests_dirs=[tests] if tests else [],
            tests_files={"run-tests.sh": path / "run-tests.sh"},
            test_script=path / "run-tests.sh",
            command="bash /tests/run-tests.sh",
        )
        metadata = {k: meta[k] for k in METADATA_KEYS if k in meta}
        ident = base_id if key in (None, BASE_KEY) else f"{base_id}.{key}"
        out.append(Task(
            id=ident,
            format="terminal-bench",
            instruction=instruction,
            path=path,
            environment_dir=environment.context_dir,
            dockerfile=(environment.dockerfile.relative_to(environment.context_dir).as_posix()
                        if environment.dockerfile else "Dockerfile"),
            image=environment.image,
            tests_dir=tests,
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
            name=path.name if key in (None, BASE_KEY) else f"{path.name}.{key}",
            environment=environment,
            agent=AgentSpec(timeout_sec=agent_timeout, user=None, network=environment.network),
            verifier=verifier,
            solution=solution,
            reward=RewardSpec(source="parser", parser_name=parser_name),
            legacy=legacy,
            variant=key,
            not_enforced=[*ignored, *notes, *compose_notes],
        ))
    return out


def load_terminal_bench_task(path: Path, task_id: str | None = None, strict: bool = False) -> Task:
    """One task of a task.yaml folder: the variant `task_id` names (`<folder>.<key>`), else the
    base one (or the first, when no entry is keyed `base`)."""
    tasks = load_terminal_bench_tasks(path, None, strict)
    if task_id is not None:
        for t in tasks:
            if t.id == task_id or (t.variant not in (None, BASE_KEY) and task_id.endswith(f".{t.variant}")):
                return _renamed(t, task_id)
    base = next((t for t in tasks if t.variant in (None, BASE_KEY)), tasks[0])
    return _renamed(base, task_id) if task_id else base


def _renamed(task: Task, task_id: str) -> Task:
    import dataclasses

    return dataclasses.replace(task, id=task_id)
