"""What verification integrity costs per trial (docs/tasks.md, "Verification integrity").

In one container of the bundled fix-python-inventory task's image (python 3.11, pytest), with a
few background processes left by an "agent" each round, interleaved:
1. the baseline before the agent phase: toolchain and mount-point digests plus `docker diff`
   (`guard_digest`) and the process listing (`guard_processes`);
2. the sweep as tbscale does it: list the agent's processes, restart the container
   (`guard_sweep`), and the check after it (`guard_check`: digests and `docker diff` again);
3. the alternative it was measured against: kill every process but PID 1 and the init's child
   from one root exec (`kill_exec`);
4. one plain exec, the unit all of these are made of; and an exec whose command leaves a background
   process holding its output, with the exec after it (the engine holds both);
5. and, for scale, one oracle trial of the same task with its image cached (`trial_wall`), with and
   without the sweep (`environment.agent_processes: stop | keep`).

Writes benchmarks/out/guard.json. Run: .venv/bin/python benchmarks/bench_guard.py
"""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

from tbscale.config import Experiment
from tbscale.environments import StartSpec
from tbscale.environments import docker as dk
from tbscale.runner import Runner
from tbscale.runner.guard import VerifierGuard
from tbscale.tasks import load_task

REPO = Path(__file__).resolve().parents[1]
OUT = Path(__file__).parent / "out"
TASK = REPO / "tasks" / "fix-python-inventory"
# Each leaves its output elsewhere: a background process that holds an exec's output makes the
# engine hold that exec and the next one up to 2 s each (`held_output` below), which would be
# counted as the sweep's time here.
LEAVE = ("nohup sh -c 'while :; do sleep 1; done' >/dev/null 2>&1 & setsid sleep 1000 >/dev/null 2>&1 < /dev/null & "
         "su nobody -s /bin/sh -c 'sleep 1000 >/dev/null 2>&1 &'")
KILL = r'''for d in /proc/[0-9]*; do p=${d#/proc/}; case "$p" in 1|"$$"|"$PPID") continue;; esac
[ "$(cut -d' ' -f4 "$d/stat" 2>/dev/null)" = 0 ] && continue
[ "$(cut -d' ' -f4 "$d/stat" 2>/dev/null)" = 1 ] && [ "$(tr '\0' ' ' < "$d/cmdline")" = "sleep infinity " ] && continue
kill -9 "$p" 2>/dev/null; done; true'''


def ms(values: list[float]) -> float:
    return round(statistics.median(values) * 1000, 1)


def bench_steps(reps: int) -> dict:
    task = load_task(TASK)
    image, _ = dk.ensure_image(task)
    box = dk.Container.start(StartSpec(image, cpus=1, memory_mb=1024, network="none"))
    timings: dict[str, list[float]] = {k: [] for k in ("guard_digest", "guard_processes", "guard_sweep", "guard_check",
                                                        "kill_exec", "exec")}
    try:
        box.exec("mkdir -p /logs/verifier /logs/agent /logs/artifacts && chmod 777 /logs/*", 30, user="0")
        for _ in range(3):
            box.exec("true", 30)
        for _ in range(reps):
            guard = VerifierGuard(box, task.verifier)
            guard.baseline()
            box.exec(LEAVE, 30, user="0")
            entries, record = guard.seal([(1, LEAVE)])
            assert record["agent_processes_count"] >= 3, record
            for k in ("guard_digest", "guard_processes", "guard_sweep", "guard_check"):
                timings[k].append(guard.timing[k])
            box.exec(LEAVE, 30, user="0")
            t = time.perf_counter()
            box.exec(KILL, 30, user="0")
            timings["kill_exec"].append(time.perf_counter() - t)
            left = box.exec("ls /proc | grep -c '^[0-9]'", 30).output.strip()
            t = time.perf_counter()
            box.exec("true", 30)
            timings["exec"].append(time.perf_counter() - t)
        held = held_output(box, reps=3)
        out = {f"{k}_ms": ms(v) for k, v in timings.items()}
        out.update(held)
        out["processes_after_kill_exec"] = left
        out["tools_digested"] = len(guard.names)
    finally:
        box.stop()
    out["per_trial_ms"] = round(out["guard_digest_ms"] + out["guard_processes_ms"] + out["guard_sweep_ms"]
                                + out["guard_check_ms"], 1)
    out["sweep_over_kill_exec"] = round(out["guard_sweep_ms"] / out["kill_exec_ms"], 2)
    return out


def held_output(box, reps: int) -> dict:
    """An agent command that leaves a background process writing to the command's own output
    (`sleep 1000 &`): the engine holds that exec, then the next one, until the process lets the
    output go or 2 s pass (the docker CLI's `docker exec` shows the same)."""
    first, second = [], []
    for _ in range(reps):
        t = time.perf_counter()
        box.exec("sleep 1000 &", 30, user="0")
        first.append(time.perf_counter() - t)
        t = time.perf_counter()
        box.exec("true", 30)
        second.append(time.perf_counter() - t)
        box.exec(KILL, 30, user="0")
    return {"held_output_exec_ms": ms(first), "held_output_next_exec_ms": ms(second)}


def bench_trials(reps: int) -> dict:
    walls: dict[str, list[float]] = {"stop": [], "keep": []}
    with tempfile.TemporaryDirectory(prefix="tbscale-bench-guard-") as tmp:
        for i in range(reps):
            for mode in ("stop", "keep"):
                exp = Experiment.model_validate({
                    "name": f"guard-{mode}-{i}", "tasks": {"path": str(REPO / "tasks"), "include": [TASK.name]},
                    "trials": 1, "concurrency": 1, "environment": {"agent_processes": mode},
                    "settings": [{"name": "oracle", "agent": "oracle"}]})
                run_dir = Path(tmp) / exp.name
                asyncio.run(Runner(exp, [load_task(TASK)], run_dir).run())
                row = json.loads((run_dir / "trials.jsonl").read_text().splitlines()[0])
                assert row["passed"], row
                walls[mode].append(row["timing"]["trial_wall"])
    stop, keep = statistics.median(walls["stop"]), statistics.median(walls["keep"])
    return {"oracle_trial_stop_s": round(stop, 3), "oracle_trial_keep_s": round(keep, 3),
            "oracle_trial_ratio": round(stop / keep, 3)}


def main() -> None:
    out = bench_steps(reps=10)
    out.update(bench_trials(reps=4))
    OUT.mkdir(exist_ok=True)
    (OUT / "guard.json").write_text(json.dumps(out, indent=2))
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
