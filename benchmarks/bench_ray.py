"""What the Ray executor adds to a trial: 32 oracle trials of small tasks (images cached) through
the local executor, then through Ray with one node and with two nodes (ray.cluster_utils.Cluster
on this machine, sharing its Docker engine), at the same parallelism (2 trials at a time).

Reported per configuration:
- wall time of the 32 trials (the cluster's start excluded, reported apart);
- each trial's round trip as the Runner sees it (submit to result) against the trial's own wall
  time measured inside it (`timing.trial_wall`); their difference is what the executor adds to a
  trial (for the local executor, nearly nothing);
- the overhead Ray adds per trial: the median of that difference under Ray minus under the local
  executor, as a share of the median trial wall time (target: at most 10%);
- the added wall time per trial slot: (Ray wall - local wall) / (32 / parallelism).

Run from the repository root: .venv/bin/python benchmarks/bench_ray.py [--trials 32]
Writes benchmarks/out/ray.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from tbscale.config import Experiment  # noqa: E402
from tbscale.logs import read_jsonl  # noqa: E402
from tbscale.runner import Runner  # noqa: E402
from tbscale.runner.executors.ray import FAST_HEALTH_CHECK  # noqa: E402
from tbscale.tasks import load_tasks  # noqa: E402
from tbscale_testing.tasks import write_harbor_task  # noqa: E402

OUT = Path(__file__).parent / "out"
PARALLEL = 2
TASKS = 4


def experiment(root: Path, executor: dict, trials_per_task: int) -> Experiment:
    return Experiment.model_validate({
        "name": "bench", "tasks": {"path": str(root / "tasks")}, "trials": trials_per_task, "seed": 0,
        "concurrency": PARALLEL, "settings": [{"name": "oracle", "agent": "oracle"}],
        "environment": {"memory_mb": 512}, "executor": executor})


def timed_run(exp: Experiment, run_dir: Path) -> dict:
    tasks, _ = load_tasks(Path(exp.tasks.path))
    runner = Runner(exp, tasks, run_dir)
    trips: dict[str, float] = {}
    inner = runner.executor.run_trial

    async def run_trial(spec, trials):
        t = time.perf_counter()
        row = await inner(spec, trials)
        trips[spec.key] = time.perf_counter() - t
        return row

    runner.executor.run_trial = run_trial
    t = time.perf_counter()
    asyncio.run(runner.run())
    wall = time.perf_counter() - t
    rows = list(read_jsonl(run_dir / "trials.jsonl"))
    assert len(rows) == len(trips) and all(r["passed"] for r in rows), (len(rows), runner.crashes[:1])
    inner_wall = {r["trial_key"]: r["timing"]["trial_wall"] for r in rows}
    added = [trips[k] - inner_wall[k] for k in trips]
    return {"trials": len(rows), "wall_sec": round(wall, 3), "trial_wall_median": round(statistics.median(inner_wall.values()), 4),
            "roundtrip_median": round(statistics.median(trips.values()), 4),
            "added_per_trial_median": round(statistics.median(added), 4),
            "added_per_trial_mean": round(statistics.mean(added), 4)}


def with_cluster(root: Path, nodes: int, trials: int) -> dict:
    import ray
    from ray.cluster_utils import Cluster

    t = time.perf_counter()
    per = PARALLEL // nodes
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": per, "include_dashboard": False,
                                                      "_system_config": FAST_HEALTH_CHECK})
    for _ in range(nodes - 1):
        c.add_node(num_cpus=per)
    c.wait_for_nodes()
    ray.init(address=c.address, logging_level="WARNING", log_to_driver=False)
    started = time.perf_counter() - t
    try:
        ex = {"name": "ray", "address": c.address}
        warm = timed_run(experiment(root, ex, 1), root / f"warm-ray{nodes}")  # worker processes start
        res = timed_run(experiment(root, ex, trials // TASKS), root / f"ray{nodes}")
    finally:
        ray.shutdown()
        c.shutdown()
    return {**res, "cluster_start_sec": round(started, 2), "warmup_wall_sec": warm["wall_sec"]}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=32)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="tbscale-bench-ray-"))
    for i in range(TASKS):
        write_harbor_task(root / "tasks", f"benchray{i}")
    timed_run(experiment(root, {"name": "local"}, 1), root / "warm-local")  # images built, caches warm
    results = {"local": timed_run(experiment(root, {"name": "local"}, args.trials // TASKS), root / "local")}
    for nodes in (1, 2):
        results[f"ray_{nodes}_node{'s' if nodes > 1 else ''}"] = with_cluster(root, nodes, args.trials)
    base = results["local"]
    for name, r in results.items():
        r["ray_added_per_trial_sec"] = round(r["added_per_trial_median"] - base["added_per_trial_median"], 4)
        r["ray_added_share_of_trial"] = round(r["ray_added_per_trial_sec"] / base["trial_wall_median"], 4)
        r["wall_added_per_slot_sec"] = round((r["wall_sec"] - base["wall_sec"]) / (args.trials / PARALLEL), 4)
        r["wall_ratio"] = round(r["wall_sec"] / base["wall_sec"], 3)
    print(f"{args.trials} oracle trials, {PARALLEL} at a time (load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    print(f"{'executor':<12} {'wall s':>7} {'ratio':>6} {'trial s':>8} {'trip s':>7} {'added/trial':>12} "
          f"{'share':>6} {'added/slot':>11} {'start s':>8}")
    for name, r in results.items():
        print(f"{name:<12} {r['wall_sec']:>7.1f} {r['wall_ratio']:>6.2f} {r['trial_wall_median']:>8.3f} "
              f"{r['roundtrip_median']:>7.3f} {r['ray_added_per_trial_sec']:>11.3f}s {100 * r['ray_added_share_of_trial']:>5.1f}% "
              f"{r['wall_added_per_slot_sec']:>10.3f}s {r.get('cluster_start_sec', 0):>8.1f}")
    OUT.mkdir(exist_ok=True)
    (OUT / "ray.json").write_text(json.dumps({"trials": args.trials, "parallel": PARALLEL, "load": os.getloadavg()[0],
                                              "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
