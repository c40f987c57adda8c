"""Harbor task directories: instruction.md, task.toml, environment/Dockerfile, tests/test.sh
(writes /logs/verifier/reward.txt or reward.json), solution/solve.sh."""

from __future__ import annotations

import tomllib
from pathlib import Path

from tbscale.errors import TbscaleError
from tbscale.tasks.model import Task


def is_harbor_task(path: Path) -> bool:
    return (path / "task.toml").is_file()


def _number(table: dict, key: str, default: float, where: str) -> float:
    value = table.get(key, default)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
        raise TbscaleError(f"{where}: `{key}` must be a positive number, got {value!r}")
    return float(value)


def load_harbor_task(path: Path) -> Task:
    toml_path = path / "task.toml"
    try:
        meta = tomllib.loads(toml_path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise TbscaleError(f"{toml_path}: not valid TOML ({e})") from None
    instruction_path = path / "instruction.md"
    if not instruction_path.is_file():
        raise TbscaleError(f"{instruction_path}: missing (a Harbor task needs its instruction)")
    instruction = instruction_path.read_text().strip()
    if not instruction:
        raise TbscaleError(f"{instruction_path}: empty instruction")
    env_dir = path / "environment"
    if not (env_dir / "Dockerfile").is_file():
        raise TbscaleError(f"{env_dir / 'Dockerfile'}: missing (a Harbor task builds its environment from it)")
    tests_dir = path / "tests"
    if not (tests_dir / "test.sh").is_file():
        raise TbscaleError(f"{tests_dir / 'test.sh'}: missing (the verifier entry point)")
    for section in ("verifier", "agent", "environment", "metadata"):
        if section in meta and not isinstance(meta[section], dict):
            raise TbscaleError(f"{toml_path}: [{section}] must be a table")
    verifier, agent, env = meta.get("verifier", {}), meta.get("agent", {}), meta.get("environment", {})
    solution_dir = path / "solution"
    return Task(
        id=path.name,
        format="harbor",
        instruction=instruction,
        path=path,
        environment_dir=env_dir,
        tests_dir=tests_dir,
        test_command="bash /tests/test.sh",
        solution_dir=solution_dir if (solution_dir / "solve.sh").is_file() else None,
        solution_command="bash /solution/solve.sh",
        solution_script="solve.sh",
        agent_timeout_sec=_number(agent, "timeout_sec", 600.0, f"{toml_path}: [agent]"),
        verifier_timeout_sec=_number(verifier, "timeout_sec", 120.0, f"{toml_path}: [verifier]"),
        build_timeout_sec=_number(env, "build_timeout_sec", 600.0, f"{toml_path}: [environment]"),
        cpus=_number(env, "cpus", 1, f"{toml_path}: [environment]"),
        memory_mb=int(_number(env, "memory_mb", 2048, f"{toml_path}: [environment]")),
        allow_internet=bool(env.get("allow_internet", False)),
        metadata=dict(meta.get("metadata", {})),
        extra={"verifier_env": dict(verifier.get("env", {}))},
    )
