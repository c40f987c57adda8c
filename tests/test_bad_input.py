"""Bad input ends in one line naming the file and the key, and a non-zero exit; never a traceback.
The table here is the one the closing note of the run-identity work reports."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tbscale.cli import app
from tbscale_testing.tasks import write_harbor_task

REPO = Path(__file__).resolve().parents[1]


def setup_inputs(root: Path) -> dict[str, Path]:
    write_harbor_task(root / "tasks", "ok-task")
    (root / "good.yaml").write_text(textwrap.dedent(f"""
        name: bad-input
        tasks: {{path: {root / 'tasks'}}}
        output_dir: {root / 'results'}
        models: {{gen: {{model: sim/policy}}, real: {{model: openai/gpt-4o-mini, api_key_env: TBSCALE_TEST_UNSET_KEY}}}}
        settings: [{{name: base, generator: gen}}]
    """))
    (root / "not-yaml.yaml").write_text("name: [unclosed\n")
    (root / "typo.yaml").write_text((root / "good.yaml").read_text() + "trails: 3\n")
    mixed = (root / "good.yaml").read_text().replace(
        "settings: [{name: base, generator: gen}]",
        "settings: [{name: mixed, generator: real, policy: {name: turn_bon, n: 2, selector: gen}}]")
    (root / "mixed.yaml").write_text(mixed)
    (root / "unknown-policy.yaml").write_text((root / "good.yaml").read_text().replace(
        "settings: [{name: base, generator: gen}]", "settings: [{name: base, generator: gen, policy: {name: bon}}]"))
    (root / "real.yaml").write_text((root / "good.yaml").read_text().replace(
        "settings: [{name: base, generator: gen}]", "settings: [{name: base, generator: real}]"))
    bad_task = write_harbor_task(root / "bad-tasks", "latin1")
    (bad_task / "task.toml").write_bytes("[agent]\ntimeout_sec = 60 # caf\xe9\n".encode("latin-1"))
    garbage = root / "garbage-run"
    garbage.mkdir()
    (garbage / "trials.jsonl").write_text("not json\n{\"also\": \"not a trial\"}\n")
    (root / "a-file.txt").write_text("x")
    run = root / "results" / "bad-input"
    run.mkdir(parents=True)
    row = {"schema_version": 2, "run": "bad-input", "setting": "base", "setting_key": "k", "trial_key": "t",
           "task_id": "ok-task", "trial": 0, "ending": "pass", "passed": True}
    (run / "trials.jsonl").write_text(json.dumps(row) + "\n")
    return {"root": root}


CASES = [
    ("missing config", ["run", "{root}/nope.yaml"], 2, "nope.yaml: no such file"),
    ("config not YAML", ["run", "{root}/not-yaml.yaml"], 2, "not-yaml.yaml: line 2: not valid YAML"),
    ("unknown key", ["run", "{root}/typo.yaml"], 2, "typo.yaml: trails: unknown key"),
    ("unknown policy", ["run", "{root}/unknown-policy.yaml"], 2, "settings[0].policy.name: unknown policy 'bon'"),
    ("--trials 0", ["run", "{root}/good.yaml", "--trials", "0"], 2, "--trials: must be at least 1, got 0"),
    ("--concurrency 0", ["run", "{root}/good.yaml", "--concurrency", "0"], 2, "--concurrency: must be at least 1"),
    ("a simulated role beside a real one", ["run", "{root}/mixed.yaml"], 2,
     "simulated roles (selector 'gen' (sim/policy)) beside real ones"),
    ("missing key variable", ["run", "{root}/real.yaml"], 2,
     "models.real: the environment variable TBSCALE_TEST_UNSET_KEY (api_key_env) is not set"),
    ("tasks path is a file", ["tasks", "list", "{root}/a-file.txt"], 2, "a-file.txt"),
    ("task file not UTF-8", ["tasks", "list", "{root}/bad-tasks"], 1, "task.toml"),
    ("no such task folder", ["tasks", "list", "{root}/nowhere"], 2, "nowhere: no such file or directory"),
    ("report on a non-run", ["report", "{root}/tasks"], 2, "no runs found (no trials.jsonl)"),
    ("report on a file", ["report", "{root}/a-file.txt"], 2, "a-file.txt: a file, not a run folder"),
    ("report on unparsable lines", ["report", "{root}/garbage-run"], 2,
     "trials.jsonl has no readable trial lines (2 unreadable; first:"),
    ("--compare an unknown setting", ["report", "{root}/results/bad-input", "--compare", "base", "zzz", "--no-plots"],
     2, "--compare: no setting named 'zzz'"),
    ("judge on a non-run", ["judge", "{root}/tasks", "--model", "sim/rubric_judge"], 2, "not a run folder"),
    ("view on a non-run", ["view", "{root}/tasks"], 2, "tasks"),
    ("import of a missing path", ["import", "{root}/nowhere", "--name", "x"], 2, "nowhere: no such file or directory"),
    ("models check, key unset", ["models", "check", "{root}/real.yaml"], 1, ""),
]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    return setup_inputs(tmp_path_factory.mktemp("bad-input"))


@pytest.mark.parametrize("name, args, code, first_line", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_and_non_zero(inputs, monkeypatch, name, args, code, first_line) -> None:
    monkeypatch.delenv("TBSCALE_TEST_UNSET_KEY", raising=False)
    res = CliRunner().invoke(app, [a.format(root=inputs["root"]) for a in args])
    assert res.exit_code == code, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    assert "Traceback" not in res.output
    errors = [ln for ln in res.output.splitlines() if ln.startswith("error:")]
    if code == 2:
        assert len(errors) == 1 and first_line in errors[0], res.output
    else:
        assert first_line in res.output
