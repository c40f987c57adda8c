"""Terminal-Bench legacy task directories: task.yaml (instruction, timeouts, parser), Dockerfile,
run-tests.sh, tests/, solution.sh. Pass = every test in the pytest summary passed (or, with no
pytest output, run-tests.sh exits 0)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import yaml

from tbscale.errors import TbscaleError
from tbscale.tasks.model import Task


def is_terminal_bench_task(path: Path) -> bool:
    return (path / "task.yaml").is_file()


def _staged_tests(path: Path) -> Path:
    """Terminal-Bench copies run-tests.sh beside the tests; stage both in one folder."""
    stage = Path(tempfile.mkdtemp(prefix=f"tbscale-tbtests-{path.name}-"))
    if (path / "tests").is_dir():
        shutil.copytree(path / "tests", stage, dirs_exist_ok=True)
    shutil.copy2(path / "run-tests.sh", stage / "run-tests.sh")
    return stage


def load_terminal_bench_task(path: Path) -> Task:
    yaml_path = path / "task.yaml"
    try:
        meta = yaml.safe_load(yaml_path.read_text()) or {}
    except yaml.YAMLError as e:
        raise TbscaleError(f"{yaml_path}: not valid YAML ({getattr(e, 'problem', e)})") from None
    if not isinstance(meta, dict):
        raise TbscaleError(f"{yaml_path}: the top level must be a mapping")
    instruction = meta.get("instruction")
    if instruction is None and isinstance(meta.get("descriptions"), list) and meta["descriptions"]:
        # Older tasks keep a list of descriptions keyed by name; "base" is the default one.
        by_key = {d.get("key"): d.get("description") for d in meta["descriptions"] if isinstance(d, dict)}
        instruction = by_key.get("base") or next(iter(by_key.values()), None)
    if not isinstance(instruction, str) or not instruction.strip():
        raise TbscaleError(f"{yaml_path}: `instruction` is missing or empty")
    if not (path / "Dockerfile").is_file():
        raise TbscaleError(f"{path / 'Dockerfile'}: missing")
    if not (path / "run-tests.sh").is_file():
        raise TbscaleError(f"{path / 'run-tests.sh'}: missing (the verifier entry point)")
    for key in ("max_agent_timeout_sec", "max_test_timeout_sec"):
        if key in meta and (not isinstance(meta[key], (int, float)) or meta[key] <= 0):
            raise TbscaleError(f"{yaml_path}: `{key}` must be a positive number, got {meta[key]!r}")
    solution = path / "solution.sh"
    return Task(
        id=path.name,
        format="terminal-bench",
        instruction=instruction.strip(),
        path=path,
        environment_dir=path,
        tests_dir=_staged_tests(path),
        test_command="bash /tests/run-tests.sh",
        solution_dir=path if solution.is_file() else None,
        solution_command="bash /solution/solution.sh",
        solution_script="solution.sh",
        agent_timeout_sec=float(meta.get("max_agent_timeout_sec", 360.0)),
        verifier_timeout_sec=float(meta.get("max_test_timeout_sec", 60.0)),
        metadata={k: meta[k] for k in ("difficulty", "category", "tags", "author_email") if k in meta},
        extra={"parser_name": meta.get("parser_name", "pytest")},
    )
