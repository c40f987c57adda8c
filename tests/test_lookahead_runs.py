"""Whole `tbscale run`s with the lookahead policy on Docker, with the simulated models (sim/...):
interrupted mid-turn (Ctrl-C, and kill -9 followed by a rerun of the same command), and on a
compose task and a multi-step task. Every candidate runs in a fork; afterwards the engine holds no
container, snapshot image or network of the run (the engine's own create events say what the run
made, so a compose project's networks are found too)."""

from __future__ import annotations

import json
import shutil
import subprocess
import textwrap
import uuid
from pathlib import Path

import pytest

from tbscale_testing.cli import Started, tbscale
from tbscale_testing.docker_events import ContainerCreations, leftovers

REPO = Path(__file__).resolve().parents[1]
# A whole run on a loaded engine takes minutes; the bound is ten times a loaded run's time.
pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("docker_available"), pytest.mark.timeout(1800)]
NOTHING = {"containers": [], "images": [], "networks": []}


def _config(tmp_path: Path, tasks: Path, include: list[str], *, trials: int = 1, max_turns: int = 20,
            skill: float = 0.6) -> Path:
    cfg = tmp_path / "exp.yaml"
    cfg.write_text(textwrap.dedent(f"""
        name: la-{uuid.uuid4().hex[:8]}
        tasks: {{path: {tasks}, include: {json.dumps(include)}}}
        trials: {trials}
        concurrency: 1
        output_dir: {tmp_path / 'results'}
        models:
          policy: {{model: sim/policy, sim: {{skill: {skill}}}}}
          selector: {{model: sim/selector, sim: {{accuracy: 0.9}}}}
        settings:
          - name: lookahead_n3
            generator: policy
            policy: {{name: lookahead, n: 3, selector: selector}}
        limits: {{max_turns: {max_turns}, command_timeout_sec: 60}}
    """))
    return cfg


def _run_dir(cfg: Path) -> Path:
    import yaml

    exp = yaml.safe_load(cfg.read_text())
    return (Path(exp["output_dir"]) / exp["name"]).resolve()


def _label(cfg: Path) -> str:
    return f"org.tbscale.run={_run_dir(cfg)}"


def _ids(*args: str) -> list[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True).stdout.split()


def _forks_alive(label: str) -> bool:
    return bool(_ids("ps", "-q", "--filter", f"label={label}", "--filter", "label=org.tbscale.fork-of"))


def _run(cfg: Path) -> subprocess.CompletedProcess:
    return tbscale("run", cfg, "--no-report", timeout=1800)


def _rows(cfg: Path) -> list[dict]:
    path = _run_dir(cfg) / "trials.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def _events(cfg: Path, row: dict) -> list[dict]:
    return [json.loads(x) for x in (_run_dir(cfg) / row["trajectory_path"]).read_text().splitlines() if x.strip()]


# ---- interrupted mid-turn -----------------------------------------------------------------------------
def test_ctrl_c_mid_lookahead_turn_exits_130_and_leaves_nothing(tmp_path):
    cfg = _config(tmp_path, REPO / "tasks", ["extract-emails"], trials=3)
    label = _label(cfg)
    with ContainerCreations(label) as created, Started("run", cfg, "--no-report") as run:
        run.wait_until(lambda: _forks_alive(label), "no candidate fork ever started")
        assert _ids("images", "-q", "--filter", f"label={label}", "--filter", "label=org.tbscale.snapshot")
        err = run.interrupt(timeout=600)
    assert run.returncode == 130, err[-3000:]
    assert any(e["Actor"]["Attributes"].get("org.tbscale.fork-of") for e in created.events)
    assert leftovers(label, created) == NOTHING


def test_kill_9_mid_lookahead_turn_then_a_rerun_finishes_and_leaves_nothing(tmp_path):
    cfg = _config(tmp_path, REPO / "tasks", ["extract-emails"], trials=2)
    label = _label(cfg)
    with ContainerCreations(label) as created:
        with Started("run", cfg, "--no-report") as run:
            run.wait_until(lambda: _forks_alive(label), "no candidate fork ever started")
            run.kill_9()
        # Nothing in a killed process could remove what it made: its forks and snapshots are there.
        assert _forks_alive(label)
        assert _ids("images", "-q", "--filter", f"label={label}", "--filter", "label=org.tbscale.snapshot")
        res = _run(cfg)
    assert res.returncode in (0, 1), res.stderr[-3000:]
    rows = _rows(cfg)
    assert len(rows) == 2 and not any(r["infra_error"] for r in rows), rows
    assert all(r["forks"] > 0 and r["snapshots"] > 0 for r in rows)
    assert leftovers(label, created) == NOTHING


# ---- a compose task and a multi-step task, end to end -------------------------------------------------
CONFORMANCE = REPO / "tests" / "conformance"


def _finished(cfg: Path, created: ContainerCreations) -> tuple[dict, list[dict]]:
    res = _run(cfg)
    assert res.returncode in (0, 1), res.stderr[-3000:]
    (row,) = _rows(cfg)
    assert not row["infra_error"] and row["reward"] is not None, row
    evs = _events(cfg, row)
    looks = [e for e in evs if e["type"] == "lookahead"]
    assert looks and all(r.get("exit_code") is not None for e in looks for r in e["ran"]), looks
    assert all(e.get("ran_in_fork") for e in evs if e["type"] == "action")
    assert row["forks"] >= len(looks) and row["snapshots"] >= len(looks) and row["candidate_execs"] >= len(looks)
    return row, evs


def _compose_task_with_a_kept_store(root: Path) -> Path:
    """The conformance compose-sidecar task with a key-value sidecar that keeps what it stores in
    files, where a commit finds it: a fork restarts the sidecar's server, and what it held only in
    memory would be gone (docs/forks-and-lookahead.md)."""
    task = root / "compose-sidecar"
    shutil.copytree(CONFORMANCE / "compose-sidecar", task)
    server = task / "environment" / "kv" / "server.py"
    text = server.read_text()
    text = text.replace("store: dict[str, bytes] = {}", textwrap.dedent("""\
        import os
        import urllib.parse


        class Files:
            def _path(self, key):
                return "/srv/data/" + urllib.parse.quote(key, safe="")

            def __contains__(self, key):
                return os.path.exists(self._path(key))

            def __getitem__(self, key):
                return open(self._path(key), "rb").read()

            def __setitem__(self, key, value):
                os.makedirs("/srv/data", exist_ok=True)
                open(self._path(key), "wb").write(value)


        store = Files()"""))
    assert "store = Files()" in text
    server.write_text(text)
    return root


def test_lookahead_on_a_compose_task_forks_every_service_and_leaves_nothing(tmp_path):
    tasks = _compose_task_with_a_kept_store(tmp_path / "tasks")
    cfg = _config(tmp_path, tasks, ["compose-sidecar"], max_turns=10, skill=0.9)
    label = _label(cfg)
    with ContainerCreations(label) as created:
        row, evs = _finished(cfg, created)
    verdicts = [e for e in evs if e["type"] == "verifier"]
    assert len(verdicts) == 1 and verdicts[0]["reward"] == row["reward"]
    # the PUT ran in a fork; the sidecar's store is on its filesystem, so the verifier, in the
    # last fork, finds it
    assert row["passed"] and row["tampering"] == [], row
    # Every snapshot holds every service, and every fork is a whole project: main and the sidecar.
    snaps = [e for e in evs if e["type"] == "fork" and e["op"] == "snapshot"]
    assert snaps and all(set(e["images"]) == {"main", "kv"} for e in snaps), snaps
    forked: dict[str, set[str]] = {}
    for e in created.events:
        attrs = e["Actor"]["Attributes"]
        if attrs.get("org.tbscale.fork-of"):
            forked.setdefault(attrs["com.docker.compose.project"], set()).add(attrs["com.docker.compose.service"])
    assert len(forked) >= row["forks"] and all(s == {"main", "kv"} for s in forked.values()), forked
    assert leftovers(label, created) == NOTHING


def test_lookahead_on_a_multi_step_task_runs_every_step_in_forks_and_leaves_nothing(tmp_path):
    cfg = _config(tmp_path, CONFORMANCE, ["multi-step-mean"], max_turns=10, skill=0.9)
    label = _label(cfg)
    with ContainerCreations(label) as created:
        row, evs = _finished(cfg, created)
    # What the harness wrote before a step (the previous step's tests, the step's workdir files)
    # is carried by every commit; it is not the agent's doing.
    assert row["tampering"] == [], row["tampering"]
    assert [s["skipped"] for s in row["steps"]] == [False, False, False] and row["passed"], row["steps"]
    steps = [s["name"] for s in row["steps"]]
    assert steps and len({e["step"] for e in evs if e["type"] == "verifier"}) == sum(not s["skipped"] for s in row["steps"])
    # each step the agent ran went through lookahead turns
    ran = {s["name"] for s in row["steps"] if not s["skipped"]}
    starts = [i for i, e in enumerate(evs) if e["type"] == "setup" and e.get("what") == "step start"]
    for i, start in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else len(evs)
        if evs[start]["step"] in ran:
            assert any(e["type"] == "lookahead" for e in evs[start:end]), evs[start]["step"]
    assert leftovers(label, created) == NOTHING
