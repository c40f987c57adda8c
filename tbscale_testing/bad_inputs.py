"""Bad inputs and what tbscale must answer to each: the exit code and a piece of the first line it
prints. One list, read by the test (tests/test_bad_input.py) and by the script that prints the
table for a report (scripts/bad_input_table.py), so the table always says what the test checks.

`make_inputs(root)` writes every file the cases name under `root` (configs, tasks, run folders,
imports) and starts a loopback model server that wants a key; `run_case` runs one case in this
process through typer's runner, or, for a case that needs a read-only folder, in a subprocess in a
private mount namespace (`unshare -m`) where that folder is mounted read-only. No case starts a
container or reaches a remote host.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from tbscale_testing.openai_server import LoopbackModel
from tbscale_testing.tasks import write_harbor_task

GOOD_KEY = "sk-loopback-right-7f3a9c2e41"
BAD_KEY = "sk-loopback-wrong-0b8d6e5f93"


@dataclass
class Case:
    name: str
    argv: list[str]  # "{root}" stands for the inputs' folder, "{api}" for the loopback server's URL
    code: int
    first_line: str  # a piece of the first line printed
    env: dict[str, str | None] = field(default_factory=dict)  # None: unset
    readonly: str | None = None  # a folder mounted read-only for the command
    # What must hold afterwards (a file that must survive, a folder that must not appear): root -> ok
    check: Callable[[Path], bool] | None = None
    absent: str | None = None  # text that must not be printed (a key)
    from_issue: bool = False
    litellm: bool = False  # the command resolves a model through litellm in its process (tests/conftest.py)


def _config(root: Path, name: str, *, extra: str = "", models: str | None = None, settings: str | None = None,
            output_dir: str | None = None, head: str = "") -> Path:
    models = models or "{gen: {model: sim/policy}}"
    settings = settings or "[{name: base, generator: gen}]"
    text = head + "".join(f"{line}\n" for line in [
        f"name: {name.replace('.yaml', '')}", f"tasks: {{path: {root / 'tasks'}}}",
        f"output_dir: {output_dir or root / 'results'}", f"models: {models}", f"settings: {settings}"]) + extra
    path = root / name
    path.write_text(text)
    return path


def _harbor_job(job: Path) -> None:
    """A Harbor job folder with one passing trial (what `tbscale import` reads)."""
    d = job / "t__1"
    (d / "agent").mkdir(parents=True)
    (d / "verifier").mkdir()
    (d / "result.json").write_text(json.dumps({
        "id": "0", "task_name": "t", "trial_name": "t__1", "trial_uri": f"file://{d}", "task_id": {"path": "tasks/t"},
        "source": "x", "task_checksum": "abc", "config": {"agent": {"name": "terminus-2"}},
        "agent_info": {"name": "terminus-2", "version": "1", "model_info": {"name": "gpt-5", "provider": "openai"}},
        "agent_result": {"n_input_tokens": 10, "n_output_tokens": 5, "cost_usd": 0.0},
        "verifier_result": {"rewards": {"reward": 1.0}}, "exception_info": None,
        "started_at": "2026-01-01T10:00:00", "finished_at": "2026-01-01T10:00:01"}))
    (d / "verifier" / "test-stdout.txt").write_text("ok\n")


def trial_line(run: str, trial: int, **over) -> dict:
    row = {"schema_version": 2, "run": run, "setting": "base", "setting_key": "k1", "trial_key": f"t{trial}",
           "task_id": "ok-task", "trial": trial, "ending": "pass", "passed": True, "reward": 1.0}
    row.update(over)
    return row


def write_run(root: Path, name: str, lines: list[str], planned: int = 4, stopped: str | None = None,
              torn: bool = False) -> Path:
    """A run folder as `tbscale run` leaves it: a manifest naming its plan, and these trial lines
    (with `torn`, the last one lacks its newline, as a write cut short by a crash leaves it)."""
    run = root / "results" / name
    run.mkdir(parents=True)
    invocation = {"started_at": "2026-01-01T10:00:00+00:00", "finished_at": "2026-01-01T10:01:00+00:00"}
    if stopped:
        invocation["stopped"] = stopped
    (run / "manifest.json").write_text(json.dumps({
        "schema_version": 2, "run_name": name, "setting_keys": {"base": "k1"},
        "current": {"settings": ["base"], "setting_keys": {"base": "k1"}, "trials": planned, "seed": 0,
                    "task_hashes": {"ok-task": "h"}, "planned_trials": {"base": planned}},
        "invocations": [invocation]}))
    (run / "trials.jsonl").write_text("\n".join(lines) + ("" if torn else "\n"))
    return run


def make_inputs(root: Path, api: str) -> None:
    """Every file the cases below name, under `root`; `api` is the loopback server's URL."""
    root.mkdir(parents=True, exist_ok=True)
    write_harbor_task(root / "tasks", "ok-task")
    _config(root, "good.yaml")
    (root / "not-yaml.yaml").write_text("name: [unclosed\n")
    _config(root, "typo.yaml", extra="trails: 3\n")
    _config(root, "unknown-policy.yaml", settings="[{name: base, generator: gen, policy: {name: bon}}]")
    real = "{gen: {model: sim/policy}, real: {model: openai/gpt-4o-mini, api_key_env: TBSCALE_TEST_UNSET_KEY}}"
    _config(root, "real.yaml", models=real, settings="[{name: base, generator: real}]")
    bad_task = write_harbor_task(root / "bad-tasks", "latin1")
    (bad_task / "task.toml").write_bytes("[agent]\ntimeout_sec = 60 # caf\xe9\n".encode("latin-1"))
    _config(root, "mixed.yaml", models=real,
            settings="[{name: mixed, generator: real, policy: {name: turn_bon, n: 2, selector: gen}}]")
    # What the issue names
    _config(root, "not-a-url.yaml", models="{gen: {model: openai/x, api_base: not-a-url}}")
    (root / "a-file.txt").write_text("x")
    _config(root, "under-a-file.yaml", output_dir=str(root / "a-file.txt" / "results"))
    _config(root, "in-proc.yaml", output_dir="/proc/tbscale-results")
    (root / "ro").mkdir()
    _config(root, "read-only.yaml", output_dir=str(root / "ro" / "results"))
    _config(root, "huge-trials.yaml", extra="trials: 1000000000\n")
    # Nine lists of nine aliases to the list before: 9**9 (387 million) values once expanded.
    levels = "".join(f"  l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]\n" for i in range(1, 10))
    _config(root, "alias-bomb.yaml", models="{gen: {model: sim/policy, extra_params: {lol: *l9}}}",
            head="x-anchors:\n  l0: &l0 [lol]\n" + levels)
    (root / "duplicate-key.yaml").write_text((root / "good.yaml").read_text() + "name: other\n")
    _config(root, "empty-model.yaml", models='{gen: {model: ""}}')
    _config(root, "empty-key.yaml", models=f"{{gen: {{model: openai/scripted, api_base: '{api}', "
                                           "api_key_env: TBSCALE_TEST_EMPTY_KEY}}")
    _config(root, "missing-prompt.yaml", extra=f"prompts: {{system: {root / 'no-such-prompt.j2'}}}\n")
    (root / "broken.j2").write_text("You work in {{ workdir }.\n{% if action_format %}\n")
    _config(root, "broken-jinja.yaml", extra=f"prompts: {{system: {root / 'broken.j2'}}}\n")
    (root / "typo-var.j2").write_text("Task: {{ instrution }}\n")
    _config(root, "undefined-var.yaml", extra=f"prompts: {{instance: {root / 'typo-var.j2'}}}\n")
    _config(root, "unknown-template.yaml", extra=f"prompts: {{sytem: {root / 'broken.j2'}}}\n")
    write_harbor_task(root / "bad-image-tasks", "prebuilt",
                      task_toml='[environment]\ndocker_image = "My Image:latest"\n[agent]\ntimeout_sec = 60\n')
    (root / "bad-image.yaml").write_text((root / "good.yaml").read_text().replace(
        str(root / "tasks"), str(root / "bad-image-tasks")))
    _config(root, "wrong-key.yaml", models=f"{{gen: {{model: openai/scripted, api_base: '{api}', "
                                           "api_key_env: TBSCALE_TEST_WRONG_KEY}}")
    _config(root, "no-key-sent.yaml", models=f"{{gen: {{model: openai/scripted, api_base: '{api}'}}}}")
    # The same classes elsewhere
    _config(root, "docker-host.yaml", extra="environment: {docker_host: 'not a host'}\n")
    _config(root, "setting-name.yaml", settings="[{name: ../up, generator: gen}]")
    _config(root, "huge-concurrency.yaml", extra="concurrency: 1000000\n")
    _config(root, "huge-turns.yaml", extra="limits: {max_turns: 1000000000}\n")
    _config(root, "huge-n.yaml", settings="[{name: base, generator: gen, policy: {name: turn_bon, n: 1000}}]")
    _config(root, "nan-timeout.yaml", models="{gen: {model: sim/policy, timeout_sec: .nan}}")
    _config(root, "key-as-name.yaml", models="{gen: {model: openai/x, api_key_env: sk-proj-abc123def456}}")
    _config(root, "no-provider.yaml", models="{gen: {model: mymodel, api_key_env: TBSCALE_TEST_ANY_KEY}}")
    _config(root, "recursive-alias.yaml", extra="description: &d [*d]\n")
    (root / "big.yaml").write_text("description: " + "x" * 6_000_000 + "\n")
    # Sweeps
    (root / "sweep-date.yaml").write_text(f"name: s\nconfigs: [{root / 'good.yaml'}]\ndate: ../../escape\n"
                                          f"output_dir: {root / 'sweeps'}\nhistory: {root / 'h.jsonl'}\n")
    (root / "missing-tasks.yaml").write_text((root / "good.yaml").read_text().replace(
        f"tasks: {{path: {root / 'tasks'}}}", "tasks: {path: nowhere-tasks}"))
    (root / "sweep-dup.yaml").write_text(f"name: s\nconfigs: [{root / 'good.yaml'}]\nname: t\n")
    # The first point is good and gets its run folder; the second names a key that is not set.
    (root / "sweep-later-point.yaml").write_text(f"name: s\nconfigs: [{root / 'good.yaml'}, {root / 'real.yaml'}]\n"
                                                 f"output_dir: {root / 'sweeps-later'}\n"
                                                 f"history: {root / 'sweeps-later' / 'h.jsonl'}\n")
    (root / "sweep-history-folder.yaml").write_text(f"name: s\nconfigs: [{root / 'good.yaml'}]\n"
                                                    f"output_dir: {root / 'sweeps'}\nhistory: {root}\n")
    (root / "judge-dup.yaml").write_text("model: sim/rubric_judge\nmodel: sim/other\n")
    # History files
    (root / "history-unreadable.jsonl").write_text('not json\n{"sweep": "s"}\n{"date": 5}\n')
    (root / "history-empty.jsonl").write_text("")
    # Run folders
    bad = write_run(root, "garbage-run", ["not json", json.dumps({"also": "not a trial"})])
    (bad / "manifest.json").unlink()
    good = [json.dumps(trial_line("torn-run", i)) for i in range(3)]
    write_run(root, "torn-run", [good[0], '{"schema_version": 2, "run": "torn', good[1], good[2][:40]], torn=True)
    nan = json.dumps(trial_line("nan-run", 1, reward=float("nan")))
    write_run(root, "nan-run", [json.dumps(trial_line("nan-run", 0, passed=False, ending="wrong_submission",
                                                      reward=0.0)), nan])
    write_run(root, "fake-pass-run", [json.dumps(trial_line("fake-pass-run", 0, reward=0.0)),
                                      json.dumps(trial_line("fake-pass-run", 1, passed=False,
                                                            ending="wrong_submission", reward=0.0))])
    write_run(root, "stopped-run", [json.dumps(trial_line("stopped-run", 0, passed=False, ending="agent_error",
                                                          reward=None, stop_reason="model_error",
                                                          infra_error=True))],
              planned=24, stopped="model openai/x: the provider rejected the key on 5 consecutive tries")
    write_run(root, "ro-run", [json.dumps(trial_line("ro-run", i)) for i in range(2)], planned=2)
    write_run(root, "ok-run", [json.dumps(trial_line("ok-run", i)) for i in range(2)], planned=2)
    write_run(root, "bad-judge-run", [json.dumps(trial_line("bad-judge-run", i)) for i in range(2)], planned=2)
    (root / "results" / "bad-judge-run" / "judge").mkdir()
    (root / "results" / "bad-judge-run" / "judge" / "manifest.json").write_text('{"judge_key": 3, "history": []}')
    (root / "not-a-viewer").mkdir()
    (root / "not-a-viewer" / "notes.txt").write_text("mine\n")
    # Imports
    _harbor_job(root / "job")
    (root / "victim").mkdir()
    (root / "victim" / "important.txt").write_text("keep me\n")
    (root / "results" / "plain-folder").mkdir()
    (root / "results" / "plain-folder" / "mine.txt").write_text("keep me too\n")


def _victim_safe(root: Path) -> bool:
    return (root / "victim" / "important.txt").read_text() == "keep me\n"


CASES: list[Case] = [
    # --- names that would become paths ---------------------------------------------------------
    Case("import --name ../../victim --force", ["import", "{root}/job", "--name", "../../victim", "--force",
                                                "--output-dir", "{root}/results/sub"], 2,
         "--name: '../../victim' must be letters", check=_victim_safe, from_issue=True),
    Case("import --force over a folder that is not a run", ["import", "{root}/job", "--name", "plain-folder",
                                                            "--force", "--output-dir", "{root}/results"], 2,
         "holds no manifest.json written by tbscale",
         check=lambda root: (root / "results" / "plain-folder" / "mine.txt").is_file()),
    Case("run --run-name ../escaped", ["run", "{root}/good.yaml", "--run-name", "../escaped"], 2,
         "--run-name: '../escaped' must be letters", check=lambda root: not (root / "escaped").exists(),
         from_issue=True),
    Case("run --run-name /abs/path", ["run", "{root}/good.yaml", "--run-name", "{root}/abs-run"], 2,
         "must be letters, digits", check=lambda root: not (root / "abs-run").exists(), from_issue=True),
    Case("run --run-name a/b", ["run", "{root}/good.yaml", "--run-name", "a/b"], 2, "--run-name: 'a/b' must be"),
    Case("import --name ../x", ["import", "{root}/job", "--name", "../x", "--output-dir", "{root}/results"], 2,
         "--name: '../x' must be letters", check=lambda root: not (root / "x").exists(), from_issue=True),
    Case("import --name /abs", ["import", "{root}/job", "--name", "{root}/abs-import"], 2, "must be letters, digits",
         check=lambda root: not (root / "abs-import").exists(), from_issue=True),
    Case("a setting named ../up", ["run", "{root}/setting-name.yaml"], 2, "settings[0].name: '../up' must be"),
    Case("sweep date ../../escape", ["sweep", "{root}/sweep-date.yaml"], 2, "date: '../../escape' must be"),
    # --- URLs and paths ------------------------------------------------------------------------
    Case("api_base: not-a-url", ["run", "{root}/not-a-url.yaml"], 2,
         "models.gen.api_base: 'not-a-url' is not a URL", from_issue=True),
    Case("docker_host: not a host", ["run", "{root}/docker-host.yaml"], 2, "environment.docker_host: 'not a host'"),
    Case("rewards --api-base not-a-url", ["rewards", "{root}/results/ok-run", "--model", "openai/x",
                                          "--api-base", "not-a-url"], 2, "api_base: 'not-a-url' is not a URL"),
    Case("clean --docker-host not-a-url", ["clean", "--docker-host", "not-a-url"], 2, "--docker-host: 'not-a-url'"),
    Case("output_dir under a file", ["run", "{root}/under-a-file.yaml"], 2, "a part of the path is a file",
         from_issue=True),
    Case("output_dir in /proc", ["run", "{root}/in-proc.yaml"], 2, "output_dir /proc/tbscale-results: cannot be",
         from_issue=True),
    Case("output_dir read-only", ["run", "{root}/read-only.yaml"], 2, "Read-only file system", readonly="{root}/ro",
         from_issue=True),
    Case("report on a read-only run", ["report", "{root}/results/ro-run", "--no-plots"], 2,
         "report folder {root}/results/ro-run/report: cannot be written (Read-only file system)",
         readonly="{root}/results/ro-run", from_issue=True),
    Case("report --out under a file", ["report", "{root}/results/ok-run", "--out", "{root}/a-file.txt/r"], 2,
         "a part of the path is a file"),
    Case("view --out a folder that is not a viewer", ["view", "{root}/results/ok-run", "--out", "{root}/not-a-viewer"],
         2, "not-a-viewer: exists and is not a viewer folder",
         check=lambda root: (root / "not-a-viewer" / "notes.txt").is_file()),
    Case("export -o in /proc", ["export", "verifier-data", "{root}/results/ok-run", "-o", "/proc/tbscale.jsonl"], 2,
         "/proc"),
    Case("sweep history is a folder", ["sweep", "{root}/sweep-history-folder.yaml"], 2, "is a folder, not a file"),
    Case("history on a folder", ["history", "{root}"], 2, "a folder, not a history file"),
    # --- bounds ---------------------------------------------------------------------------------
    Case("trials: 1000000000", ["run", "{root}/huge-trials.yaml"], 2,
         "trials: 1,000,000,000 is above the limit of 10,000", from_issue=True),
    Case("--trials 1000000000", ["run", "{root}/good.yaml", "--trials", "1000000000"], 2,
         "--trials: 1,000,000,000 is above the limit"),
    Case("concurrency: 1000000", ["run", "{root}/huge-concurrency.yaml"], 2, "concurrency: 1,000,000 is above"),
    Case("max_turns: 1000000000", ["run", "{root}/huge-turns.yaml"], 2, "limits.max_turns: 1,000,000,000 is above"),
    Case("turn_bon n: 1000", ["run", "{root}/huge-n.yaml"], 2, "settings[0].policy.n: Input should be less than"),
    Case("tasks check --concurrency 1000000", ["tasks", "check", "{root}/tasks", "--concurrency", "1000000"], 2,
         "--concurrency: 1,000,000 is above"),
    Case("YAML alias bomb in extra_params", ["run", "{root}/alias-bomb.yaml"], 2,
         "expands to more than 1,000,000 values through its aliases", from_issue=True),
    Case("YAML recursive alias", ["run", "{root}/recursive-alias.yaml"], 2, "recursive alias"),
    Case("YAML file of 6 MB", ["run", "{root}/big.yaml"], 2, "larger than the limit of 5,000,000 bytes"),
    Case("config /dev/zero", ["run", "/dev/zero"], 2, "larger than the limit"),
    # --- refused at load ------------------------------------------------------------------------
    Case("duplicate YAML key", ["run", "{root}/duplicate-key.yaml"], 2,
         "line 6: duplicate key 'name' (first given at line 1)", from_issue=True),
    Case("duplicate key in a sweep file", ["sweep", "{root}/sweep-dup.yaml"], 2, "line 3: duplicate key 'name'"),
    Case("duplicate key in a judge config", ["judge", "{root}/results/ok-run", "--config", "{root}/judge-dup.yaml"],
         2, "line 2: duplicate key 'model'"),
    Case('model: ""', ["run", "{root}/empty-model.yaml"], 2, "models.gen.model: must not be empty", from_issue=True),
    Case("empty key variable", ["run", "{root}/empty-key.yaml"], 2,
         "TBSCALE_TEST_EMPTY_KEY (api_key_env) is set but empty", env={"TBSCALE_TEST_EMPTY_KEY": ""},
         from_issue=True, litellm=True),
    Case("a key where its variable's name goes", ["run", "{root}/key-as-name.yaml"], 2,
         "models.gen.api_key_env: not an environment variable name", absent="abc123def456"),
    Case("timeout_sec: .nan", ["run", "{root}/nan-timeout.yaml"], 2, "models.gen.timeout_sec: Input should be a finite"),
    Case("a model string with no provider", ["run", "{root}/no-provider.yaml"], 2,
         "models.gen.model: litellm cannot tell the provider of 'mymodel'", env={"TBSCALE_TEST_ANY_KEY": "x" * 8}, litellm=True),
    # --- refused before the first container -----------------------------------------------------
    Case("missing prompt file", ["run", "{root}/missing-prompt.yaml"], 2, "prompts.system:", from_issue=True),
    Case("broken Jinja template", ["run", "{root}/broken-jinja.yaml"], 2, "not a valid Jinja template",
         from_issue=True),
    Case("template with an undefined variable", ["run", "{root}/undefined-var.yaml"], 2,
         "does not render ('instrution' is undefined"),
    Case("unknown template name", ["run", "{root}/unknown-template.yaml"], 2, "prompts.sytem: unknown template"),
    Case("prebuilt image 'My Image:latest'", ["run", "{root}/bad-image.yaml"], 2,
         "its image 'My Image:latest' is not a valid image reference"),
    # --- preflight ------------------------------------------------------------------------------
    Case("endpoint answers 401 to the key", ["run", "{root}/wrong-key.yaml"], 2,
         "refused the key: 401 Unauthorized: Incorrect API key provided: ***",
         env={"TBSCALE_TEST_WRONG_KEY": BAD_KEY}, absent=BAD_KEY, from_issue=True, litellm=True),
    Case("endpoint wants a key, none named", ["run", "{root}/no-key-sent.yaml"], 2, "wants a key and none was sent", litellm=True),
    Case("models check, endpoint answers 401", ["models", "check", "{root}/wrong-key.yaml"], 1, "models of",
         env={"TBSCALE_TEST_WRONG_KEY": BAD_KEY}, absent=BAD_KEY),
    # --- broken lines read around ---------------------------------------------------------------
    Case("report: torn and corrupt lines, with a manifest", ["report", "{root}/results/torn-run", "--no-plots"], 0,
         "warning: {root}/results/torn-run/trials.jsonl: skipped 1 unreadable line: line 2 (not JSON); and a torn "
         "last line (line 4", from_issue=True),
    Case("view: torn and corrupt lines", ["view", "{root}/results/torn-run"], 0,
         "warning: {root}/results/torn-run/trials.jsonl:2: skipped a line"),
    Case("view: reward NaN", ["view", "{root}/results/nan-run"], 0,
         "warning: {root}/results/nan-run/trials.jsonl:2: skipped a line (reward: Input should be a finite number)"),
    Case("report: reward NaN", ["report", "{root}/results/nan-run", "--no-plots"], 0,
         "line 2 (reward: Input should be a finite number)", from_issue=True),
    Case("report: passed with reward 0", ["report", "{root}/results/fake-pass-run", "--no-plots"], 0,
         "line 1 (passed: true with reward 0.0"),
    Case("report: a run the breaker stopped", ["report", "{root}/results/stopped-run", "--no-plots"], 0,
         "INCOMPLETE: 1 of 24 planned trials have finished", from_issue=True),
    Case("history --check, no readable line", ["history", "{root}/history-unreadable.jsonl", "--check"], 2,
         "no readable history line (3 unreadable", from_issue=True),
    Case("history --check, empty file", ["history", "{root}/history-empty.jsonl", "--check"], 2,
         "no readable history line (0 unreadable)"),
    Case("report with a judge manifest it cannot read", ["report", "{root}/results/bad-judge-run"], 2,
         "bad-judge-run/judge/manifest.json: not a judge manifest (judge_key: Input should be a valid string)",
         check=lambda root: not (root / "results" / "bad-judge-run" / "report").exists()),
    Case("report on unparsable lines", ["report", "{root}/results/garbage-run"], 2,
         "trials.jsonl has no readable trial lines (2 unreadable; first:"),
    # --- clean ------------------------------------------------------------------------------------
    Case("clean --all, not confirmed", ["clean", "--all"], 2, "--all: not confirmed, nothing removed"),
    # --- the command line itself ------------------------------------------------------------------
    Case("unknown option", ["run", "{root}/good.yaml", "--bogus"], 2, "tbscale run: No such option: --bogus"),
    Case("--trials abc", ["run", "{root}/good.yaml", "--trials", "abc"], 2, "Invalid value for '--trials'"),
    Case("config is a folder", ["run", "{root}"], 2, "is a folder, not a YAML file"),
    # --- kept from before -------------------------------------------------------------------------
    Case("missing config", ["run", "{root}/nope.yaml"], 2, "nope.yaml: no such file"),
    Case("config not YAML", ["run", "{root}/not-yaml.yaml"], 2, "not-yaml.yaml: line 2: not valid YAML"),
    Case("unknown key", ["run", "{root}/typo.yaml"], 2, "typo.yaml: trails: unknown key"),
    Case("unknown policy", ["run", "{root}/unknown-policy.yaml"], 2, "settings[0].policy.name: unknown policy 'bon'"),
    Case("--trials 0", ["run", "{root}/good.yaml", "--trials", "0"], 2, "--trials: must be at least 1, got 0"),
    Case("--concurrency 0", ["run", "{root}/good.yaml", "--concurrency", "0"], 2, "--concurrency: must be at least 1"),
    Case("a simulated role beside a real one", ["run", "{root}/mixed.yaml"], 2,
         "simulated roles (selector 'gen' (sim/policy)) beside real ones"),
    Case("missing key variable", ["run", "{root}/real.yaml"], 2,
         "models.real: the environment variable TBSCALE_TEST_UNSET_KEY (api_key_env) is not set",
         env={"TBSCALE_TEST_UNSET_KEY": None}, litellm=True),
    Case("tasks show: no such folder, --path absent", ["tasks", "show", "{root}/nowhere-task", "--path",
                                                         "{root}/nowhere-dir"], 2,
         "{root}/nowhere-task: no such task folder; as a task id it is looked up under --path {root}/nowhere-dir, "
         "which does not exist"),
    Case("run --tasks naming no task", ["run", "{root}/good.yaml", "--tasks", "zzz"], 2,
         "{root}/tasks: no task named zzz here; its tasks: ok-task"),
    Case("tasks.path names nothing", ["run", "{root}/missing-tasks.yaml"], 2,
         "{root}/missing-tasks.yaml: tasks.path: nowhere-tasks: no such file or directory (looked beside the "
         "config, {root}/nowhere-tasks, and in the working directory)"),
    Case("sweep: a later point's key variable is missing", ["sweep", "{root}/sweep-later-point.yaml"], 2,
         "models.real: the environment variable TBSCALE_TEST_UNSET_KEY (api_key_env) is not set",
         env={"TBSCALE_TEST_UNSET_KEY": None}, litellm=True,
         check=lambda root: not (root / "sweeps-later").exists()),  # nor the folder of the point before it
    Case("tasks path is a file", ["tasks", "list", "{root}/a-file.txt"], 2, "a-file.txt"),
    Case("task file not UTF-8", ["tasks", "list", "{root}/bad-tasks"], 1, "task.toml"),
    Case("no such task folder", ["tasks", "list", "{root}/nowhere"], 2, "nowhere: no such file or directory"),
    Case("report on a non-run", ["report", "{root}/tasks"], 2, "no runs found (no trials.jsonl)"),
    Case("report on a file", ["report", "{root}/a-file.txt"], 2, "a-file.txt: a file, not a run folder"),
    Case("--compare an unknown setting", ["report", "{root}/results/ok-run", "--compare", "base", "zzz", "--no-plots"],
         2, "--compare: no setting named 'zzz'"),
    Case("judge on a non-run", ["judge", "{root}/tasks", "--model", "sim/rubric_judge"], 2, "not a run folder"),
    Case("view on a non-run", ["view", "{root}/tasks"], 2, "not a run folder"),
    Case("import of a missing path", ["import", "{root}/nowhere", "--name", "x"], 2, "nowhere: no such file"),
    Case("models check, key unset", ["models", "check", "{root}/real.yaml"], 1, "models of",
         env={"TBSCALE_TEST_UNSET_KEY": None}),
]


@contextmanager
def inputs(root: Path) -> Iterator[dict[str, str]]:
    """The inputs written under `root` with their loopback server running: the substitutions for
    the cases' "{root}" and "{api}"."""
    with LoopbackModel(api_key=GOOD_KEY) as srv:
        make_inputs(root, srv.base_url)
        yield {"root": str(root), "api": srv.base_url}


def fill(text: str, subs: dict[str, str]) -> str:
    for k, v in subs.items():
        text = text.replace("{" + k + "}", v)
    return text


@dataclass
class Outcome:
    code: int
    output: str  # stderr and stdout, in that order
    traceback: bool
    first_line: str


def can_mount_read_only() -> bool:
    if not shutil.which("unshare") or not shutil.which("mount"):
        return False
    probe = subprocess.run(["unshare", "-m", "sh", "-c", "mount --bind / / 2>/dev/null && echo ok"],
                           capture_output=True, text=True)
    return probe.stdout.strip() == "ok"


def run_case(case: Case, subs: dict[str, str], in_process: bool = False) -> Outcome:
    """Run one case: as its own process (`python -m tbscale.cli`), or with `in_process` through
    typer's test runner in this one (quicker; a read-only case always runs as a process)."""
    argv = [fill(a, subs) for a in case.argv]
    if in_process and not case.readonly:
        from typer.testing import CliRunner

        from tbscale.cli import app

        res = CliRunner().invoke(app, argv, env={"NO_PROXY": "127.0.0.1,localhost", "COLUMNS": "200", **case.env},
                                 prog_name="tbscale")
        lines = [ln for ln in res.output.splitlines() if ln.strip()]
        crashed = res.exception is not None and not isinstance(res.exception, SystemExit)
        return Outcome(res.exit_code, res.output, crashed or "Traceback (most recent call last)" in res.output,
                       lines[0] if lines else "")
    env = {**os.environ, "NO_PROXY": "127.0.0.1,localhost", "COLUMNS": "200"}
    for k, v in case.env.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    command = [sys.executable, "-m", "tbscale.cli", *argv]
    if case.readonly:
        folder = fill(case.readonly, subs)
        command = ["unshare", "-m", "sh", "-c", 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" "$0" && '
                   'shift && exec "$@"', folder, "_", *command]
    res = subprocess.run(command, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, timeout=300)
    output = res.stderr + res.stdout
    lines = [ln for ln in output.splitlines() if ln.strip()]
    return Outcome(res.returncode, output, "Traceback (most recent call last)" in output, lines[0] if lines else "")
