"""`tbscale view`: the static trajectory viewer.

The run is written by hand (docs/formats.md): a Turn-BoN trial with 4 candidates per turn, a
baseline trial on the same task and seed (for compare), a PDR trial with RTV rounds and several
attempts, and a baseline trial on a second task. The browser tests load the built viewer from
file:// in headless Chromium and read the rendered DOM (--dump-dom) or take screenshots.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tbscale_testing.browser import Browser

from tbscale.viewer import index_href, trial_href, trial_file_stem
from tbscale.viewer.build import build_viewer, extract_trial, read_lines

# Where the screenshot test also keeps its pictures, to look at them (else only in its tmp_path).
SHOTS = os.environ.get("TBSCALE_VIEWER_SHOTS")

TB_KEY, BASE_KEY, PDR_KEY, OTHER_KEY = "tb0000000000000a", "ba0000000000000b", "pd0000000000000c", "ba0000000000000d"
TB_PICKS = [2, 0, 3]  # the selector's index on each Turn-BoN turn
TB_RATIONALES = ["Candidate 2 reads the log before changing anything.",
                 "Candidate 0 writes the report with <awk> & checks it.",
                 "Candidate 3 submits: the report is verified."]
TB_COMMANDS = [["ls /app", "cat /app/README", "head -3 /app/logs/access.log", "rm -rf /app/logs"],
               ["awk '{print $1}' /app/logs/access.log > /app/report.txt", "echo hi", "pwd", "true"],
               ["false", "cat /app/report.txt", "ls", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"]]
BASE_COMMANDS = ["cat /app/logs/access.log | wc -l", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"]
# PDR: N=4, T=2, K=2, G=2. Brackets: select_k keeps 2 of iter0; final picks 1 of iter1 in two rounds.
SELECT_K_ROUNDS = [{"round": 1, "groups": [([2, 0], 0, {"2": 0, "0": 3}), ([1, 3], 3, {"1": 1, "3": 2})]}]
FINAL_ROUNDS = [{"round": 1, "groups": [([5, 7], 7, {"5": 1, "7": 2}), ([6, 4], 6, {"6": 2, "4": 1})]},
                {"round": 2, "groups": [([6, 7], 6, {"6": 2, "7": 1})]}]


# a repository that kept the fix after its HEAD (docs/swebench.md, "The repository's history")
HISTORY = {"path": "/testbed", "head": "0" * 40, "beyond_head": 12, "after_head": 9, "refs_beyond_head": 2,
           "refs": ["refs/tags/v2.0", "refs/remotes/origin/main"], "scrubbed": False, "left_beyond_head": 12,
           "left_after_head": 9, "left_refs": 2, "errors": []}


# ---- writing a run by hand --------------------------------------------------------------------------
class Traj:
    def __init__(self) -> None:
        self.lines: list[dict] = []
        self.ts = 1_700_000_000.0

    def ev(self, type: str, attempt, turn, **fields) -> None:
        self.ts += 0.25
        self.lines.append({"type": type, "ts": round(self.ts, 4), "attempt": attempt, "turn": turn, **fields})

    def call(self, attempt, turn, role, model, n=1, inp=500, out=40, latency=0.05, retries=0, error=None) -> None:
        self.ev("model_call", attempt, turn, role=role, model=model, n=n,
                usage={"input": inp, "output": out, "reasoning": 0, "cached": 0, "cost_usd": 0.001, "calls": 1},
                latency_sec=latency, retries=retries, error=error)

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(line) + "\n" for line in self.lines))


def candidate(command: str, thought: str = "Looking first.", reasoning: str | None = None) -> dict:
    return {"text": f"THOUGHT: {thought}\n\n```bash\n{command}\n```", "reasoning": reasoning, "tool_calls": [],
            "finish_reason": "stop", "output_tokens": 20 + len(command) // 4, "reasoning_tokens": 0,
            "command": command, "runnable": True, "submission": "COMPLETE_TASK" in command, "parse_error": None}


def start(t: Traj, key: str, setting: str, task: str) -> None:
    t.ev("start", None, None, schema_version=1, trial_key=key, task_id=task, setting=setting, setting_key="k" + setting,
         trial=0, seed=42, simulated=True, instruction=f"Write a report for {task}.\nUse awk.")


def attempt_events(t: Traj, a: int, stage: str, commands: list[str], passed: bool, context=()) -> None:
    t.ev("attempt_start", a, None, stage=stage, image="tbscale-task/x:1", image_built=False, container="c0ffee",
         context_attempts=list(context))
    for turn, cmd in enumerate(commands, 1):
        t.call(a, turn, "generator", "sim/refiner")
        t.ev("candidates", a, turn, candidates=[candidate(cmd, f"attempt {a} turn {turn}")])
        t.ev("action", a, turn, command=cmd, selected_index=0, n_candidates=1)
        t.ev("observation", a, turn, exit_code=0, output=f"out {a}.{turn}\n", timed_out=False, duration_sec=0.1)
    t.ev("verifier", a, len(commands), reward=1.0 if passed else 0.0, passed=passed, error=None,
         output="PASS\n" if passed else "FAIL: report.txt wrong\n", details={"exit_code": 0 if passed else 1})
    t.ev("attempt_end", a, len(commands), stage=stage, ending="pass" if passed else "wrong_submission",
         stop_reason="submitted", reward=1.0 if passed else 0.0, turns=len(commands), error=None,
         timing={"agent": 1.0}, usage={"generator": {"input": 500, "output": 40, "reasoning": 0, "cached": 0,
                                                     "cost_usd": 0.0, "calls": len(commands)}})


def row(key: str, setting: str, task: str, *, policy="baseline", n=1, trajectory="single", passed=True, turns=2,
        tokens=1000, wall=5.0, **extra) -> dict:
    return {"schema_version": 1, "run": "viewer-test", "setting": setting, "setting_key": "k" + setting,
            "trial_key": key, "task_id": task, "task_format": "harbor", "trial": 0, "seed": 42, "agent": "bash",
            "policy": policy, "policy_params": {"n": n} if n > 1 else {}, "n": n, "trajectory": trajectory,
            "trajectory_params": {}, "generator_model": "sim/policy", "selector_model": "sim/selector" if n > 1 else None,
            "simulated": True, "reward": 1.0 if passed else 0.0, "passed": passed,
            "ending": "pass" if passed else "wrong_submission", "stop_reason": "submitted", "turns": turns,
            "tokens": {"generator": {"input": tokens - 100, "output": 100, "reasoning": 0, "cached": 0, "cost_usd": 0.01,
                                     "calls": turns}},
            "cost_usd": 0.01, "timing": {"agent": wall - 1, "trial_wall": wall}, "n_attempts": 1, "final_attempt": 0,
            "attempts": None, "strategy_record": None,
            "trajectory_path": f"trajectories/{task}/{setting}__t0__{key}.jsonl", "error": None,
            "started_at": "2026-01-01T00:00:00+00:00", "finished_at": "2026-01-01T00:00:05+00:00", **extra}


def tournament(stage: str, frm: list[int], target: int, rounds_spec: list[dict]) -> dict:
    rounds, entrants = [], list(frm)
    for rd in rounds_spec:
        groups = []
        for members, winner, counts in rd["groups"]:
            votes = [{"choice": int(m), "order": members} for m, c in counts.items() for _ in range(c)]
            groups.append({"members": members, "bye": False, "votes": votes, "counts": counts, "winner": winner,
                           "tie_broken": False, "invalid_votes": 0})
        survivors = [g["winner"] for g in groups]
        rounds.append({"round": rd["round"], "entrants": entrants, "groups": groups, "survivors": survivors})
        entrants = survivors
    return {"stage": stage, "kind": "select", "method": "rtv", "target": target, "from": frm, "selected": entrants,
            "tournament": {"method": "rtv", "target": target, "group_size": 2, "entrants": frm, "rounds": rounds,
                           "survivors": entrants}}


def write_run(root: Path) -> Path:
    run = root / "viewer-test"
    run.mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps({"run_name": "viewer-test", "simulated_models": True}))
    rows = []

    # Turn-BoN, N=4, three turns
    t = Traj()
    start(t, TB_KEY, "turn_bon_n4", "log-report")
    t.ev("attempt_start", 0, None, stage="final", image="tbscale-task/x:1", image_built=False, container="c1",
         context_attempts=[])
    for turn, (cmds, pick, why) in enumerate(zip(TB_COMMANDS, TB_PICKS, TB_RATIONALES), 1):
        t.call(0, turn, "generator", "sim/policy", n=4, out=120)
        t.ev("candidates", 0, turn, candidates=[candidate(c, f"option {i} on turn {turn}",
                                                          reasoning=f"hidden reasoning {i}" if i == 1 else None)
                                                for i, c in enumerate(cmds)])
        t.call(0, turn, "selector", "sim/selector", out=22, retries=1 if turn == 2 else 0)
        t.ev("selection", 0, turn, index=pick, rationale=why, selector_failed=False, tries=1, method="listwise",
             model="sim/selector")
        t.ev("action", 0, turn, command=cmds[pick], selected_index=pick, n_candidates=4)
        out = "\n".join(f"line {i}" for i in range(200)) if turn == 1 else "ok\n"
        t.ev("observation", 0, turn, exit_code=0, output=out, timed_out=False, duration_sec=0.2)
    t.ev("verifier", 0, 3, reward=1.0, passed=True, error=None, output="PASS: 3 checks\n", details={"exit_code": 0})
    t.ev("attempt_end", 0, 3, stage="final", ending="pass", stop_reason="submitted", reward=1.0, turns=3, error=None,
         timing={"agent": 2.0}, usage={})
    t.ev("end", None, None, reward=1.0, passed=True, ending="pass", final_attempt=0, record={})
    t.write(run / f"trajectories/log-report/turn_bon_n4__t0__{TB_KEY}.jsonl")
    rows.append(row(TB_KEY, "turn_bon_n4", "log-report", policy="turn_bon", n=4, turns=3, tokens=9000, wall=7.5))

    # Baseline on the same task and seed
    t = Traj()
    start(t, BASE_KEY, "baseline", "log-report")
    attempt_events(t, 0, "final", BASE_COMMANDS, passed=False)
    t.lines.append({"broken": True})  # a line without a type
    t.write(run / f"trajectories/log-report/baseline__t0__{BASE_KEY}.jsonl")
    with open(run / f"trajectories/log-report/baseline__t0__{BASE_KEY}.jsonl", "a") as f:
        f.write('{"type": "end", "torn')  # a torn last line, as a crash leaves it
    rows.append(row(BASE_KEY, "baseline", "log-report", passed=False, turns=2, tokens=2000, wall=3.0))

    # PDR + RTV: iter0 (attempts 0-3), select_k, iter1 (4-7, refining 0 and 3), final
    t = Traj()
    start(t, PDR_KEY, "pdr_rtv", "log-report")
    results = {0: True, 1: False, 2: False, 3: True, 4: False, 5: True, 6: True, 7: False}
    for a in range(8):
        stage = "iter0" if a < 4 else "iter1"
        attempt_events(t, a, stage, [f"echo attempt-{a}", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"], results[a],
                       context=[0, 3] if a >= 4 else [])
        t.call(-1, None, "summarizer", "sim/summarizer")
        t.ev("summary", -1, None, stage=stage, of_attempt=a, source="llm", fields={"progress": f"p{a}"},
             text=f"summary of attempt {a}", error=None)
    for stage, rounds in (("select_k", SELECT_K_ROUNDS), ("final", FINAL_ROUNDS)):
        for rd in rounds:
            for g, (members, winner, counts) in enumerate(rd["groups"]):
                v = 0
                for m, c in counts.items():
                    for _ in range(c):
                        t.call(-1, None, "judge", "sim/judge")
                        t.ev("verifier_call", -1, None, stage=stage, role="judge", method=stage, model="sim/judge",
                             parsed={"best": int(m), "order": members}, round=rd["round"], group=g, vote=v, error=None,
                             calls=1, messages=[{"role": "user", "content": "judge these"}],
                             response=json.dumps({"rationale": f"attempt {m} looks complete (vote {v})", "best": 1}))
                        v += 1
    record = {"kind": "pdr", "n": 4, "iterations": 2, "k": 2, "stages": [
        {"stage": "iter0", "kind": "iteration", "attempts": [0, 1, 2, 3], "summarized": True},
        tournament("select_k", [0, 1, 2, 3], 2, SELECT_K_ROUNDS),
        {"stage": "iter1", "kind": "iteration", "attempts": [4, 5, 6, 7], "summarized": True},
        tournament("final", [4, 5, 6, 7], 1, FINAL_ROUNDS)], "final": 6}
    t.ev("end", None, None, reward=1.0, passed=True, ending="pass", final_attempt=6, record=record)
    t.write(run / f"trajectories/log-report/pdr_rtv__t0__{PDR_KEY}.jsonl")
    attempts = [{"index": a, "label": "iter0" if a < 4 else "iter1", "stage": "iter0" if a < 4 else "iter1",
                 "reward": float(results[a]), "passed": results[a], "ending": "pass" if results[a] else "wrong_submission",
                 "stop_reason": "submitted", "turns": 2, "context": [0, 3] if a >= 4 else []} for a in range(8)]
    rows.append(row(PDR_KEY, "pdr_rtv", "log-report", trajectory="pdr", turns=2, tokens=30000, wall=40.0,
                    n_attempts=8, final_attempt=6, attempts=attempts, strategy_record=record))

    # Baseline on another task
    t = Traj()
    start(t, OTHER_KEY, "baseline", "csv-summary")
    attempt_events(t, 0, "final", ["ls", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"], passed=True)
    t.write(run / f"trajectories/csv-summary/baseline__t0__{OTHER_KEY}.jsonl")
    rows.append(row(OTHER_KEY, "baseline", "csv-summary", turns=2, tokens=1500, wall=2.0, repositories=[HISTORY],
                    history_reads=["git log --all --oneline --grep=#7"]))

    with open(run / "trials.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
        f.write('{"schema_version": 1, "run": "viewer-te')  # torn
    return run


@pytest.fixture
def run(tmp_path: Path) -> Path:
    return write_run(tmp_path)


@pytest.fixture
def built(run: Path) -> Path:
    res = build_viewer(run)
    assert res.trials == 4
    return res.out_dir


def load_trial_js(path: Path) -> dict:
    text = path.read_text(encoding="utf-8")
    m = re.fullmatch(r"tbvTrial\((\"[^\"]*\"),(.*)\);\n", text, re.S)
    assert m, text[:200]
    return json.loads(m.group(2))


def load_index_js(path: Path) -> dict:
    text = path.read_text(encoding="utf-8")
    assert text.startswith("window.TBV_INDEX=") and text.endswith(";\n")
    return json.loads(text[len("window.TBV_INDEX="):-2])


# ---- building --------------------------------------------------------------------------------------
def test_build_writes_index_trials_and_assets(built: Path) -> None:
    for name in ("index.html", "viewer.js", "viewer.css", "index.js"):
        assert (built / name).is_file()
    page = (built / "index.html").read_text()
    assert "tbvTrial" not in page and "TBV_INDEX=" not in page  # no data inlined in the page
    assert re.search(r"(src|href)=\"(https?:)?//", page) is None  # no external assets
    idx = load_index_js(built / "index.js")
    assert idx["trials"] == 4 and idx["simulated"] and idx["simulated_banner"].startswith("SIMULATED MODELS")
    assert sorted(idx["cols"]["key"]) == sorted([TB_KEY, BASE_KEY, PDR_KEY, OTHER_KEY])
    assert set(idx["settings"]) == {"turn_bon_n4", "baseline", "pdr_rtv"}
    assert {len(v) for v in idx["cols"].values()} == {4}  # columnar
    files = sorted(p.name for p in (built / "trials").glob("*.js"))
    assert files == sorted(f"{k}.js" for k in (TB_KEY, BASE_KEY, PDR_KEY, OTHER_KEY))


def test_trial_data_turn_by_turn(built: Path) -> None:
    data = load_trial_js(built / "trials" / f"{TB_KEY}.js")
    (att,) = data["attempts"]
    assert [t["selection"]["index"] for t in att["turns"]] == TB_PICKS
    assert [t["selection"]["rationale"] for t in att["turns"]] == TB_RATIONALES
    assert all(len(t["candidates"]) == 4 for t in att["turns"])
    assert [c["role"] for c in att["turns"][1]["calls"]] == ["generator", "selector"]
    assert att["verifier"]["output"] == "PASS: 3 checks\n" and att["end"]["ending"] == "pass"

    pdr = load_trial_js(built / "trials" / f"{PDR_KEY}.js")
    assert [a["stage"] for a in pdr["attempts"]] == ["iter0"] * 4 + ["iter1"] * 4
    assert [a["start"]["context_attempts"] for a in pdr["attempts"]][4:] == [[0, 3]] * 4
    assert [t["stage"] for t in pdr["tournaments"]] == ["select_k", "final"]
    assert [r["survivors"] for r in pdr["tournaments"][1]["rounds"]] == [[7, 6], [6]]
    vote = pdr["tournaments"][1]["rounds"][1]["groups"][0]["votes"][0]
    assert "looks complete" in vote["reply"]["response"]  # the judge's reply joins its vote
    assert len(pdr["strategy"]["summaries"]) == 8
    assert all("messages" not in c for c in pdr["strategy"]["verifier_calls"])  # prompts are summarised


def test_brackets_rebuilt_from_judge_calls_without_a_record(built: Path, run: Path) -> None:
    pdr = load_trial_js(built / "trials" / f"{PDR_KEY}.js")
    rebuilt = extract_trial({"trial_key": PDR_KEY}, read_lines(run / f"trajectories/log-report/pdr_rtv__t0__{PDR_KEY}.jsonl",
                                                                 lambda m: None))
    assert [t["stage"] for t in rebuilt["tournaments"]] == ["select_k", "final"]
    for a, b in zip(pdr["tournaments"], rebuilt["tournaments"]):
        assert [r["survivors"] for r in a["rounds"]] == [r["survivors"] for r in b["rounds"]]


def test_corrupt_lines_are_skipped_with_a_warning(run: Path) -> None:
    warnings: list[str] = []
    res = build_viewer(run, warn=warnings.append)
    assert res.trials == 4
    assert any("trials.jsonl" in w and "not JSON" in w for w in warnings)
    assert any(BASE_KEY in w and "not JSON" in w for w in warnings)
    base = load_trial_js(res.out_dir / "trials" / f"{BASE_KEY}.js")
    assert [t["action"]["command"] for t in base["attempts"][0]["turns"]] == BASE_COMMANDS


def test_long_outputs_keep_head_and_tail(run: Path, tmp_path: Path) -> None:
    from tbscale.viewer.build import OUTPUT_HEAD, OUTPUT_TAIL

    path = run / f"trajectories/log-report/baseline__t0__{BASE_KEY}.jsonl"
    lines = [e for e in read_lines(path, lambda m: None) if "type" in e]
    big = "HEAD" + "x" * 200_000 + "TAIL"
    for e in lines:
        if e["type"] == "observation":
            e["output"] = big
    path.write_text("".join(json.dumps(e) + "\n" for e in lines))
    res = build_viewer(run, tmp_path / "elsewhere")
    obs = load_trial_js(res.out_dir / "trials" / f"{BASE_KEY}.js")["attempts"][0]["turns"][0]["observation"]
    assert obs["output"].startswith("HEAD") and obs["output"].endswith("TAIL")
    assert len(obs["output"]) == OUTPUT_HEAD + OUTPUT_TAIL and obs["output_cut"] == len(big) - OUTPUT_HEAD - OUTPUT_TAIL
    assert not (run / "view").exists()  # --out: nothing written into the run


def test_rebuild_writes_only_what_changed(run: Path) -> None:
    first = build_viewer(run)
    assert first.written == 4
    again = build_viewer(run)
    assert (again.written, again.unchanged) == (0, 4)
    traj = run / f"trajectories/csv-summary/baseline__t0__{OTHER_KEY}.jsonl"
    later = time.time() + 5
    os.utime(traj, (later, later))
    third = build_viewer(run)
    assert third.written == 1
    # a superseding trials.jsonl line (a rerun) rewrites that trial, and a trial gone from the index is removed
    rows = [json.loads(x) for x in (run / "trials.jsonl").read_text().splitlines()[:4]]
    rows[0].update(reward=0.5, passed=False, ending="wrong_submission")  # a verdict that can be true
    rows = [r for r in rows if r["trial_key"] != OTHER_KEY]
    (run / "trials.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    fourth = build_viewer(run)
    assert (fourth.written, fourth.removed, fourth.trials) == (1, 1, 3)
    assert not (fourth.out_dir / "trials" / f"{OTHER_KEY}.js").exists()
    assert build_viewer(run, force=True).written == 3


def test_parallel_build_matches_serial(run: Path, tmp_path: Path) -> None:
    serial = build_viewer(run, tmp_path / "serial", workers=1)
    parallel = build_viewer(run, tmp_path / "parallel", workers=2)
    assert parallel.written == serial.written == 4
    assert sorted(parallel.warnings) == sorted(serial.warnings)
    for p in (serial.out_dir / "trials").glob("*.js"):
        assert (parallel.out_dir / "trials" / p.name).read_bytes() == p.read_bytes()
    assert (parallel.out_dir / "index.js").read_bytes() == (serial.out_dir / "index.js").read_bytes()


def test_links() -> None:
    assert trial_href("ab12") == "../view/index.html#/trial/ab12"
    assert trial_href("a/b c") == "../view/index.html#/trial/a%2Fb%20c"
    assert trial_href("ab12", base="index.html") == "index.html#/trial/ab12"
    assert index_href(setting="baseline", ending="pass") == "../view/index.html#/?setting=baseline&ending=pass"
    assert trial_file_stem("ab-12_x") == "ab-12_x" and trial_file_stem("a/b.c") == "a_b_c"


def test_cli_view_and_errors(run: Path, tmp_path: Path) -> None:
    from tbscale.cli import app

    res = CliRunner().invoke(app, ["view", str(run)])
    assert res.exit_code == 0, res.output
    assert str((run / "view" / "index.html").resolve()) in res.output
    res = CliRunner().invoke(app, ["view", str(tmp_path / "nothing-here")])
    assert res.exit_code == 2
    assert "not a run folder (no trials.jsonl)" in res.output
    assert len([x for x in res.output.splitlines() if x.strip()]) == 1


def test_view_builds_without_heavy_imports(run: Path) -> None:
    code = ("import sys; from tbscale.viewer.build import build_viewer; build_viewer(sys.argv[1]); "
            "heavy = [m for m in ('pandas', 'litellm', 'docker', 'numpy', 'matplotlib', 'pyarrow') if m in sys.modules]; "
            "print(heavy)")
    out = subprocess.run([os.sys.executable, "-c", code, str(run)], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_serve_binds_to_loopback(built: Path) -> None:
    from tbscale.viewer.serve import make_server

    server = make_server(built, 0)
    host, port = server.server_address[:2]
    assert host == "127.0.0.1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        for name in ("index.html", "index.js", f"trials/{TB_KEY}.js"):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/{name}", timeout=10) as resp:
                assert resp.status == 200 and resp.read()
    finally:
        server.shutdown()
        server.server_close()


# ---- in the browser -----------------------------------------------------------------------------------
VIEWER_READY = "document.getElementById('app').getAttribute('data-ready') === '1'"  # set once a route has rendered


def dom(browser: Browser, built: Path, route: str) -> str:
    page = browser.dom((built / "index.html").resolve().as_uri() + route, ready=VIEWER_READY)
    assert 'data-ready="1"' in page, page[:2000]
    return page


def turn_sections(page: str) -> dict[tuple[int, int], str]:
    """(attempt, turn) -> the HTML of that turn's section."""
    out = {}
    for chunk in page.split('<section class="turn"')[1:]:
        m = re.match(r' data-turn="(\d+)" data-attempt="(\d+)"', chunk)
        assert m, chunk[:200]
        out[(int(m.group(2)), int(m.group(1)))] = chunk.split("</section>")[0]
    return out


def text_of(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


def test_turn_bon_page_highlights_the_selected_candidate(browser: Browser, built: Path) -> None:
    page = dom(browser, built, f"#/trial/{TB_KEY}")
    turns = turn_sections(page)
    assert sorted(turns) == [(0, 1), (0, 2), (0, 3)]
    for t, (pick, why, cmds) in enumerate(zip(TB_PICKS, TB_RATIONALES, TB_COMMANDS), 1):
        sec = turns[(0, t)]
        cards = re.findall(r'<div class="(cand[^"]*)" data-index="(\d+)">', sec)
        assert [int(i) for _, i in cards] == [0, 1, 2, 3]
        picked = [int(i) for cls, i in cards if "picked" in cls.split()]
        assert picked == [pick]
        rationale = re.search(r'<p class="rationale">(.*?)</p>', sec, re.S)
        assert rationale and text_of(rationale.group(1)) == why
        action = sec.split('<div class="action">')[1].split('<div class="obs">')[0]
        assert html.escape(cmds[pick], quote=False) in action
        assert "<details" in sec and "thought" in sec  # the generator's visible thought is folded
    assert "hidden reasoning 1" in page and 'class="reasoning"' in page
    assert "more lines" in turns[(0, 1)]  # the 200-line observation is folded, head and tail shown
    assert "line 0" in turns[(0, 1)] and "line 199" in turns[(0, 1)]
    assert "SIMULATED MODELS" in page and "PASS: 3 checks" in page


def test_index_lists_trials_and_filters_from_the_hash(browser: Browser, built: Path) -> None:
    page = dom(browser, built, "#/")
    assert len(re.findall(r'<tr class="trial-row"', page)) == 4
    assert re.search(r'id="count" data-n="4" data-total="4"', page)
    assert "SIMULATED MODELS" in page
    assert f'href="#/trial/{TB_KEY}"' in page
    page = dom(browser, built, "#/?setting=baseline")
    assert len(re.findall(r'<tr class="trial-row"', page)) == 2
    page = dom(browser, built, "#/?setting=baseline&passed=1")
    assert re.findall(r'<tr class="trial-row" data-key="([^"]+)"', page) == [OTHER_KEY]
    page = dom(browser, built, "#/?sort=tokens&dir=desc")
    assert re.findall(r'<tr class="trial-row" data-key="([^"]+)"', page) == [PDR_KEY, TB_KEY, BASE_KEY, OTHER_KEY]


def test_compare_shows_both_settings_and_their_commands(browser: Browser, built: Path) -> None:
    page = dom(browser, built, f"#/compare/{TB_KEY}/{BASE_KEY}")
    cols = re.findall(r'class="setting-name"[^>]*>([^<]+)<', page)
    assert cols[:2] == ["turn_bon_n4", "baseline"]
    a = page.split('class="cmp-grid cmp-turns"')[1]
    left = "".join(re.findall(r'<div class="cmp-cell cmp-a">(.*?)</div>(?=<div class="cmp-cell cmp-b">)', a, re.S))
    right = "".join(re.findall(r'<div class="cmp-cell cmp-b">(.*?)(?=<div class="cmp-cell cmp-a">|$)', a, re.S))
    for cmds, pick in zip(TB_COMMANDS, TB_PICKS):
        assert html.escape(cmds[pick], quote=False) in left
    for cmd in BASE_COMMANDS:
        assert html.escape(cmd, quote=False) in right
    trial = dom(browser, built, f"#/trial/{TB_KEY}")
    assert f'<option value="{BASE_KEY}">baseline' in trial  # the control to pick the other setting
    assert f'<option value="{PDR_KEY}">pdr_rtv' in trial


def test_a_trial_given_the_history_beyond_head_says_so(browser: Browser, built: Path) -> None:
    page = dom(browser, built, f"#/trial/{OTHER_KEY}")
    block = text_of(page.split('<div class="tampering history">')[1].split("</div>")[0])
    assert "exposed /testbed 9 commits after HEAD (12 beyond it) · refs: refs/tags/v2.0, refs/remotes/origin/main" in block
    assert "reads past HEAD git log --all --oneline --grep=#7" in block
    assert '<div class="tampering history">' not in dom(browser, built, f"#/trial/{TB_KEY}")


def test_rtv_bracket_shows_each_rounds_winners(browser: Browser, built: Path) -> None:
    page = dom(browser, built, f"#/trial/{PDR_KEY}")
    brackets = {m.group(1): m.group(2) for m in
                re.finditer(r'<div class="bracket" data-stage="([^"]+)">(.*?)(?=<div class="bracket"|<div class="sub-h")', page, re.S)}
    assert set(brackets) == {"select_k", "final"}
    for stage, spec in (("select_k", SELECT_K_ROUNDS), ("final", FINAL_ROUNDS)):
        for rd in spec:
            col = re.search(rf'<div class="round" data-round="{rd["round"]}">(.*?)(?=<div class="round)', brackets[stage], re.S)
            assert col, stage
            winners = [int(x) for x in re.findall(r'class="member winner" data-attempt="(\d+)"', col.group(1))]
            assert winners == [w for _, w, _ in rd["groups"]]
    final_sel = re.search(r'<div class="round final-col">(.*)', brackets["final"], re.S).group(1)
    assert re.findall(r'class="member winner selected" data-attempt="(\d+)"', final_sel) == ["6"]
    assert "looks complete" in brackets["final"]  # the judge's rationale per vote
    assert len(re.findall(r'<details class="attempt', page)) == 8


def colours(png: Path) -> int:
    from PIL import Image

    img = Image.open(png).convert("RGB")
    found = img.getcolors(maxcolors=1_000_000)
    return len(found) if found is not None else 1_000_000


def test_screenshots_are_not_blank(browser: Browser, built: Path, tmp_path: Path) -> None:
    shots = {"index.png": ("#/", 1400, 900), "turn_bon_trial.png": (f"#/trial/{TB_KEY}", 1400, 1600),
             "pdr_rtv_trial.png": (f"#/trial/{PDR_KEY}", 1400, 1600)}
    for name, (route, w, h) in shots.items():
        out = tmp_path / name
        browser.screenshot((built / "index.html").resolve().as_uri() + route, out, w, h, ready=VIEWER_READY)
        assert out.is_file(), name
        assert colours(out) > 50, name  # text, badges, highlighted cards: not a blank page
        if SHOTS:
            Path(SHOTS).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(out, Path(SHOTS) / name)


def test_report_links_each_setting_to_its_trials_in_the_viewer(run: Path) -> None:
    import io

    from rich.console import Console

    from tbscale.analysis.report import build_report

    ctx = build_report([run], Console(file=io.StringIO()), plots=True)
    built = build_viewer(run)
    page = (ctx.out_dir / "report.html").read_text()
    hrefs = set(re.findall(r'href="(\.\./view/[^"]*)"', html.unescape(page)))
    assert "../view/index.html" in hrefs
    assert {index_href(setting=s) for s in ("baseline", "turn_bon_n4", "pdr_rtv")} <= hrefs
    for href in hrefs:
        assert (ctx.out_dir / href.split("#")[0]).resolve() == built.index_html.resolve()
