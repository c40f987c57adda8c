"""tbscale beside Harbor: 8 oracle trials of a trivial task at concurrency 4, each harness as a
whole process from its own command line, alternating, with the task's image already built.

Issue 20 set its target (8 trials in at most 2.2 s) as an absolute time on this machine, and the
machine's speed has moved by several times since (benchmarks/README.md). The reference harness run
in the same minutes is the yardstick that moves with it: this script reports each round's wall
time for both, the Harbor / tbscale ratio per round and its median, the machine's CPU per trial
(/proc/stat: run it on an otherwise quiet machine) and how many trials passed in each run (a round
whose trials did not all pass is reported and left out of the ratio).

- tbscale: `tbscale run CONFIG --no-preflight` (8 trials, `agent: oracle`, concurrency 4), a new
  run folder each round, so nothing is resumed;
- Harbor: `harbor run -p TASK -a oracle -n 4 -k 8 -o JOBS`, its defaults otherwise.

Both read the same task folder (bench_sandbox.py's trivial task: a Dockerfile FROM
debian:bookworm-slim, a one-line solution and a one-line test). Each harness runs it once untimed
first, so that its image is built and cached as it keeps it.

Usage: .venv/bin/python benchmarks/bench_vs_harbor.py --harbor PATH/TO/harbor [--rounds 3]
  Harbor installs in a Python 3.12 virtualenv: python3.12 -m venv /tmp/hv && /tmp/hv/bin/pip install harbor
Writes benchmarks/out/vs_harbor.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_sandbox import MachineCPU, trivial_task  # noqa: E402

OUT = HERE / "out"
TRIALS, CONCURRENCY = 8, 4


def tbscale_config(root: Path, task_dir: Path) -> Path:
    config = root / "vs_harbor.yaml"
    config.write_text(json.dumps({  # YAML is a superset of JSON
        "name": "vs-harbor", "tasks": {"path": str(task_dir.parent), "include": [task_dir.name]},
        "trials": TRIALS, "concurrency": CONCURRENCY, "output_dir": str(root / "tbscale-runs"),
        "settings": [{"name": "oracle", "agent": "oracle"}]}))
    return config


def timed(argv: list[str]) -> tuple[float, MachineCPU]:
    """Run a harness's command to its end: its wall time and the machine's CPU meanwhile."""
    with MachineCPU() as cpu:
        t0 = time.monotonic()
        done = subprocess.run(argv, capture_output=True, text=True)
        wall = time.monotonic() - t0
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:3])} exited {done.returncode}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return wall, cpu


def run_tbscale(config: Path, run_name: str) -> tuple[float, MachineCPU, int]:
    wall, cpu = timed([sys.executable, "-m", "tbscale.cli", "run", str(config), "--run-name", run_name, "--no-preflight"])
    lines = (config.parent / "tbscale-runs" / run_name / "trials.jsonl").read_text().splitlines()
    return wall, cpu, sum(1 for line in lines if json.loads(line)["passed"])


def run_harbor(harbor: str, task_dir: Path, jobs: Path) -> tuple[float, MachineCPU, int]:
    wall, cpu = timed([harbor, "run", "-p", str(task_dir), "-a", "oracle", "-n", str(CONCURRENCY), "-k", str(TRIALS),
                       "-o", str(jobs)])
    result = json.loads(next(jobs.glob("*/result.json")).read_text())
    rewards = next(iter(result["stats"]["evals"].values()))["reward_stats"].get("reward", {})
    return wall, cpu, len(rewards.get("1.0", []))


def measure(name: str, wall: float, cpu: MachineCPU, passed: int) -> dict:
    return {"harness": name, "wall_sec": round(wall, 2), "passed": passed,
            "machine_cpu_sec_per_trial": (cpu.per(TRIALS) or {}).get("total")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--harbor", required=True, help="the harbor command (e.g. /tmp/hv/bin/harbor)")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="tbscale-vs-harbor-"))
    task_dir = trivial_task(root)
    config = tbscale_config(root, task_dir)
    run_tbscale(config, "warm")
    run_harbor(args.harbor, task_dir, root / "harbor-warm")
    rounds = []
    for i in range(args.rounds):
        # alternate which goes first, so that neither always follows the other's clean-up
        order = ["tbscale", "harbor"] if i % 2 == 0 else ["harbor", "tbscale"]
        row = {"round": i + 1, "load_average": round(os.getloadavg()[0], 1)}
        for name in order:
            if name == "tbscale":
                row[name] = measure(name, *run_tbscale(config, f"round-{i + 1}"))
            else:
                row[name] = measure(name, *run_harbor(args.harbor, task_dir, root / f"harbor-{i + 1}"))
        complete = row["tbscale"]["passed"] == TRIALS and row["harbor"]["passed"] == TRIALS
        row["harbor_over_tbscale"] = round(row["harbor"]["wall_sec"] / row["tbscale"]["wall_sec"], 2) if complete else None
        rounds.append(row)
        print(json.dumps(row), flush=True)
    ratios = [r["harbor_over_tbscale"] for r in rounds if r["harbor_over_tbscale"] is not None]
    summary = {
        "trials": TRIALS, "concurrency": CONCURRENCY, "rounds": rounds,
        "median_wall_sec": {h: statistics.median(r[h]["wall_sec"] for r in rounds) for h in ("tbscale", "harbor")},
        "median_harbor_over_tbscale": statistics.median(ratios) if ratios else None,
        "rounds_left_out": len(rounds) - len(ratios),
        "harbor_version": subprocess.run([args.harbor, "--version"], capture_output=True, text=True).stdout.strip(),
    }
    OUT.mkdir(exist_ok=True)
    (OUT / "vs_harbor.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k != "rounds"}, indent=2))


if __name__ == "__main__":
    main()
