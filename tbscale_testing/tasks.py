"""Writing small Harbor task directories, for tests and benchmarks that need a task of their own."""

from __future__ import annotations

from pathlib import Path

PASS_IF_DONE = 'if grep -qx done /app/out.txt 2>/dev/null; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n'


def write_harbor_task(root: Path, name: str, *, instruction: str = "Write 'done' into /app/out.txt.\n",
                      task_toml: str = "[agent]\ntimeout_sec = 60\n[verifier]\ntimeout_sec = 30\n",
                      test_sh: str = PASS_IF_DONE, solve: str = "#!/bin/bash\necho done > /app/out.txt\n",
                      dockerfile: str = "FROM debian:bookworm-slim\nWORKDIR /app\n") -> Path:
    """root/name with instruction.md, task.toml, environment/Dockerfile, tests/test.sh and
    solution/solve.sh; returns the task directory."""
    d = Path(root) / name
    for sub in ("environment", "tests", "solution"):
        (d / sub).mkdir(parents=True)
    (d / "instruction.md").write_text(instruction)
    (d / "task.toml").write_text(task_toml)
    (d / "environment" / "Dockerfile").write_text(dockerfile)
    (d / "tests" / "test.sh").write_text(test_sh)
    (d / "solution" / "solve.sh").write_text(solve)
    return d
