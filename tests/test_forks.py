"""Forks (docs/forks-and-lookahead.md): a snapshot of a running environment and environments
started from it. A fork keeps the filesystem, the limits, user, workdir and network policy of its
parent, restarts the image's entrypoint and carries no process over; a prefix continued from a
fork keeps what `date`, `$RANDOM` and `mktemp` made, where a replay makes new values; and no
snapshot image or fork container outlives its run, whether it ends, is interrupted or is killed."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from tbscale.environments import BaseBackend, Capabilities, Snapshot, StartSpec, snapshot_of
from tbscale.errors import ForksUnsupported
from tbscale.strategies.base import AttemptResult, Prefix
from tbscale_testing.cli import Started, tbscale
from tbscale_testing.waiting import wait_for

REPO = Path(__file__).resolve().parents[1]


# ---- without an engine --------------------------------------------------------------------------------
def test_a_backend_without_snapshots_refuses_forks_in_one_line():
    backend = BaseBackend()
    snap = Snapshot(id="s", backend="x", parent="p", images={"main": "img"})
    assert backend.capabilities() == Capabilities() and not backend.capabilities().snapshots
    with pytest.raises(ForksUnsupported, match="cannot start an environment from a snapshot"):
        backend.fork(snap)
    with pytest.raises(ForksUnsupported):
        backend.release(snap)

    class OldEnvironment:  # an environment written before snapshots joined the protocol
        backend = "remote"

    with pytest.raises(ForksUnsupported, match="remote environment cannot be snapshotted"):
        snapshot_of(OldEnvironment())


def test_a_prefix_forks_only_from_a_live_snapshot_and_replay_can_be_chosen():
    snap = Snapshot(id="s", backend="docker", parent="p", images={"main": "img"})
    a = AttemptResult(3, "seg", "seg", None, False, "unfinished", "paused", 1, ["ls"], [], snapshot=snap,
                      guard_baseline={"now": "1"})
    assert Prefix.of(a).snapshot is snap and Prefix.of(a).guard_baseline == {"now": "1"}
    assert Prefix.of(a, restore="replay").snapshot is None
    snap.released = True
    assert Prefix.of(a).snapshot is None and Prefix.of(a).actions == ["ls"]


def test_a_released_parent_pending_before_its_child_goes_when_the_child_is_released():
    """A lookahead attempt inside CER releases its chain at its end, while CER still holds the
    snapshot taken in its last fork (a child image of the chain): the engine refuses the chain
    until that child is released, and then the whole chain goes with it."""
    import docker

    from tbscale.environments.snapshots import SnapshotStore

    parent_of = {"img-cer": "img-la2", "img-la2": "img-la1", "img-la1": None}  # what the engine holds

    class Api:
        def remove_image(self, ref, force=False):
            if ref not in parent_of:
                raise docker.errors.ImageNotFound(ref)
            if ref in parent_of.values():
                raise docker.errors.APIError(f"conflict: unable to delete {ref} (cannot be forced) - image has "
                                             "dependent child images")
            del parent_of[ref]

    class Engine:
        api = Api()

    store = SnapshotStore()
    snaps = {name: Snapshot(id=name, backend="docker", parent="p", images={"main": f"img-{name}"})
             for name in ("la1", "la2", "cer")}
    for snap in snaps.values():
        store.add(snap, Engine())
    store.release(snaps["la2"])  # the chain, newest first, as the attempt's end releases it
    store.release(snaps["la1"])
    assert set(parent_of) == {"img-cer", "img-la2", "img-la1"} and set(store.pending) == {"la2", "la1"}
    store.release(snaps["cer"])  # CER lets its prefix go
    assert parent_of == {} and store.pending == {} and store.snapshots == {}


# ---- on Docker ----------------------------------------------------------------------------------------
def _docker(*args: str) -> list[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True).stdout.split()


def _images(*labels: str) -> list[str]:
    return _docker("images", "-aq", *[x for label in labels for x in ("--filter", f"label={label}")])


def _containers(*labels: str) -> list[str]:
    return _docker("ps", "-aq", *[x for label in labels for x in ("--filter", f"label={label}")])


def _wait_for(predicate, timeout=300.0) -> bool:
    return wait_for(predicate, timeout, 0.2)


ENTRY_DOCKERFILE = textwrap.dedent("""\
    FROM debian:bookworm-slim
    RUN useradd -m worker && mkdir -p /app && chown worker /app
    WORKDIR /app
    USER worker
    ENTRYPOINT ["/bin/sh", "-c", "date +%s%N >> /tmp/entrypoint-ran; exec \\"$@\\"", "--"]
""")


@pytest.mark.docker
def test_a_fork_keeps_files_limits_user_workdir_and_network_but_no_process(tmp_path):
    from tbscale.environments.docker_backend import DockerBackend
    from tbscale.tasks import load_task
    from tbscale.tasks.model import NetworkPolicy
    from tbscale_testing.tasks import write_harbor_task

    tag = f"org.tbscale.test=forks-{os.getpid()}"
    task = load_task(write_harbor_task(tmp_path / "tasks", "fork-entry", dockerfile=ENTRY_DOCKERFILE))
    backend = DockerBackend()
    assert backend.capabilities().snapshots
    image, _ = backend.prepare(task)
    parent = backend.start(StartSpec(image=image, cpus=0.5, memory_mb=300, pids_limit=200, workdir="/app",
                                     env={"FOO": "bar"}, labels={"org.tbscale.test": tag.split("=", 1)[1]}))
    fork = None
    try:
        res = parent.exec("echo kept > /app/f && (nohup sleep 4321 >/dev/null 2>&1 &) && wc -l < /tmp/entrypoint-ran",
                          30)
        assert res.exit_code == 0 and res.output.strip() == "1"
        running = "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' ' | grep -c 'sleep 432[1]'"
        assert parent.exec(running, 30).output.strip() == "1"
        parent.set_network(NetworkPolicy("no-network"))
        snap = parent.snapshot()
        assert snap.images.keys() == {"main"} and snap.parent == parent.id and snap.network == "no-network"
        assert 0 < snap.size_bytes < 10_000_000  # its own layer, not the base image again
        assert _images(f"org.tbscale.snapshot={snap.id}")
        fork = backend.fork(snap, labels={"org.tbscale.extra": "1"})
        assert fork.exec("cat /app/f", 30).output.strip() == "kept"
        assert fork.exec(running, 30).output.strip() == "0"  # processes are not carried over
        assert fork.exec("wc -l < /tmp/entrypoint-ran", 30).output.strip() == "2"  # the entrypoint ran again
        assert fork.exec("whoami; pwd; echo $FOO", 30).output.split() == ["worker", "/app", "bar"]
        p, f = parent.container.attrs, fork.container.attrs
        for key in ("NanoCpus", "Memory", "PidsLimit", "Init"):
            assert f["HostConfig"][key] == p["HostConfig"][key], key
        assert f["Config"]["User"] == p["Config"]["User"] == "worker"
        fork.container.reload()
        assert set(fork.container.attrs["NetworkSettings"]["Networks"]) <= {"none"}  # the parent's no-network
        assert fork.container.labels["org.tbscale.fork-of"] == snap.id and fork.container.labels["org.tbscale.extra"] == "1"
        # released while a fork still runs on it: the image goes when that fork stops
        backend.release(snap)
        backend.release(snap)  # idempotent
        assert _images(f"org.tbscale.snapshot={snap.id}")
        fork.stop()
        assert _wait_for(lambda: not _images(f"org.tbscale.snapshot={snap.id}"), timeout=60)
        with pytest.raises(Exception, match="released"):
            backend.fork(snap)
    finally:
        if fork is not None:
            fork.stop()
        parent.stop()
    assert _containers(tag) == []


STATE = 'd=$(mktemp -d) && echo "$(date +%s%N) $RANDOM $d" | tee /app/state'
SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


class Scripted:
    def __init__(self, commands):
        self.commands = list(commands)

    async def decide(self, messages, ctx):
        from tbscale.strategies.base import Decision
        from tbscale.types import Completion
        from tbscale.types.actions import parse_action

        c = Completion(text=f"THOUGHT: step\n\n```bash\n{self.commands.pop(0)}\n```", finish_reason="stop")
        return Decision(c, parse_action(c))


@pytest.mark.docker
def test_a_prefix_with_date_random_and_mktemp_is_kept_by_a_fork_and_changed_by_a_replay(tmp_path):
    from tbscale.agent.loop import run_agent
    from tbscale.config import Experiment
    from tbscale.runner import Runner, plan_trials
    from tbscale.strategies import register_trajectory
    from tbscale.strategies.base import Params, TrajectoryOutcome
    from tbscale.tasks import load_task
    from tbscale_testing.tasks import write_harbor_task

    seen: dict = {}

    class P(Params):
        pass

    @register_trajectory("test_fork_vs_replay", P)
    class ForkVsReplay:
        def __init__(self, params, **_):
            pass

        async def run(self, task, start_attempt, rec):
            a = await start_attempt("seg", max_new_turns=1, verify=False, keep_snapshot="required")
            seen["held"] = _images(f"org.tbscale.snapshot={a.snapshot.id}")
            f = await start_attempt("fork", prefix=Prefix.of(a))
            r = await start_attempt("replay", prefix=Prefix.of(a, restore="replay"))
            seen.update(a=a, f=f, r=r)
            return TrajectoryOutcome(f, [a, f, r])  # the trial releases the snapshot

    task = load_task(write_harbor_task(tmp_path / "tasks", "nondeterministic"))
    exp = Experiment.model_validate({"name": "forks", "tasks": {"path": str(tmp_path / "tasks")},
                                     "models": {"m": {"model": "sim/policy"}},
                                     "settings": [{"name": "s", "generator": "m",
                                                   "trajectory": {"name": "test_fork_vs_replay"}}]})
    runner = Runner(exp, [task], tmp_path / "run")
    spec = plan_trials(exp, [task])[0]
    scripts = {"seg": [STATE], "fork": ["cat /app/state", SUBMIT], "replay": ["cat /app/state", SUBMIT]}

    async def act(spec_, rec, box, context, prefix=None, max_new_turns=None, **_):
        return await run_agent(task, box, Scripted(scripts[rec.label]), exp.limits, rec, seed=0,
                               history=prefix.messages if prefix else None, max_new_turns=max_new_turns)

    runner.trials.act = act
    (tmp_path / "run").mkdir()
    row = asyncio.run(runner.run_trial(spec))
    a, f, r = seen["a"], seen["f"], seen["r"]
    assert seen["held"] and a.stop_reason == "paused" and a.snapshot is not None
    assert (f.prefix_restore, r.prefix_restore) == ("fork", "replay")
    events = [json.loads(x) for x in (tmp_path / "run" / row.trajectory_path).read_text().splitlines()]
    obs = {}
    for e in events:
        if e["type"] == "observation":
            obs.setdefault(e["attempt"], []).append(e["output"].strip())
    made = obs[a.index][0]
    stamp, rand, folder = made.split()
    assert stamp.isdigit() and rand.isdigit() and folder.startswith("/tmp/")
    assert obs[f.index][0] == made  # the fork holds the prefix's very state
    replayed = obs[r.index][0].split()
    assert replayed[0] != stamp and replayed[2] != folder  # the replay made a new time and a new folder
    starts = {e["attempt"]: e for e in events if e["type"] == "attempt_start"}
    assert starts[f.index]["prefix_restore"] == "fork" and starts[r.index]["prefix_restore"] == "replay"
    assert [e["command"] for e in events if e["type"] == "replay"] == [STATE]  # only the replay re-ran it
    forks = [e for e in events if e["type"] == "fork"]
    assert [e["op"] for e in forks] == ["snapshot", "fork", "release"]
    assert (row.snapshots, row.forks, len(row.fork_sec), len(row.snapshot_sec)) == (1, 1, 1, 1)
    assert row.fork_sec[0] > 0 and "fork" in f.timing and "replay" in r.timing
    run_label = f"org.tbscale.run={(tmp_path / 'run').resolve()}"
    assert _images("org.tbscale.snapshot", run_label) == [] and _containers(run_label) == []


# ---- a whole `tbscale run` with CER on forks: end, Ctrl-C, kill -9 and rerun --------------------------
def _cer_config(tmp_path: Path, rounds: int = 2) -> Path:
    cfg = tmp_path / "exp.yaml"
    cfg.write_text(textwrap.dedent(f"""
        name: forkrun
        tasks: {{path: {REPO / 'tasks'}, include: [extract-emails]}}
        trials: 1
        concurrency: 1
        output_dir: {tmp_path / 'results'}
        models:
          policy: {{model: sim/policy, sim: {{skill: 0.6}}}}
          judge: {{model: sim/cer_judge, sim: {{accuracy: 0.9}}}}
        settings:
          - name: cer
            generator: policy
            trajectory: {{name: cer, m: 3, beam: 2, segment_turns: 1, rounds: {rounds}, judge: judge}}
        limits: {{max_turns: 20}}
    """))
    return cfg


def _run_label(tmp_path: Path) -> str:
    return f"org.tbscale.run={(tmp_path / 'results' / 'forkrun').resolve()}"


@pytest.mark.docker
def test_a_cer_run_on_forks_leaves_nothing_and_counts_its_forks(tmp_path):
    cfg = _cer_config(tmp_path)
    res = tbscale("run", cfg, "--no-report")
    assert res.returncode in (0, 1), res.stderr[-2000:]
    row = json.loads((tmp_path / "results" / "forkrun" / "trials.jsonl").read_text().splitlines()[0])
    rec = row["strategy_record"]
    assert rec["params"]["prefix_restore"] == "auto" and rec["prefix_restores"].get("fork", 0) >= 3
    assert row["snapshots"] >= 3 and row["forks"] >= 3 and len(row["fork_sec"]) == row["forks"]
    assert all(c["restored"] in ("fork", None) for c in rec["candidates"].values())
    label = _run_label(tmp_path)
    assert _images("org.tbscale.snapshot", label) == [] and _containers(label) == []


@pytest.mark.docker
def test_ctrl_c_during_a_cer_run_on_forks_leaves_no_snapshot_or_fork(tmp_path):
    cfg = _cer_config(tmp_path, rounds=3)
    label = _run_label(tmp_path)
    with Started("run", cfg, "--no-report") as run:
        run.wait_until(lambda: _containers("org.tbscale.fork-of", label), "no fork ever started", timeout=300)
        assert _images("org.tbscale.snapshot", label)
        err = run.interrupt()
    assert run.returncode == 130, err[-2000:]
    assert _containers(label) == [] and _images("org.tbscale.snapshot", label) == []


@pytest.mark.docker
def test_kill_9_during_a_cer_run_on_forks_then_a_rerun_leaves_nothing(tmp_path):
    cfg = _cer_config(tmp_path, rounds=3)
    label = _run_label(tmp_path)
    with Started("run", cfg, "--no-report") as run:
        run.wait_until(lambda: _containers("org.tbscale.fork-of", label), "no fork ever started", timeout=300)
        run.kill_9()
    # the killed process left its snapshots behind: nothing in it could remove them
    assert _images("org.tbscale.snapshot", label)
    res = tbscale("run", cfg, "--no-report")
    assert res.returncode in (0, 1), res.stderr[-2000:]
    assert (tmp_path / "results" / "forkrun" / "trials.jsonl").read_text().strip()
    assert _containers(label) == [] and _images("org.tbscale.snapshot", label) == []


def test_the_report_gives_forks_per_trial_and_their_latency_percentiles(tmp_path):
    from tbscale.analysis import tables
    from tbscale.analysis.fork_report import fork_table

    run = tmp_path / "r1"
    run.mkdir()
    rows = []
    for setting, forks in (("cer-fork", [[0.4, 0.6], [0.5, 1.5]]), ("cer-replay", [[], []])):
        for i, secs in enumerate(forks):
            rows.append({"schema_version": 2, "run": "r1", "setting": setting, "setting_key": setting, "task_id": "a",
                         "trial_key": f"{setting}-{i}", "trial": i, "reward": 1.0, "passed": True, "ending": "pass",
                         "trajectory": "cer", "snapshots": len(secs), "snapshot_sec": [0.2] * len(secs),
                         "forks": len(secs), "fork_sec": secs, "candidate_execs": 2 * len(secs),
                         "candidate_exec_sec": 0.1 * len(secs),
                         "trajectory_path": f"trajectories/a/{setting}__t{i}.jsonl"})
    (run / "trials.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    t = fork_table(tables.load_trials([run])).set_index("setting")
    assert t.loc["cer-fork", "forks_per_trial"] == 2 and t.loc["cer-fork", "snapshots_per_trial"] == 2
    assert t.loc["cer-fork", "fork_p50"] == pytest.approx(0.55) and 1.0 < t.loc["cer-fork", "fork_p95"] <= 1.5
    assert t.loc["cer-fork", "candidate_execs_per_trial"] == 4
    assert t.loc["cer-replay", "forks_per_trial"] == 0 and t.loc["cer-replay", "fork_p50"] != t.loc["cer-replay", "fork_p50"]


@pytest.mark.docker
def test_a_compose_project_forks_every_service_and_its_sidecars_serve_again(tmp_path):
    from tbscale.environments.compose import compose_spec
    from tbscale.environments.docker_backend import DockerBackend
    from tbscale.tasks import load_task
    from tbscale.tasks.model import NetworkPolicy
    from tbscale_testing.tasks import write_harbor_task

    d = write_harbor_task(tmp_path / "tasks", "fork-compose", dockerfile="FROM python:3.11-slim-bookworm\nWORKDIR /app\n")
    (d / "environment" / "docker-compose.yaml").write_text(textwrap.dedent("""\
        services:
          alpha:
            image: python:3.11-slim-bookworm
            command: ["sh", "-c", "mkdir -p /srv && echo alpha > /srv/index.html && exec python3 -m http.server 8000 --directory /srv"]
    """))
    task = load_task(d)
    backend = DockerBackend()
    image, _ = backend.prepare(task)
    parent = backend.start(StartSpec(image=image, network="public", compose=compose_spec(task, image),
                                     labels={"org.tbscale.test": f"forks-{os.getpid()}"}))
    get = ("python3 -c \"import sys, urllib.request\ntry:\n print(urllib.request.urlopen(sys.argv[1], timeout=2).read()"
           ".decode().strip())\nexcept OSError:\n print('unreachable')\" ")
    fork = None
    try:
        assert _wait_for(lambda: parent.exec(get + "http://alpha:8000/", 20).output.strip() == "alpha", timeout=300)
        parent.exec("echo main-state > /app/f", 30)
        parent.service("alpha").exec("echo sidecar-state > /srv/extra", 30)
        parent.set_network(NetworkPolicy("allowlist", ("alpha",)))
        snap = parent.snapshot()
        assert set(snap.images) == {"main", "alpha"} and snap.backend == "compose"
        fork = backend.fork(snap)
        assert fork.project.name != parent.project.name and fork.services == ["alpha"]
        assert fork.exec("cat /app/f", 30).output.strip() == "main-state"
        # the sidecar's command ran again (it serves) on the sidecar's own committed files
        assert _wait_for(lambda: fork.exec(get + "http://alpha:8000/extra", 20).output.strip() == "sidecar-state",
                         timeout=300)
        assert fork.network is not None and fork.network.current == "allowlist:alpha"
        backend.release(snap)
        project = fork.project.name
        fork.stop()
        assert _containers(f"com.docker.compose.project={project}") == []
        assert _wait_for(lambda: not _images(f"org.tbscale.snapshot={snap.id}"), timeout=60)
    finally:
        if fork is not None:
            fork.stop()
        parent.stop()


def test_a_fork_starts_only_on_the_node_that_holds_its_snapshot(monkeypatch):
    """Under Ray a trial runs whole in one worker, so its forks start where their snapshots are;
    a snapshot handed to another node is refused before anything starts there."""
    from tbscale.environments import snapshots
    from tbscale.errors import SandboxError

    started = []
    snap = Snapshot(id="s1", backend="docker", parent="p", images={"main": "tbscale-snapshot:s1-main"},
                    node="node-a", spec=StartSpec(image="base"))
    monkeypatch.setattr(snapshots, "current_node", lambda: "node-b")
    with pytest.raises(SandboxError, match="lives on node node-a; a fork starts only there"):
        snapshots.fork(snap, started.append)
    assert started == []
    monkeypatch.setattr(snapshots, "current_node", lambda: "node-a")

    class Box:
        id, network = "f1", None

        def stop(self):
            started.append("stopped")

    spec_seen = []
    box = snapshots.fork(snap, lambda spec: spec_seen.append(spec) or Box(), {"x": "1"})
    assert spec_seen[0].image == "tbscale-snapshot:s1-main" and spec_seen[0].labels["org.tbscale.fork-of"] == "s1"
    assert box.start_spec.image == "base"
    snapshots.STORE.forks.pop("s1", None)


@pytest.mark.docker
def test_tbscale_clean_of_a_run_removes_its_snapshots_and_forks(tmp_path):
    from tbscale.environments.docker_backend import DockerBackend
    from tbscale.environments.owner import LABEL_RUN
    from tbscale.tasks import load_task
    from tbscale_testing.tasks import write_harbor_task

    run = str((tmp_path / "run").resolve())
    task = load_task(write_harbor_task(tmp_path / "tasks", "fork-clean"))
    backend = DockerBackend()
    image, _ = backend.prepare(task)
    parent = backend.start(StartSpec(image=image, labels={LABEL_RUN: run}))
    try:
        snap = parent.snapshot()
        fork = backend.fork(snap)
        assert _images(f"org.tbscale.snapshot={snap.id}") and _containers(f"org.tbscale.fork-of={snap.id}")
        # `--label` keeps it to this test's run: on its own, `clean` also removes every owner-less
        # snapshot and container on the engine, such as a killed run's in another test
        res = tbscale("clean", "--run", run, "--label", f"{LABEL_RUN}={run}", timeout=300)
        assert res.returncode == 0, res.stderr
        assert "1 snapshot images" in res.stdout
        assert _containers(f"org.tbscale.run={run}") == [] and _images(f"org.tbscale.run={run}") == []
        fork.stop()
        backend.release(snap)  # gone already: nothing to do, no error
    finally:
        parent.stop()
