"""Failures of the harness are not failures of the agent: an endpoint that is down, a missing key,
a broken image build or a verifier that cannot run are infrastructure errors, left out of pass@1,
shown apart, retried on rerun, and they make `tbscale run` exit non-zero. A model that is plainly
unavailable stops the run at once: no call to it is retried."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from tbscale_testing import LoopbackModel, auth_error, cli, server_error
from tbscale_testing.tasks import write_harbor_task

pytestmark = [pytest.mark.docker]


def write_config(tmp_path: Path, model: dict, **extra) -> Path:
    write_harbor_task(tmp_path / "tasks", "write-done")
    doc = {"name": "infra", "tasks": {"path": str(tmp_path / "tasks")}, "trials": 2, "concurrency": 2,
           "output_dir": str(tmp_path / "results"), "models": {"m": model},
           "settings": [{"name": "base", "generator": "m"}], "limits": {"max_turns": 3}, **extra}
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def tbscale(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return cli.tbscale(*args, env={**os.environ, "NO_PROXY": "127.0.0.1,localhost", **(env or {})}, timeout=timeout)


def rows(tmp_path: Path) -> list[dict]:
    path = tmp_path / "results" / "infra" / "trials.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def run_oracle_once(tmp_path: Path) -> subprocess.CompletedProcess:
    """`tbscale run` of one oracle trial of the tasks under tmp_path/tasks."""
    doc = {"name": "infra", "tasks": {"path": str(tmp_path / "tasks")}, "trials": 1,
           "output_dir": str(tmp_path / "results"), "settings": [{"name": "oracle", "agent": "oracle"}]}
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(doc))
    return tbscale("run", str(tmp_path / "exp.yaml"), "--no-report")


def no_call_retried(tmp_path: Path) -> bool:
    """Every model call the run recorded (spend.jsonl) failed at its first try: none was retried.
    What "stops within seconds" means, counted in calls rather than timed."""
    path = tmp_path / "results" / "infra" / "spend.jsonl"
    calls = [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []
    assert calls, "no model call was recorded"
    return all(c["retries"] == 0 and c["error"] for c in calls)


def test_server_errors_are_infrastructure_errors_with_exit_3(tmp_path: Path) -> None:
    with LoopbackModel(lambda body: server_error()) as srv:
        cfg = write_config(tmp_path, {"model": "openai/scripted", "api_base": srv.base_url, "max_retries": 1,
                                      "retry_backoff_sec": 0.01})
        res = tbscale("run", str(cfg), "--no-report")
    assert res.returncode == 3, res.stderr
    got = rows(tmp_path)
    assert len(got) == 2 and all(r["infra_error"] and r["stop_reason"] == "model_error" for r in got)
    assert all(r["error"]["type"] == "ModelCallError" for r in got)  # the exception class, not a role
    assert "2 trials ended in an infrastructure error" in res.stderr
    rep = tbscale("report", str(tmp_path / "results" / "infra"), "--no-plots")
    assert rep.returncode == 0 and "INFRASTRUCTURE ERRORS: 2 of 2 trials" in rep.stdout


def test_endpoint_down_is_caught_before_the_run(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, {"model": "openai/scripted", "api_base": "http://127.0.0.1:9/v1"})
    res = tbscale("run", str(cfg), "--no-report")
    assert res.returncode == 2, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "models.m: api_base http://127.0.0.1:9/v1 does not answer" in lines[0]
    assert rows(tmp_path) == []


def test_missing_key_variable_stops_before_any_trial(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, {"model": "openai/gpt-4o-mini", "api_key_env": "TBSCALE_TEST_MISSING_KEY"})
    res = tbscale("run", str(cfg), "--no-report", env={"TBSCALE_TEST_MISSING_KEY": ""})
    assert res.returncode == 2, (res.returncode, res.stderr)
    assert rows(tmp_path) == []
    assert "TBSCALE_TEST_MISSING_KEY (api_key_env) is set but empty" in res.stderr  # not "not set": it is


def test_rejected_key_trips_the_breaker_within_seconds(tmp_path: Path) -> None:
    """Past the preflight (the endpoint answers), every call is refused with 401: after a few tries
    the run stops with one message, keeping nothing as an agent failure."""
    with LoopbackModel(lambda body: auth_error()) as srv:
        cfg = write_config(tmp_path, {"model": "openai/scripted", "api_base": srv.base_url, "max_retries": 6,
                                      "circuit_breaker_tries": 3}, trials=6)
        res = tbscale("run", str(cfg), "--no-report")
        calls = len(srv.requests)
    assert res.returncode == 4, res.stderr
    assert "model openai/scripted: the provider rejected the key" in res.stderr and "stopping the run" in res.stderr
    assert calls <= 6  # no trial burns its retries on an auth error (6 trials, max_retries 6)
    assert no_call_retried(tmp_path)
    # Trials that ended before the breaker tripped are infrastructure errors, never the agent's.
    assert all(r["infra_error"] and r["stop_reason"] == "model_error" for r in rows(tmp_path))
    assert len(rows(tmp_path)) < 6


def test_missing_credentials_through_litellm_trip_the_breaker(tmp_path: Path) -> None:
    """litellm reports a missing OpenAI key as an InternalServerError: it must not be retried."""
    cfg = write_config(tmp_path, {"model": "openai/gpt-4o-mini", "max_retries": 6, "circuit_breaker_tries": 2})
    env = {k: "" for k in ("OPENAI_API_KEY",)}
    res = tbscale("run", str(cfg), "--no-report", "--no-preflight", env=env)
    assert res.returncode == 4, (res.returncode, res.stderr)
    assert "missing credentials" in res.stderr
    assert no_call_retried(tmp_path)


def test_image_build_failure_is_an_infrastructure_error(tmp_path: Path) -> None:
    write_harbor_task(tmp_path / "tasks", "write-done", dockerfile="FROM debian:bookworm-slim\nRUN exit 3\n")
    res = run_oracle_once(tmp_path)
    assert res.returncode == 3, res.stderr
    (row,) = rows(tmp_path)
    assert row["stop_reason"] == "image_build_error" and row["infra_error"] and row["error"]["type"] == "ImageBuildError"


def test_a_rebuild_names_the_quiet_download_failure_of_a_step_it_took_from_the_cache(tmp_path, monkeypatch):
    """A step whose download fails quietly (`|| true`), then a step that fails: the first build's log
    shows the download's failure; the rebuild takes that step from the engine's cache, which prints
    nothing, and still names it (tbscale/environments/network_failures.py)."""
    import uuid

    import docker

    from tbscale.environments.docker import ensure_image
    from tbscale.errors import ImageBuildError
    from tbscale.tasks import load_tasks

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    token = uuid.uuid4().hex  # a step no earlier build made, so that the first build runs it
    download = f"import urllib.request; urllib.request.urlopen('http://{token}.example.invalid/install.sh')"
    write_harbor_task(tmp_path / "tasks", "write-done", dockerfile=(
        f'FROM python:3.11-slim-bookworm\nRUN python3 -c "{download}" || echo the install failed quietly\n'
        "RUN exit 3\n"))
    (task,), _ = load_tasks(tmp_path / "tasks")
    messages = []
    try:
        for _ in range(2):
            with pytest.raises(ImageBuildError) as raised:
                ensure_image(task)
            messages.append(str(raised.value))
    finally:  # the image the download step made (its note's name): the only one the builds kept
        for note in (tmp_path / "cache" / "tbscale" / "build-steps").glob("[0-9a-f]*"):
            docker.from_env().images.remove(note.name, force=True)
    assert "Name or service not known" in messages[0] and "took from the cache" not in messages[0]
    assert messages[1].splitlines()[-1].startswith(
        "earlier, in a step this build took from the cache (it printed this when it ran): ")
    assert "Name or service not known" in messages[1].splitlines()[-1]


def test_log_folders_that_cannot_be_made_are_a_sandbox_error_naming_them(tmp_path: Path) -> None:
    """The verifier guard's baseline makes a fresh environment's /logs folders in its own exec
    (one exec a trial fewer); where they cannot be made (the image's /logs is a file), the trial is
    still the sandbox error it was when a separate exec made them, naming the folders."""
    write_harbor_task(tmp_path / "tasks", "write-done",
                      dockerfile="FROM debian:bookworm-slim\nRUN echo not a folder > /logs\nWORKDIR /app\n")
    res = run_oracle_once(tmp_path)
    assert res.returncode == 3, res.stderr
    (row,) = rows(tmp_path)
    assert row["stop_reason"] == "sandbox_error" and row["infra_error"] and row["turns"] == 0, row
    assert row["error"]["message"].startswith(
        "could not make /logs/agent /logs/verifier /logs/artifacts in the container: mkdir: "), row["error"]
    assert "Not a directory" in row["error"]["message"] and "\n" not in row["error"]["message"]
    assert row["error"]["message"].count("Not a directory") == 3, row["error"]  # one line per folder, joined


def test_a_verifier_that_cannot_run_is_a_verifier_error(tmp_path: Path) -> None:
    write_harbor_task(tmp_path / "tasks", "write-done", test_sh="exit 127\n")  # writes no reward, "not found"
    res = run_oracle_once(tmp_path)
    assert res.returncode == 3
    (row,) = rows(tmp_path)
    # exit 127 (126) without a reward: the script could not run (issue 9: tests_not_run)
    assert (row["ending"], row["stop_reason"], row["infra_error"]) == ("verifier_error", "tests_not_run", True)


def test_nightly_history_scores_what_the_report_scores(tmp_path: Path) -> None:
    from tbscale.sweeps import Sweep, history_lines

    write_harbor_task(tmp_path / "tasks", "builds")
    write_harbor_task(tmp_path / "tasks", "broken", dockerfile="FROM debian:bookworm-slim\nRUN exit 3\n")
    doc = {"name": "infra", "tasks": {"path": str(tmp_path / "tasks")}, "trials": 1,
           "output_dir": str(tmp_path / "results"), "settings": [{"name": "oracle", "agent": "oracle"}]}
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(doc))
    assert tbscale("run", str(tmp_path / "exp.yaml"), "--no-report").returncode == 3
    sweep = Sweep(name="nightly", configs=[str(tmp_path / "exp.yaml")])
    (line,) = history_lines(tmp_path / "results" / "infra", sweep, {}, "2026-11-30")
    # the image that did not build is the harness's failure: not a 0 in pass@1 nor in the gate's rates
    assert line.pass_at_1 == 1.0 and line.trials == 1 and line.infra_errors == 1
    assert line.task_pass_rates == {"builds": 1.0}
