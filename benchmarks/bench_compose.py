"""The cost of a compose environment over a single container, for one oracle trial.

Two Harbor tasks that differ only in their environment: `single` (environment/Dockerfile) and
`compose` (the same Dockerfile plus a docker-compose.yaml adding one idle sidecar). Their images are
built first (untimed); then oracle trials of the two alternate, one at a time, and the medians of
the trial wall time and of its phases (create = start, prepare, agent, verify, remove) are
compared. The ratio compose / single is the overhead of `docker compose up --wait` / `down` and of
the second container, measured in the same run on the same engine.

Usage: .venv/bin/python benchmarks/bench_compose.py [--reps 5]; writes benchmarks/out/compose.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

from tbscale.config import Experiment
from tbscale.runner import Runner, load_rows
from tbscale.tasks import load_task

HERE = Path(__file__).parent
PHASES = ("image", "create", "prepare", "agent", "verify", "remove", "trial_wall")


def write_task(root: Path, name: str, compose: bool) -> Path:
    d = root / name
    for sub in ("environment", "tests", "solution"):
        (d / sub).mkdir(parents=True)
    (d / "instruction.md").write_text("Write 'done' into /app/out.txt.\n")
    (d / "task.toml").write_text('schema_version = "1.4"\n[agent]\ntimeout_sec = 60\n[verifier]\ntimeout_sec = 30\n')
    (d / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\nRUN mkdir -p /app\nWORKDIR /app\n")
    if compose:
        (d / "environment" / "docker-compose.yaml").write_text(
            "services:\n  side:\n    image: debian:bookworm-slim\n    command: [\"sleep\", \"infinity\"]\n")
    (d / "tests" / "test.sh").write_text('#!/bin/bash\n[ "$(cat /app/out.txt)" = done ] && echo 1 > '
                                         '/logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n')
    (d / "solution" / "solve.sh").write_text("#!/bin/bash\necho done > /app/out.txt\n")
    return d


def one_trial(root: Path, task, tag: str) -> dict[str, float]:
    exp = Experiment.model_validate({"name": "bench-compose", "tasks": {"path": str(root)}, "trials": 1,
                                     "concurrency": 1, "settings": [{"name": "oracle", "agent": "oracle"}]})
    run_dir = root / "runs" / tag
    t0 = time.monotonic()
    asyncio.run(Runner(exp, [task], run_dir).run())
    wall = time.monotonic() - t0
    (row,) = load_rows(run_dir)
    assert row["passed"], f"oracle failed: {row.get('error')}"
    return {**row["timing"], "runner_wall": wall}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tbscale-bench-compose-") as tmp:
        root = Path(tmp)
        tasks = {kind: load_task(write_task(root / "tasks", f"bench-{kind}", kind == "compose"))
                 for kind in ("single", "compose")}
        for kind, task in tasks.items():  # build and warm up, untimed
            one_trial(root, task, f"warm-{kind}")
        samples: dict[str, list[dict[str, float]]] = {"single": [], "compose": []}
        for i in range(args.reps):
            for kind, task in tasks.items():
                samples[kind].append(one_trial(root, task, f"{kind}-{i}"))
    medians = {kind: {p: round(statistics.median(s.get(p, 0.0) for s in runs), 3)
                      for p in PHASES + ("runner_wall",)} for kind, runs in samples.items()}
    ratio = medians["compose"]["trial_wall"] / medians["single"]["trial_wall"]
    result = {"reps": args.reps, "median_sec": medians, "compose_over_single_trial_wall": round(ratio, 2),
              "compose_extra_sec": round(medians["compose"]["trial_wall"] - medians["single"]["trial_wall"], 2)}
    out = HERE / "out"
    out.mkdir(exist_ok=True)
    (out / "compose.json").write_text(json.dumps(result, indent=2))
    print("one oracle trial, images cached (median s over", args.reps, "each, alternating):")
    for p in PHASES:
        print(f"  {p:10s} single {medians['single'][p]:6.2f}   compose {medians['compose'][p]:6.2f}")
    print(f"compose / single trial wall: {ratio:.2f}x (+{result['compose_extra_sec']:.2f} s)")


if __name__ == "__main__":
    main()
