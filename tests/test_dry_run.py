"""`tbscale run --dry-run`: every check a run makes, then what it would do (per setting: trials
planned, kept from an earlier run, to run, and of those the ones run again after an
infrastructure error), and nothing of it: no container, no folder, no lock, no line written."""

from __future__ import annotations

import os
from pathlib import Path

import yaml
from typer.testing import CliRunner

from tbscale.cli import app
from tbscale.runner import load_experiment, plan_trials
from tbscale.runner.identity import task_hash
from tbscale.runner.rundir import RunFolder, RunLock
from tbscale.tasks import load_tasks
from tbscale.types.results import TrialResult
from tbscale_testing.tasks import write_harbor_task


def _config(tmp_path: Path, settings: list[dict]) -> Path:
    for name in ("one", "two"):
        if not (tmp_path / "tasks" / name).exists():
            write_harbor_task(tmp_path / "tasks", name)
    cfg = tmp_path / "exp.yaml"
    cfg.write_text(yaml.safe_dump({"name": "dry", "tasks": {"path": str(tmp_path / "tasks")}, "trials": 2,
                                   "output_dir": str(tmp_path / "results"), "settings": settings}))
    return cfg


SETTINGS = [{"name": "oracle", "agent": "oracle"}, {"name": "nop", "agent": "nop"}]


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_dry_run_of_a_new_run_plans_every_trial_and_makes_no_folder(tmp_path: Path) -> None:
    cfg = _config(tmp_path, SETTINGS)
    res = CliRunner().invoke(app, ["run", str(cfg), "--dry-run"])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines[0] == f"dry run of dry into {tmp_path / 'results' / 'dry'}: 8 planned, 0 kept from an earlier run, 8 to run"
    assert lines[1:3] == ["  oracle: 4 planned, 0 kept from an earlier run, 4 to run",
                          "  nop: 4 planned, 0 kept from an earlier run, 4 to run"]
    assert not (tmp_path / "results").exists()


def test_a_dry_run_of_a_run_begun_counts_what_it_keeps_and_what_it_reruns_and_touches_nothing(tmp_path: Path) -> None:
    cfg = _config(tmp_path, SETTINGS)
    exp = load_experiment(cfg)
    tasks, _ = load_tasks(tmp_path / "tasks")
    folder = RunFolder(tmp_path / "results" / "dry")  # what an earlier run left: its manifest, two lines
    folder.path.mkdir(parents=True)
    folder.write_manifest(folder.open_for(exp, {t.id: task_hash(t) for t in tasks}))
    specs = [s for s in plan_trials(exp, tasks) if s.setting.name == "oracle"]
    for spec, infra in ((specs[0], False), (specs[1], True)):
        folder.index.append(TrialResult(
            schema_version=2, run="dry", setting="oracle", setting_key=spec.setting_key, trial_key=spec.key,
            task_id=spec.task.id, trial=spec.trial, ending="infra_error" if infra else "pass", passed=not infra,
            reward=None if infra else 1.0, infra_error=infra, stop_reason="sandbox_error" if infra else "submitted"))
    before = _files(tmp_path / "results")

    res = CliRunner().invoke(app, ["run", str(cfg), "--dry-run"])
    assert res.exit_code == 0, res.output
    assert res.output.splitlines()[1] == ("  oracle: 4 planned, 1 kept from an earlier run, 3 to run "
                                          "(1 of them again, after an infrastructure error)")
    assert "  nop: 4 planned, 0 kept from an earlier run, 4 to run" in res.output
    kept = CliRunner().invoke(app, ["run", str(cfg), "--dry-run", "--keep-errors"])
    assert "  oracle: 4 planned, 2 kept from an earlier run, 2 to run\n" in kept.output, kept.output
    assert "another tbscale run" not in kept.output
    assert _files(tmp_path / "results") == before  # not a byte written, and no lock file made

    # While another run holds the folder, the dry run says so (it takes no lock: it is not refused).
    lock = RunLock(folder.path)
    lock.acquire()
    try:
        live = CliRunner().invoke(app, ["run", str(cfg), "--dry-run"])
    finally:
        lock.release()
    assert live.exit_code == 0, live.output
    assert f"another tbscale run is running trials into this folder now (pid {os.getpid()} on " in live.output
    before = _files(tmp_path / "results")  # now with the lock file the holder made

    # A setting whose identity changed is refused as `run` refuses it, before anything.
    changed = _config(tmp_path, [{"name": "oracle", "agent": "nop"}, SETTINGS[1]])
    refused = CliRunner().invoke(app, ["run", str(changed), "--dry-run"])
    assert refused.exit_code == 2
    assert "setting 'oracle' changed since this run began" in refused.output, refused.output
    assert _files(tmp_path / "results") == before
