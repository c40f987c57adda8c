"""Task loading (Harbor and Terminal-Bench legacy, including broken directories) and experiment
config validation: one-line errors that name the file and the key."""

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tbscale.runner import load_experiment
from tbscale.errors import TbscaleError
from tbscale.tasks import load_task, load_tasks
from tbscale_testing.tasks import write_harbor_task

ROOT = Path(__file__).resolve().parents[1]
LEGACY = Path(__file__).parent / "fixtures" / "tb-legacy" / "hello-file"


def test_bundled_suite_loads_as_harbor():
    tasks, problems = load_tasks(ROOT / "tasks", on_error="collect")
    assert problems == []
    assert len(tasks) >= 12
    for t in tasks:
        assert t.format == "harbor"
        assert t.instruction and t.environment_dir.joinpath("Dockerfile").is_file()
        assert t.tests_dir.joinpath("test.sh").is_file()
        assert len(t.solution_steps()) >= 1, t.id


def test_harbor_fields(tmp_path):
    task = _harbor(tmp_path, toml="""
        version = "1.0"
        [metadata]
        difficulty = "hard"
        [verifier]
        timeout_sec = 42.0
        [agent]
        timeout_sec = 99
        [environment]
        cpus = 2
        memory_mb = 512
        allow_internet = true
    """)
    t = load_task(task)
    assert (t.verifier_timeout_sec, t.agent_timeout_sec, t.cpus, t.memory_mb) == (42.0, 99.0, 2.0, 512)
    assert t.allow_internet and t.metadata["difficulty"] == "hard"
    assert t.solution_steps() == ["echo one", "echo two &&\n  echo three"]


def test_legacy_format_loads():
    t = load_task(LEGACY)
    assert t.format == "terminal-bench"
    assert t.instruction.startswith("Create a file /app/hello.txt")
    assert t.agent_timeout_sec == 120 and t.verifier_timeout_sec == 60
    assert t.test_command == "bash /tests/run-tests.sh"
    assert sorted(p.name for p in t.tests_dir.iterdir()) == ["test_outputs.py"]
    assert t.verifier.tests_files == {"run-tests.sh": LEGACY / "run-tests.sh"}
    assert t.solution_steps() == ["printf 'hello, terminal\\n' > /app/hello.txt"]


@pytest.mark.parametrize("breakage, expected", [
    (lambda d: (d / "instruction.md").unlink(), "instruction.md: missing"),
    (lambda d: (d / "task.toml").write_text("[agent\ntimeout_sec = 1"), "task.toml: not valid TOML"),
    (lambda d: (d / "task.toml").write_text("[agent]\ntimeout_sec = -5\n"), "`timeout_sec` must be a positive number"),
    (lambda d: (d / "environment" / "Dockerfile").unlink(), "Dockerfile: missing"),
    (lambda d: (d / "tests" / "test.sh").unlink(), "test.sh: missing"),
])
def test_broken_harbor_task_names_file(tmp_path, breakage, expected):
    d = _harbor(tmp_path)
    breakage(d)
    with pytest.raises(TbscaleError) as err:
        load_task(d)
    msg = str(err.value)
    assert expected in msg and str(d) in msg and "\n" not in msg.strip()


def test_an_empty_instruction_loads_as_the_reference_harness_loads_it(tmp_path):
    """Harbor and the legacy harness run a task whose instruction is empty (`harbor tasks init`
    writes an empty instruction.md); so does tbscale, saying so; strict key checking refuses it."""
    d = _harbor(tmp_path)
    (d / "instruction.md").write_text("  \n")
    t = load_task(d)
    assert t.instruction == "" and [(n.key, n.why) for n in t.not_enforced] == [
        ("instruction.md", "empty: the agent is given an empty instruction, as Harbor gives it")]
    with pytest.raises(TbscaleError, match="instruction.md: empty instruction"):
        load_task(d, strict=True)
    legacy = tmp_path / "legacy"
    shutil.copytree(LEGACY, legacy)
    (legacy / "task.yaml").write_text("instruction: ''\n")
    assert load_task(legacy).instruction == "" and load_task(legacy).not_enforced[0].key == "instruction"
    with pytest.raises(TbscaleError, match="task.yaml: `instruction` is empty"):
        load_task(legacy, strict=True)


def test_broken_legacy_task(tmp_path):
    d = tmp_path / "legacy"
    shutil.copytree(LEGACY, d)
    (d / "task.yaml").write_text("difficulty: easy\n")
    with pytest.raises(TbscaleError, match="task.yaml: `instruction` is missing"):
        load_task(d)
    (d / "task.yaml").write_text("instruction: [unclosed\n")
    with pytest.raises(TbscaleError, match="task.yaml: not valid YAML"):
        load_task(d)


def test_collect_mode_reports_broken_and_keeps_good(tmp_path):
    good = _harbor(tmp_path, name="good")
    bad = _harbor(tmp_path, name="bad")
    (bad / "instruction.md").unlink()
    tasks, problems = load_tasks(tmp_path, on_error="collect")
    assert [t.id for t in tasks] == ["good"] and good.exists()
    assert len(problems) == 1 and problems[0][0].name == "bad"


def test_cli_tasks_list_exit_code_on_broken(tmp_path):
    _harbor(tmp_path, name="good")
    (_harbor(tmp_path, name="bad") / "task.toml").write_text("[[[")
    res = subprocess.run([sys.executable, "-m", "tbscale.cli", "tasks", "list", str(tmp_path)],
                         capture_output=True, text=True)
    assert res.returncode == 1
    assert "bad/task.toml: not valid TOML" in res.stderr


def _write_config(tmp_path, body: str) -> Path:
    p = tmp_path / "exp.yaml"
    p.write_text(textwrap.dedent(body))
    return p


BASE = """
name: t
tasks: {path: %s}
models:
  gen: {model: sim/policy}
settings:
  - name: a
    generator: gen
""" % (ROOT / "tasks")


def test_config_loads_and_defaults(tmp_path):
    exp = load_experiment(_write_config(tmp_path, BASE))
    assert exp.trials == 1 and exp.settings[0].policy.name == "baseline"
    assert exp.limits.max_turns == 50
    from tbscale.runner.identity import setting_key

    key = setting_key(exp, exp.settings[0])
    assert len(key) == 12 and key == setting_key(exp, exp.settings[0])


@pytest.mark.parametrize("extra, expected", [
    ("trails: 3\n", "trails: unknown key"),
    ("trials: 0\n", "trials: Input should be greater than 0"),
    ("limits: {max_turns: many}\n", "limits.max_turns: Input should be a valid integer"),
    ("limits: {max_turn: 5}\n", "limits.max_turn: unknown key"),
])
def test_config_errors_name_the_key(tmp_path, extra, expected):
    with pytest.raises(TbscaleError) as err:
        load_experiment(_write_config(tmp_path, BASE + extra))
    assert str(err.value).startswith(str(tmp_path / "exp.yaml") + ": ")
    assert expected in str(err.value)


@pytest.mark.parametrize("setting, expected", [
    ("  - name: b\n    generator: nope\n", "settings[1].generator: 'nope' is not a key of `models`"),
    ("  - name: b\n    generator: gen\n    policy: {name: turn_bon, n: 0}\n", "settings[1].policy.n: Input should be greater than or equal to 1"),
    ("  - name: b\n    generator: gen\n    policy: {name: turn_bon, n: 4, selector: missing}\n", "settings[1].policy.selector: 'missing' is not a key"),
    ("  - name: b\n    generator: gen\n    policy: {name: turn_bon, m: 4}\n", "settings[1].policy.m: unknown key"),
    ("  - name: b\n    generator: gen\n    policy: {name: best_of_everything}\n", "settings[1].policy.name: unknown policy 'best_of_everything'"),
    ("  - name: a\n    generator: gen\n", "setting names must be unique, repeated: a"),
])
def test_setting_errors(tmp_path, setting, expected):
    with pytest.raises(TbscaleError) as err:
        load_experiment(_write_config(tmp_path, BASE + setting))
    assert expected in str(err.value)


def test_cli_run_bad_config_one_line_exit_2(tmp_path):
    cfg = _write_config(tmp_path, BASE + "concurency: 2\n")
    res = subprocess.run([sys.executable, "-m", "tbscale.cli", "run", str(cfg)], capture_output=True, text=True)
    assert res.returncode == 2
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "concurency: unknown key" in lines[0] and "exp.yaml" in lines[0]


def test_cli_missing_config(tmp_path):
    res = subprocess.run([sys.executable, "-m", "tbscale.cli", "run", str(tmp_path / "nope.yaml")],
                         capture_output=True, text=True)
    assert res.returncode == 2 and "nope.yaml: no such file" in res.stderr


def _harbor(root: Path, name: str = "demo-task", toml: str = "[agent]\ntimeout_sec = 60\n") -> Path:
    return write_harbor_task(root, name, instruction="Do the thing.\n", task_toml=textwrap.dedent(toml),
                             test_sh="echo 1 > /logs/verifier/reward.txt\n",
                             solve="#!/bin/bash\nset -e\n\necho one\n\n# a comment\necho two &&\n  echo three\n")


def test_environment_hash_follows_content(tmp_path):
    from tbscale.seeds import hash_directory

    d = _harbor(tmp_path) / "environment"
    first = hash_directory(d)
    assert hash_directory(d) == first
    (d / "Dockerfile").write_text("FROM debian:bookworm-slim\nWORKDIR /srv\n")
    assert hash_directory(d) != first
    (d / "Dockerfile").write_text("FROM debian:bookworm-slim\nWORKDIR /app\n")
    assert hash_directory(d) == first  # same bytes, same image
