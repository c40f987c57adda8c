"""Sandbox speed, as ratios measured in one run (timings on shared machines are noisy).

1. One action's exec round trip: tbscale's Container.exec (the Docker backend's Environment) against a bare docker SDK exec_run of the
   same command, and a `docker exec` subprocess, interleaved in one container.
2. One oracle trial of a trivial task with the image cached, split into its phases.
3. Eight such trials at concurrency 4: wall time.
4. Engine calls per trial, by kind (every HTTP request the docker SDK sends, counted), for the
   single trials and for the eight at concurrency 4.
5. The machine's CPU time (all processes: this one, the engine, the containers, the kernel; from
   /proc/stat, so Linux only, and only meaningful on an otherwise quiet machine) that one exec, one
   container's start and removal, one restart and one trial of the eight cost. With it, the least
   wall time the eight trials can take on this machine's cores when CPU is what they wait for.

Writes benchmarks/out/sandbox.json. Run: .venv/bin/python benchmarks/bench_sandbox.py
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import json
import os
import re
import statistics
import threading
import subprocess
import tempfile
import time
from pathlib import Path

from tbscale.config import Experiment
from tbscale.environments import StartSpec
from tbscale.environments import docker as dk
from tbscale.runner import Runner, plan_trials
from tbscale.tasks import load_task
from tbscale_testing.tasks import write_harbor_task

OUT = Path(__file__).parent / "out"

# An engine API request (method, path without the version prefix) -> its kind.
_KINDS = [
    ("POST", r"/containers/create", "create"), ("POST", r"/containers/[^/]+/start", "start"),
    ("POST", r"/containers/[^/]+/exec", "exec_create"), ("POST", r"/exec/[^/]+/start", "exec_start"),
    ("GET", r"/exec/[^/]+/json", "exec_inspect"), ("PUT", r"/containers/[^/]+/archive", "put_archive"),
    ("GET", r"/containers/[^/]+/archive", "get_archive"), ("HEAD", r"/containers/[^/]+/archive", "stat_archive"),
    ("GET", r"/containers/[^/]+/json", "inspect"), ("POST", r"/containers/[^/]+/restart", "restart"),
    ("POST", r"/containers/[^/]+/kill", "kill"), ("POST", r"/containers/[^/]+/stop", "stop"),
    ("POST", r"/containers/[^/]+/wait", "wait"), ("DELETE", r"/containers/[^/]+", "remove"),
    ("POST", r"/commit", "commit"), ("GET", r"/images/.+/json", "image_inspect"),
    ("GET", r"/containers/json", "list_containers"), ("GET", r"/images/json", "list_images"),
    ("POST", r"/networks/create", "network_create"), ("POST", r"/networks/[^/]+/connect", "network_connect"),
    ("POST", r"/networks/[^/]+/disconnect", "network_disconnect"), ("GET", r"/networks/[^/]+", "network_inspect"),
    ("DELETE", r"/networks/[^/]+", "network_remove"), ("GET", r"/_ping", "ping"), ("GET", r"/version", "version"),
    ("GET", r"/info", "info"),
]


class EngineCalls:
    """Counts every request the docker SDK sends to the engine (its APIClient is a requests
    Session: each call goes through `request`), by kind."""

    def __init__(self):
        self.counts: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()
        self._orig = None

    @staticmethod
    def kind(method: str, url: str) -> str:
        path = re.sub(r"^[a-z+]+://[^/]*", "", url.split("?", 1)[0])
        path = re.sub(r"^/v[0-9.]+(?=/)", "", path)
        for m, pattern, name in _KINDS:
            if m == method.upper() and re.fullmatch(pattern, path):
                return name
        return f"{method.upper()} {path}"

    def __enter__(self) -> "EngineCalls":
        from docker.api.client import APIClient

        self._orig = APIClient.request
        orig, counter = self._orig, self

        def request(session, method, url, *args, **kwargs):
            with counter._lock:
                counter.counts[counter.kind(method, url)] += 1
            return orig(session, method, url, *args, **kwargs)

        APIClient.request = request
        return self

    def __exit__(self, *exc) -> None:
        from docker.api.client import APIClient

        APIClient.request = self._orig

    def per_trial(self, trials: int) -> dict[str, float]:
        out = {k: round(v / trials, 2) for k, v in sorted(self.counts.items(), key=lambda kv: (-kv[1], kv[0]))}
        out["total"] = round(sum(self.counts.values()) / trials, 2)
        return out


class MachineCPU:
    """CPU seconds the whole machine spent (user and system, every process and the kernel) between
    enter and exit, from /proc/stat; None where there is no /proc/stat. `this_process`: the part
    this Python process spent (tbscale's own work and the docker SDK, all threads)."""

    def __init__(self):
        self.user = self.system = self.this_process = None

    @staticmethod
    def _ticks() -> tuple[int, int] | None:
        try:
            fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
        except OSError:
            return None
        user, nice, system, _idle, _iowait, irq, softirq = (int(x) for x in fields[:7])
        return user + nice, system + irq + softirq

    def __enter__(self) -> "MachineCPU":
        self._start, self._own = self._ticks(), os.times()
        return self

    def __exit__(self, *exc) -> None:
        end, own = self._ticks(), os.times()
        self.this_process = own.user + own.system - self._own.user - self._own.system
        if self._start is not None and end is not None:
            hz = os.sysconf("SC_CLK_TCK")
            self.user, self.system = ((b - a) / hz for a, b in zip(self._start, end))

    def per(self, n: int) -> dict[str, float] | None:
        if self.user is None:
            return None
        return {"user": round(self.user / n, 4), "system": round(self.system / n, 4),
                "total": round((self.user + self.system) / n, 4), "this_process": round(self.this_process / n, 4)}


def bench_engine_cpu(task, reps: int = 12) -> dict:
    """Machine CPU seconds per exec, per container start + removal (no network, then the bridge), per
    restart (no network), one at a time."""
    image, _ = dk.ensure_image(task)
    spec = StartSpec(image, cpus=1, memory_mb=512, network="none")
    box = dk.Container.start(spec)
    try:
        with MachineCPU() as execs:
            for _ in range(reps * 5):
                box.exec("echo hello", 30)
        with MachineCPU() as restarts:
            for _ in range(reps):
                box.restart()
    finally:
        box.stop()
    with MachineCPU() as lifecycles:
        for _ in range(reps):
            dk.Container.start(spec).stop()
    with MachineCPU() as bridged:  # a task's default network (public) is the engine's bridge
        for _ in range(reps):
            dk.Container.start(dataclasses.replace(spec, network="public")).stop()
    return {"exec": execs.per(reps * 5), "container_start_and_remove": lifecycles.per(reps),
            "container_start_and_remove_bridge": bridged.per(reps), "restart": restarts.per(reps)}


def trivial_task(root: Path) -> Path:
    return write_harbor_task(root / "tasks", "trivial", instruction="Write ok into /app/ok.\n",
                             test_sh="grep -qx ok /app/ok && echo 1 > /logs/verifier/reward.txt "
                                     "|| echo 0 > /logs/verifier/reward.txt\n",
                             solve="echo ok > /app/ok\n")


def bench_exec(task, reps: int = 60) -> dict:
    image, _ = dk.ensure_image(task)
    box = dk.Container.start(StartSpec(image, cpus=1, memory_mb=512, network="none"))
    try:
        raw = box.container
        cmd = "echo hello"
        tb, bare, bare_bash, cli = [], [], [], []
        for _ in range(5):  # warm up the connection pool
            box.exec(cmd, 30)
            raw.exec_run(["bash", "-c", cmd])
        for _ in range(reps):
            t = time.perf_counter()
            box.exec(cmd, 30)
            tb.append(time.perf_counter() - t)
            t = time.perf_counter()
            raw.exec_run(["bash", "-c", cmd])
            bare_bash.append(time.perf_counter() - t)
            t = time.perf_counter()
            raw.exec_run(["echo", "hello"])
            bare.append(time.perf_counter() - t)
        for _ in range(max(reps // 3, 10)):
            t = time.perf_counter()
            subprocess.run(["docker", "exec", raw.id, "bash", "-c", cmd], capture_output=True)
            cli.append(time.perf_counter() - t)
    finally:
        box.stop()
    med = {k: statistics.median(v) * 1000 for k, v in
           {"tbscale_exec_ms": tb, "sdk_exec_run_bash_ms": bare_bash, "sdk_exec_run_direct_ms": bare,
            "docker_exec_cli_ms": cli}.items()}
    med["ratio_vs_sdk_bash"] = med["tbscale_exec_ms"] / med["sdk_exec_run_bash_ms"]
    med["ratio_vs_sdk_direct"] = med["tbscale_exec_ms"] / med["sdk_exec_run_direct_ms"]
    return med


def oracle_experiment(root: Path, trials: int, concurrency: int) -> Experiment:
    return Experiment.model_validate({"name": "bench", "tasks": {"path": str(root / "tasks")}, "trials": trials,
                                      "concurrency": concurrency,
                                      "settings": [{"name": "oracle", "agent": "oracle"}]})


def bench_trials(root: Path, task, trials: int, concurrency: int,
                 tag: str) -> tuple[float, list[dict], dict, dict | None]:
    exp = oracle_experiment(root, trials, concurrency)
    run_dir = root / f"run-{tag}"
    runner = Runner(exp, [task], run_dir)
    with EngineCalls() as calls, MachineCPU() as cpu:
        t = time.perf_counter()
        asyncio.run(runner.run())
        wall = time.perf_counter() - t
    rows = [json.loads(x) for x in (run_dir / "trials.jsonl").read_text().splitlines()]
    assert all(r["passed"] for r in rows), "oracle failed"
    return wall, rows, calls.per_trial(trials), cpu.per(trials)


def main() -> None:
    OUT.mkdir(exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="tbscale-bench-"))
    task = load_task(trivial_task(root))
    dk.ensure_image(task)  # cached from here on
    exec_res = bench_exec(task)
    engine_cpu = bench_engine_cpu(task)

    singles = []
    with EngineCalls() as single_calls:
        for i in range(8):
            exp = oracle_experiment(root, 1, 1)
            spec = plan_trials(exp, [task])[0]
            runner = Runner(exp, [task], root / f"single-{i}")
            (root / f"single-{i}").mkdir()
            t = time.perf_counter()
            row = asyncio.run(runner.run_trial(spec))
            singles.append({"wall": time.perf_counter() - t, **row.timing})
    phases = {k: statistics.median(s.get(k, 0.0) for s in singles)
              for k in ("image", "create", "prepare", "guard_digest", "guard_processes", "agent", "guard_sweep",
                        "guard_check", "artifacts", "verify", "remove", "wall")}

    wall8, rows, calls8, cpu8 = bench_trials(root, task, 8, 4, "c4")
    cores = os.cpu_count() or 1
    result = {"exec": exec_res, "oracle_trial_median_sec": phases, "eight_trials_concurrency4_wall_sec": wall8,
              "eight_trials_sum_of_trial_walls_sec": sum(r["timing"]["trial_wall"] for r in rows),
              "engine_calls_per_trial": {"single": single_calls.per_trial(len(singles)), "concurrency4": calls8},
              "machine_cpu_sec": {**engine_cpu, "trial_at_concurrency4": cpu8, "cores": cores,
                                  "load_average_1min": round(os.getloadavg()[0], 2),
                                  "eight_trials_cpu_floor_wall_sec": round(8 * cpu8["total"] / cores, 2)
                                  if cpu8 else None}}
    (OUT / "sandbox.json").write_text(json.dumps(result, indent=2))
    print("exec round trip (median ms):")
    for k, v in exec_res.items():
        print(f"  {k:28s} {v:8.3f}")
    print("oracle trial, image cached (median s):")
    for k, v in phases.items():
        print(f"  {k:28s} {v:8.3f}")
    print(f"8 oracle trials at concurrency 4: {wall8:.2f} s wall "
          f"(sum of trial walls {result['eight_trials_sum_of_trial_walls_sec']:.2f} s)")
    cpu = result["machine_cpu_sec"]
    if cpu8:
        print("machine CPU seconds (user + system, all processes) per:")
        for k in ("exec", "container_start_and_remove", "container_start_and_remove_bridge", "restart",
                  "trial_at_concurrency4"):
            print(f"  {k:34s} {cpu[k]['total']:8.3f}  (system {cpu[k]['system']:.3f}, "
                  f"this process {cpu[k]['this_process']:.3f})")
        print(f"  least wall for 8 trials on {cores} cores: {cpu['eight_trials_cpu_floor_wall_sec']:.2f} s "
              f"(load average at the end {cpu['load_average_1min']})")
    print("engine calls per trial (single trials | 8 at concurrency 4):")
    single = result["engine_calls_per_trial"]["single"]
    for k in sorted(set(single) | set(calls8), key=lambda k: (k == "total", -calls8.get(k, 0), k)):
        print(f"  {k:28s} {single.get(k, 0):8.2f} {calls8.get(k, 0):8.2f}")


if __name__ == "__main__":
    main()
