"""The Ray executor on a two-node Ray cluster started on this machine (ray.cluster_utils.Cluster),
sharing this machine's Docker engine: the same trials and outcomes as the local executor; a node
killed mid-run costs only the attempts it held, and every trial is indexed exactly once; keys reach
the workers and appear in no file of the run folder or of Ray's session; a model that is unavailable
in a worker stops the run; SIGINT leaves no container; `--help` and local runs never import Ray.
Per node: two processes never build one image twice; the image disk budget evicts least recently
used tbscale images that no pending trial needs. Remote engines: a trial runs against the engine
reached as a `tcp://` Docker host."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
import yaml

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
# Ray starts its workers at nice 15, so beside other busy processes (the other test workers, a
# second job) they get a few percent of a core: under load a 26 s test took 214 s. Here they run at
# the priority of the tests that start them.
os.environ.setdefault("RAY_worker_niceness", "0")

HAVE_RAY = importlib.util.find_spec("ray") is not None  # not imported here: collection stays quick
requires_ray = pytest.mark.skipif(not HAVE_RAY, reason="needs Ray: pip install -e '.[ray]' (make test installs it)")
# The cluster tests in two groups of about 250 s (quiet), each on one worker with a cluster of its own
# (the fixture is per module and worker): as one group they were the Docker lane's tail, alone on
# their worker for the last minutes of the lane.
CLUSTER_A = pytest.mark.xdist_group("ray-cluster-a")
CLUSTER_B = pytest.mark.xdist_group("ray-cluster-b")

from tbscale.config import Experiment  # noqa: E402
from tbscale.logs import read_jsonl  # noqa: E402
from tbscale.runner import EXIT_MODEL_UNAVAILABLE, Runner, load_experiment  # noqa: E402
from tbscale.runfiles import read_artifact_manifest  # noqa: E402
from tbscale.runner.executors.ray import FAST_HEALTH_CHECK, Keys  # noqa: E402  (imports no ray)
from tbscale.tasks import load_task, load_tasks  # noqa: E402
from tbscale.types.actions import FINISH_MARKER  # noqa: E402
from tbscale_testing import LoopbackModel, auth_error  # noqa: E402
from tbscale_testing.cli import Started  # noqa: E402
from tbscale_testing.engine import TcpToDockerSocket, containers  # noqa: E402
from tbscale_testing.tasks import write_harbor_task  # noqa: E402
from tbscale_testing.waiting import wait_for  # noqa: E402

pytestmark = [pytest.mark.docker]

REPO = Path(__file__).resolve().parents[1]
TASKS = ["extract-emails", "batch-rename-files"]


@pytest.fixture(scope="module")
def cluster():
    """Two Ray nodes on this machine (a head and a worker, 2 CPUs each), fast dead-node detection."""
    import ray
    from ray.cluster_utils import Cluster

    # Ray waits a fixed 30 s for a new raylet to register; on a starved machine (a loaded run, both
    # clusters starting beside the suite's heaviest tests) that ran out: a cluster that timed out
    # is taken down and started again.
    for tries_left in (2, 1, 0):
        c = Cluster(initialize_head=False)
        try:
            c.add_node(num_cpus=2, include_dashboard=False, _system_config=FAST_HEALTH_CHECK)
            c.add_node(num_cpus=2)
            c.wait_for_nodes()
            break
        except Exception as e:  # noqa: BLE001 - Ray raises a bare Exception for this
            c.shutdown()
            if tries_left == 0 or "timed out during startup" not in str(e):
                raise
    # One Ray job for the module's runs: the executor uses a Ray this process already joined (and
    # leaves it running), so the runs share the job's workers instead of each starting its own.
    ray.init(address=c.address, log_to_driver=False, logging_level="WARNING")
    yield c
    ray.shutdown()
    c.shutdown()


def rows_of(run_dir: Path) -> list[dict]:
    return list(read_jsonl(run_dir / "trials.jsonl"))


def outcome(rows: list[dict]) -> dict[str, tuple]:
    return {r["trial_key"]: (r["setting"], r["task_id"], r["trial"], r["passed"], r["ending"], r["reward"],
                             r["turns"]) for r in rows}


def experiment(executor: dict, tasks_path: Path = REPO / "tasks", include=TASKS, trials: int = 2,
               settings=None, **extra) -> Experiment:
    return Experiment.model_validate({
        "name": "raytest", "tasks": {"path": str(tasks_path), "include": include}, "trials": trials,
        "concurrency": 4, "models": {"p": {"model": "sim/policy"}},
        "settings": settings or [{"name": "oracle", "agent": "oracle"}, {"name": "nop", "agent": "nop"},
                                 {"name": "sim", "generator": "p", "policy": {"name": "baseline"}}],
        "environment": {"memory_mb": 512}, "limits": {"max_turns": 12}, "executor": executor, **extra})


def run(exp: Experiment, run_dir: Path, **kw) -> Runner:
    tasks, _ = load_tasks(Path(exp.tasks.path), include=exp.tasks.include)
    runner = Runner(exp, tasks, run_dir, **kw)
    asyncio.run(runner.run())
    return runner


@requires_ray
@pytest.mark.slow
@CLUSTER_A
def test_two_node_cluster_matches_the_local_executor(tmp_path, cluster):
    local = run(experiment({"name": "local"}), tmp_path / "local")
    t0 = time.monotonic()
    remote = run(experiment({"name": "ray", "address": cluster.address}), tmp_path / "ray")
    took = time.monotonic() - t0
    assert local.counters.done == remote.counters.done == 12 and remote.crashes == []
    a, b = outcome(rows_of(tmp_path / "local")), outcome(rows_of(tmp_path / "ray"))
    assert a == b
    # Trajectories: the same events, in the same order (timestamps and container ids aside).
    for row in rows_of(tmp_path / "ray"):
        mine = [e["type"] for e in read_jsonl(tmp_path / "ray" / row["trajectory_path"])]
        theirs = [e["type"] for e in read_jsonl(tmp_path / "local" / row["trajectory_path"])]
        assert mine == theirs and mine[0] == "start" and mine[-1] == "end"
    # The driver alone wrote the run folder: no partial files, a spend line per model call.
    assert not list((tmp_path / "ray").rglob("*.partial"))
    spend = list(read_jsonl(tmp_path / "ray" / "spend.jsonl"))
    assert len(spend) == sum(r["tokens"].get("generator", {}).get("calls", 0) for r in rows_of(tmp_path / "ray"))
    inv = json.loads((tmp_path / "ray" / "manifest.json").read_text())["invocations"][-1]
    assert inv["executor"]["name"] == "ray" and inv["executor"]["nodes_used"] == 2, inv
    # Resume: a second run finds every trial done; --retry-errors reruns only infra errors (none).
    again = run(experiment({"name": "ray", "address": cluster.address}), tmp_path / "ray", retry_infra_errors=True)
    assert again.counters.skipped == 12 and again.counters.done == 0
    print(f"ray run of 12 trials: {took:.1f} s")


@requires_ray
@pytest.mark.slow
@CLUSTER_B
def test_placement_by_task_keeps_each_tasks_trials_on_one_node(tmp_path, cluster):
    for i in range(4):
        write_harbor_task(tmp_path / "tasks", f"placed{i}")
    exp = experiment({"name": "ray", "address": cluster.address, "placement": "task"}, tasks_path=tmp_path / "tasks",
                     include=None, trials=3, settings=[{"name": "oracle", "agent": "oracle"}])
    runner = run(exp, tmp_path / "run")
    assert runner.counters.done == 12 and runner.crashes == []
    by_task: dict[str, set[str]] = {}
    for row in rows_of(tmp_path / "run"):
        by_task.setdefault(row["task_id"], set()).add(runner.executor.trial_nodes[row["trial_key"]])
    assert all(len(nodes) == 1 for nodes in by_task.values()), by_task


@requires_ray
@pytest.mark.slow
@CLUSTER_B
def test_without_streaming_the_events_come_with_the_result(tmp_path, cluster):
    # What Ray Client (ray://) gets: the same trajectory, delivered when the trial ends.
    exp = experiment({"name": "ray", "address": cluster.address, "stream": False}, include=["extract-emails"],
                     settings=[{"name": "sim", "generator": "p"}])
    runner = run(exp, tmp_path / "run")
    assert runner.counters.done == 2 and runner.crashes == [] and runner.executor.stream is False
    for row in rows_of(tmp_path / "run"):
        types = [e["type"] for e in read_jsonl(tmp_path / "run" / row["trajectory_path"])]
        assert types[0] == "start" and types[-1] == "end" and "model_call" in types
    assert len(list(read_jsonl(tmp_path / "run" / "spend.jsonl"))) == sum(
        r["tokens"]["generator"]["calls"] for r in rows_of(tmp_path / "run"))


@requires_ray
@pytest.mark.slow
@CLUSTER_A
def test_artifacts_collected_in_a_worker_reach_the_run_folder(tmp_path, cluster):
    # the worker's run folder is a scratch copy: what its attempts collected must be sent back
    exp = experiment({"name": "ray", "address": cluster.address}, tasks_path=REPO / "tests" / "conformance",
                     include=["separate-verifier"], trials=1, settings=[{"name": "oracle", "agent": "oracle"}])
    runner = run(exp, tmp_path / "run")
    (row,) = rows_of(tmp_path / "run")
    assert runner.counters.done == 1 and row["passed"], row
    art = tmp_path / "run" / row["artifacts_path"]
    assert (art / "logs" / "artifacts" / "published.txt").read_text().strip() == "published"
    assert {m.source: m.status for m in read_artifact_manifest(art)}["/app/out"] == "ok"


@requires_ray
@pytest.mark.slow
@CLUSTER_A
def test_killing_a_node_mid_run_finishes_every_trial_once(tmp_path, cluster):
    for i in range(3):
        write_harbor_task(tmp_path / "tasks", f"slow{i}", solve="#!/bin/bash\nsleep 4\necho done > /app/out.txt\n")
    victim = cluster.add_node(num_cpus=2)
    cluster.wait_for_nodes()
    exp = experiment({"name": "ray", "address": cluster.address, "retries": 2}, tasks_path=tmp_path / "tasks",
                     include=None, trials=2, settings=[{"name": "oracle", "agent": "oracle"}])
    tasks, _ = load_tasks(tmp_path / "tasks")
    runner = Runner(exp, tasks, tmp_path / "run")
    killed: dict[str, float] = {}

    async def main():
        async def killer():
            while victim.node_id not in runner.executor.nodes_used:
                await asyncio.sleep(0.05)
            await asyncio.sleep(1.5)  # the trial on that node is mid-way (oracle sleeps 4 s)
            killed["at"] = time.time()
            await asyncio.to_thread(cluster.remove_node, victim, False)

        k = asyncio.create_task(killer())
        await runner.run()
        k.cancel()

    asyncio.run(main())
    assert "at" in killed, "no trial ever ran on the victim node"
    rows = rows_of(tmp_path / "run")
    keys = Counter(r["trial_key"] for r in rows)
    assert len(keys) == 6 and set(keys.values()) == {1}, keys
    assert all(r["passed"] for r in rows) and runner.crashes == []
    retries = runner.executor.infra_retries
    assert retries and {r.error for r in retries} <= {"NodeDiedError", "WorkerCrashedError", "RaySystemError",
                                                          "LocalRayletDiedError", "OwnerDiedError"}, retries
    assert not list((tmp_path / "run").rglob("*.partial"))
    for row in rows:  # one attempt's lines only: one start, one end
        types = Counter(e["type"] for e in read_jsonl(tmp_path / "run" / row["trajectory_path"]))
        assert types["start"] == 1 and types["end"] == 1 and types["attempt_start"] == 1
    inv = json.loads((tmp_path / "run" / "manifest.json").read_text())["invocations"][-1]
    assert inv["executor"]["infra_retries"]
    for r in retries:
        if r.retry_started_at is not None:
            print(f"node death seen {r.at - killed['at']:.2f} s after the kill; "
                  f"retry started {r.retry_started_at - killed['at']:.2f} s after it")
    # Containers on the dead node's worker survive it (dockerd is not Ray's child); the next run
    # on this host removes them as orphans.
    from tbscale.environments.docker import cleanup_orphans

    cleanup_orphans()
    for i in range(3):
        assert containers(f"org.tbscale.task=slow{i}", under=tmp_path) == []


KEY_ENV = "TBSCALE_RAY_TEST_KEY"


@requires_ray
@pytest.mark.slow
@CLUSTER_A
def test_keys_reach_workers_and_no_file_holds_them(tmp_path, cluster, monkeypatch):
    key = "sk-raytest-" + uuid.uuid4().hex
    monkeypatch.setenv(KEY_ENV, key)
    steps = load_task(REPO / "tasks" / "extract-emails").solution_steps()

    def responder(body):
        turn = sum(m["role"] == "assistant" for m in body["messages"]) + 1
        command = steps[turn - 1] if turn <= len(steps) else f"echo {FINISH_MARKER}"
        # The reply quotes the key: the worker must redact it from every line it sends.
        return f"THOUGHT: step {turn} (I was called with {key}).\n\n```bash\n{command}\n```"

    with LoopbackModel(responder, max_lifetime_sec=600) as srv:
        cfg = {"name": "keys", "tasks": {"path": str(REPO / "tasks"), "include": ["extract-emails"]}, "trials": 2,
               "concurrency": 2, "output_dir": str(tmp_path / "results"),
               "models": {"m": {"model": "openai/scripted", "api_base": srv.base_url, "api_key_env": KEY_ENV,
                                "max_retries": 2, "retry_backoff_sec": 0.01}},
               "settings": [{"name": "scripted", "generator": "m"}], "limits": {"max_turns": 10},
               "environment": {"memory_mb": 512}, "executor": {"name": "ray", "address": cluster.address}}
        (tmp_path / "keys.yaml").write_text(yaml.safe_dump(cfg))
        exp = load_experiment(tmp_path / "keys.yaml")
        runner = run(exp, tmp_path / "results" / "keys")
        reqs = srv.requests
    assert runner.crashes == [] and runner.counters.done == 2
    assert all(r["passed"] for r in rows_of(tmp_path / "results" / "keys"))
    assert reqs and all(r.headers.get("authorization") == f"Bearer {key}" for r in reqs)
    assert key not in repr(Keys({KEY_ENV: key}))
    session = Path(cluster.head_node.get_session_dir_path())
    hits = subprocess.run(["grep", "-rlaF", key, str(tmp_path), str(session)], capture_output=True, text=True)
    assert hits.stdout.split() == [], hits.stdout
    trajectory = (tmp_path / "results" / "keys" / rows_of(tmp_path / "results" / "keys")[0]["trajectory_path"])
    assert "***" in trajectory.read_text()  # it was there, redacted


@requires_ray
@pytest.mark.slow
@CLUSTER_B
def test_model_unavailable_in_a_worker_stops_the_run(tmp_path, cluster):
    with LoopbackModel(lambda body: "never", max_lifetime_sec=600) as srv:
        srv.fail_next(*[auth_error()] * 50)
        cfg = {"name": "down", "tasks": {"path": str(REPO / "tasks"), "include": TASKS}, "trials": 2,
               "concurrency": 2, "output_dir": str(tmp_path / "results"),
               "models": {"m": {"model": "openai/scripted", "api_base": srv.base_url, "max_retries": 0,
                                "circuit_breaker_tries": 1}},
               "settings": [{"name": "scripted", "generator": "m"}],
               "environment": {"memory_mb": 512}, "executor": {"name": "ray", "address": cluster.address}}
        (tmp_path / "down.yaml").write_text(yaml.safe_dump(cfg))
        exp = load_experiment(tmp_path / "down.yaml")
        tasks, _ = load_tasks(REPO / "tasks", include=TASKS)
        runner = Runner(exp, tasks, tmp_path / "results" / "down")
        with pytest.raises(Exception) as info:
            asyncio.run(runner.run())
    assert type(info.value).__name__ == "ModelUnavailable"
    assert runner.stopped is not None and runner.exit_code == EXIT_MODEL_UNAVAILABLE
    assert "auth" in str(runner.stopped) or "key" in str(runner.stopped)
    manifest = json.loads((tmp_path / "results" / "down" / "manifest.json").read_text())
    assert manifest["invocations"][-1]["stopped"]


@requires_ray
@pytest.mark.slow
@CLUSTER_A
def test_sigint_stops_a_ray_run_and_leaves_no_container(tmp_path, cluster):
    write_harbor_task(tmp_path / "tasks", "rayslow", solve="#!/bin/bash\nsleep 120\necho done > /app/out.txt\n",
                      task_toml="[agent]\ntimeout_sec = 300\n[verifier]\ntimeout_sec = 30\n")
    write_harbor_task(tmp_path / "tasks", "rayquick")
    cfg = {"name": "raysig", "tasks": {"path": str(tmp_path / "tasks")}, "trials": 2, "concurrency": 4,
           "output_dir": str(tmp_path / "results"), "settings": [{"name": "oracle", "agent": "oracle"}],
           "environment": {"memory_mb": 512}, "executor": {"name": "ray", "address": cluster.address}}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    index = tmp_path / "results" / "raysig" / "trials.jsonl"
    with Started("run", tmp_path / "c.yaml", "--no-report") as run:
        # the quick trials have finished too, if they can within the bound: the interrupt then keeps them
        wait_for(lambda: len(containers("org.tbscale.task=rayslow", under=tmp_path)) == 2
                 and index.exists() and len(index.read_text().splitlines()) == 2, 180)
        assert len(containers("org.tbscale.task=rayslow", under=tmp_path)) == 2, "the slow trials never started"
        err = run.interrupt()
    assert run.returncode == 130, err[-3000:]
    assert "resume" in err
    wait_for(lambda: not containers("org.tbscale.task=rayslow", under=tmp_path), 300, 0.5)
    assert containers("org.tbscale.task=rayslow", under=tmp_path) == []
    rows = rows_of(tmp_path / "results" / "raysig")
    assert {r["task_id"] for r in rows} == {"rayquick"} and len(rows) == 2
    manifest = json.loads((tmp_path / "results" / "raysig" / "manifest.json").read_text())
    assert manifest["invocations"][-1]["finished_at"]


def test_help_and_local_runs_never_import_ray(tmp_path):
    write_harbor_task(tmp_path / "tasks", "noray")
    script = f"""
import asyncio, subprocess, sys
from pathlib import Path
from tbscale.cli import app
from tbscale.config import Experiment
from tbscale.runner import Runner
from tbscale.tasks import load_tasks
exp = Experiment.model_validate({{"name": "noray", "tasks": {{"path": {str(tmp_path / 'tasks')!r}}},
                                  "settings": [{{"name": "oracle", "agent": "oracle"}}]}})
tasks, _ = load_tasks(Path(exp.tasks.path))
r = Runner(exp, tasks, Path({str(tmp_path / 'run')!r}))
asyncio.run(r.run())
assert r.counters.done == 1, r.counters
print("ray" in sys.modules)
"""
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "False"
    res = subprocess.run([sys.executable, "-c", "import sys\nfrom tbscale.cli import app\n"
                          "try:\n    app(['--help'])\nexcept SystemExit:\n    pass\nprint('ray' in sys.modules)"],
                         capture_output=True, text=True, timeout=120)
    assert res.stdout.strip().splitlines()[-1] == "False", res.stdout + res.stderr


def test_runtime_env_never_carries_keys():
    from tbscale.errors import TbscaleError
    from tbscale.runner.executors.ray import RayExecutor

    with pytest.raises(TbscaleError, match="env_vars"):
        RayExecutor(experiment({"name": "ray"}), runtime_env={"env_vars": {"K": "v"}})
    with pytest.raises(TbscaleError, match="unknown option"):
        RayExecutor(experiment({"name": "ray"}), adress="auto")


@requires_ray
def test_a_workers_result_reaches_the_driver_with_the_values_its_node_resolved_hidden(tmp_path, monkeypatch):
    """The driver writes a Ray trial's line, and hides only the values its own host has: a
    variable may hold another value on the worker's node. The worker sends its result redacted
    with what it resolved (runner/executors/ray.py), so the line never carries that value."""
    import ray

    from tbscale.runner.executors import ray as ray_executor
    from tbscale.runner.plan import plan_trials
    from tbscale.runner.trial import TrialRunner
    from tbscale.secrets import redact
    from tbscale.tasks.envvars import EnvTable
    from tbscale.types.results import ErrorInfo, TrialResult

    node_value = "value-only-this-node-has-5"
    exp = experiment({"name": "ray"}, include=["extract-emails"], trials=1,
                     settings=[{"name": "oracle", "agent": "oracle"}])
    tasks, _ = load_tasks(Path(exp.tasks.path), include=exp.tasks.include)
    spec = plan_trials(exp, tasks)[0]

    async def run_trial(self, spec):  # the trial resolves its env as a worker does, and fails
        value = EnvTable({"K": "${TBSCALE_T_NODE_VAR}"}).resolve({"TBSCALE_T_NODE_VAR": node_value})["K"]
        return TrialResult(schema_version=1, run="r", setting="oracle", setting_key="k", trial_key=spec.key,
                           task_id=spec.task.id, trial=0, ending="error", passed=False,
                           error=ErrorInfo(type="VerifierError", message=f"tests printed K={value}"))

    class Idle:  # a backend with nothing to start
        def keep_images(self, refs): pass
        def stop_all(self): pass

    monkeypatch.setattr(TrialRunner, "run_trial", run_trial)
    monkeypatch.setattr("tbscale.environments.open_backend", lambda _config: Idle())
    monkeypatch.setattr(ray, "get_runtime_context", lambda: type("C", (), {"get_node_id": lambda self: "n1"})())
    payload = {"exp": exp, "spec": spec, "run_name": "run", "run_label": "run"}
    messages = list(ray_executor.trial_messages(payload, ray_executor.pack_task(spec.task), None, 0))
    result = messages[-1]
    assert result["kind"] == "result", messages
    assert result["row"]["error"]["message"] == "tests printed K=***", result["row"]
    assert node_value not in json.dumps(messages)
    assert redact(node_value) == "***"  # (this test's one process is both the worker and the driver)


def test_task_files_are_rebuilt_on_a_machine_without_them(tmp_path):
    from tbscale.runner.executors.ray import materialize_task, pack_task
    from tbscale.environments.docker import image_tag_for

    d = write_harbor_task(tmp_path / "src", "shipped")
    os.chmod(d / "tests" / "test.sh", 0o755)
    task = load_task(d)
    packed = pack_task(task)
    here = materialize_task(task, packed, root=tmp_path / "cache")
    assert here.path == task.path  # same machine, same content: the originals
    import shutil

    moved = tmp_path / "elsewhere"
    shutil.move(str(tmp_path / "src"), moved)
    there = materialize_task(task, packed, root=tmp_path / "cache")
    assert there.tests_dir != task.tests_dir and (there.tests_dir / "test.sh").stat().st_mode & 0o777 == 0o755
    assert image_tag_for(there) == image_tag_for(load_task(moved / "shipped"))
    assert there.path.parent == tmp_path / "cache" and there.tests_dir.parent == there.path
    # A folder the task names outside its own (Terminal-Bench stages its tests elsewhere) travels too.
    from dataclasses import replace

    staged = tmp_path / "staged" / "tests"
    shutil.copytree(moved / "shipped" / "tests", staged)
    (staged / "extra.txt").write_text("x")
    outside = replace(load_task(moved / "shipped"), tests_dir=staged)
    packed = pack_task(outside)
    assert len(packed) == 2
    shutil.rmtree(tmp_path / "staged")
    there = materialize_task(outside, packed, root=tmp_path / "cache2")
    assert (there.tests_dir / "extra.txt").read_text() == "x" and there.path == outside.path


# ---- per node: image builds locked across processes, the image disk budget -----------------------

def test_two_processes_build_one_image_once(tmp_path):
    d = write_harbor_task(tmp_path, f"lock{uuid.uuid4().hex[:8]}",
                          dockerfile=f"FROM debian:bookworm-slim\nRUN sleep 2 && echo {uuid.uuid4().hex} > /id\n")
    code = ("import sys\nfrom tbscale.tasks import load_task\nfrom tbscale.environments.docker import ensure_image\n"
            f"print(ensure_image(load_task({str(d)!r}))[1])")
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) for _ in range(2)]
    built = [p.communicate(timeout=300)[0].strip() for p in procs]
    try:
        assert sorted(built) == ["False", "True"], built
    finally:
        from tbscale.environments.docker import image_tag_for

        subprocess.run(["docker", "rmi", "-f", image_tag_for(load_task(d))], capture_output=True)


def test_image_disk_budget_evicts_least_recently_used_images_no_pending_trial_needs(tmp_path, monkeypatch):
    from tbscale.environments import docker as dk

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    label = f"org.tbscale.budgettest={uuid.uuid4().hex[:8]}"  # only this test's images are candidates
    tags = [f"tbscale-budgettest/{n}:{label[-8:]}" for n in ("a", "b", "c")]
    (tmp_path / "ctx").mkdir()
    (tmp_path / "ctx" / "Dockerfile").write_text("FROM debian:bookworm-slim\nARG N\nRUN head -c 3000000 /dev/urandom"
                                                 " > /blob && echo $N > /n\n")
    box = None
    try:
        for i, tag in enumerate(tags):
            dk.client().images.build(path=str(tmp_path / "ctx"), tag=tag, buildargs={"N": f"{tag}"}, rm=True,
                                     labels={dk.LABEL_APP: "1", label.split("=")[0]: label.split("=")[1]})
            dk.note_image_use(tag)
            t = time.time() - 300 + 100 * i  # a used longest ago, c last
            os.utime(dk._use_record(tag), (t, t))
        images = dk.tbscale_images(label=label)
        assert sorted(t for i in images for t in i.tags) == sorted(tags)
        size = max(i.size for i in images)
        # Over budget by one image: a is the least recently used but a pending trial needs it, so b goes.
        removed = dk.evict_images(2.5 * size / 1e9, keep={tags[0]}, label=label)
        assert removed == [tags[1]]
        assert sorted(t for i in dk.tbscale_images(label=label) for t in i.tags) == [tags[0], tags[2]]
        # Within budget: nothing goes.
        assert dk.evict_images(10.0, keep=set(), label=label) == []
        # An image a container uses is never removed, whatever the budget.
        box = dk.client().containers.run(tags[2], ["sleep", "60"], detach=True)
        removed = dk.evict_images(0.001, keep=set(), label=label)
        assert removed == [tags[0]]
        assert [t for i in dk.tbscale_images(label=label) for t in i.tags] == [tags[2]]
    finally:
        if box is not None:
            box.remove(force=True)
        for tag in tags:
            subprocess.run(["docker", "rmi", "-f", tag], capture_output=True)


def test_backend_evicts_before_a_build_and_keeps_pending_images(tmp_path, monkeypatch):
    from tbscale.environments import docker as dk
    from tbscale.environments.docker_backend import DockerBackend

    task = load_task(write_harbor_task(tmp_path, "budgeted"))
    other = load_task(write_harbor_task(tmp_path, "pending", solve="#!/bin/bash\necho other\n",
                                        dockerfile="FROM debian:bookworm-slim\nWORKDIR /srv\n"))
    calls = []
    monkeypatch.setattr(dk, "_image_present", lambda tag, host: False)
    monkeypatch.setattr(dk, "evict_images", lambda budget, keep, host=None: calls.append((budget, keep)))
    monkeypatch.setattr(dk, "ensure_image", lambda task, timeout=None, host=None: (dk.image_tag_for(task), True))
    backend = DockerBackend(image_disk_budget_gb=50)
    backend.plan([other])
    assert backend.prepare(task) == (dk.image_tag_for(task), True)
    assert calls == [(50, {dk.image_tag_for(other), dk.image_tag_for(task)})]
    calls.clear()
    DockerBackend().prepare(task)  # no budget: nothing evicted
    assert calls == []


# ---- a Docker host reached over tcp:// ------------------------------------------------------------

def test_a_trial_runs_against_a_docker_host_over_tcp(tmp_path):
    write_harbor_task(tmp_path / "tasks", "overtcp")
    proxy = TcpToDockerSocket()
    try:
        exp = Experiment.model_validate({
            "name": "tcp", "tasks": {"path": str(tmp_path / "tasks")}, "trials": 2,
            "settings": [{"name": "oracle", "agent": "oracle"}],
            "environment": {"docker_host": f"tcp://127.0.0.1:{proxy.port}"}})
        runner = run(exp, tmp_path / "run")
        assert runner.backend.host == f"tcp://127.0.0.1:{proxy.port}"
        assert runner.counters.done == 2 and all(r["passed"] for r in rows_of(tmp_path / "run"))
        assert proxy.connections > 0  # every engine call of the run went through tcp://
    finally:
        proxy.close()


@requires_ray
@pytest.mark.slow
@CLUSTER_B
def test_cer_forks_stay_on_the_node_that_ran_their_trial(tmp_path, cluster):
    """A trial runs whole in one Ray worker: its snapshots are taken and its forks started on the
    node that ran it, and none is left after the run."""
    settings = [{"name": "cer", "generator": "p",
                 "trajectory": {"name": "cer", "m": 2, "beam": 1, "segment_turns": 1, "rounds": 2,
                                "prefix_restore": "fork"}}]
    exp = experiment({"name": "ray", "address": cluster.address}, include=["extract-emails"], trials=2,
                     settings=settings)
    runner = run(exp, tmp_path / "run")
    assert runner.counters.done == 2 and runner.crashes == []
    for row in rows_of(tmp_path / "run"):
        forks = [e for e in read_jsonl(tmp_path / "run" / row["trajectory_path"]) if e["type"] == "fork"]
        assert row["forks"] >= 1 and {e["op"] for e in forks} >= {"snapshot", "fork", "release"}
        assert {e["node"] for e in forks if e["op"] != "release"} == {runner.executor.trial_nodes[row["trial_key"]]}
    left = subprocess.run(["docker", "images", "-aq", "--filter", "label=org.tbscale.snapshot", "--filter",
                           f"label=org.tbscale.run={(tmp_path / 'run').resolve()}"], capture_output=True, text=True)
    assert left.stdout.split() == []
