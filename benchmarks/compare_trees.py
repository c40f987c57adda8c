"""8 oracle trials at concurrency 4, in two checkouts of tbscale, interleaved: the ratio of their
wall times (timings on a shared machine drift; rounds that alternate the trees see the same load).

Each measure runs in its own process with the checkout first on PYTHONPATH, through that
checkout's own benchmarks/bench_sandbox.py (the trivial oracle task, image cached, a warm-up of 2
trials first). The Python environment is this one, so both checkouts must run in it.

Usage: .venv/bin/python benchmarks/compare_trees.py BEFORE_DIR AFTER_DIR [--rounds 3]
  e.g. git worktree add /tmp/base fe1cf58 && .venv/bin/python benchmarks/compare_trees.py /tmp/base .
Writes benchmarks/out/compare_trees.json: every wall, the AFTER/BEFORE ratio per round and its median.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

OUT = Path(__file__).parent / "out"

# Run inside the measured checkout; bench_trials returns (wall, rows) in older checkouts and
# (wall, rows, engine calls) in newer ones: the wall is first in both.
MEASURE = """
import json, sys, tempfile
from pathlib import Path
import bench_sandbox as b
from tbscale.environments import docker as dk
from tbscale.tasks import load_task
root = Path(tempfile.mkdtemp(prefix="tbscale-compare-"))
task = load_task(b.trivial_task(root))
dk.ensure_image(task)
b.bench_trials(root, task, 2, 2, "warm")
print(json.dumps({"wall": b.bench_trials(root, task, 8, 4, "c4")[0]}))
"""


def measure(tree: Path) -> float:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), str(tree / "benchmarks")])}
    res = subprocess.run([sys.executable, "-c", MEASURE], cwd=tree, env=env, capture_output=True, text=True,
                         timeout=1800)
    if res.returncode != 0:
        raise SystemExit(f"{tree}: the measure failed:\n{res.stderr[-2000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])["wall"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    before, after = args.before.resolve(), args.after.resolve()
    rounds = []
    for i in range(args.rounds):
        a, b = measure(before), measure(after)
        load = os.getloadavg()[0]
        rounds.append({"before_sec": round(a, 3), "after_sec": round(b, 3), "ratio": round(b / a, 3),
                       "load_average": round(load, 1)})
        print(f"round {i + 1}: before {a:.2f} s, after {b:.2f} s, ratio {b / a:.2f} (load {load:.1f})", flush=True)
    median = statistics.median(r["ratio"] for r in rounds)
    print(f"8 oracle trials at concurrency 4, after/before: median ratio {median:.2f} over {len(rounds)} rounds")
    OUT.mkdir(exist_ok=True)
    (OUT / "compare_trees.json").write_text(json.dumps({"before": str(before), "after": str(after),
                                                        "rounds": rounds, "median_ratio": median}, indent=2))


if __name__ == "__main__":
    main()
