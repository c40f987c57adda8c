"""The Task every loader produces, whatever the on-disk format."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

TaskFormat = Literal["harbor", "terminal-bench", "swebench"]


@dataclass
class Task:
    """Everything a trial needs to know about one task.

    `environment_dir` is the docker build context (with `dockerfile` inside it), or None when the
    task names a ready `image`. `tests_dir` is copied to `tests_mount` only after the agent has
    finished, and `solution_dir` to /solution only for the oracle, so an agent can read neither.
    """

    id: str
    format: TaskFormat
    instruction: str
    path: Path | None = None
    environment_dir: Path | None = None
    dockerfile: str = "Dockerfile"
    image: str | None = None
    tests_dir: Path | None = None
    tests_mount: str = "/tests"
    test_command: str = "bash /tests/test.sh"
    solution_dir: Path | None = None
    solution_command: str = "bash /solution/solve.sh"
    solution_script: str = "solve.sh"  # file in solution_dir whose blank-line blocks are the steps
    workdir: str | None = None  # None: the image's own WORKDIR
    agent_timeout_sec: float = 600.0
    verifier_timeout_sec: float = 120.0
    build_timeout_sec: float = 600.0
    cpus: float = 1.0
    memory_mb: int = 2048
    allow_internet: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)
    # Format-specific data (e.g. the SWE-bench instance) for the verifier of that format.
    extra: dict[str, Any] = field(default_factory=dict)

    def solution_steps(self) -> list[str]:
        """The reference solution as a list of actions: blocks of the solution script separated
        by blank lines (the bundled tasks are written that way). Shebang-only and `set -e`-only
        lines are dropped, since each action runs in its own shell."""
        if not self.solution_dir:
            return []
        script = self.solution_dir / self.solution_script
        if not script.is_file():
            return []
        steps = []
        for block in re.split(r"\n\s*\n", script.read_text()):
            lines = [ln for ln in block.splitlines()
                     if not re.fullmatch(r"\s*(#!.*|set -[a-z]+( -o \w+)*|#.*)?\s*", ln)]
            if lines:
                steps.append("\n".join(lines))
        return steps
