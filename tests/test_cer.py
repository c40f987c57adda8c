"""CER (cer-early-reward.txt): rubric aggregation, regression stopping, tie detection and tie-break
rubrics, beam selection, the record and the report metrics.

Strategy tests run without containers: a scripted `start_attempt` builds prefixes whose commands
carry a quality (`echo q=3 t=1`), and a scripted judge (an object with an async `complete`)
returns canned rubric sets and scores each prefix by the last quality it shows (tie-break rubrics:
by `t`). The last test runs CER end to end in Docker with the simulated models."""

from __future__ import annotations

import asyncio
import json
import math
import re
from types import SimpleNamespace

import pytest

from tbscale.analysis import cer_report
from tbscale.logs import AttemptRecorder, EventLog, read_jsonl
from tbscale.strategies.base import AttemptResult
from tbscale.strategies.cer import (CER, CERParams, Criterion, aggregate, allocate, common_prefix_len, parse_rubrics,
                                    parse_scores, rank, regressed, select_beam, top_tied)
from tbscale.tasks import Task
from tbscale.types import Usage

INSTRUCTION = "Raise the quality of the widget."
TASK = Task(id="t", format="harbor", instruction=INSTRUCTION)
SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


# ---- pure parts -----------------------------------------------------------------------------------------
def test_aggregate_is_the_weighted_mean_with_negative_criteria_and_missing_scores():
    crit = [Criterion("a", "progress", 3), Criterion("b", "validation", 1), Criterion("c", "errors", 2, "negative")]
    # q = s/4; negative contributes 1 - q: (3*1 + 1*0.5 + 2*(1-0.25)) / 6
    assert aggregate(crit, {"a": 4, "b": 2, "c": 1}) == pytest.approx((3 + 0.5 + 1.5) / 6)
    # a missing criterion is left out and the weights renormalize
    assert aggregate(crit, {"a": 2, "c": 0}) == pytest.approx((3 * 0.5 + 2 * 1.0) / 5)
    assert aggregate(crit, {}) is None
    assert aggregate(crit, {"a": 9}) == 1.0  # clipped to the scale


def test_parse_rubrics_and_scores_keep_only_usable_entries():
    obj = {"criteria": [{"id": "c1", "criterion": "x", "weight": 2}, {"id": "c1", "criterion": "dup", "weight": 1,
                                                                        "polarity": "Negative"},
                        {"id": "bad", "weight": -1}, {"id": "b2", "weight": True}, "junk"]}
    crit = parse_rubrics(obj)
    assert [(c.id, c.weight, c.polarity) for c in crit] == [("c1", 2.0, "positive"), ("c1_", 1.0, "negative")]
    assert parse_rubrics({"criteria": [{"weight": 0}]}) is None and parse_rubrics(None) is None
    assert len(parse_rubrics({"criteria": [{"weight": 1}] * 9}, max_criteria=3)) == 3
    scores = parse_scores({"candidates": [{"id": "3", "scores": [{"criterion": "c1", "score": 3, "evidence": "ran tests"},
                                                                 {"criterion": "zz", "score": 4}]},
                                          {"id": 9, "scores": [{"criterion": "c1", "score": 1}]},
                                          {"id": 4, "scores": [{"criterion": "c1", "score": "high"}]}]},
                          [3, 4], crit)
    assert scores == {3: {"criteria": {"c1": 3.0}, "evidence": {"c1": "ran tests"}}}
    assert parse_scores({"candidates": []}, [1], crit) is None


def test_ties_regression_ranking_and_beam():
    assert top_tied({1: 0.5, 2: 0.75, 3: 0.75, 4: None}) == [2, 3]
    assert top_tied({1: 0.5, 2: None}) == [1] and top_tied({1: None}) == []
    assert regressed(0.4, 0.5) and not regressed(0.5, 0.5) and not regressed(0.9, 0.5)
    assert not regressed(0.1, None) and regressed(None, 0.2)
    rng = __import__("random").Random(0)
    # score first, then the tie-break score among equals, unscored last
    assert rank({1: 0.5, 2: 0.75, 3: 0.75, 4: None}, rng, {2: 0.1, 3: 0.9}) == [3, 2, 1, 4]
    # a tie the tie-break leaves is decided by the seeded coin, the same for the same seed
    r1 = rank({1: 0.5, 2: 0.5}, __import__("random").Random(3))
    assert r1 == rank({1: 0.5, 2: 0.5}, __import__("random").Random(3)) and sorted(r1) == [1, 2]
    assert allocate(8, 2) == [4, 4] and allocate(5, 2) == [3, 2] and allocate(4, 3) == [2, 1, 1]
    assert select_beam([7, 3, 5], 2) == [7, 3] and select_beam([7], 4) == [7]
    a = [{"role": "system"}, {"role": "user", "content": "t"}, {"role": "assistant", "content": "x"},
         {"role": "user", "content": "o"}, {"role": "assistant", "content": "y"}, {"role": "user", "content": "p"}]
    b = a[:4] + [{"role": "assistant", "content": "z"}, {"role": "user", "content": "p"}]
    assert common_prefix_len([a, b]) == 4
    assert common_prefix_len([a, a[:5]]) == 4  # never cut between a command and its observation


# ---- strategy with a scripted start_attempt and judge ---------------------------------------------------
def _turn(cmd: str) -> list[dict]:
    return [{"role": "assistant", "content": f"THOUGHT: go\n\n```bash\n{cmd}\n```"},
            {"role": "user", "content": "<returncode>0</returncode>\n<output>\n</output>"}]


class Attempts:
    """start_attempt for tests. `plan[(stage, parent, k)]` is the command a continuation adds
    (k counts that parent's children in that stage); completions (no max_new_turns) pass when the
    last quality shown is >= `pass_q`."""

    def __init__(self, plan: dict, pass_q: int = 3):
        self.plan, self.pass_q = plan, pass_q
        self.results: list[AttemptResult | None] = []
        self.calls: list[dict] = []
        self.kids: dict = {}
        self.kept: dict[int, str] = {}  # keep_snapshot asked of each attempt
        self.forked_from: dict[int, object] = {}  # the snapshot its prefix carried
        self.snapshot_log: list[tuple[str, int]] = []  # ("take" | "release", attempt)

    async def __call__(self, stage, context=None, context_indices=None, *, prefix=None, max_new_turns=None, verify=True,
                       keep_snapshot="no"):
        index = len(self.results)
        self.results.append(None)
        parent = prefix.parent if prefix else None
        self.calls.append({"index": index, "stage": stage, "parent": parent, "max_new_turns": max_new_turns,
                           "verify": verify})
        self.kept[index], self.forked_from[index] = keep_snapshot, getattr(prefix, "snapshot", None)
        base = list(prefix.messages) if prefix else [{"role": "system", "content": "sys"},
                                                     {"role": "user", "content": f"<task>\n{INSTRUCTION}\n</task>"}]
        actions = list(prefix.actions) if prefix else []
        if max_new_turns is not None:
            k = self.kids[(stage, parent)] = self.kids.get((stage, parent), -1) + 1
        await asyncio.sleep(0.001 * ((index * 7) % 5))  # finish out of order
        if max_new_turns is None:  # a completion: run to the end and get verified
            q = _last_q(" ".join(actions))
            msgs = base + _turn(SUBMIT)
            passed = q >= self.pass_q
            a = AttemptResult(index, stage, stage, float(passed), passed, "pass" if passed else "wrong_submission",
                              "submitted", len(actions) + 1, actions + [SUBMIT], msgs,
                              usage={"generator": Usage(input=100, output=10)})
        else:
            cmd = self.plan[(stage, parent, k)]
            if cmd == "SANDBOX":  # the container died: no transcript at all
                a = AttemptResult(index, stage, stage, None, False, "sandbox_error", "sandbox_error", 0, [], [])
                self.results[index] = a
                return a
            a = AttemptResult(index, stage, stage, None, False, "unfinished", "paused", len(actions) + 1,
                              actions + [cmd], base + _turn(cmd), usage={"generator": Usage(input=50, output=5)})
            if keep_snapshot != "no":  # a stand-in for the environment's snapshot
                snap = SimpleNamespace(id=f"snap{index}", released=False)
                self.snapshot_log.append(("take", index))

                def release(snap=snap, index=index):
                    snap.released = True
                    self.snapshot_log.append(("release", index))

                a.snapshot, a.release = snap, release
        self.results[index] = a
        return a


def _last_q(text: str) -> int:
    qs = re.findall(r"q=(\d+)", text)
    return int(qs[-1]) if qs else 0


class ScriptedJudge:
    """An LLM stand-in: rubric prompts get a canned set (group: c1 quality, c2 negative; tie-break:
    t1); scoring prompts score each id by the last `q=` (or `t=`) it shows."""

    name = "scripted/judge"

    def __init__(self):
        self.prompts: list[str] = []

    async def complete(self, messages, *, n=1, seed=None, sink=None, tools=None):
        text = messages[-1]["content"]
        self.prompts.append(text)
        if text.startswith("<cer_rubrics"):
            if 'purpose="tie_break"' in text.split("\n", 1)[0]:
                reply = {"criteria": [{"id": "t1", "criterion": "finer", "weight": 1}]}
            else:
                reply = {"criteria": [{"id": "c1", "criterion": "quality", "weight": 3},
                                      {"id": "c2", "criterion": "errors", "weight": 1, "polarity": "negative"}]}
        else:
            shared = re.search(r"<shared_prefix>\n(.*?)\n</shared_prefix>", text, re.DOTALL).group(1)
            conts = dict(re.findall(r'<continuation id="(\d+)"[^>]*>\n(.*?)\n</continuation>', text, re.DOTALL))
            ids = [int(x) for x in re.search(r"with ids \[([\d, ]*)\]", text).group(1).split(",")]
            tie = "t1" in text.split("<rubrics>", 1)[1].split("</rubrics>", 1)[0]
            cands = []
            for i in ids:
                shown = shared + "\n" + (conts.get(str(i), "") if i else "")
                if tie:
                    ts = re.findall(r"t=(\d+)", shown)
                    cands.append({"id": i, "scores": [{"criterion": "t1", "score": int(ts[-1]) if ts else 0,
                                                       "evidence": "t"}]})
                else:
                    cands.append({"id": i, "scores": [{"criterion": "c1", "score": min(4, _last_q(shown)), "evidence": "q"},
                                                      {"criterion": "c2", "score": 0, "evidence": "none failed"}]})
            reply = {"candidates": cands}
        if sink is not None:
            from tbscale.types import Usage
            sink.record_call("judge", self.name, Usage(input=len(text) // 4, output=20, calls=1), 0.0,
                             n=n, retries=0)
        return SimpleNamespace(completions=[SimpleNamespace(text=json.dumps(reply))])


def _run_cer(params: CERParams, plan: dict, tmp_path, pass_q: int = 3):
    judge = ScriptedJudge()
    atts = Attempts(plan, pass_q)
    log = EventLog(tmp_path / "t.jsonl", trial_key="k")
    strategy = CER(params, models=lambda key, role: judge, seed=11)
    out = asyncio.run(strategy.run(TASK, atts, AttemptRecorder(log, attempt=-1)))
    log.close()
    return out, atts, judge, list(read_jsonl(log.path))


PLAN = {
    # round 1 from the empty prefix: 1 and 2 tie at q=3; the tie-break rubric (t) prefers 2
    ("round1", None, 0): "echo q=2", ("round1", None, 1): "echo q=3 t=1",
    ("round1", None, 2): "echo q=3 t=3", ("round1", None, 3): "echo q=1",
    # round 2: parent 2's children q=4 and q=2 (a regression below the parent's 3);
    # parent 1's children both q=3 (a top tie in the group, no regression: equal to the parent)
    ("round2", 2, 0): "echo q=4", ("round2", 2, 1): "echo q=2",
    ("round2", 1, 0): "echo q=3", ("round2", 1, 1): "echo q=3",
}


def test_cer_search_beam_regression_ties_and_final_completion(tmp_path):
    params = CERParams(m=4, beam=2, segment_turns=3, rounds=2)
    out, atts, judge, events = _run_cer(params, PLAN, tmp_path)
    rec = out.record
    r1, r2 = rec["rounds"]
    # round 1: 4 continuations of the empty prefix, each paused after segment_turns, unverified
    assert [(c["stage"], c["parent"], c["max_new_turns"], c["verify"]) for c in atts.calls[:4]] == [
        ("round1", None, 3, False)] * 4
    assert r1["top_tied"] == [1, 2] and r1["tie_break"]["members"] == [1, 2]
    assert r1["ranked"][:2] == [2, 1] and r1["beam"] == [2, 1] and r1["selected"] == 2
    # round 2: m split over the two beam parents, each parent's children scored as one group
    assert r2["parents"] == [2, 1] and r2["allocation"] == [2, 2]
    by_parent = {g["parent"]: g for g in r2["groups"]}
    kids2, kids1 = by_parent[2]["members"], by_parent[1]["members"]
    assert sorted(atts.calls[i]["parent"] for i in kids2 + kids1) == [1, 1, 2, 2]
    q = {i: _last_q(" ".join(atts.results[i].actions)) for i in kids2 + kids1}
    low = next(i for i in kids2 if q[i] == 2)
    high = next(i for i in kids2 if q[i] == 4)
    assert r2["regressed"] == [low] and rec["candidates"][str(low)]["regressed"]
    assert by_parent[1]["top_tie"] and not by_parent[2]["top_tie"]
    assert by_parent[2]["parent_score"] == pytest.approx((3 * 0.75 + 1) / 4)
    assert low not in r2["ranked"] and r2["ranked"][0] == high and r2["top_tied"] == []
    # the selected prefix is completed with no turn cap and verified; that is the final attempt
    assert rec["selected"] == high and out.final.stage == "final" and out.final.reward == 1.0
    assert atts.calls[out.final.index] == {"index": out.final.index, "stage": "final", "parent": high,
                                           "max_new_turns": None, "verify": True}
    assert len(out.attempts) == 9
    # every judge call is a verifier_call event; only the tied round-1 candidates were in the tie-break
    calls = [e for e in events if e["type"] == "verifier_call"]
    methods = [(c["method"], c["purpose"]) for c in calls]
    assert methods.count(("cer_rubrics", "group")) == 3 and methods.count(("cer_score", "group")) == 3
    assert methods.count(("cer_rubrics", "tie_break")) == 1 and methods.count(("cer_score", "tie_break")) == 1
    tie_prompt = next(p for p in judge.prompts if 'purpose="tie_break"' in p.split("\n", 1)[0])
    assert tie_prompt.count("<continuation ") == 2
    assert all(c["role"] == "judge" and c["rubric_set"] for c in calls)
    assert rec["judge_usage"]["round1"]["judge"]["calls"] == 4


def test_regression_stop_off_expands_everything_and_fully_regressed_round_keeps_selection(tmp_path):
    plan = {("round1", None, 0): "echo q=3", ("round1", None, 1): "echo q=1",
            ("round2", 0, 0): "echo q=1", ("round2", 0, 1): "echo q=2"}
    out, atts, _, _ = _run_cer(CERParams(m=2, beam=1, segment_turns=2, rounds=2, tie_break_rubrics=False), plan, tmp_path)
    r2 = out.record["rounds"][1]
    assert r2["all_regressed"] and r2["selected"] == 0 and out.record["selected"] == 0
    assert atts.calls[out.final.index]["parent"] == 0
    out2, _, _, _ = _run_cer(CERParams(m=2, beam=1, segment_turns=2, rounds=2, regression_stop=False), plan, tmp_path)
    r2 = out2.record["rounds"][1]
    assert r2["regressed"] == [] and r2["groups"][0]["parent_score"] is None
    assert out2.record["selected"] == r2["ranked"][0] and _last_q(" ".join(out2.final.actions)) == 2


def test_dead_sandboxes_are_neither_judged_nor_selected(tmp_path):
    plan = {("round1", None, 0): "SANDBOX", ("round1", None, 1): "echo q=1",
            ("round2", 1, 0): "SANDBOX", ("round2", 1, 1): "echo q=2"}
    out, atts, judge, _ = _run_cer(CERParams(m=2, beam=2, segment_turns=2, rounds=2), plan, tmp_path)
    r1, r2 = out.record["rounds"]
    assert r1["groups"][0]["broken"] == [0] and r1["ranked"] == [1] and r1["beam"] == [1]
    assert r2["parents"] == [1] and r2["groups"][0]["broken"] == [2] and r2["selected"] == 3
    # the judge saw only the live continuation, with the parent's history as the shared prefix
    score_prompt = [p for p in judge.prompts if p.startswith("<cer_score")][-1]
    assert score_prompt.count("<continuation ") == 1 and "echo q=1" in score_prompt.split("</shared_prefix>")[0]
    assert out.final.stage == "final" and atts.calls[out.final.index]["parent"] == 3


def test_analysis_complete_all_feeds_rm_random_oracle_and_pair_accuracy(tmp_path):
    params = CERParams(m=4, beam=2, segment_turns=3, rounds=1, analysis_complete_all=True)
    plan = {("round1", None, 0): "echo q=2", ("round1", None, 1): "echo q=4",
            ("round1", None, 2): "echo q=3", ("round1", None, 3): "echo q=1"}
    out, atts, _, _ = _run_cer(params, plan, tmp_path, pass_q=3)
    rec = out.record
    assert rec["selected"] == 1 and out.final.stage == "final"
    assert sorted(int(k) for k in rec["completions"]) == [0, 1, 2, 3]
    assert sorted(atts.calls[v]["stage"] for v in rec["completions"].values()) == ["analysis"] * 3 + ["final"]
    row = {"task_id": "t", "passed": out.final.passed,
           "attempts": [a.brief().model_dump(mode="json") for a in out.attempts],
           "strategy_record": rec, "tokens": {"generator": {"input": 1, "output": 1}, "judge": {"input": 40, "output": 2}}}
    m = cer_report.round_metrics(row)[0]
    # outcomes: q>=3 passes -> candidates 1 and 2 pass, 0 and 3 fail
    assert (m["k"], m["rm"], m["random"], m["oracle"]) == (4, 1.0, 0.5, 1.0)
    assert cer_report.pair_counts(row) == (4, 4)  # all four mixed pairs ordered right by q
    tok = cer_report.token_split(row)
    assert tok["search"] == 4 * 55 and tok["completion"] == 110 and tok["analysis"] == 3 * 110 and tok["judge"] == 42
    assert tok["cer_total"] == 220 + 110 + 42
    t = cer_report.setting_table([row])
    assert t["RM@k"] == 1.0 and t["Random"] == 0.5 and t["Acc_pair"] == 1.0 and t["top_tie_rate"] == 0.0
    # without the analysis completions only the pick has an outcome: Random and Best-of-N are not measured
    lean = dict(row, strategy_record={**rec, "completions": {"1": rec["completions"]["1"]}})
    m = cer_report.round_metrics(lean)[0]
    assert m["rm"] == 1.0 and math.isnan(m["random"]) and math.isnan(m["oracle"])
    assert cer_report.setting_table([{"task_id": "t", "passed": True, "strategy_record": None}])["trials"] == 0


# ---- end to end in Docker ---------------------------------------------------------------------------------
@pytest.mark.docker
def test_cer_end_to_end_with_simulated_models(tmp_path, monkeypatch):
    import io
    from pathlib import Path

    from rich.console import Console

    from tbscale.analysis import report
    from tbscale.config import Experiment
    from tbscale.runner import Runner
    from tbscale.tasks import load_task

    repo = Path(__file__).resolve().parents[1]
    exp = Experiment.model_validate({
        "name": "cer_e2e", "tasks": {"path": str(repo / "tasks"), "include": ["extract-emails"]}, "trials": 1,
        "models": {"policy": {"model": "sim/policy", "sim": {"skill": 0.6}},
                   "judge": {"model": "sim/cer_judge", "sim": {"accuracy": 0.9}}},
        "settings": [{"name": "cer", "generator": "policy",
                      "trajectory": {"name": "cer", "m": 3, "beam": 2, "segment_turns": 1, "rounds": 2,
                                     "judge": "judge", "analysis_complete_all": True}}],
        "limits": {"max_turns": 20}})
    runner = Runner(exp, [load_task(repo / "tasks" / "extract-emails")], tmp_path / "run")
    asyncio.run(runner.run())
    row = json.loads((tmp_path / "run" / "trials.jsonl").read_text())
    rec = row["strategy_record"]
    assert rec["kind"] == "cer" and rec["rounds"] and rec["rounds"][0]["allocation"] == [3]
    atts = {a["index"]: a for a in row["attempts"]}
    final = atts[row["final_attempt"]]
    assert final["ending"] not in ("unfinished", "sandbox_error") and final["reward"] is not None  # verified
    assert row["passed"] == (final["ending"] == "pass")
    for c in rec["candidates"].values():
        assert c["rubric_set"] and c["score"] is not None and set(c["criteria"]) == {"c1", "c2"}
    assert row["tokens"]["judge"]["calls"] >= 2
    events = list(read_jsonl(tmp_path / "run" / row["trajectory_path"]))
    assert {e["method"] for e in events if e["type"] == "verifier_call"} >= {"cer_rubrics", "cer_score"}
    # the report section shows
    buf = io.StringIO()
    ctx = report.build_report([tmp_path / "run"], Console(file=buf, width=250), plots=False)
    keys = [s.key for s in ctx.sections]
    assert "cer" in keys and "cer_rounds" in keys


@pytest.mark.parametrize("restore, keep", [("auto", "if_able"), ("fork", "required"), ("replay", "no")])
def test_prefixes_continue_from_snapshots_released_once_out_of_the_beam(tmp_path, restore, keep):
    """Every paused segment is asked to keep a snapshot (unless replay is chosen); a continuation's
    prefix carries its parent's snapshot; a snapshot is released as soon as its candidate leaves
    the beam, and none is left after the search."""
    params = CERParams(m=4, beam=2, segment_turns=3, rounds=2, prefix_restore=restore)
    out, atts, _, _ = _run_cer(params, PLAN, tmp_path)
    rec = out.record
    assert rec["params"]["prefix_restore"] == restore
    segments = [c["index"] for c in atts.calls if c["max_new_turns"] is not None]
    assert {atts.kept[i] for i in segments} == {keep}
    taken = [i for op, i in atts.snapshot_log if op == "take"]
    released = [i for op, i in atts.snapshot_log if op == "release"]
    if restore == "replay":
        assert taken == [] and all(s is None for s in atts.forked_from.values())
        return
    assert sorted(taken) == sorted(segments) and sorted(released) == sorted(taken)  # each released exactly once
    for child, snap in atts.forked_from.items():  # a continuation starts from its parent's snapshot
        parent = atts.calls[child]["parent"]
        assert (snap is None) == (parent is None) and (snap is None or snap.id == f"snap{parent}")
    r1 = rec["rounds"][0]
    # round 1's candidates outside the beam were released before round 2 began
    first_round2 = min(i for i in segments if atts.calls[i]["stage"] == "round2")
    order = [(op, i) for op, i in atts.snapshot_log]
    cut = order.index(("take", first_round2))
    assert {i for op, i in order[:cut] if op == "release"} == set(r1["candidates"]) - set(r1["beam"])
