"""Fork latency against replaying a prefix, on the bundled tasks (docs/forks-and-lookahead.md).

For every task in tasks/ (images built first, untimed) and each repetition:
- a parent container is started the way an attempt starts one and runs a 20-command agent-like
  prefix (files written, listings, greps, a small Python call);
- `snapshot`: its filesystem committed (`Environment.snapshot`, the container paused meanwhile);
- `fork`: an environment started from the snapshot (`Backend.fork`) until it answers a command;
- `fork_latency` = snapshot + fork: from a paused prefix to a running copy of it;
- `replay_N` for N in 5, 10, 20: what a continuation costs without forks: a fresh container
  started from the task's image, answering a command, then the prefix's first N commands run in it.
Snapshot and fork are what `prefix_restore: fork` pays per continuation, fresh start plus replay
what `prefix_restore: replay` pays. The figures are p50 and p95 over every task and repetition;
the ratio `fork_latency / replay_10` is the one the target (at most 25%) is about; `fork /
replay_commands_10` compares the fork with the replayed commands alone (no container start).

Second part (`--cer-tasks`, skip with `--cer-tasks ""`): the same CER search with the simulated
models run twice on the same tasks and seeds, `prefix_restore: fork` and `replay`, and what
restoring each continuation's prefix cost inside real attempts (fork: the parent's snapshot plus
the fork and its preparation; replay: image lookup, create, preparation and the replayed
commands, from the attempts' `timing`), with the trials' wall time. The simulated agent's commands
are the prefix here (SIMULATED: no language model).

`--engine-calls` also times every Docker Engine API call per phase (snapshot, fork, replay start):
what the engine itself takes (commit, container start) against the client's round trips.

Usage: .venv/bin/python benchmarks/bench_forks.py [--reps 3] [--tasks a,b] [--cer-tasks a,b]
[--engine-calls]; writes benchmarks/out/forks.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import os
import statistics
import time
from pathlib import Path

from tbscale.environments import StartSpec
from tbscale.environments.docker_backend import DockerBackend
from tbscale.tasks import load_tasks

HERE = Path(__file__).parent
REPO = HERE.parent
LABEL = {"org.tbscale.bench": f"forks-{os.getpid()}"}
PREFIX = [
    "ls -la", "mkdir -p /tmp/work && cd /tmp/work && pwd", "echo 'alpha,1' > /tmp/work/data.csv",
    "echo 'beta,2' >> /tmp/work/data.csv", "cat /tmp/work/data.csv", "wc -l /tmp/work/data.csv",
    "grep -n beta /tmp/work/data.csv", "python3 -c 'print(sum(range(1000)))' || echo no-python",
    "sed -i 's/alpha/gamma/' /tmp/work/data.csv", "head -n 1 /tmp/work/data.csv",
    "find /tmp/work -type f | sort", "date +%s > /tmp/work/stamp", "cat /etc/os-release | head -n 2",
    "cp /tmp/work/data.csv /tmp/work/copy.csv && ls /tmp/work", "tail -n 1 /tmp/work/copy.csv",
    "echo $RANDOM > /tmp/work/rand", "du -sh /tmp/work", "printf 'x%.0s' $(seq 1 100) > /tmp/work/xs",
    "test -s /tmp/work/xs && echo nonempty", "ls /tmp/work | wc -l",
]
LENGTHS = (5, 10, 20)


class EngineCalls:
    """`--engine-calls`: every Docker Engine API call the client makes, timed and counted per phase
    of a sample (snapshot, fork, replay start), so that where a fork's time goes is measured, not
    guessed: the engine's own work (commit, container start) against the client's round trips."""

    CALLS = ("commit", "inspect_image", "create_container", "start", "inspect_container", "exec_create",
             "exec_start", "exec_inspect", "top", "connect_container_to_network", "disconnect_container_from_network")

    def __init__(self) -> None:
        self.phase = ""
        self.sec: dict[str, dict[str, list[float]]] = {}

    def install(self) -> None:
        from docker.api.client import APIClient

        for name in self.CALLS:
            original = getattr(APIClient, name)

            def timed(api, *a, _original=original, _name=name, **k):
                t = time.monotonic()
                try:
                    return _original(api, *a, **k)
                finally:
                    if self.phase:
                        self.sec.setdefault(self.phase, {}).setdefault(_name, []).append(time.monotonic() - t)
            setattr(APIClient, name, timed)

    def summary(self, samples: int) -> dict:
        return {phase: {name: {"calls_per_sample": round(len(v) / samples, 2), "p50": pct(v, 0.5),
                               "sec_per_sample": round(sum(v) / samples, 3)} for name, v in sorted(calls.items())}
                for phase, calls in self.sec.items()}


ENGINE = EngineCalls()


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return round(s[min(len(s) - 1, int(q * (len(s) - 1) + 0.5))], 3)


def start(backend: DockerBackend, image: str, task) -> object:
    env = task.environment
    spec = StartSpec(image=image, cpus=None, memory_mb=None, network="public", workdir=env.workdir,
                     env=env.env.resolve(), labels=dict(LABEL), task=task)
    box = backend.start(spec)
    box.exec("true", 30)
    return box


def one(backend: DockerBackend, image: str, task) -> dict[str, float]:
    out: dict[str, float] = {}
    parent = start(backend, image, task)
    fork = snap = None
    try:
        for command in PREFIX:
            parent.exec(command, 60)
        ENGINE.phase = "snapshot"
        t = time.monotonic()
        snap = parent.snapshot()
        out["snapshot"] = time.monotonic() - t
        ENGINE.phase = "fork"
        t = time.monotonic()
        fork = backend.fork(snap, labels=dict(LABEL))
        res = fork.exec("cat /tmp/work/rand", 30)
        out["fork"] = time.monotonic() - t
        ENGINE.phase = ""
        assert res.exit_code == 0 and res.output.strip() == parent.exec("cat /tmp/work/rand", 30).output.strip()
        out["fork_latency"] = out["snapshot"] + out["fork"]
        out["snapshot_mb"] = snap.size_bytes / 1e6
    finally:
        if fork is not None:
            fork.stop()
        if snap is not None:
            backend.release(snap)
        parent.stop()
    for n in LENGTHS:
        ENGINE.phase = "replay_start"
        t = time.monotonic()
        box = start(backend, image, task)
        started = time.monotonic() - t
        ENGINE.phase = ""
        try:
            t = time.monotonic()
            for command in PREFIX[:n]:
                box.exec(command, 60)
            out[f"replay_commands_{n}"] = time.monotonic() - t
            out[f"replay_{n}"] = started + out[f"replay_commands_{n}"]
        finally:
            box.stop()
    return out


def cer_compare(task_ids: list[str]) -> dict:
    """CER on forks against CER on replays, same tasks and seeds (simulated models)."""
    from tbscale.config import Experiment
    from tbscale.jsonl import read_jsonl
    from tbscale.runner import Runner, load_rows

    settings = [{"name": f"cer-{mode}", "generator": "policy",
                 "trajectory": {"name": "cer", "m": 3, "beam": 2, "segment_turns": 3, "rounds": 3, "judge": "judge",
                                "prefix_restore": mode}} for mode in ("fork", "replay")]
    exp = Experiment.model_validate({
        "name": "bench-forks-cer", "tasks": {"path": str(REPO / "tasks"), "include": task_ids}, "trials": 1,
        "concurrency": 1, "models": {"policy": {"model": "sim/policy", "sim": {"skill": 0.6}},
                                     "judge": {"model": "sim/cer_judge", "sim": {"accuracy": 0.9}}},
        "settings": settings, "limits": {"max_turns": 30}})
    tasks, _ = load_tasks(REPO / "tasks")
    tasks = [t for t in tasks if t.id in task_ids]
    with tempfile.TemporaryDirectory(prefix="tbscale-bench-forks-") as tmp:
        run = Path(tmp) / "run"
        asyncio.run(Runner(exp, tasks, run).run())
        out: dict[str, dict] = {}
        for line in load_rows(run):
            row = line.model_dump() if hasattr(line, "model_dump") else line
            mode = row["setting"].removeprefix("cer-")
            events = list(read_jsonl(run / row["trajectory_path"]))
            ends = [e for e in events if e.get("type") == "attempt_end"]
            starts = {e["attempt"]: e for e in events if e.get("type") == "attempt_start"}
            snap_sec = {e["attempt"]: e["timing"].get("snapshot", 0.0) for e in ends}
            restore = []
            for e in ends:
                start = starts.get(e["attempt"], {})
                t = e.get("timing") or {}
                if start.get("prefix_restore") == "fork":
                    restore.append(snap_sec.get(start.get("prefix_of"), 0.0) + t.get("fork", 0.0) + t.get("prepare", 0.0))
                elif start.get("prefix_restore") == "replay":
                    restore.append(t.get("image", 0.0) + t.get("create", 0.0) + t.get("prepare", 0.0) + t.get("replay", 0.0))
            agg = out.setdefault(mode, {"restore_sec": [], "trial_wall": [], "prefix_turns": [], "forks": 0})
            agg["restore_sec"] += restore
            agg["trial_wall"].append(row["timing"].get("trial_wall", 0.0))
            agg["prefix_turns"] += [s.get("prefix_turns", 0) for s in starts.values() if s.get("prefix_restore")]
            agg["forks"] += row.get("forks", 0)
    summary = {}
    for mode, agg in out.items():
        summary[mode] = {"continuations": len(agg["restore_sec"]), "forks": agg["forks"],
                         "restore_p50": pct(agg["restore_sec"], 0.5) if agg["restore_sec"] else None,
                         "restore_p95": pct(agg["restore_sec"], 0.95) if agg["restore_sec"] else None,
                         "prefix_turns_median": statistics.median(agg["prefix_turns"]) if agg["prefix_turns"] else 0,
                         "trial_wall_sum": round(sum(agg["trial_wall"]), 2)}
    return summary


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--tasks", default="", help="comma-separated task ids (default: every bundled task)")
    parser.add_argument("--cer-tasks", default="extract-emails,fix-python-inventory,csv-sales-summary",
                        help="tasks of the CER fork-vs-replay comparison (empty: skip it)")
    parser.add_argument("--engine-calls", action="store_true",
                        help="time every engine API call per phase (snapshot, fork, replay start)")
    args = parser.parse_args()
    if args.engine_calls:
        ENGINE.install()
    tasks, _ = load_tasks(REPO / "tasks")
    if args.tasks:
        tasks = [t for t in tasks if t.id in set(args.tasks.split(","))]
    backend = DockerBackend()
    images = {t.id: backend.prepare(t)[0] for t in tasks}  # built or found, untimed
    samples: list[dict[str, float]] = []
    for rep in range(args.reps):
        for task in tasks:
            samples.append({"task": task.id, **one(backend, images[task.id], task)})
            print(f"rep {rep} {task.id}: " + ", ".join(f"{k} {v:.2f}" for k, v in samples[-1].items() if k != "task"),
                  flush=True)
    keys = ["snapshot", "fork", "fork_latency"] + [f"replay_commands_{n}" for n in LENGTHS] + [f"replay_{n}" for n in LENGTHS]
    stats = {k: {"p50": pct([s[k] for s in samples], 0.5), "p95": pct([s[k] for s in samples], 0.95)} for k in keys}
    mb = statistics.median(s["snapshot_mb"] for s in samples)
    ratios = {"fork_latency_over_replay_10": round(stats["fork_latency"]["p50"] / stats["replay_10"]["p50"], 3),
              "fork_over_replay_10": round(stats["fork"]["p50"] / stats["replay_10"]["p50"], 3),
              "fork_latency_over_replay_commands_10":
                  round(stats["fork_latency"]["p50"] / stats["replay_commands_10"]["p50"], 3)}
    cer = cer_compare([t for t in args.cer_tasks.split(",") if t]) if args.cer_tasks else {}
    result = {"tasks": len(tasks), "reps": args.reps, "samples": len(samples), "sec": stats,
              "snapshot_mb_median": round(mb, 3), "ratios_p50": ratios, "cer_simulated": cer, "per_sample": samples,
              "load_average": [round(x, 2) for x in os.getloadavg()]}
    if args.engine_calls:
        result["engine_calls"] = ENGINE.summary(len(samples))
    out = HERE / "out"
    out.mkdir(exist_ok=True)
    (out / "forks.json").write_text(json.dumps(result, indent=2))
    print(f"{len(samples)} samples ({len(tasks)} tasks x {args.reps}); seconds p50 / p95:")
    for k in keys:
        print(f"  {k:22s} {stats[k]['p50']:6.2f} / {stats[k]['p95']:6.2f}")
    print(f"snapshot's own layer: {mb:.2f} MB median")
    for k, v in ratios.items():
        print(f"  {k}: {v:.2f}")
    for phase, calls in result.get("engine_calls", {}).items():
        print(f"engine calls in {phase}, seconds per sample: "
              + ", ".join(f"{name} {c['sec_per_sample']:.3f} ({c['calls_per_sample']:g}x)" for name, c in calls.items()))
    print(f"load average at the end: {result['load_average']}")
    for mode, m in cer.items():
        print(f"CER (SIMULATED models) prefix_restore {mode}: {m}")


if __name__ == "__main__":
    main()
