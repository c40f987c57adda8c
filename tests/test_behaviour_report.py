"""Tests for tbscale.analysis.behaviour_report: trajectories -> labelled turns -> Figure 4 / Figure 5.

`make_run` writes a small run folder in tbscale's own format (trials.jsonl + one event stream per
trial, as the runner writes them), so the analysis is tested on the same input a real run gives.
The other analysis test files import it from here.
"""

from __future__ import annotations

import json
from itertools import count
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tbscale.analysis import behaviour_report as br
from tbscale.analysis import metrics, tables
from tbscale.analysis.behaviours import BEHAVIOURS
from tbscale.types.events import CandidateRecord

_keys = count()


def record(*args: Any, **kwargs: Any) -> CandidateRecord:
    """A candidate as the trajectory reader gives it (its model)."""
    return CandidateRecord(**cand(*args, **kwargs))


def cand(command: str | None, *, text: str | None = None, reasoning: str | None = None, reasoning_tokens: int = 0,
         runnable: bool | None = None) -> dict[str, Any]:
    runnable = (command is not None) if runnable is None else runnable
    return {"text": text if text is not None else (f"THOUGHT: go\n\n```bash\n{command}\n```" if command else "no command"),
            "reasoning": reasoning, "tool_calls": [], "finish_reason": "stop", "output_tokens": 10,
            "reasoning_tokens": reasoning_tokens, "command": command if runnable else None, "runnable": runnable,
            "submission": bool(command and "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT" in command),
            "parse_error": None if runnable else "found 0 ```bash blocks; give exactly one"}


def turn(cands: list[dict[str, Any]], pick: int | None = 0, *, failed: bool = False, output: str = "ok\n",
         exit_code: int = 0, selection: bool | None = None) -> dict[str, Any]:
    """One turn: candidates, which ran (None: no pick recorded), whether every selector call failed."""
    return {"cands": cands, "pick": pick, "failed": failed, "output": output, "exit_code": exit_code,
            "selection": len(cands) > 1 if selection is None else selection}


def write_trial_events(path: Path, *, task: str, setting: str, trial: int, attempts: list[list[dict]],
                       passed: bool, verifier_output: str = "PASS\n", instruction: str | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    ev: list[dict[str, Any]] = [{"type": "start", "attempt": None, "turn": None, "task_id": task, "setting": setting,
                                 "trial": trial, **({"instruction": instruction} if instruction else {})}]
    for a, turns in enumerate(attempts):
        ev.append({"type": "attempt_start", "attempt": a, "turn": None, "stage": "final"})
        for n, t in enumerate(turns, start=1):
            ev.append({"type": "candidates", "attempt": a, "turn": n, "candidates": t["cands"]})
            if t["selection"]:
                idx = t["pick"] if t["pick"] is not None else 0
                if t["pick"] is None:
                    continue  # the attempt stopped before a pick was logged
                ev.append({"type": "selection", "attempt": a, "turn": n, "index": idx, "selector_failed": t["failed"],
                           "rationale": "SELECTOR RATIONALE TEXT", "tries": 1})
            c = t["cands"][t["pick"]]
            if c["runnable"]:
                ev.append({"type": "action", "attempt": a, "turn": n, "command": c["command"],
                           "selected_index": t["pick"], "n_candidates": len(t["cands"])})
                ev.append({"type": "observation", "attempt": a, "turn": n, "exit_code": t["exit_code"],
                           "output": t["output"], "timed_out": False})
            else:
                ev.append({"type": "format_error", "attempt": a, "turn": n, "error": c["parse_error"]})
        ev.append({"type": "verifier", "attempt": a, "turn": len(turns), "reward": float(passed), "passed": passed,
                   "output": verifier_output})
        ev.append({"type": "attempt_end", "attempt": a, "turn": len(turns), "ending": "pass" if passed else
                   "wrong_submission", "reward": float(passed), "turns": len(turns)})
    ev.append({"type": "end", "attempt": None, "turn": None, "passed": passed, "reward": float(passed),
               "ending": "pass" if passed else "wrong_submission", "final_attempt": len(attempts) - 1})
    path.write_text("".join(json.dumps(e) + "\n" for e in ev))


def make_run(root: Path, trials: list[dict[str, Any]], name: str = "synthetic") -> Path:
    """A run folder. Each trial: setting, task, trial, attempts (list of turn lists) or turns,
    passed, n (candidates per turn of the setting), optional tokens, instruction."""
    run = root / name
    rows = []
    for t in trials:
        key = f"k{next(_keys):06d}"
        rel = f"trajectories/{t['task']}/{t['setting']}__t{t['trial']}__{key}.jsonl"
        attempts = t.get("attempts") or [t["turns"]]
        write_trial_events(run / rel, task=t["task"], setting=t["setting"], trial=t["trial"], attempts=attempts,
                           passed=t["passed"], instruction=t.get("instruction"),
                           verifier_output=t.get("verifier_output", "PASS\n"))
        n = t.get("n", 1)
        rows.append({
            "schema_version": 1, "run": name, "setting": t["setting"], "setting_key": t["setting"], "trial_key": key,
            "task_id": t["task"], "task_format": "harbor", "trial": t["trial"], "seed": 1, "agent": "bash",
            "policy": "turn_bon" if n > 1 else "baseline", "policy_params": {"n": n} if n > 1 else {},
            "trajectory": "single", "trajectory_params": {}, "n": n, "generator_model": "sim/policy",
            "selector_model": "sim/selector" if n > 1 else None, "simulated": True,
            "reward": float(t["passed"]), "passed": t["passed"], "ending": "pass" if t["passed"] else "wrong_submission",
            "stop_reason": "submitted", "turns": len(attempts[-1]),
            "tokens": t.get("tokens", {"generator": {"input": 100 * n, "output": 20 * n, "reasoning": 0, "cached": 0,
                                                     "cost_usd": 0.0, "calls": 1}}),
            "cost_usd": 0.0, "timing": {}, "n_attempts": len(attempts), "final_attempt": len(attempts) - 1,
            "trajectory_path": rel, "error": None})
    run.mkdir(parents=True, exist_ok=True)
    (run / "trials.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run / "manifest.json").write_text(json.dumps({"run_name": name, "experiment": {"models": {}, "tasks": {}}}))
    return run


SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


def _labels(run: Path) -> list[br.LabelledTurn]:
    df = tables.load_trials([run])
    return [lt for _, lt in br.iter_labelled(df)]


# --- labelling from trajectories -------------------------------------------------------------


def test_table4_examples_are_labelled_from_a_trajectory(tmp_path: Path) -> None:
    """Every Table 4 example, offered as candidates of Turn-BoN turns, gets the paper's label;
    the two history-dependent ones use what the attempt executed before."""
    heredoc = "cat > solve.py <<EOF\nprint(42)\nEOF"
    turns = [
        turn([cand("ls /app"), cand("cat README.md"), cand("sed -i 's/x/y/' app.py"), cand(heredoc)], pick=3),
        turn([cand("python solve.py"), cand("pytest tests/"), cand("diff -u out.txt expected.txt"),
              cand("pip install numpy")], pick=0),
        turn([cand("python solve.py"), cand("cp out.txt /app/"), cand("chmod +x run.sh"),
              cand("apt-get install -y jq")], pick=1),
        turn([cand(None, text="I think I should fix the file."), cand(SUBMIT), cand("sleep 5"), cand("python solve.py")],
             pick=1),
    ]
    run = make_run(tmp_path, [{"setting": "bon", "task": "t1", "trial": 0, "turns": turns, "passed": True, "n": 4}])
    lts = _labels(run)
    assert [lt.turn for lt in lts] == [1, 2, 3, 4]
    t1, t2, t3, t4 = (lt.labels for lt in lts)
    assert t1 == [{"only_reads"}, {"only_reads"}, {"edits_file"}, {"edits_file"}]
    # turn 2: solve.py was written at turn 1 and nothing has run since
    assert t2[0] == {"tests_last_edit"}
    assert "runs_test_or_check" in t2[1] and "tests_last_edit" in t2[1]
    assert "runs_test_or_check" in t2[2]
    assert t2[3] == {"installs_package"}
    # turn 3: python solve.py ran at turn 2 with no edit since -> a loop, and no longer an untested edit
    assert t3[0] == {"loops_on_command"}
    assert t3[1] == {"file_operations"} and t3[2] == {"file_operations"}
    assert t3[3] == {"installs_package"}
    # turn 4: no command -> cannot run; a submission gets no label; sleep is excluded from loops
    assert t4[0] == {"cannot_run"} and t4[1] == set()
    assert "loops_on_command" not in t4[2]
    assert "loops_on_command" in t4[3]


def test_history_is_what_ran_not_what_was_offered(tmp_path: Path) -> None:
    """An edit offered but not picked does not count as the last edit; each attempt starts afresh."""
    a0 = [turn([cand("ls"), cand("sed -i 's/a/b/' f.py")], pick=0),
          turn([cand("python f.py"), cand("ls")], pick=0)]
    a1 = [turn([cand("sed -i 's/a/b/' f.py"), cand("ls")], pick=0),
          turn([cand("python f.py"), cand("ls")], pick=0)]
    run = make_run(tmp_path, [{"setting": "bon", "task": "t", "trial": 0, "attempts": [a0, a1], "passed": False, "n": 2}])
    lts = _labels(run)
    assert [(lt.attempt, lt.turn) for lt in lts] == [(0, 1), (0, 2), (1, 1), (1, 2)]
    assert "tests_last_edit" not in lts[1].labels[0]  # the sed was never executed in attempt 0
    assert lts[2].labels[1] == {"only_reads"}  # attempt 1: ls has not run in this attempt -> no loop
    assert "tests_last_edit" in lts[3].labels[0]


def test_unrunnable_pick_executes_nothing(tmp_path: Path) -> None:
    turns = [turn([cand(None), cand("ls")], pick=0), turn([cand("ls"), cand("pwd")], pick=0)]
    run = make_run(tmp_path, [{"setting": "bon", "task": "t", "trial": 0, "turns": turns, "passed": False, "n": 2}])
    lts = _labels(run)
    assert lts[0].labels == [{"cannot_run"}, {"only_reads"}]
    assert lts[1].labels[0] == {"only_reads"}  # `ls` never ran, so it is no loop


# --- Figure 4 table ------------------------------------------------------------------------------


def _pref_run(tmp_path: Path) -> Path:
    edit, read, bad = cand("sed -i 's/a/b/' x.py"), cand("ls"), cand(None)
    trials = [
        # task A: picks the edit twice out of [edit, read]; one turn where the selector failed
        {"setting": "bon", "task": "A", "trial": 0, "n": 2, "passed": True, "turns": [
            turn([edit, read], pick=0), turn([read, edit], pick=1), turn([edit, read], pick=1, failed=True)]},
        # task B: picks the read out of [edit, read, read, bad]; a turn with no recorded pick
        {"setting": "bon", "task": "B", "trial": 0, "n": 4, "passed": False, "turns": [
            turn([edit, read, read, bad], pick=1), turn([edit, read], pick=None)]},
        {"setting": "base", "task": "A", "trial": 0, "n": 1, "passed": True, "turns": [turn([read]), turn([edit])]},
        {"setting": "base", "task": "B", "trial": 0, "n": 1, "passed": False, "turns": [turn([read])]},
    ]
    return make_run(tmp_path, trials)


def test_preference_shares_exclusions_and_baseline(tmp_path: Path) -> None:
    run = _pref_run(tmp_path)
    df = tables.load_trials([run])
    col = br.collect(df)
    assert col.excluded["bon"]["selector_failed"] == 1 and col.excluded["bon"]["pick_unknown"] == 1
    pref = br.preference(col, ["bon", "base"], "base", n_resamples=2000).set_index("behaviour")
    assert list(pref.index) == [br.BEHAVIOUR_TITLES[b] for b in BEHAVIOURS]
    e = pref.loc["Edits a file"]
    # usable turns: A1 (edit of [edit, read]), A2 (edit of [read, edit]), B1 (read of [edit, read, read, bad])
    assert e["turns"] == 3 and e["tasks"] == 2 and e["excluded_turns"] == 2
    assert e["selected"] == pytest.approx(2 / 3)
    assert e["uniform"] == pytest.approx((0.5 + 0.5 + 0.25) / 3)
    assert e["difference"] == pytest.approx(2 / 3 - 1.25 / 3)
    r = pref.loc["Only reads or inspects"]
    assert r["selected"] == pytest.approx(1 / 3) and r["uniform"] == pytest.approx((0.5 + 0.5 + 0.5) / 3)
    c = pref.loc["Response cannot run"]
    assert c["selected"] == 0 and c["uniform"] == pytest.approx(0.25 / 3)
    # baseline share: 3 baseline turns, one edit
    assert e["baseline_share"] == pytest.approx(1 / 3)
    assert set(pref["setting"]) == {"bon"}  # the baseline offers no choice


def test_preference_p_value_agrees_with_exhaustive_bootstrap(tmp_path: Path) -> None:
    """The table's p-value is the paired bootstrap over tasks (turn-weighted); on a tiny case its
    10,000-resample Monte Carlo value agrees with enumerating every resample."""
    edit, read = cand("sed -i 's/a/b/' x.py"), cand("ls")
    trials = []
    picks = {"A": [0, 0, 1], "B": [0, 1], "C": [0, 0, 0, 1], "D": [1]}
    for task, ps in picks.items():
        trials.append({"setting": "bon", "task": task, "trial": 0, "n": 2, "passed": True,
                       "turns": [turn([edit, read], pick=p) for p in ps]})
    df = tables.load_trials([make_run(tmp_path, trials)])
    col = br.collect(df)
    pref = br.preference(col, ["bon"], None, n_resamples=10_000).set_index("behaviour").loc["Edits a file"]
    sel = np.array([2 / 3, 1 / 2, 3 / 4, 0.0])
    uni = np.full(4, 0.5)
    w = np.array([3, 2, 4, 1], float)
    exact = metrics.paired_bootstrap_exact(uni, sel, weights=w)
    assert pref["difference"] == pytest.approx(exact.diff)
    assert pref["p_value"] == pytest.approx(exact.p_value, abs=0.02)
    assert pref["ci_lo"] == pytest.approx(exact.lo, abs=0.03) and pref["ci_hi"] == pytest.approx(exact.hi, abs=0.03)


# --- Figure 5 table ------------------------------------------------------------------------------


def test_reasoning_token_sources() -> None:
    counter = br.TokenCounter()
    assert br.reasoning_tokens(record("ls", reasoning="long thinking", reasoning_tokens=321), None, counter) == (321, "provider")
    n, src = br.reasoning_tokens(record("ls", reasoning="Let me think about this carefully."), "openai/gpt-4o", counter)
    assert src == "reasoning text" and 5 <= n <= 12
    n, src = br.reasoning_tokens(record("ls", text="THOUGHT: check the folder\n\n```bash\nls\n```"), None, counter)
    assert src == "visible thought" and n == counter.count("THOUGHT: check the folder", None) and n > 0
    assert br.visible_thought(record("ls", text="THOUGHT: a\n\n```bash\nls -la\n```\nafter")) == "THOUGHT: a\n\n\nafter"


def test_command_chars_and_turn_size_vs_baseline(tmp_path: Path) -> None:
    short, long_ = cand("ls"), cand("grep -rn foo src/ | sort | head")
    bad = cand(None)
    trials = []
    for task in ("A", "B", "C"):
        trials.append({"setting": "bon", "task": task, "trial": 0, "n": 3, "passed": True,
                       "turns": [turn([short, long_, bad], pick=1), turn([short, long_, bad], pick=1)]})
        trials.append({"setting": "base", "task": task, "trial": 0, "n": 1, "passed": True, "turns": [turn([short])]})
    df = tables.load_trials([make_run(tmp_path, trials)])
    col = br.collect(df)
    assert br.command_chars(CandidateRecord(**bad)) == 0
    size = br.turn_size(col, ["base", "bon"], "base", n_resamples=1000)
    chars = size[size["metric"] == "command chars / turn"].set_index("setting")
    assert chars.loc["bon", "selected"] == len(long_["command"])
    assert chars.loc["bon", "candidates"] == pytest.approx((2 + len(long_["command"]) + 0) / 3)
    assert chars.loc["bon", "baseline"] == 2 and chars.loc["base", "selected"] == 2
    assert chars.loc["bon", "diff_vs_baseline"] == pytest.approx(len(long_["command"]) - 2)
    assert np.isnan(chars.loc["base", "diff_vs_baseline"])
    reasoning = size[size["metric"] == "reasoning tokens / turn"].set_index("setting")
    assert reasoning.loc["bon", "source"].startswith("visible thought")


def test_report_sections_on_a_run(tmp_path: Path) -> None:
    from rich.console import Console

    from tbscale.analysis.report import build_report

    run = _pref_run(tmp_path)
    ctx = build_report([run], Console(file=open("/dev/null", "w")), plots=False)
    keys = [s.key for s in ctx.sections]
    assert {"behaviour_preference", "behaviour_shares", "turn_size"} <= set(keys)
    note = next(s.note for s in ctx.sections if s.key == "behaviour_preference")
    assert "bon: 1 turns where every selector call failed, 1 with no recorded pick" in note
    assert (ctx.out_dir / "behaviour_preference.csv").is_file()
    dump = (ctx.out_dir / "behaviour_turns.csv").read_text()
    assert "edits_file" in dump and "cannot_run" in dump
