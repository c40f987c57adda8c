"""terminal-bench `tb run` folders and submissions, imported and reported against the numbers they
published. Fixtures are synthesized in terminal-bench 0.2.x's layout (tbscale_testing/tb_runs.py)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from tbscale.analysis import tables
from tbscale.analysis.report import build_report
from tbscale.errors import TbscaleError
from tbscale.ingest import runs as I
from tbscale.ingest.terminal_bench import FAILURE_MODES, tb_ending
from tbscale.logs import read_events
from tbscale_testing.tb_runs import trial_result, write_run, write_submission

# terminal_bench/agents/failure_mode.py (0.2.18): every member of the enum
TB_FAILURE_MODES = {"unset", "none", "unknown", "test_timeout", "agent_timeout", "unknown_agent_error", "parse_error",
                    "fatal_llm_parse_error", "context_length_exceeded", "output_length_exceeded",
                    "agent_installation_failed"}


def _quiet() -> Console:
    return Console(file=open(os.devnull, "w"))


def _section(ctx, key):
    return next(s.frame for s in ctx.sections if s.key == key)


def test_every_failure_mode_has_an_ending_and_a_side() -> None:
    assert set(FAILURE_MODES) == TB_FAILURE_MODES
    cases = {  # (failure_mode, is_resolved) -> (ending, passed, infra_error)
        ("unset", True): ("pass", True, False), ("unset", False): ("wrong_submission", False, False),
        ("none", False): ("wrong_submission", False, False), ("unknown", False): ("agent_error", False, False),
        ("agent_timeout", False): ("time_limit", False, False),
        ("agent_timeout", True): ("pass", True, False),  # the harness ran the tests after the timeout
        ("unknown_agent_error", False): ("agent_error", False, False),
        ("unknown_agent_error", None): ("agent_error", False, True),  # the harness raised: nothing ran
        ("fatal_llm_parse_error", False): ("agent_error", False, False),
        ("context_length_exceeded", False): ("out_of_context", False, False),
        ("output_length_exceeded", False): ("out_of_context", False, False),
        ("test_timeout", None): ("verifier_error", False, True), ("parse_error", None): ("verifier_error", False, True),
        ("agent_installation_failed", False): ("agent_error", False, True),
        ("agent_installation_failed", True): ("agent_error", False, True),
    }
    for (mode, resolved), want in cases.items():
        assert tb_ending(mode, resolved)[:3] == want, (mode, resolved)
    assert tb_ending("unknown_agent_error", None)[3] == "harness_error"
    assert tb_ending("agent_timeout", True)[3] == "agent_timeout"


def _two_runs(root: Path) -> Path:
    sub = root / "20250101_my-agent_model"
    t = trial_result
    run1 = [t("hello", "hello.1-of-1.r1", resolved=True, recording="r1/hello/hello.1-of-1.r1/sessions/agent.cast"),
            t("crack-7z-hash.easy", "crack-7z-hash.easy.1-of-1.r1", resolved=True, failure_mode="agent_timeout"),
            t("slow", "slow.1-of-1.r1", resolved=None, failure_mode="test_timeout", tokens=None),
            t("boom", "boom.1-of-1.r1", resolved=None, failure_mode="unknown_agent_error", timestamps=False,
              tokens=None)]
    run2 = [t("hello", "hello.1-of-1.r2", resolved=False),
            t("crack-7z-hash.easy", "crack-7z-hash.easy.1-of-1.r2", resolved=False, failure_mode="agent_timeout"),
            t("slow", "slow.1-of-1.r2", resolved=True),
            t("boom", "boom.1-of-1.r2", resolved=False, failure_mode="context_length_exceeded")]
    write_run(sub / "r1", run1, start="2025-01-01T10:00:00+00:00")
    write_run(sub / "r2", run2, start="2025-01-02T10:00:00+00:00")
    # the harness writes no trial folder for a trial it failed outside the agent
    shutil.rmtree(sub / "r1" / "boom")
    return sub


def test_a_submission_of_two_runs(tmp_path: Path) -> None:
    sub = _two_runs(tmp_path)
    assert I.detect_format(sub) == "terminal-bench" and I.detect_format(sub / "r1") == "terminal-bench"
    res = I.import_runs([sub], tmp_path / "results" / "mine")
    assert res.format == "terminal-bench" and res.trials == 8 and res.tasks == 4
    df = tables.load_trials([res.run_dir]).set_index(["task_id", "trial"])
    assert set(df["setting"]) == {"20250101_my-agent_model"} and set(df["agent"]) == {"terminus"}
    hello0, hello1 = df.loc[("hello", 0)], df.loc[("hello", 1)]  # trials numbered by run start
    assert hello0["passed"] and hello0["ending"] == "pass" and not hello1["passed"]
    assert hello0["generator_input"] == 1200 and hello0["generator_output"] == 300
    assert hello0["cost_usd"] != hello0["cost_usd"]  # unknown, not $0
    assert hello0["trial_wall"] == 100.0
    late = df.loc[("crack-7z-hash.easy", 0)]  # variant id kept; resolved after the agent's timeout
    assert late["passed"] and late["stop_reason"] == "agent_timeout"
    assert df.loc[("crack-7z-hash.easy", 1), "ending"] == "time_limit"
    slow = df.loc[("slow", 0)]
    assert slow["infra_error"] and slow["ending"] == "verifier_error" and slow["reward"] != slow["reward"]
    boom = df.loc[("boom", 0)]
    assert boom["infra_error"] and boom["stop_reason"] == "harness_error" and boom["source"].endswith(
        "r1/results.json#boom.1-of-1.r1")
    assert df.loc[("boom", 1), "ending"] == "out_of_context" and not df.loc[("boom", 1), "infra_error"]

    events = list(read_events(res.run_dir / hello0["trajectory_path"]))
    assert events[0].instruction == "Do the hello task."
    verdict = next(e for e in events if e.type == "verifier")
    assert verdict.details["parser_results"]["test_outputs.py::test_content"] == "passed"
    assert Path(verdict.details["recording"]).is_file() and "PASSED test_outputs.py::test_content" in verdict.output

    ctx = build_report([res.run_dir], _quiet(), plots=False)
    pub = _section(ctx, "published").set_index("run")
    assert list(pub.index) == ["r1", "r2", "all 2 runs"]
    assert pub.loc["r1", "stated_accuracy"] == 0.5 and pub.loc["r1", "as_published"] == 0.5
    assert pub.loc["r2", "as_published"] == 0.25 and set(pub["matches"]) == {"yes"}
    assert pub.loc["r1", "infra_errors"] == 2 and pub.loc["r1", "pass@1"] == 1.0  # hello, crack; both passed
    assert pub.loc["all 2 runs", "passed_after_agent_failure"] == 1
    total = pub.loc["all 2 runs"]
    assert total["k"] == 2 and total["pass@k_as_published"] == pytest.approx(0.75)  # hello, crack, slow of 4
    summary = tables.summary(ctx.df, all_trials=ctx.all_trials).iloc[0]
    assert summary["infra_errors"] == 2 and summary["trials"] == 6
    assert summary["pass@1"] == pytest.approx((0.5 + 0.5 + 1.0 + 0.0) / 4)
    pk = _section(ctx, "pass_at_k").set_index("k")
    assert pk.loc[2, "n_tasks"] == 2  # slow and boom lost a trial to the harness


def test_one_run_with_several_attempts_and_a_missing_run_file(tmp_path: Path) -> None:
    """The orchestrator layout: one run, n_attempts = 4 (`.k-of-4.`); and a run whose run-level
    results.json is a Git LFS pointer: its trials come from the trial folders, its accuracy unknown."""
    t = trial_result
    attempts = [t("a", f"a.{k}-of-4.x", resolved=k != 2) for k in (1, 2, 3, 4)] + \
               [t("b", f"b.{k}-of-4.x", resolved=k == 3) for k in (1, 2, 3, 4)] + \
               [t("c", f"c.{k}-of-4.x", resolved=False) for k in (1, 2, 3, 4)]
    run = write_run(tmp_path / "orchestrator", attempts, n_attempts=4)
    stated = json.loads((run / "results.json").read_text())["pass_at_k"]
    assert set(stated) == {"2", "4"}
    res = I.import_runs([run], tmp_path / "out")
    df = tables.load_trials([res.run_dir]).set_index(["task_id", "trial"])
    assert [bool(df.loc[("a", i), "passed"]) for i in range(4)] == [True, False, True, True]  # attempt order
    total = _section(build_report([res.run_dir], _quiet(), plots=False), "published").iloc[-1]
    assert total["k"] == 4 and total["stated_pass@k"] == stated["4"] == pytest.approx(2 / 3)
    assert total["pass@k_as_published"] == pytest.approx(stated["4"])

    pointer = write_run(tmp_path / "lfs", [t("a", "a.1-of-1.y", resolved=True,
                                             recording="lfs/a/a.1-of-1.y/sessions/agent.cast")])
    (pointer / "results.json").write_text("version https://git-lfs.github.com/spec/v1\noid sha256:00\nsize 9\n")
    (pointer / "a" / "a.1-of-1.y" / "sessions" / "agent.cast").unlink()
    res2 = I.import_runs([pointer], tmp_path / "out2")
    assert res2.trials == 1 and any("Git LFS pointer" in w for w in res2.warnings)
    assert any("recordings" in w for w in res2.warnings)
    pub = _section(build_report([res2.run_dir], _quiet(), plots=False), "published").iloc[0]
    assert pub["matches"] == "-" and pub["as_published"] == 1.0


def test_a_standalone_results_file_and_bad_input(tmp_path: Path) -> None:
    t = trial_result
    run = write_run(tmp_path / "x", [t("a", "a.1-of-1.x", resolved=True), t("b", "b.1-of-1.x", resolved=False)],
                    trial_folders=False)
    lone = tmp_path / "sub" / "2025-08-27__22-13-13_results.json"
    lone.parent.mkdir()
    (run / "results.json").rename(lone)
    assert I.detect_format(lone.parent) == "terminal-bench"
    res = I.import_runs([lone.parent], tmp_path / "out")
    pub = _section(build_report([res.run_dir], _quiet(), plots=False), "published")
    assert pub.iloc[0]["run"] == "2025-08-27__22-13-13" and pub.iloc[0]["matches"] == "yes"
    with pytest.raises(TbscaleError, match="no terminal-bench runs found"):
        I.import_runs([tmp_path / "x"], tmp_path / "out3", fmt="terminal-bench")


def test_report_compares_two_imported_submissions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from tbscale.cli import app

    a = write_submission(tmp_path / "sub-a", tasks=12, runs=3, seed=1)
    b = write_submission(tmp_path / "sub-b", tasks=12, runs=3, seed=2)
    monkeypatch.chdir(tmp_path)  # report --import caches under ./results/imported
    res = CliRunner().invoke(app, ["report", "--import", str(a), "--import", str(b), "--compare", "sub-a", "sub-b",
                                   "--no-plots", "--format", "csv"])
    assert res.exit_code == 0, res.output
    csv = res.stdout
    compare = csv.split("# table: compare\n", 1)[1].split("\n\n", 1)[0].splitlines()
    metrics = [line.split(",")[0] for line in compare[1:]]
    assert metrics[0] == "pass@1" and "pass@2" in metrics and "consistency@1" in metrics
    assert "# table: published" in csv
    bad = CliRunner().invoke(app, ["report", "--import", str(a), "--compare", "sub-a", "nope", "--no-plots"])
    assert bad.exit_code == 2 and "no setting named 'nope'" in bad.output


def test_a_folder_of_submissions_gives_one_setting_each(tmp_path: Path) -> None:
    board = tmp_path / "leaderboard"
    write_submission(board / "sub-a", tasks=4, runs=2, seed=3)
    t = trial_result
    write_run(board / "single-run-sub", [t(n, f"{n}.{k}-of-2.z", resolved=k == 1) for n in ("x", "y") for k in (1, 2)],
              n_attempts=2)
    lone = write_run(tmp_path / "tmp-run", [t("x", "x.1-of-1.g", resolved=True)], trial_folders=False)
    (board / "sub-b").mkdir()
    (lone / "results.json").rename(board / "sub-b" / "2025-01-01__00-00-00_results.json")
    res = I.import_runs([board], tmp_path / "out")
    df = tables.load_trials([res.run_dir])
    assert df.groupby("setting").size().to_dict() == {"single-run-sub": 4, "sub-a": 8, "sub-b": 1}
    pub = _section(build_report([res.run_dir], _quiet(), plots=False), "published")
    assert set(pub["matches"]) == {"yes"} and (pub["run"].str.startswith("all")).sum() == 3


def test_older_rows_without_trial_names_or_failure_mode(tmp_path: Path) -> None:
    rows = [{"task_id": "a", "is_resolved": True, "failure_mode": None},
            {"task_id": "a", "is_resolved": False, "failure_mode": "agent_timeout"},
            {"task_id": "b", "is_resolved": None, "failure_mode": "parse_error"}]
    run = tmp_path / "old-run"
    run.mkdir()
    (run / "results.json").write_text(json.dumps({"results": rows, "accuracy": 1 / 3}))
    res = I.import_runs([run], tmp_path / "out")
    df = tables.load_trials([res.run_dir]).set_index(["task_id", "trial"])
    assert df.loc[("a", 0), "passed"] and df.loc[("a", 1), "ending"] == "time_limit" and df.loc[("b", 0), "infra_error"]
    pub = _section(build_report([res.run_dir], _quiet(), plots=False), "published").iloc[0]
    assert pub["matches"] == "yes" and pub["pass@1"] == 0.5
