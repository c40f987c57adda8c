"""Where the Docker lane of the test suite spends the machine: the engine work of each test.

Runs the Docker lane (the Makefile's `-m "docker and not serial"` on TEST_WORKERS workers, or the
pytest arguments given after `--`) while it records:
- every container event the engine sends (the docker SDK's event stream): creations, execs,
  restarts, commits;
- each test's tmp_path and its time, from this file loaded into pytest as a plugin (`-p`);
- the machine's CPU over the lane, busy (bench_sandbox.py's MachineCPU: /proc/stat, every process, the
  engine and the containers too) against the lane's wall time on every core.

A container is the test's whose tmp_path holds the run folder its `org.tbscale.run` label names;
containers without that label (a remote-sandbox backend's, swebench's own, a test's bare SDK
container) are counted by image. With `benchmarks/out/sandbox.json` present (bench_sandbox.py), the
engine's share of the CPU is estimated from its per-operation costs (measured there on a quiet
machine: an estimate, said as one).

Writes benchmarks/out/docker_lane.json. Run: make test-profile, or
.venv/bin/python benchmarks/profile_docker_lane.py [-- PYTEST ARGS]
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

OUT = Path(__file__).parent / "out"
ROOT = Path(__file__).resolve().parent.parent
LABEL_RUN = "org.tbscale.run"
RECORD_ENV = "TBSCALE_LANE_PROFILE"  # set for the pytest run: the file each worker appends its tests to
ACTIONS = ("create", "exec_create", "restart", "commit")


# --- the pytest plugin: each test's tmp_path and time --------------------------------------------

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    path = os.environ.get(RECORD_ENV)
    start = time.time()
    yield
    if path:
        tmp = getattr(item, "_lane_profile_tmp_path", None)
        with open(path, "a") as f:  # one short line per test, written at once: workers do not interleave
            f.write(json.dumps({"test": item.nodeid, "tmp_path": tmp, "start": start, "end": time.time()}) + "\n")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    tmp = (getattr(item, "funcargs", None) or {}).get("tmp_path")
    if tmp is not None:
        item._lane_profile_tmp_path = str(Path(tmp).resolve())
    yield


# --- attribution -----------------------------------------------------------------------------------

def attribute(events: list[dict], tests: list[dict]) -> dict[str, collections.Counter]:
    """Engine actions per test: a container event goes to the test whose tmp_path holds the run
    folder the container's label names (the longest such path), else to `(no run label) IMAGE`."""
    by_tmp = sorted(((t["tmp_path"].rstrip("/") + "/", t["test"]) for t in tests if t.get("tmp_path")),
                    key=lambda pair: -len(pair[0]))
    per: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for e in events:
        if e.get("Type") != "container":
            continue
        action = e.get("Action", "").split(":")[0]
        if action not in ACTIONS:
            continue
        attrs = e.get("Actor", {}).get("Attributes", {})
        run = attrs.get(LABEL_RUN)
        owner = None
        if run:
            owner = next((test for tmp, test in by_tmp if (run.rstrip("/") + "/").startswith(tmp)), None)
            owner = owner or f"(a run outside every test's tmp_path) {run}"
        per[owner or f"(no run label) {attrs.get('image', '?')}"][action] += 1
    return per


def per_operation_cpu() -> dict[str, float] | None:
    """bench_sandbox.py's CPU-seconds per exec, container start and removal, and restart."""
    try:
        cpu = json.loads((OUT / "sandbox.json").read_text())["machine_cpu_sec"]
        return {"exec_create": cpu["exec"]["total"], "create": cpu["container_start_and_remove_bridge"]["total"],
                "restart": cpu["restart"]["total"]}
    except (OSError, ValueError, KeyError, TypeError):
        return None


# --- where the CPU went: the engine, the containers, the tests (cgroup v1's cpuacct) ------------------

CPUACCT = Path("/sys/fs/cgroup/cpuacct")
ENGINE_PROGRAMS = ("dockerd", "containerd", "containerd-shim", "containerd-shim-runc-v2")


class CpuByCgroup:
    """The lane's CPU split three ways, on a cgroup v1 host with Docker's cgroupfs driver (as here):
    the engine (dockerd, containerd and the shims, moved into a `tbscale-engine` group for the lane,
    and so whatever they start: runc, dockerd's re-executions of itself), the containers (Docker's
    `docker` group), and pytest with everything it starts (a `tbscale-lane` group: the workers, the
    `tbscale` processes, Ray). The engine's processes go back to the root group at the end.
    Elsewhere (cgroup v2, not root) `available` is False and the lane runs as before."""

    def __init__(self) -> None:
        self.available = os.geteuid() == 0 and (CPUACCT / "cpuacct.usage").is_file() \
            and (CPUACCT / "docker").is_dir()
        self.engine, self.lane = CPUACCT / "tbscale-engine", CPUACCT / "tbscale-lane"
        self.start: dict[str, int] = {}
        self.split: dict[str, float] | None = None

    def _usage(self) -> dict[str, int]:
        return {name: int((folder / "cpuacct.usage").read_text()) for name, folder in
                (("all", CPUACCT), ("engine", self.engine), ("lane", self.lane), ("containers", CPUACCT / "docker"))}

    def _engine_pids(self) -> list[str]:
        found = subprocess.run(["pgrep", "-x", "|".join(ENGINE_PROGRAMS)], capture_output=True, text=True)
        return found.stdout.split()

    def __enter__(self) -> CpuByCgroup:
        if self.available:
            try:
                self.engine.mkdir(exist_ok=True)
                self.lane.mkdir(exist_ok=True)
                for pid in self._engine_pids():
                    (self.engine / "cgroup.procs").write_text(pid)
                self.start = self._usage()
            except OSError as e:
                print(f"(no CPU split by cgroup: {e})")
                self.available = False
        return self

    def join_lane(self) -> None:
        """preexec_fn of the lane's pytest: it and all it starts count as the lane."""
        if self.available:
            (self.lane / "cgroup.procs").write_text(str(os.getpid()))

    def __exit__(self, *exc) -> None:
        if not self.available:
            return
        end = self._usage()
        cpu = {k: (end[k] - self.start[k]) / 1e9 for k in end}
        cpu["other"] = cpu["all"] - cpu["engine"] - cpu["lane"] - cpu["containers"]
        self.split = {k: round(v, 1) for k, v in cpu.items()}
        for pid in (self.engine / "cgroup.procs").read_text().split():
            try:
                (CPUACCT / "cgroup.procs").write_text(pid)
            except OSError:
                pass  # exited meanwhile
        for folder in (self.engine, self.lane):
            try:
                folder.rmdir()
            except OSError:
                pass  # a process of the lane still in it (a container's leftover shim): kept


# --- the run -------------------------------------------------------------------------------------

def lane_args(argv: list[str]) -> list[str]:
    if "--" in argv:
        return argv[argv.index("--") + 1:]
    return ["-m", "docker and not serial", "-n", os.environ.get("TEST_WORKERS", "4"), "--dist", "loadgroup",
            "--no-loadscope-reorder"]


def main(argv: list[str]) -> int:
    import docker

    OUT.mkdir(exist_ok=True)
    record = OUT / "docker_lane.tests.jsonl"
    record.unlink(missing_ok=True)
    client = docker.from_env()
    stream = client.events(decode=True, filters={"type": "container"})
    events: list[dict] = []

    def listen() -> None:
        try:
            for e in stream:
                events.append(e)
        except Exception:  # noqa: BLE001 - the stream is closed when the lane ends
            pass

    listener = threading.Thread(target=listen, name="engine-events", daemon=True)
    listener.start()
    from bench_sandbox import MachineCPU  # its /proc/stat reader; imported here, not in pytest's workers

    env = {**os.environ, RECORD_ENV: str(record),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).parent), os.environ.get("PYTHONPATH")]))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as `make test` runs it (the Makefile says why)
    interrupted = False
    with MachineCPU() as cpu, CpuByCgroup() as split:
        wall0 = time.time()
        lane = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "profile_docker_lane", *lane_args(argv)],
                                cwd=ROOT, env=env, preexec_fn=split.join_lane)
        try:
            rc = lane.wait()
        except KeyboardInterrupt:
            # pytest had the same Ctrl-C (one process group): it tears its tests and their containers
            # down; wait for that, then keep what the lane recorded so far.
            interrupted = True
            rc = lane.wait()
        wall = time.time() - wall0
    time.sleep(1)  # the last events of the lane's teardown
    stream.close()
    listener.join(timeout=10)
    tests = [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []
    per = attribute(events, tests)
    total: collections.Counter = collections.Counter()
    for counts in per.values():
        total.update(counts)
    seconds = {t["test"]: t["end"] - t["start"] for t in tests}
    busy = None if cpu.user is None else cpu.user + cpu.system
    all_ = wall * (os.cpu_count() or 1)
    unit = per_operation_cpu()
    engine_estimate = sum(total[a] * unit[a] for a in unit) if unit else None
    rows = sorted(per.items(), key=lambda kv: (-kv[1]["create"], -kv[1]["exec_create"]))
    result = {
        "pytest_exit_code": rc, "interrupted": interrupted, "wall_sec": round(wall, 1), "tests": len(tests),
        "machine_cpu_busy_sec": busy and round(busy, 1), "machine_cpu_all_sec": round(all_, 1),
        "cores": os.cpu_count(), "engine_actions": dict(total),
        "engine_cpu_estimate_sec": engine_estimate and round(engine_estimate, 1),
        "per_operation_cpu_sec": unit,
        "cpu_split_sec": split.split,  # engine, containers, the lane's processes (CpuByCgroup); None where unavailable
        "per_test": [{"test": k, **dict(v), "seconds": round(seconds[k], 1) if k in seconds else None}
                     for k, v in rows],
    }
    (OUT / "docker_lane.json").write_text(json.dumps(result, indent=1) + "\n")
    print(f"\nDocker lane: {len(tests)} tests, {wall:.0f} s wall, pytest exit code {rc}"
          + (" (interrupted: the tests that finished)" if interrupted else ""))
    if busy is not None:
        print(f"machine CPU: {busy:.0f} of {all_:.0f} CPU-seconds busy ({busy / all_:.0%}) on {os.cpu_count()} cores")
    if split.split:
        s = split.split
        print(f"CPU by cgroup: the engine (dockerd, containerd, shims, runc) {s['engine']:.0f}, the containers "
              f"{s['containers']:.0f}, pytest and what it started {s['lane']:.0f}, the rest {s['other']:.0f} "
              f"CPU-seconds")
    print("engine: " + ", ".join(f"{total[a]} {a}" for a in ACTIONS))
    if engine_estimate is not None:
        print(f"engine work, estimated from bench_sandbox.py's per-operation CPU (execs, container starts and "
              f"removals, restarts): {engine_estimate:.0f} CPU-seconds")
    print(f"{'create':>6} {'exec':>6} {'restart':>7} {'commit':>6} {'sec':>6}  test")
    for name, c in rows[:30]:
        sec = f"{seconds[name]:.0f}" if name in seconds else "-"
        print(f"{c['create']:>6} {c['exec_create']:>6} {c['restart']:>7} {c['commit']:>6} {sec:>6}  {name}")
    print(f"written: {OUT / 'docker_lane.json'}")
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
