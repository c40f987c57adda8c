"""Sweeps: grid expansion, overrides by dotted path, runs that resume, and the kept history."""

import json
import subprocess
import sys
import textwrap

import pytest

from tbscale.errors import TbscaleError
from tbscale.sweeps import expand, grid_points, load_sweep, set_path
from tests.test_sandbox_lifecycle import make_task


def test_set_path_and_grid():
    doc = {"settings": [{"name": "a", "policy": {"name": "turn_bon", "n": 2}}], "trials": 1}
    set_path(doc, "settings.0.policy.n", 8)
    set_path(doc, "models.gen.sim.skill", 0.3)
    assert doc["settings"][0]["policy"]["n"] == 8 and doc["models"]["gen"]["sim"]["skill"] == 0.3
    with pytest.raises(TbscaleError, match="not an index"):
        set_path(doc, "settings.5.name", "x")
    assert grid_points({"a": [1, 2], "b": ["x"]}) == [{"a": 1, "b": "x"}, {"a": 2, "b": "x"}]
    assert grid_points({}) == [{}]


def test_expand_names_runs_by_grid_point(tmp_path):
    (tmp_path / "exp.yaml").write_text("name: e\ntrials: 1\nmodels: {p: {model: sim/policy}}\n")
    (tmp_path / "sweep.yaml").write_text("name: s\nconfigs: [exp.yaml]\ngrid:\n  trials: [1, 3]\n  models.p.sim.skill: [0.5]\n")
    plan = expand(load_sweep(tmp_path / "sweep.yaml"))
    assert [name for name, *_ in plan] == ["e__trials-1_skill-0.5", "e__trials-3_skill-0.5"]
    assert plan[1][1]["trials"] == 3 and plan[1][1]["models"]["p"]["sim"]["skill"] == 0.5


def test_bad_sweep_file_is_one_line(tmp_path):
    (tmp_path / "sweep.yaml").write_text("name: s\nconfigs: [a.yaml]\ngird: {}\n")
    with pytest.raises(TbscaleError, match="sweep.yaml: gird: unknown key"):
        load_sweep(tmp_path / "sweep.yaml")


@pytest.mark.docker
def test_sweep_runs_resumes_and_keeps_history(tmp_path):
    make_task(tmp_path / "tasks", "tiny")
    (tmp_path / "exp.yaml").write_text(textwrap.dedent(f"""
        name: tinyexp
        tasks: {{path: {tmp_path / 'tasks'}}}
        settings:
          - {{name: oracle, agent: oracle}}
          - {{name: nop, agent: nop}}
    """))
    (tmp_path / "sweep.yaml").write_text(textwrap.dedent(f"""
        name: nightly-test
        configs: [exp.yaml]
        grid: {{trials: [1, 2]}}
        output_dir: {tmp_path / 'sweeps'}
        history: {tmp_path / 'history.jsonl'}
        date: 2026-11-30
    """))
    cmd = [sys.executable, "-m", "tbscale.cli", "sweep", str(tmp_path / "sweep.yaml")]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    lines = [json.loads(x) for x in (tmp_path / "history.jsonl").read_text().splitlines()]
    assert len(lines) == 4  # 2 grid points x 2 settings
    by = {(ln["run"], ln["setting"]): ln for ln in lines}
    assert by[("tinyexp__trials-2", "oracle")]["pass_at_1"] == 1.0
    assert by[("tinyexp__trials-2", "nop")]["pass_at_1"] == 0.0 and by[("tinyexp__trials-2", "nop")]["trials"] == 2
    run_dir = tmp_path / "sweeps" / "2026-11-30" / "tinyexp__trials-2"
    assert len((run_dir / "trials.jsonl").read_text().splitlines()) == 4
    # The next night (same date folder here) resumes: nothing is run again, history grows.
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["invocations"][-1]["trials_run"] == 0
    assert len((tmp_path / "history.jsonl").read_text().splitlines()) == 8
    hist = subprocess.run([sys.executable, "-m", "tbscale.cli", "history", str(tmp_path / "history.jsonl")],
                          capture_output=True, text=True)
    assert hist.returncode == 0 and "tinyexp__trials-2" in hist.stdout and "100.0%" in hist.stdout
