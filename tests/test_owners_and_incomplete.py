"""With Docker: `tbscale clean` beside a live run leaves it whole and removes only what owners that
are gone left (a reused pid told apart by its start time); a run the circuit breaker or Ctrl-C
stopped says so in its report; `tbscale run`'s closing report reads around broken lines; a task
folder named with a space and a non-ASCII letter runs.

Every container, network and image these tests make carries a label of their own, and every
clean-up they run is narrowed to it: other work on the engine is never touched."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml

from tbscale_testing import LoopbackModel, auth_error, cli
from tbscale_testing.engine import containers
from tbscale_testing.tasks import write_harbor_task

pytestmark = [pytest.mark.docker]
BASE_IMAGE = "debian:bookworm-slim"
ENV = {**os.environ, "NO_PROXY": "127.0.0.1,localhost", "COLUMNS": "200"}


def tbscale(*args: str | Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return cli.tbscale(*args, env=ENV, timeout=timeout)


def docker_ids(kind: str, label: str) -> list[str]:
    cmd = {"container": ["docker", "ps", "-aq"], "network": ["docker", "network", "ls", "-q"],
           "image": ["docker", "images", "-q"]}[kind]
    return subprocess.run([*cmd, "--filter", f"label={label}"], capture_output=True, text=True).stdout.split()


def remove_labelled(label: str) -> None:
    """Only what carries this test's own label."""
    for cid in docker_ids("container", label):
        subprocess.run(["docker", "rm", "-f", cid], capture_output=True)
    for nid in docker_ids("network", label):
        subprocess.run(["docker", "network", "rm", nid], capture_output=True)
    for iid in set(docker_ids("image", label)):
        subprocess.run(["docker", "rmi", "-f", iid], capture_output=True)


def write_config(tmp_path: Path, name: str, **doc) -> Path:
    base = {"name": name, "tasks": {"path": str(tmp_path / "tasks")}, "trials": 1, "concurrency": 1,
            "output_dir": str(tmp_path / "results"), "settings": [{"name": "oracle", "agent": "oracle"}]}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({**base, **doc}))
    return path


# What an owner does: start a container through tbscale (its labels name this process), make a
# network and build an image labelled as tbscale labels them, print the container id, and hold.
OWNER = """
import io, sys, time
from tbscale.environments.base import StartSpec
from tbscale.environments.docker import Container, client
from tbscale.environments.owner import owner_labels
extra = dict(a.split("=", 1) for a in sys.argv[1:])
box = Container.start(StartSpec(image="%s", labels=extra))
api = client().api
api.create_network("tbscale-test-" + box.id, labels={**owner_labels(), **extra})
tag = "tbscale-test-clean/" + box.id + ":1"
client().images.build(fileobj=io.BytesIO(b"FROM %s\\nLABEL purpose=clean-test\\n"), tag=tag, rm=True,
                      labels={**owner_labels(), **extra})
print(box.id, flush=True)
time.sleep(600)
""" % (BASE_IMAGE, BASE_IMAGE)


def start_owner(*labels: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-c", OWNER, *labels], stdout=subprocess.PIPE, text=True)
    cid = proc.stdout.readline().strip()
    assert cid, "the owner process did not start its container"
    return proc, cid


@pytest.mark.serial  # counts what a sweep removes: another run's orphan sweep must not take it first
def test_clean_removes_only_what_gone_owners_left_and_a_live_run_when_named(tmp_path: Path) -> None:
    from tbscale.environments.docker import client
    from tbscale.environments.owner import HOST, LABEL_APP, LABEL_HOST, LABEL_PID, LABEL_SESSION, LABEL_STARTED

    scope = f"org.tbscale.test-scope={uuid.uuid4().hex[:12]}"
    key, value = scope.split("=")
    live_run = str(tmp_path / "results" / "live-run")
    live = dead = None
    try:
        live, live_id = start_owner(scope, f"org.tbscale.run={live_run}")
        dead, dead_id = start_owner(scope)
        os.kill(dead.pid, signal.SIGKILL)  # its containers, network and image are now orphans
        dead.wait(timeout=30)
        # The test's own pid is alive, but not the process that started this one: a reused pid.
        reused = client().containers.create(BASE_IMAGE, ["sleep", "600"], labels={
            LABEL_APP: "1", LABEL_HOST: HOST, LABEL_PID: str(os.getpid()), LABEL_STARTED: "0000dead:12",
            LABEL_SESSION: f"{os.getpid()}-feedface", key: value}).id[:12]
        elsewhere = client().containers.create(BASE_IMAGE, ["sleep", "600"], labels={
            LABEL_APP: "1", LABEL_HOST: "another-host", LABEL_PID: "1", key: value}).id[:12]

        res = tbscale("clean", "--images", "--label", scope)
        assert res.returncode == 0, res.stderr
        left = {c[:12] for c in docker_ids("container", scope)}
        assert left == {live_id, elsewhere}, (left, res.stdout)
        assert "removed 2 containers and 1 networks and 1 images" in res.stdout
        assert f"kept 1 containers of a live or unknown owner (pid {live.pid} on {HOST}, run {live_run})" in res.stdout
        assert [n for n in docker_ids("network", scope)] and len(docker_ids("image", scope)) == 1  # the live owner's
        assert live.poll() is None and reused not in left

        named = tbscale("clean", "--label", scope, "--run", live_run)
        assert named.returncode == 0 and {c[:12] for c in docker_ids("container", scope)} == {elsewhere}, named.stdout

        unconfirmed = tbscale("clean", "--all", "--label", scope)
        assert unconfirmed.returncode == 2 and "not confirmed, nothing removed" in unconfirmed.stderr
        assert docker_ids("container", scope)
        everything = tbscale("clean", "--all", "--yes", "--label", scope)
        assert everything.returncode == 0 and docker_ids("container", scope) == []
    finally:
        for proc in (live, dead):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
        remove_labelled(scope)


def test_clean_beside_a_live_run_leaves_it_whole(tmp_path: Path) -> None:
    write_harbor_task(tmp_path / "tasks", "hold", solve="#!/bin/bash\nsleep 15; echo done > /app/out.txt\n",
                      task_toml="[agent]\ntimeout_sec = 120\n[verifier]\ntimeout_sec = 30\n")
    cfg = write_config(tmp_path, "live", trials=3, concurrency=3)
    run_dir = (tmp_path / "results" / "live").resolve()
    mine = f"org.tbscale.run={run_dir}"
    with cli.Started("run", cfg, "--no-report", env=ENV) as run:
        run.wait_until(lambda: len(docker_ids("container", mine)) == 3, "the run's containers never started",
                       timeout=240)
        before = set(docker_ids("container", mine))
        res = tbscale("clean", "--label", mine)
        assert res.returncode == 0, res.stderr
        assert "removed 0 containers" in res.stdout and "kept 3 containers" in res.stdout
        assert set(docker_ids("container", mine)) == before
        err = run.finish(timeout=300)
    assert run.returncode == 0, err
    rows = [json.loads(x) for x in (run_dir / "trials.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and all(r["passed"] and not r["infra_error"] for r in rows), rows
    assert docker_ids("container", mine) == []


def test_a_run_the_breaker_stopped_says_so_in_its_report(tmp_path: Path) -> None:
    write_harbor_task(tmp_path / "tasks", "write-done")
    with LoopbackModel(lambda body: auth_error()) as srv:  # the model list answers; every call is refused
        cfg = write_config(tmp_path, "stopped", trials=6, concurrency=1, limits={"max_turns": 3},
                           models={"m": {"model": "openai/scripted", "api_base": srv.base_url, "max_retries": 0,
                                         "circuit_breaker_tries": 3}},
                           settings=[{"name": "base", "generator": "m"}])
        res = tbscale("run", str(cfg), "--report")
    assert res.returncode == 4, res.stderr
    run_dir = tmp_path / "results" / "stopped"
    last = json.loads((run_dir / "manifest.json").read_text())["invocations"][-1]
    assert last["stop_kind"] == "model_unavailable" and "rejected the key" in last["stopped"]
    assert json.loads((run_dir / "manifest.json").read_text())["current"]["planned_trials"] == {"base": 6}
    rep = tbscale("report", str(run_dir), "--no-plots")
    finished = len((run_dir / "trials.jsonl").read_text().splitlines()) if (run_dir / "trials.jsonl").exists() else 0
    assert finished < 6
    if finished:
        assert rep.returncode == 0, rep.stderr
        assert f"INCOMPLETE: {finished} of 6 planned trials have finished" in rep.stdout
        assert "Why: stopped: model openai/scripted: the provider rejected the key" in rep.stdout
        assert "INCOMPLETE" in res.stdout  # the run's own closing report says it too
    else:
        assert rep.returncode == 2 and "no trial has finished (0 of 6 planned)" in rep.stderr


def test_an_interrupted_run_says_so_in_its_report(tmp_path: Path) -> None:
    write_harbor_task(tmp_path / "tasks", "a-quick")
    write_harbor_task(tmp_path / "tasks", "b-slow", solve="#!/bin/bash\nsleep 300; echo done > /app/out.txt\n",
                      task_toml="[agent]\ntimeout_sec = 600\n[verifier]\ntimeout_sec = 30\n")
    cfg = write_config(tmp_path, "interrupted")
    run_dir = tmp_path / "results" / "interrupted"
    with cli.Started("run", cfg, "--no-report", env=ENV) as run:
        run.wait_until(lambda: (run_dir / "trials.jsonl").exists() and containers(
            "org.tbscale.task=b-slow", under=tmp_path), "the slow trial never started", timeout=240)
        run.interrupt()
    assert run.returncode == 130
    last = json.loads((run_dir / "manifest.json").read_text())["invocations"][-1]
    assert last["stop_kind"] == "interrupted"
    rep = tbscale("report", str(run_dir), "--no-plots")
    assert rep.returncode == 0, rep.stderr
    assert "INCOMPLETE: 1 of 2 planned trials have finished (oracle: 1 of 2)" in rep.stdout
    assert "Why: interrupted: interrupted (Ctrl-C or SIGTERM)" in rep.stdout


def test_run_reads_around_broken_lines_in_its_closing_report(tmp_path: Path) -> None:
    write_harbor_task(tmp_path / "tasks", "write-done")
    cfg = write_config(tmp_path, "broken", trials=2, concurrency=2)
    first = tbscale("run", str(cfg), "--no-report")
    assert first.returncode == 0, first.stderr
    index = tmp_path / "results" / "broken" / "trials.jsonl"
    good = index.read_text().splitlines()
    nan = json.loads(good[0]) | {"reward": float("nan"), "trial_key": "forged"}
    index.write_text("\n".join([good[0], '{"schema_version": 2, "run": "bro', good[1], json.dumps(nan)]) + "\n")
    again = tbscale("run", str(cfg), "--report")
    assert again.returncode == 0, again.stderr
    assert "Traceback" not in again.stderr
    assert f"{index}: skipped 2 unreadable lines: line 2 (not JSON), line 4 (reward: Input should be a finite " \
           "number)" in again.stderr.replace("\n", "")
    assert "100.0%" in again.stdout


def test_a_task_folder_named_with_a_space_and_a_non_ascii_letter_runs(tmp_path: Path) -> None:
    write_harbor_task(tmp_path / "tasks", "my tâsk")
    cfg = write_config(tmp_path, "odd-name")
    res = tbscale("run", str(cfg), "--no-report")
    assert res.returncode == 0, res.stderr
    row = json.loads((tmp_path / "results" / "odd-name" / "trials.jsonl").read_text())
    assert row["task_id"] == "my tâsk" and row["passed"], row
