"""One process runs trials into a run folder at a time: a second `tbscale run` on the same folder is
refused with one line naming the holder, instead of running every trial again beside the first and
interleaving their lines (before: 24 trial lines for 12 trials, and torn trajectory lines)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tbscale.cli import app
from tbscale.errors import TbscaleError
from tbscale.runner.rundir import RunLock
from tbscale_testing.tasks import write_harbor_task


def test_a_held_folder_is_refused_naming_its_holder_and_free_once_let_go(tmp_path: Path) -> None:
    first, second = RunLock(tmp_path), RunLock(tmp_path)
    first.acquire()
    with pytest.raises(TbscaleError, match=rf"another tbscale run is running trials into this run folder "
                                           rf"\(pid {os.getpid()} on "):
        second.acquire()
    assert not second.held
    first.release()
    second.acquire()
    assert second.held and (tmp_path / RunLock.NAME).is_file()
    second.release()


def test_a_holder_killed_with_sigkill_leaves_no_stale_lock(tmp_path: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from tbscale.runner.rundir import RunLock
        RunLock({str(tmp_path)!r}).acquire()
        print("held", flush=True)
        time.sleep(600)
        """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(TbscaleError, match=f"pid {holder.pid} on"):
            RunLock(tmp_path).acquire()
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=60)
        lock = RunLock(tmp_path)
        lock.acquire()  # the kernel let go of it with the process
        assert lock.held
        lock.release()
    finally:
        holder.kill()
        holder.wait()


def refused_while_held(folder: Path, argv: list[str]) -> str:
    """Run the CLI with `argv` while another holder has `folder`'s lock: it exits 2 with one error
    line, which is returned."""
    other = RunLock(folder)
    other.acquire()
    try:
        res = CliRunner().invoke(app, argv, env={"COLUMNS": "300"})
    finally:
        other.release()
    assert res.exit_code == 2, res.output
    errors = [x for x in res.output.splitlines() if x.startswith("error:")]
    assert len(errors) == 1, res.output
    return errors[0]


def test_run_on_a_folder_another_run_holds_exits_2_before_anything_starts(tmp_path: Path) -> None:
    write_harbor_task(tmp_path / "tasks", "t1")
    config = tmp_path / "exp.yaml"
    config.write_text(f"name: busy\ntasks: {{path: {tmp_path / 'tasks'}}}\noutput_dir: {tmp_path / 'results'}\n"
                      "models: {p: {model: sim/policy}}\nsettings: [{name: base, generator: p}]\n")
    folder = tmp_path / "results" / "busy"
    folder.mkdir(parents=True)
    (folder / "trials.jsonl").write_text("")
    error = refused_while_held(folder, ["run", str(config)])
    assert "another tbscale run is running trials into this run folder" in error
    assert sorted(p.name for p in folder.iterdir()) == [RunLock.NAME, "trials.jsonl"]  # nothing written


def _live_run(tmp_path: Path) -> Path:
    """A run folder whose last invocation has not ended: 1 of 4 planned trials finished."""
    import json

    from tbscale_testing.bad_inputs import trial_line

    run = tmp_path / "results" / "live"
    run.mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps({
        "schema_version": 2, "run_name": "live", "setting_keys": {"base": "k1"},
        "current": {"settings": ["base"], "setting_keys": {"base": "k1"}, "trials": 4, "seed": 0,
                    "task_hashes": {"ok-task": "h"}, "planned_trials": {"base": 4}},
        "invocations": [{"started_at": "2026-01-01T10:00:00+00:00", "argv": ["tbscale", "run"]}]}))
    (run / "trials.jsonl").write_text(json.dumps(trial_line("live", 0)) + "\n")
    return run


def test_a_report_of_a_run_still_going_says_so_instead_of_asking_for_a_rerun(tmp_path: Path) -> None:
    from tbscale.rundata.trials import run_plan
    from tbscale.runfiles import run_holder

    run = _live_run(tmp_path)
    assert run_holder(run) is None  # no lock file yet
    lock = RunLock(run)
    lock.acquire()
    try:
        assert run_holder(run).startswith(f"pid {os.getpid()} on ")
        plan = run_plan(run)
        assert plan.running.startswith(f"pid {os.getpid()} on ") and plan.stopped is None
        res = CliRunner().invoke(app, ["report", str(run), "--no-plots", "--format", "json"], env={"COLUMNS": "300"})
        assert res.exit_code == 0, res.output
        import json

        banner = next(b for b in json.loads(res.stdout)["banners"] if b.startswith("INCOMPLETE"))
        assert f"Still running (live: pid {os.getpid()} on " in banner and "the numbers will change" in banner
        assert "Run the same command again" not in banner
        assert lock.held  # reading took nothing from the run
    finally:
        lock.release()
    # Let go (the process ended, however): the run stopped without recording its end.
    assert run_holder(run) is None
    plan = run_plan(run)
    assert plan.running is None and "never recorded its end (the process was killed)" in plan.stopped


def test_a_changed_setting_is_refused_before_the_progress_starts(tmp_path: Path) -> None:
    from tbscale.runner import load_experiment
    from tbscale.runner.identity import task_hash
    from tbscale.runner.rundir import RunFolder
    from tbscale.tasks import load_tasks

    write_harbor_task(tmp_path / "tasks", "t1")
    config = tmp_path / "exp.yaml"
    text = (f"name: pinned\ntasks: {{path: {tmp_path / 'tasks'}}}\noutput_dir: {tmp_path / 'results'}\nseed: 0\n"
            "models: {p: {model: sim/policy}}\nsettings: [{name: base, generator: p}]\n")
    config.write_text(text)
    folder = RunFolder(tmp_path / "results" / "pinned")
    folder.path.mkdir(parents=True)
    tasks, _ = load_tasks(tmp_path / "tasks")
    folder.write_manifest(folder.open_for(load_experiment(config), {t.id: task_hash(t) for t in tasks}))
    config.write_text(text.replace("seed: 0", "seed: 7"))
    res = CliRunner().invoke(app, ["run", str(config)], env={"COLUMNS": "300"})
    assert res.exit_code == 2, res.output
    assert [x for x in res.output.splitlines() if x.strip()] == [
        f"error: {folder.manifest_path}: setting 'base' changed since this run began (seed); give the run a new name "
        "(--run-name) or the setting a new name"]
    from tbscale.runfiles import run_holder

    assert run_holder(folder.path) is None  # the refused run let go of the folder


def test_a_sweep_claims_every_point_before_the_first_runs(tmp_path: Path) -> None:
    write_harbor_task(tmp_path / "tasks", "t1")
    for name in ("first", "second"):
        (tmp_path / f"{name}.yaml").write_text(
            f"name: {name}\ntasks: {{path: {tmp_path / 'tasks'}}}\nmodels: {{p: {{model: sim/policy}}}}\n"
            "settings: [{name: base, generator: p}]\n")
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(f"name: nightly\nconfigs: [{tmp_path / 'first.yaml'}, {tmp_path / 'second.yaml'}]\n"
                     f"date: '2026-01-01'\noutput_dir: {tmp_path / 'sweeps'}\nhistory: {tmp_path / 'h.jsonl'}\n")
    held = tmp_path / "sweeps" / "2026-01-01" / "second"
    held.mkdir(parents=True)
    error = refused_while_held(held, ["sweep", str(sweep)])
    assert f"{held}: another tbscale run is running trials into this run folder" in error
    # the first point never ran, and the folder the sweep made for it is gone again
    assert not (tmp_path / "sweeps" / "2026-01-01" / "first").exists()
    assert sorted(p.name for p in held.iterdir()) == [RunLock.NAME]


def test_where_the_kernels_locks_cannot_be_read_a_run_without_an_end_may_still_be_running(tmp_path: Path,
                                                                                           monkeypatch) -> None:
    import tbscale.rundata.trials as trials

    run = _live_run(tmp_path)
    monkeypatch.setattr(trials, "holders_visible", lambda: False)
    assert "never recorded its end (the process was killed, or is still running)" in trials.run_plan(run).stopped
    monkeypatch.setattr(trials, "holders_visible", lambda: True)
    assert trials.run_plan(run).stopped.endswith("never recorded its end (the process was killed)")
