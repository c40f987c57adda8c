"""Synthetic terminal-bench `tb run` output, in the layout terminal-bench 0.2.x writes (a run
folder with run_metadata.json, a run-level results.json and `<task>/<trial_name>/` folders with
results.json, panes/ and sessions/agent.cast), for the importer's tests and benchmark.

The numbers are made up; the shapes follow terminal-bench's `RunMetadata`, `TrialResults` and
`BenchmarkResults` models (harness/models.py): `accuracy` is n_resolved / trials, `pass_at_k`
is given for the ks terminal-bench gives it (powers of two and 5 when every task has that many
attempts).
"""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np


def trial_result(task_id: str, trial_name: str, *, resolved: bool | None, failure_mode: str = "unset",
                 start: datetime | None = None, tokens: tuple[int, int] | None = (1200, 300),
                 parser_results: dict[str, str] | None = None, recording: str | None = None,
                 timestamps: bool = True) -> dict[str, Any]:
    start = start or datetime(2025, 8, 1, 12, 0, tzinfo=timezone.utc)

    def at(seconds: float) -> str | None:
        return (start + timedelta(seconds=seconds)).isoformat() if timestamps else None

    if parser_results is None and resolved is not None:
        parser_results = {"test_outputs.py::test_file_exists": "passed",
                          "test_outputs.py::test_content": "passed" if resolved else "failed"}
    return {"id": "00000000-0000-4000-8000-000000000000", "trial_name": trial_name, "task_id": task_id,
            "instruction": f"Do the {task_id} task.", "is_resolved": resolved, "failure_mode": failure_mode,
            "parser_results": parser_results, "recording_path": recording,
            "total_input_tokens": tokens[0] if tokens else None, "total_output_tokens": tokens[1] if tokens else None,
            "trial_started_at": at(0), "trial_ended_at": at(100), "agent_started_at": at(5),
            "agent_ended_at": at(65), "test_started_at": at(70), "test_ended_at": at(90)}


def pass_at_k(results: list[dict[str, Any]]) -> dict[str, float]:
    """terminal-bench's `BenchmarkResults.pass_at_k`, computed the same way."""
    counts: dict[str, list[int]] = {}
    for r in results:
        counts.setdefault(r["task_id"], []).append(1 if r["is_resolved"] else 0)
    least = min(len(v) for v in counts.values())
    ks = sorted({2 ** i for i in range(1, int(np.log2(least)) + 1)}) if least >= 2 else []
    if least >= 5:
        ks.append(5)
    out = {}
    for k in ks:
        vals = []
        for v in counts.values():
            n, c = len(v), sum(v)
            vals.append(1.0 if n - c < k else float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1))))
        out[str(k)] = float(np.mean(vals))
    return out


def write_run(folder: Path, results: list[dict[str, Any]], *, agent: str = "terminus", model: str | None = "m",
              n_attempts: int = 1, trial_folders: bool = True, run_level: bool = True,
              start: str = "2025-08-01T12:00:00+00:00") -> Path:
    """One `tb run` folder holding `results` (TrialResults dicts)."""
    folder.mkdir(parents=True, exist_ok=True)
    resolved = [r for r in results if r["is_resolved"]]
    bench = {"id": "00000000-0000-4000-8000-000000000001", "results": results,
             "pass_at_k": pass_at_k(results) if n_attempts > 1 else {}, "n_resolved": len(resolved),
             "n_unresolved": len(results) - len(resolved), "resolved_ids": [r["task_id"] for r in resolved],
             "unresolved_ids": [r["task_id"] for r in results if not r["is_resolved"]],
             "accuracy": len(resolved) / len(results) if results else 0.0}
    meta = {"run_id": folder.name, "uuid": "u", "dataset_name": "terminal-bench-core", "dataset_version": "0.1.1",
            "output_path": "/runs", "agent_name": agent, "no_rebuild": False, "cleanup": False, "log_level": 20,
            "task_ids": sorted({r["task_id"] for r in results}), "n_attempts": n_attempts,
            "dataset_size": len({r["task_id"] for r in results}), "accuracy": bench["accuracy"], "model_name": model,
            "start_time": start, "commit_hash": "unknown", "username": "unknown"}
    (folder / "run_metadata.json").write_text(json.dumps(meta, indent=4))
    if run_level:
        (folder / "results.json").write_text(json.dumps(bench, indent=4))
    if trial_folders:
        for r in results:
            d = folder / r["task_id"] / r["trial_name"]
            (d / "panes").mkdir(parents=True, exist_ok=True)
            (d / "sessions").mkdir(exist_ok=True)
            (d / "results.json").write_text(json.dumps(r, indent=4))
            (d / "panes" / "post-test.txt").write_text(
                "".join(f"{s.upper()} {n}\n" for n, s in (r.get("parser_results") or {}).items()))
            (d / "commands.txt").write_text("['clear', 'Enter']\n")
            if r.get("recording_path"):
                (d / "sessions" / "agent.cast").write_text('{"version": 2, "width": 160, "height": 40}\n')
    return folder


def write_submission(root: Path, *, tasks: int = 80, runs: int = 5, seed: int = 0) -> Path:
    """A submission folder of `runs` runs over `tasks` tasks with a realistic mix of failure modes."""
    rng = random.Random(seed)
    modes = ["unset"] * 14 + ["agent_timeout"] * 4 + ["parse_error", "test_timeout", "unknown_agent_error"]
    names = [f"task-{i:03d}" + (".easy" if i % 10 == 3 else "") for i in range(tasks)]
    for run in range(runs):
        run_id = f"2025-08-0{run + 1}__12-00-00"
        start = datetime(2025, 8, run + 1, 12, tzinfo=timezone.utc)
        results = []
        for t in names:
            mode = rng.choice(modes)
            resolved = None if mode in ("parse_error", "test_timeout") else rng.random() < 0.5
            trial = f"{t}.1-of-1.{run_id}"
            results.append(trial_result(t, trial, resolved=resolved, failure_mode=mode, start=start,
                                        recording=f"{run_id}/{t}/{trial}/sessions/agent.cast"))
        write_run(root / run_id, results, start=start.isoformat())
    return root
