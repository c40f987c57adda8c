"""One SWE-bench instance as a tbscale Task.

The agent gets the problem statement and where the repository is; the gold patch becomes the
oracle's reference solution (one action that decodes and applies it), and everything grading needs
(the instance row and the grading settings) goes into Task.extra, which no agent sees.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

from tbscale.errors import TbscaleError
from tbscale.seeds import stable_hash
from tbscale.tasks.model import Task
from tbscale.tasks.swebench.config import SWEbenchSource
from tbscale.tasks.swebench.row import SWEbenchRow

DEFAULT_INSTRUCTION = """\
{problem_statement}

---
The repository {repo} is checked out at {repo_dir}, at the commit this issue was reported against.
Resolve the issue by editing the repository's source files. Do not modify, add or delete tests:
when you submit, your changes are collected as a git diff of {repo_dir} against that commit, and
the project's own tests, which you cannot see, decide whether the issue is resolved."""

# Columns grading reads (make_test_spec and the patch application); the rest stays out of the task.
GRADING_COLUMNS = ("instance_id", "repo", "version", "base_commit", "FAIL_TO_PASS", "PASS_TO_PASS",
                   "eval_script", "log_parser", "eval_type", "image_assets", "test_patch")


def _cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tbscale" / "swebench" / "solutions"


def solution_script(patch: str, repo_dir: str) -> str:
    """One action that applies `patch` in repo_dir: the patch travels base64-encoded in the
    command itself, so it works for the oracle (which runs the file) and for the simulated model
    (which types the file's single step) alike. The fallbacks are swebench's own apply commands."""
    b64 = base64.b64encode(patch.encode()).decode()
    p = "/tmp/tbscale_reference.patch"
    return (f"cd {repo_dir} && echo '{b64}' | base64 -d > {p} && "
            f"(git apply --verbose {p} || patch --batch --forward --fuzz=5 -p1 -i {p}) && rm -f {p}\n")


def _solution_dir(iid: str, patch: str, repo_dir: str) -> Path:
    script = solution_script(patch, repo_dir)
    digest = stable_hash(script)
    d = _cache_root() / iid / digest
    if not (d / "solve.sh").is_file():
        d.mkdir(parents=True, exist_ok=True)
        tmp = d / f"solve.sh.{os.getpid()}.tmp"
        tmp.write_text(script)
        tmp.replace(d / "solve.sh")
    return d


def instruction_for(row: SWEbenchRow, src: SWEbenchSource) -> str:
    template = src.instruction_template or DEFAULT_INSTRUCTION
    if src.instruction_template and "\n" not in template and Path(template).expanduser().is_file():
        template = Path(template).expanduser().read_text()
    hints = (row.get("hints_text") or "").strip()
    values = {"problem_statement": str(row["problem_statement"]).strip(), "hints": hints, "repo": row["repo"],
              "repo_dir": src.repo_dir, "instance_id": row["instance_id"], "base_commit": row["base_commit"]}
    try:
        text = template.format(**values)
    except (KeyError, IndexError, ValueError) as e:
        raise TbscaleError(f"tasks.swebench.instruction_template: cannot fill it ({type(e).__name__}: {e}); "
                           f"fields: {', '.join(values)}") from None
    if src.include_hints and hints and "{hints}" not in template:
        text += f"\n\nHints from the issue's discussion:\n{hints}"
    return text


def _json_safe(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except TypeError:
        return str(value)


def make_task(row: SWEbenchRow, image: str, src: SWEbenchSource) -> Task:
    iid = row["instance_id"]
    instance = {k: row.get(k) for k in GRADING_COLUMNS}
    instance["version"] = str(instance["version"])
    instance["image"] = image  # grading runs in the image the agent ran in
    patch = row.get("patch") or ""
    return Task(
        id=iid,
        format="swebench",
        instruction=instruction_for(row, src),
        path=Path(src.task_repo).expanduser() / "tasks" / iid if src.task_repo else None,
        environment_dir=None,  # a ready image (built beforehand when `build` says so)
        image=image,
        tests_dir=None,
        test_command="bash /eval.sh",
        solution_dir=_solution_dir(iid, patch, src.repo_dir) if patch.strip() else None,
        solution_command="bash /solution/solve.sh",
        workdir=src.repo_dir,
        agent_timeout_sec=src.agent_timeout_sec,
        verifier_timeout_sec=src.eval_timeout_sec,
        build_timeout_sec=src.build_timeout_sec,
        cpus=src.cpus,
        memory_mb=src.memory_mb,
        allow_internet=src.allow_internet,
        metadata={k: _json_safe(row[k]) for k in ("repo", "version", "base_commit", "created_at", "difficulty")
                  if row.get(k) not in (None, "")},
        extra={"instance": instance,
               "grading": {"repo_dir": src.repo_dir, "grading_container": src.grading_container,
                           "evaluate_empty_patch": src.evaluate_empty_patch,
                           "patch_exclude": list(src.patch_exclude), "patch_max_bytes": src.patch_max_bytes}},
    )
