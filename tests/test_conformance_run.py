"""The run time against the conformance tasks (tests/conformance/README.md): every oracle passes and
every nop fails, or, where this engine cannot give what the task asks (a storage quota, a GPU), the
task is refused with a one-line message naming the key. Then proof that the keys are really acted
on: copies of some tasks with their key removed make the oracle fail (or the nop pass)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tbscale.runfiles import read_artifact_manifest
from tbscale_testing.docker_events import ContainerCreations

pytestmark = [pytest.mark.docker, pytest.mark.slow]

CONFORMANCE = Path(__file__).parent / "conformance"
# On an engine without a GPU runtime or a storage quota these two are refused; elsewhere they run.
REFUSED_HERE = {"gpu-required": r"^\[environment\]\.gpus = 1: ", "storage-limit": r"^\[environment\]\.storage_mb = 1024: "}


def check(path: Path, run_dir: Path, *extra: str) -> tuple[int, dict]:
    from tbscale.cli import app

    result = CliRunner().invoke(app, ["tasks", "check", str(path), "--keep", str(run_dir), "--concurrency", "4", *extra])
    data = json.loads((run_dir / "check.json").read_text())
    return result.exit_code, data


def app_for_report():
    from tbscale.cli import app

    return app


def engine_caps() -> dict[str, bool]:
    from tbscale.environments.docker import engine_capabilities

    return engine_capabilities()


def test_every_conformance_task_passes_its_oracle_and_fails_its_nop(tmp_path: Path) -> None:
    code, data = check(CONFORMANCE, tmp_path / "run", "--storage-limit", "enforce")
    reasons = {t: (r["category"], r["detail"]) for t, r in data["reasons"].items()}
    tasks = sorted(p.name for p in CONFORMANCE.iterdir() if p.is_dir())
    assert sorted(reasons) == tasks and len(tasks) == 30
    caps = engine_caps()
    expected_refusals = {t for t, key in (("gpu-required", "gpus"), ("storage-limit", "storage_quota"))
                         if not caps[key]}
    for task, (category, detail) in reasons.items():
        if task in expected_refusals:
            assert category == "refused" and re.match(REFUSED_HERE[task], detail), (task, detail)
            assert "\n" not in detail
        else:
            assert category == "ok", (task, category, detail)
    assert code == (1 if expected_refusals else 0)
    rows = [json.loads(x) for x in (tmp_path / "run" / "trials.jsonl").read_text().splitlines()]
    by = {(r["task_id"], r["setting"]): r for r in rows}
    # reward.json keys are all kept, and the trial line says which one is the reward
    assert by["reward-json-keys", "oracle"]["rewards"] == {"reward": 1.0, "correctness": 1.0, "style": 0.5}
    assert by["reward-json-keys", "oracle"]["reward_key"] == "reward"
    assert by["reward-sole-key", "oracle"]["reward_key"] == "score"
    # multi-step: per-step rewards, gating, and the strategies
    final_nop = by["multi-step-final", "nop"]["steps"]
    assert [s["skipped"] for s in final_nop] == [False, True, True]
    assert by["multi-step-mean", "nop"]["reward"] == pytest.approx(1 / 3)
    assert [s["reward"] for s in by["multi-step-mean", "oracle"]["steps"]] == [1.0, 1.0, 1.0]
    # artifacts are collected into the run folder, with a manifest
    art = tmp_path / "run" / by["separate-verifier", "oracle"]["artifacts_path"]
    assert (art / "app" / "report.json").is_file() and (art / "collected" / "out" / "a.txt").is_file()
    assert not (art / "collected" / "out" / "skip.tmp").exists()
    assert (art / "logs" / "artifacts" / "published.txt").read_text().strip() == "published"
    assert {m.source: m.status for m in read_artifact_manifest(art)}["/app/out"] == "ok"
    # refusals are infrastructure errors (left out of pass@1), with the key in the message
    for task in expected_refusals:
        row = by[task, "oracle"]
        assert row["stop_reason"] == "task_refused" and row["infra_error"]
    # the report shows each step and the reward keys (issue 9: "per-step rewards in the report")
    report = CliRunner().invoke(app_for_report(), ["report", str(tmp_path / "run"), "--no-plots", "--format", "json"])
    assert report.exit_code == 0, report.output
    sections = json.loads(report.stdout)["tables"]
    steps = {(r["setting"], r["task"], r["step"]): r for r in sections["steps"]}
    gated = [r for (setting, task, _), r in sorted(steps.items()) if (setting, task) == ("nop", "multi-step-final")]
    assert [r["reached"] for r in gated] == [1.0, 0.0, 0.0] and gated[0]["passed"] == 0.0
    mean_oracle = [r for (setting, task, _), r in sorted(steps.items()) if (setting, task) == ("oracle", "multi-step-mean")]
    assert len(mean_oracle) == 3 and all(r["mean_reward"] == 1.0 and r["passed"] == 1.0 for r in mean_oracle)
    keys = {(r["setting"], r["task"]): r for r in sections["reward_keys"]}
    assert keys["oracle", "reward-json-keys"]["reward_key"] == "reward"
    assert "style=0.5" in keys["oracle", "reward-json-keys"]["key_means"]


def _copy(name: str, dest: Path, edit) -> Path:
    target = dest / name
    shutil.copytree(CONFORMANCE / name, target)
    toml = target / "task.toml"
    toml.write_text(edit(toml.read_text()))
    return target


def test_the_keys_are_acted_on_removing_one_breaks_its_task(tmp_path: Path) -> None:
    """Each copy loses the key its task pins down: its oracle must now fail (or its nop pass)."""
    root = tmp_path / "mutated"
    root.mkdir()
    _copy("workdir", root, lambda t: t.replace('workdir = "/srv/work"', ""))
    _copy("agent-user", root, lambda t: t.replace('user = "agent"', ""))
    _copy("healthcheck", root, lambda t: t[:t.index("\n[environment.healthcheck]")])
    _copy("network-phase-overrides", root, lambda t: t.replace('network_mode = "no-network"', "", 1))
    _copy("separate-verifier", root, lambda t: t[:t.index("\n[verifier.environment]")] + t[t.index("\n[verifier.env]"):])
    _copy("env-tables", root, lambda t: t.replace('CONF_ENV_MAIN = "from-environment"', ""))
    _copy("multi-step-final", root, lambda t: t.replace("min_reward = { ready = 1.0 }", "")
          .replace("min_reward = 1.0", ""))
    code, data = check(root, tmp_path / "run")
    reasons = {t: r["category"] for t, r in data["reasons"].items()}
    assert code == 1 and data["broken"] == []
    expected = {"workdir": "oracle failed", "agent-user": "oracle failed", "healthcheck": "oracle failed",
                "network-phase-overrides": "oracle failed", "separate-verifier": "oracle failed",
                "env-tables": "oracle failed", "multi-step-final": "nop passed"}
    assert reasons == expected


def test_network_override_public_breaks_the_no_network_task(tmp_path: Path) -> None:
    """`tasks check --network public` overrides the task's no-network policy: its oracle now
    reaches the sidecar and fails its test."""
    code, data = check(CONFORMANCE, tmp_path / "run", "--include", "network-no-network,network-public",
                       "--network", "public")
    assert {t: r["category"] for t, r in data["reasons"].items()} == {"network-no-network": "oracle failed",
                                                                       "network-public": "ok"}


def test_compose_projects_leave_nothing_behind(tmp_path: Path) -> None:
    """A compose trial, and one that fails its healthcheck, take their whole project down."""
    from tbscale_testing.tasks import write_harbor_task

    sick = write_harbor_task(tmp_path / "tasks", "sick-compose",
                             task_toml="[agent]\ntimeout_sec = 30\n[verifier]\ntimeout_sec = 30\n"
                                       "[environment.healthcheck]\ncommand = \"false\"\ninterval_sec = 0.2\n"
                                       "retries = 2\n")
    (sick / "environment" / "docker-compose.yaml").write_text(
        "services:\n  side:\n    image: debian:bookworm-slim\n    command: [\"sleep\", \"infinity\"]\n")
    run_label = f"org.tbscale.run={(tmp_path / 'run').resolve()}"
    with ContainerCreations(run_label) as created:
        code, data = check(tmp_path / "tasks", tmp_path / "run")
    assert data["reasons"]["sick-compose"][("category")] == "environment error"
    assert "healthcheck_failed" in data["reasons"]["sick-compose"]["detail"]
    rows = [json.loads(x) for x in (tmp_path / "run" / "trials.jsonl").read_text().splitlines()]
    keys = {r["trial_key"] for r in rows}
    for key in keys:
        left = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=org.tbscale.trial={key}"],
                              capture_output=True, text=True).stdout.split()
        assert left == []
    # The projects this run made, named by the engine's own record of its containers (other tests
    # on the engine make projects and networks at the same time): none left a network behind.
    services: dict[str, set] = {}
    for e in created.events:
        attrs = e["Actor"]["Attributes"]
        if attrs.get("com.docker.compose.project"):
            services.setdefault(attrs["com.docker.compose.project"], set()).add(attrs["com.docker.compose.service"])
    projects = set(services)
    assert len(projects) == len(rows) == 2, (projects, rows)  # oracle and nop, a project each
    # Each project's containers, the main one too (only tbscale defines it here), carry the run's labels.
    assert all(s == {"main", "side"} for s in services.values()), services
    networks = subprocess.run(["docker", "network", "ls", "--format", "{{.Name}}"], capture_output=True,
                              text=True, check=True).stdout.split()
    assert [n for n in networks if any(n.startswith(p) for p in projects)] == []


def test_storage_mb_runs_unenforced_by_default_and_says_so(tmp_path: Path) -> None:
    """Harbor's Docker backend never applies storage_mb; on an engine without quotas tbscale runs
    the task without it by default, says so once, and records it in the manifest, the trial line
    and the report. (On an engine with quotas it is enforced and nothing is said.)"""
    if engine_caps()["storage_quota"]:
        pytest.skip("this engine enforces storage quotas")
    from tbscale.cli import app

    result = CliRunner().invoke(app, ["tasks", "check", str(CONFORMANCE), "--include", "storage-limit",
                                      "--keep", str(tmp_path / "run")])
    assert "not enforced here: [environment].storage_mb (1 task: storage-limit)" in result.output, result.output
    data = json.loads((tmp_path / "run" / "check.json").read_text())
    # the task's own test demands the quota, so its oracle fails, and the reason names the key
    assert data["reasons"]["storage-limit"]["category"] == "oracle failed"
    assert "[environment].storage_mb" in data["reasons"]["storage-limit"]["detail"]
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert [(e["key"], e["tasks"]) for e in manifest["not_enforced"]] == [("[environment].storage_mb", ["storage-limit"])]
    rows = [json.loads(x) for x in (tmp_path / "run" / "trials.jsonl").read_text().splitlines()]
    assert all(r["not_enforced"][0]["key"] == "[environment].storage_mb" and r["stop_reason"] != "task_refused"
               for r in rows) and len(rows) == 2
    report = CliRunner().invoke(app, ["report", str(tmp_path / "run"), "--no-plots", "--format", "json"])
    summary = json.loads(report.stdout)
    assert summary["tables"]["not_enforced"][0]["key"] == "[environment].storage_mb"
    assert any(b.startswith("NOT ENFORCED HERE") for b in summary["banners"])


def test_a_task_needing_an_unset_host_variable_is_refused_not_crashed(tmp_path: Path, monkeypatch) -> None:
    """A `${VAR}` in [environment.env] the host does not set: each trial is refused, naming the file,
    table, key and variable, before any container starts; the check goes on with the other tasks."""
    from tbscale_testing.tasks import write_harbor_task

    monkeypatch.delenv("TBSCALE_NEVER_SET_TOKEN", raising=False)
    write_harbor_task(tmp_path / "tasks", "needs-token",
                      task_toml='[environment.env]\nTOKEN = "${TBSCALE_NEVER_SET_TOKEN}"\n')
    write_harbor_task(tmp_path / "tasks", "plain")
    run_label = f"org.tbscale.run={(tmp_path / 'run').resolve()}"
    with ContainerCreations(run_label) as created:
        code, data = check(tmp_path / "tasks", tmp_path / "run")
    assert code == 1 and data["reasons"]["plain"]["category"] == "ok"
    reason = data["reasons"]["needs-token"]
    assert reason["category"] == "refused", reason
    assert reason["detail"].startswith(f"{tmp_path / 'tasks' / 'needs-token' / 'task.toml'}: [environment.env]: "
                                       'TOKEN = "${TBSCALE_NEVER_SET_TOKEN}" needs the host environment variable')
    rows = [json.loads(x) for x in (tmp_path / "run" / "trials.jsonl").read_text().splitlines()]
    refused = [r for r in rows if r["task_id"] == "needs-token"]
    assert len(refused) == 2 and all(r["stop_reason"] == "task_refused" and r["infra_error"] for r in refused)
    assert not (tmp_path / "run" / "crashes.log").exists()
    labels = [e["Actor"]["Attributes"].get("org.tbscale.trial") for e in created.events]
    assert not {r["trial_key"] for r in refused} & set(labels)  # no container started for them


def test_the_reward_key_picks_which_key_of_reward_json_is_the_verdict(tmp_path: Path) -> None:
    """reward-json-keys writes {reward: 1, correctness: 1, style: 0.5}: with `--reward-key style` its
    oracle scores 0.5 and fails; every key is still kept. A config's `tasks.reward_key` is the same
    key and is part of the setting's identity only when given."""
    from tbscale.config import Experiment
    from tbscale.runner.identity import setting_identity

    code, data = check(CONFORMANCE, tmp_path / "run", "--include", "reward-json-keys", "--reward-key", "style")
    assert code == 1 and data["reasons"]["reward-json-keys"]["category"] == "oracle failed"
    rows = {r["setting"]: r for r in map(json.loads, (tmp_path / "run" / "trials.jsonl").read_text().splitlines())}
    oracle = rows["oracle"]
    assert (oracle["reward"], oracle["passed"], oracle["reward_key"]) == (0.5, False, "style")
    assert oracle["rewards"] == {"reward": 1.0, "correctness": 1.0, "style": 0.5}
    base = {"name": "e", "tasks": {"path": str(CONFORMANCE)}, "settings": [{"name": "oracle", "agent": "oracle"}]}
    plain = Experiment.model_validate(base)
    keyed = Experiment.model_validate({**base, "tasks": {"path": str(CONFORMANCE), "reward_key": "style"}})
    assert "reward_key" not in setting_identity(plain, plain.settings[0])
    assert setting_identity(keyed, keyed.settings[0])["reward_key"] == "style"
    from tbscale.runner.plan import experiment_tasks  # what `tbscale run` loads

    loaded = {t.id: t for t in experiment_tasks(keyed, ["reward-json-keys", "reward-sole-key"])}
    assert {t: task.reward.primary_key for t, task in loaded.items()} == {"reward-json-keys": "style",
                                                                          "reward-sole-key": "style"}
