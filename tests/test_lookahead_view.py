"""The viewer shows each lookahead candidate with what it did in its fork: the run's data holds
the outcome per candidate (identical candidates share one), and the page puts it in the card."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tbscale_testing.browser import Browser

from tests.test_viewer import Traj, candidate, dom, load_trial_js, row, start, turn_sections
from tbscale.viewer.build import build_viewer

KEY = "la0000000000000e"
COMMANDS = ["cat notes.txt", "make", "cat notes.txt", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"]
RAN = [{"candidates": [0, 2], "command": "cat notes.txt", "exit_code": 0, "timed_out": False, "duration_sec": 0.05,
        "output_bytes": 17, "output": "remember the make\n", "picked": False},
       {"candidates": [1], "command": "make", "exit_code": 2, "timed_out": False, "duration_sec": 1.5,
        "output_bytes": 40, "output": "make: *** No rule to make target. Stop.\n", "picked": True},
       {"candidates": [3], "command": COMMANDS[3], "exit_code": 0, "timed_out": False, "duration_sec": 0.04,
        "output_bytes": 38, "output": "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n", "picked": False}]


def write_run(tmp_path: Path) -> Path:
    run = tmp_path / "la-run"
    t = Traj()
    start(t, KEY, "lookahead_n4", "build-it")
    t.ev("attempt_start", 0, None, stage="final", image="x", image_built=False, container="c0")
    t.call(0, 1, "generator", "sim/policy", n=4)
    t.ev("candidates", 0, 1, candidates=[candidate(c) for c in COMMANDS])
    t.call(0, 1, "selector", "sim/selector")
    t.ev("lookahead", 0, 1, path="selected", ran=RAN, picked=1, exec_added_sec=0.09, turn_sec=2.1)
    t.ev("selection", 0, 1, index=1, rationale="make shows what is missing", selector_failed=False,
         method="lookahead", model="sim/selector", path="selected")
    t.ev("action", 0, 1, command="make", selected_index=1, n_candidates=4, ran_in_fork=True)
    t.ev("observation", 0, 1, exit_code=2, output=RAN[1]["output"], timed_out=False, duration_sec=1.5)
    t.ev("attempt_end", 0, 1, stage="final", ending="time_limit", stop_reason="time_limit", reward=0.0, turns=1)
    t.write(run / f"trajectories/build-it/lookahead_n4__t0__{KEY}.jsonl")
    (run / "trials.jsonl").write_text(json.dumps(row(KEY, "lookahead_n4", "build-it", policy="lookahead", n=4,
                                                     passed=False, turns=1, candidate_execs=3,
                                                     candidate_exec_sec=0.09)) + "\n")
    return run


def test_each_candidate_carries_its_fork_outcome(tmp_path: Path) -> None:
    built = build_viewer(write_run(tmp_path)).out_dir
    data = load_trial_js(built / "trials" / f"{KEY}.js")
    (turn,) = data["attempts"][0]["turns"]
    by = turn["lookahead"]["by_candidate"]
    assert sorted(by, key=int) == ["0", "1", "2", "3"]
    assert by["0"]["output"] == by["2"]["output"] == "remember the make\n" and by["0"]["shared"]
    assert by["0"]["first"] and not by["2"]["first"]
    assert by["1"]["exit_code"] == 2 and by["1"]["picked"] and not by["3"]["picked"]


def test_the_page_shows_each_outcome_beside_its_candidate(browser: Browser, tmp_path: Path) -> None:
    built = build_viewer(write_run(tmp_path)).out_dir
    sec = turn_sections(dom(browser, built, f"#/trial/{KEY}"))[(0, 1)]
    cards = re.split(r'<div class="cand[^"]*" data-index="', sec)[1:]
    assert len(cards) == 4
    assert "In its fork" in cards[0] and "remember the make" in cards[0] and "shared fork" in cards[0]
    assert "exit 2" in cards[1] and "No rule to make target" in cards[1]
    assert "shares a fork" in cards[2]
    assert "exit 0" in cards[3] and "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT" in cards[3]
