"""What tbscale checks before it works and while it reads: names that stay in their folder, strict
YAML within bounds, templates rendered at load, a preflight that sends the key, and files with
broken lines read around (without Docker; tests/test_bad_input.py runs the command-line table)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tbscale.cli import app
from tbscale.errors import TbscaleError
from tbscale_testing import LoopbackModel
from tbscale_testing.bad_inputs import trial_line, write_run

# ---- names -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["../x", "/abs", "a/b", "..", ".hidden", "", "a\x00b", "trailing.", "x" * 300,
                                  "with space", "naïve"])
def test_names_that_would_leave_their_folder_or_break_it_are_refused(name: str) -> None:
    from tbscale.names import check_name

    with pytest.raises(TbscaleError, match="--run-name"):
        check_name(name, "--run-name")


@pytest.mark.parametrize("name", ["run1", "turnbon_n8", "a.b-c", "2026-01-01"])
def test_ordinary_names_pass(name: str) -> None:
    from tbscale.names import check_name

    assert check_name(name, "--run-name") == name


def _import(tmp_path: Path, name: str, *extra: str):
    job = tmp_path / "job" / "t__1"
    if not job.exists():
        from tbscale_testing.bad_inputs import _harbor_job

        _harbor_job(tmp_path / "job")
    return CliRunner().invoke(app, ["import", str(tmp_path / "job"), "--name", name, "--output-dir",
                                    str(tmp_path / "results"), *extra])


def test_import_force_replaces_a_run_folder_and_nothing_else(tmp_path: Path) -> None:
    first = _import(tmp_path, "h")
    assert first.exit_code == 0, first.output
    run = tmp_path / "results" / "h"
    (run / "extra.txt").write_text("from the first import")
    again = _import(tmp_path, "h")
    assert again.exit_code == 2 and "already exists" in again.output
    forced = _import(tmp_path, "h", "--force")
    assert forced.exit_code == 0, forced.output
    assert (run / "trials.jsonl").is_file() and not (run / "extra.txt").exists()  # replaced whole
    assert not [p for p in (tmp_path / "results").iterdir() if p.name.startswith(".")]  # no scratch left
    # A folder that is not a tbscale run is never removed, whatever --force says.
    (tmp_path / "results" / "mine").mkdir()
    (tmp_path / "results" / "mine" / "thesis.tex").write_text("years of work")
    refused = _import(tmp_path, "mine", "--force")
    assert refused.exit_code == 2 and "holds no manifest.json written by tbscale" in refused.output
    assert (tmp_path / "results" / "mine" / "thesis.tex").read_text() == "years of work"


def test_force_never_follows_a_link_out_of_the_results_folder(tmp_path: Path) -> None:
    from tbscale.names import run_folder_problem

    outside = write_run(tmp_path / "elsewhere", "real", [json.dumps(trial_line("real", 0))])
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "linked").symlink_to(outside)
    assert run_folder_problem(tmp_path / "results" / "linked", tmp_path / "results") == "is a symbolic link"
    res = _import(tmp_path, "linked", "--force")
    assert res.exit_code == 2 and "is a symbolic link" in res.output
    assert (outside / "trials.jsonl").is_file()
    # A manifest tbscale wrote for another run name is not this run's.
    write_run(tmp_path, "renamed", [json.dumps(trial_line("renamed", 0))])
    (tmp_path / "results" / "renamed").rename(tmp_path / "results" / "other")
    assert "did not write for a run of this name" in run_folder_problem(tmp_path / "results" / "other",
                                                                         tmp_path / "results")


def test_a_failed_replacement_leaves_the_old_run_as_it_was(tmp_path: Path) -> None:
    from tbscale.ingest.runs import replace_folder

    run = write_run(tmp_path, "keep", [json.dumps(trial_line("keep", 0))])
    before = (run / "trials.jsonl").read_text()

    def broken(folder: Path) -> None:
        folder.mkdir()
        (folder / "trials.jsonl").write_text("half")
        raise RuntimeError("the source went away")

    with pytest.raises(RuntimeError):
        replace_folder(run, True, broken)
    assert (run / "trials.jsonl").read_text() == before
    assert sorted(p.name for p in run.parent.iterdir()) == ["keep"]


# ---- YAML --------------------------------------------------------------------------------------


def test_duplicate_keys_name_the_key_and_both_lines_at_any_depth() -> None:
    from tbscale.config.yamlfile import load_yaml

    with pytest.raises(TbscaleError, match=r"f.yaml: line 4: duplicate key 'model' \(first given at line 3\)"):
        load_yaml("name: x\nmodels:\n  g: {model: a,\n         model: b}\n", "f.yaml")
    with pytest.raises(TbscaleError, match="line 3: duplicate key 'n'"):
        load_yaml("settings:\n  - n: 1\n    n: 2\n", "f.yaml")


def test_merge_keys_and_a_few_aliases_are_still_yaml() -> None:
    from tbscale.config.yamlfile import load_yaml

    doc = load_yaml("base: &b {a: 1, b: 2}\nmine:\n  <<: *b\n  b: 3\nlist: [*b, *b]\n", "f.yaml")
    assert doc["mine"] == {"a": 1, "b": 3} and doc["list"] == [{"a": 1, "b": 2}] * 2


def test_alias_expansion_is_bounded_and_the_bound_can_be_raised(monkeypatch) -> None:
    from tbscale.config.yamlfile import load_yaml

    text = "l0: &l0 [x, x, x, x]\n" + "".join(f"l{i}: &l{i} [*l{i - 1}, *l{i - 1}, *l{i - 1}, *l{i - 1}]\n"
                                               for i in range(1, 8))  # 4**8 = 65,536 values under l7
    monkeypatch.setenv("TBSCALE_MAX_YAML_VALUES", "50000")
    with pytest.raises(TbscaleError, match="expands to more than 50,000 values.*TBSCALE_MAX_YAML_VALUES"):
        load_yaml(text, "f.yaml")
    monkeypatch.setenv("TBSCALE_MAX_YAML_VALUES", "200000")
    assert len(load_yaml(text, "f.yaml")["l7"]) == 4


def test_count_bounds_name_the_limit_and_its_variable(monkeypatch) -> None:
    from tbscale.config import bounds

    from tbscale.config import Experiment

    doc = {"name": "x", "tasks": {"path": "t"}, "settings": [{"name": "s"}], "trials": 25}
    monkeypatch.setenv("TBSCALE_MAX_TRIALS", "20")
    with pytest.raises(ValueError, match="25 is above the limit of 20 trials per setting and task.*TBSCALE_MAX_TRIALS=25"):
        Experiment.model_validate(doc)
    monkeypatch.setenv("TBSCALE_MAX_TRIALS", "30")
    assert Experiment.model_validate(doc).trials == 25
    monkeypatch.setenv("TBSCALE_MAX_TRIALS", "lots")
    with pytest.raises(TbscaleError, match="TBSCALE_MAX_TRIALS: must be a positive integer"):
        bounds.limit("trials")


def test_planned_trials_are_bounded_before_planning(tmp_path: Path, monkeypatch) -> None:
    from tbscale.config import Experiment
    from tbscale.runner.checks import check_plan_size
    from tbscale_testing.tasks import write_harbor_task

    from tbscale.tasks import load_tasks

    for i in range(3):
        write_harbor_task(tmp_path / "tasks", f"t{i}")
    tasks, _ = load_tasks(tmp_path / "tasks")
    exp = Experiment.model_validate({"name": "x", "tasks": {"path": "t"}, "trials": 10,
                                     "settings": [{"name": "a"}, {"name": "b"}]})
    monkeypatch.setenv("TBSCALE_MAX_PLANNED_TRIALS", "59")
    with pytest.raises(TbscaleError, match=r"2 settings x 3 tasks x 10 trials: 60 is above the limit of 59"):
        check_plan_size(exp, tasks, "c.yaml")


# ---- templates ---------------------------------------------------------------------------------


def test_bundled_templates_render_with_the_sample_values_and_mistakes_do_not(tmp_path: Path) -> None:
    from tbscale.agent.templates import PROMPT_DIR, TEMPLATE_NAMES, template_problem

    for name in TEMPLATE_NAMES:
        assert template_problem(name, PROMPT_DIR / f"{name}.j2") is None, name
    branch = tmp_path / "obs.j2"  # a typo inside a branch taken only on a timeout
    branch.write_text("{{ output }}{% if timed_out %} (killed after {{ timout }} s){% endif %}")
    assert "'timout' is undefined" in template_problem("observation", branch)
    bad_filter = tmp_path / "sys.j2"
    bad_filter.write_text("{{ workdir | no_such_filter }}")
    assert "not a valid Jinja template" in template_problem("system", bad_filter)
    latin = tmp_path / "latin.j2"
    latin.write_bytes("caf\xe9 {{ workdir }}".encode("latin-1"))
    assert "not UTF-8" in template_problem("system", latin)


# ---- preflight -----------------------------------------------------------------------------------


def test_preflight_fails_on_401_with_the_providers_message_and_never_the_key(monkeypatch) -> None:
    from tbscale.config import ModelConfig
    from tbscale.models.preflight import check_model

    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    wrong = "sk-test-wrong-a1b2c3d4e5f6"
    with LoopbackModel(api_key="sk-test-right-f6e5d4c3b2a1") as srv:
        cfg = ModelConfig(model="openai/scripted", api_base=srv.base_url, api_key_env="TBSCALE_TEST_PREFLIGHT_KEY")
        monkeypatch.setenv("TBSCALE_TEST_PREFLIGHT_KEY", wrong)
        bad = asyncio.run(check_model("gen", cfg))
        assert not bad.ok and "refused the key: 401 Unauthorized" in bad.problem
        assert "Incorrect API key provided" in bad.problem  # the provider's own words
        assert wrong not in bad.problem and "a1b2c3d4e5f6" not in bad.problem
        monkeypatch.setenv("TBSCALE_TEST_PREFLIGHT_KEY", "sk-test-right-f6e5d4c3b2a1")
        assert asyncio.run(check_model("gen", cfg)).ok
        got = srv.requests  # the model list was asked for with the key; no completion was paid for
        assert got == []


def test_a_masked_piece_of_the_key_is_scrubbed_too() -> None:
    from tbscale.models.preflight import provider_message, scrub_key

    key = "sk-proj-0123456789abcdefXYZ"
    text = 'Incorrect API key provided: sk-proj-****************cdefXYZ. You can find your key at https://x'
    assert "cdefXYZ" not in scrub_key(text, key) and "Incorrect API key provided" in scrub_key(text, key)
    assert provider_message(b'{"error": {"message": "Forbidden: project has no access", "type": "x"}}') == \
        "Forbidden: project has no access"
    assert provider_message(b'{"detail": "Not authenticated"}') == "Not authenticated"


# ---- broken lines read around --------------------------------------------------------------------


def test_report_reads_around_corrupt_lines_of_a_run_with_a_manifest(tmp_path: Path) -> None:
    """The TypeError (NoneType + int) of the current-configuration filter on a corrupt line."""
    from tbscale.rundata import read_trial_table

    rows = [json.dumps(trial_line("r", i)) for i in range(3)]
    run = write_run(tmp_path, "r", [rows[0], '{"schema_version": 2, "run": "r", "trial": ', rows[1],
                                    json.dumps({**trial_line("r", 3), "trial": None}), rows[2]], planned=4)
    table = read_trial_table([run])
    assert sorted(table.df["trial"]) == [0, 1, 2]
    assert [n for n, _ in table.problems[0].corrupt] == [2, 4]


def test_a_nan_reward_never_counts_as_a_pass(tmp_path: Path) -> None:
    from tbscale.analysis import tables
    from tbscale.rundata import read_trial_table

    fail = trial_line("r", 0, passed=False, ending="wrong_submission", reward=0.0)
    nan_pass = trial_line("r", 1, reward=float("nan"))
    run = write_run(tmp_path, "r", [json.dumps(fail), json.dumps(nan_pass)], planned=2)
    table = read_trial_table([run])
    assert table.df["passed"].tolist() == [False]
    assert tables.summary(table.df)["pass@1"].tolist() == [0.0]
    assert "reward: Input should be a finite number" in table.problems[0].corrupt[0][1]


def test_report_says_a_run_is_incomplete_and_why(tmp_path: Path) -> None:
    run = write_run(tmp_path, "r", [json.dumps(trial_line("r", i)) for i in range(2)], planned=6,
                    stopped="interrupted (Ctrl-C or SIGTERM) before every trial had run")
    res = CliRunner().invoke(app, ["report", str(run), "--no-plots"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "INCOMPLETE: 2 of 6 planned trials have finished (base: 2 of 6)" in res.output
    assert "Why: r: interrupted (Ctrl-C or SIGTERM)" in res.output
    summary = json.loads((run / "report" / "summary.json").read_text())
    row = summary["tables"]["summary"][0]
    assert (row["finished"], row["planned"]) == (2, 6)
    complete = write_run(tmp_path, "c", [json.dumps(trial_line("c", i)) for i in range(2)], planned=2)
    res = CliRunner().invoke(app, ["report", str(complete), "--no-plots"])
    assert res.exit_code == 0 and "INCOMPLETE" not in res.output


def test_history_reads_around_broken_lines_and_the_gate_fails_on_none(tmp_path: Path) -> None:
    line = {"sweep": "s", "run": "r", "setting": "b", "date": "2026-01-01", "pass_at_1": 0.5, "ci_lo": 0.2,
            "ci_hi": 0.8, "turns_mean": 3.0, "total_out_tokens": 100.0, "task_pass_rates": {"a": 1.0, "b": 0.0}}
    path = tmp_path / "history.jsonl"
    path.write_text(json.dumps(line) + "\n" + json.dumps({**line, "pass_at_1": float("nan")}) + "\n"
                    + json.dumps({**line, "date": "2026-01-02", "task_pass_rates": {"a": 7}}) + "\n{\"sweep\": ")
    res = CliRunner().invoke(app, ["history", str(path), "--check"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output  # one readable line: nothing to compare, nothing failed
    assert "skipped 2 unreadable lines: line 2 (pass_at_1" in res.output and "line 3 (task_pass_rates" in res.output
    assert "torn last line (line 4" in res.output
    none = tmp_path / "none.jsonl"
    none.write_text("\n".join(["garbage", json.dumps({**line, "pass_at_1": 2.0})]) + "\n")
    res = CliRunner().invoke(app, ["history", str(none), "--check"])
    assert res.exit_code == 2 and "no readable history line (2 unreadable" in res.output
    res = CliRunner().invoke(app, ["history", str(path), "--check", "--sweep", "nightly-typo"])
    assert res.exit_code == 2 and "no history line of sweep 'nightly-typo'" in res.output


def test_one_line_errors_come_from_one_place() -> None:
    """Commands raise TbscaleError and leave the one-line exit to the app (cli/app.py)."""
    root = Path(__file__).resolve().parents[1] / "tbscale" / "cli"
    scattered = [p.name for p in root.glob("*.py") if "except TbscaleError" in p.read_text() and p.name != "app.py"]
    assert scattered == ["report.py"], scattered  # run's closing report: a failed report is a warning there


def test_output_dir_checks_leave_nothing_behind(tmp_path: Path) -> None:
    from tbscale.names import writable_folder

    writable_folder(tmp_path / "a" / "b", "output_dir")
    assert [p.name for p in (tmp_path / "a" / "b").iterdir()] == []


def test_sweep_history_lines_read_around_broken_lines(tmp_path: Path, caplog) -> None:
    from tbscale.sweeps import Sweep, history_lines

    good = [json.dumps(trial_line("r", i)) for i in range(3)]
    run = write_run(tmp_path, "r", [good[0], "not json", json.dumps(trial_line("r", 3, reward=float("inf"))),
                                    good[1], good[2]], planned=4)
    sweep = Sweep(name="s", configs=["c.yaml"])
    with caplog.at_level("WARNING", logger="tbscale"):
        lines = history_lines(run, sweep, {}, "2026-01-01")
    assert [(x.setting, x.trials, x.pass_at_1) for x in lines] == [("base", 3, 1.0)]
    assert "skipped 2 unreadable lines: line 2 (not JSON), line 3 (reward: Input should be a finite number)" \
        in caplog.text


def test_only_the_folders_a_command_made_and_left_empty_are_removed_again(tmp_path: Path) -> None:
    from tbscale.names import remove_made_folders, writable_folder

    (tmp_path / "there").mkdir()
    made: list[Path] = []
    writable_folder(tmp_path / "there" / "a" / "b" / "c", "run folder", made)
    assert made == [tmp_path / "there" / "a", tmp_path / "there" / "a" / "b", tmp_path / "there" / "a" / "b" / "c"]
    (tmp_path / "there" / "a" / "mine.txt").write_text("written meanwhile\n")
    remove_made_folders(made)
    # b and c were empty and made here; a holds a file now; `there` was not made here
    assert not (tmp_path / "there" / "a" / "b").exists()
    assert (tmp_path / "there" / "a" / "mine.txt").is_file()
    again: list[Path] = []
    writable_folder(tmp_path / "there", "output_dir", again)
    assert again == [] and (tmp_path / "there").is_dir()
    remove_made_folders(again)
    assert (tmp_path / "there").is_dir()
