"""`tbscale tasks show` gives one task as a run gives it, and every command prints task text verbatim
(a `[environment]` or `[/tests]` in an instruction or an error is text, never rich markup)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from typer.testing import CliRunner

from tbscale.cli import app
from tbscale_testing.tasks import write_harbor_task

MARKUP = "Set [environment] and [agent] in /etc/x.ini, then [bold]keep[/bold] [/tests] as it is."


def run(*args: str):
    return CliRunner().invoke(app, list(args))


def test_tasks_list_prints_instructions_verbatim(tmp_path):
    write_harbor_task(tmp_path, "brackets", instruction=MARKUP + "\n")
    result = run("tasks", "list", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert "[environment] and [agent]" in result.stdout


def test_errors_print_brackets_verbatim(tmp_path):
    d = write_harbor_task(tmp_path, "bad", task_toml='[environment]\ncpus = "two"\n')
    result = run("tasks", "show", str(d))
    assert result.exit_code == 2, result.output
    assert "[environment].cpus: Input should be a valid integer" in result.output


def test_tasks_show_gives_the_instruction_and_the_resolved_environment(tmp_path):
    d = write_harbor_task(tmp_path, "shown", instruction=MARKUP + "\n\n  indented line\n", task_toml=textwrap.dedent("""
        [agent]
        timeout_sec = 90
        user = "agent"
        network_mode = "no-network"
        [verifier]
        timeout_sec = 40
        [environment]
        cpus = 2
        memory_mb = 1024
        storage_mb = 4096
        workdir = "/srv"
        colour = "red"
        env = { TOKEN = "${HOST_TOKEN}" }
        artifacts = ["/srv/out.json"]
    """).replace('artifacts = ["/srv/out.json"]\n', "").replace("[agent]", 'artifacts = ["/srv/out.json"]\n[agent]'))
    text = run("tasks", "show", str(d), "--storage-limit", "auto")
    assert text.exit_code == 0, text.output
    # the instruction exactly as the agent receives it (after the canary strip and the outer strip)
    assert text.stdout.split("verbatim:\n" + "-" * 72 + "\n", 1)[1].startswith(MARKUP + "\n\n  indented line\n")
    data = json.loads(run("tasks", "show", str(d), "--json").stdout)
    assert data["instruction"] == MARKUP + "\n\n  indented line"
    env = data["environment"]
    assert env["workdir"] == "/srv" and env["env"] == ["TOKEN"] and "HOST_TOKEN" not in json.dumps(env)
    assert (env["resources"]["cpus"], env["resources"]["memory_mb"]) == (2, 1024)
    assert data["network"] == {"environment": "public (the internet and the task's services)",
                               "agent": "no-network (nothing, not even the task's services)",
                               "verifier": "public (the internet and the task's services)"}
    assert (data["agent"]["user"], data["agent"]["timeout_sec"]) == ("agent", 90)
    assert (data["verifier"]["mode"], data["verifier"]["timeout_sec"]) == ("shared", 40)
    assert data["artifacts"][0]["source"] == "/srv/out.json"
    assert {"key": "[environment].colour", "why": "not a key of Harbor's task.toml: ignored, as Harbor ignores it"} \
        in data["not_enforced"]
    assert "4096 MB" in env["resources"]["storage_mb"]


def test_tasks_show_a_legacy_variant_by_id(tmp_path):
    d = tmp_path / "crack-7z-hash"
    (d / "tests").mkdir(parents=True)
    (d / "task.yaml").write_text("descriptions:\n  - key: base\n    description: Base.\n  - key: easy\n"
                                 "    description: Easy [agent] text.\n")
    (d / "Dockerfile").write_text("FROM debian:bookworm-slim\n")
    (d / "run-tests.sh").write_text("echo\n")
    by_path = json.loads(run("tasks", "show", str(tmp_path / "crack-7z-hash.easy"), "--json").stdout)
    by_id = json.loads(run("tasks", "show", "crack-7z-hash.easy", "--path", str(tmp_path), "--json").stdout)
    assert by_path["instruction"] == by_id["instruction"] == "Easy [agent] text."
    assert by_id["id"] == "crack-7z-hash.easy" and by_id["variant"] == "easy"
    assert by_id["verifier"]["tests"] == [f"{d / 'tests'} -> /tests", f"{d / 'run-tests.sh'} -> /tests/run-tests.sh"]
    missing = run("tasks", "show", "nope", "--path", str(tmp_path))
    assert missing.exit_code == 2 and "nope" in missing.output


def test_tasks_show_steps(tmp_path):
    root = Path(__file__).parent / "conformance" / "multi-step-final"
    data = json.loads(run("tasks", "show", str(root), "--json").stdout)
    assert data["instruction"] is None and [s["name"] for s in data["steps"]] and data["multi_step_reward_strategy"]
    text = run("tasks", "show", str(root)).stdout
    assert f"step {data['steps'][0]['name']}: the instruction the agent receives, verbatim:" in text


def test_tasks_show_names_the_repository_the_agent_is_asked_to_fix(tmp_path):
    """A verifier script that applies a test patch in /testbed (SWE-bench style): that repository is
    checked for commits after its HEAD before the agent starts (docs/swebench.md)."""
    d = write_harbor_task(tmp_path, "patched", test_sh="#!/bin/bash\ncd /testbed\ngit apply /tmp/t.diff\npytest -rA tests\n")
    data = json.loads(run("tasks", "show", str(d), "--json").stdout)
    assert data["repositories"] == {"paths": ["/testbed"], "history": "keep"}
    assert "repositories" not in json.loads(run("tasks", "show", str(write_harbor_task(tmp_path, "plain")), "--json").stdout)
