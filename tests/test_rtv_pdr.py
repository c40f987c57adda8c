"""Recursive Tournament Voting, rollout summaries, best-of-N and PDR, and the stage metrics.

Tournament and strategy tests force known votes, with a scripted vote function or a scripted judge
on the loopback server (the real LLM path), and check the right survivor at every round. Strategy
tests run without containers through a scripted `start_attempt`; the last test runs a tiny PDR
and Turn-BoN-inside-PDR experiment in Docker and checks that every stage metric is reported."""

from __future__ import annotations

import asyncio
import io
import json
import math
import random
import re
from pathlib import Path

import pytest
from rich.console import Console

from tbscale.analysis import stages
from tbscale.logs import AttemptRecorder, EventLog, read_jsonl
from tbscale_sim import provider as sim
from tbscale.models.llm import LLM
from tbscale.strategies.base import AttemptResult
from tbscale.strategies.best_of_n import BestOfN, BestOfNParams
from tbscale.strategies.pdr import PDR, PDRParams
from tbscale.strategies.rtv import RTVParams, SummaryJudge, Vote, majority, plan_groups, run_rtv
from tbscale.strategies.summaries import fallback_summary, render_summary, summarizer_messages
from tbscale.tasks import Task

REPO = Path(__file__).resolve().parents[1]
INSTRUCTION = "Make the quality as high as you can."
SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


def run(coro):
    return asyncio.run(coro)


# ---- the bracket and the vote count -----------------------------------------------------------------------
def test_plan_groups_sizes_and_byes():
    assert plan_groups([0, 1, 2, 3], 2, 1) == [[0, 1], [2, 3]]
    assert plan_groups([0, 1, 2, 3, 4], 2, 1) == [[0, 1], [2, 3], [4]]  # a bye for the odd one out
    # The round that would overshoot K only plays the groups it needs: 6 -> 4 is two pairs and two byes.
    assert plan_groups(list(range(6)), 2, 4) == [[0, 1], [2, 3], [4], [5]]
    assert plan_groups(list(range(7)), 3, 1) == [[0, 1, 2], [3, 4, 5], [6]]
    assert plan_groups(list(range(5)), 4, 3) == [[0, 1, 2], [3], [4]]  # a group of 3 eliminates exactly 2
    assert plan_groups([0, 1], 2, 2) == [[0], [1]]
    shuffled = plan_groups(list(range(8)), 2, 1, random.Random(5))
    assert shuffled == plan_groups(list(range(8)), 2, 1, random.Random(5))
    assert sorted(x for g in shuffled for x in g) == list(range(8))


def test_majority_counts_and_breaks_ties_by_seed():
    assert majority([3, 3, 7, None, 99], [3, 7], random.Random(0)) == (3, {3: 2, 7: 1}, False)
    picks = {majority([3, 7], [3, 7], random.Random(s))[0] for s in range(30)}
    assert picks == {3, 7}
    for s in range(10):
        assert majority([3, 7, None], [3, 7], random.Random(s)) == majority([3, 7, None], [3, 7], random.Random(s))
    winner, counts, tie = majority([None, None], [4, 5], random.Random(1))
    assert tie and winner in (4, 5) and counts == {4: 0, 5: 0}


def test_rtv_with_forced_votes_keeps_the_right_survivor_every_round():
    quality = {i: q for i, q in enumerate([5, 9, 2, 7, 1, 8, 3, 6])}

    async def best_always(members, r, g):  # 3 votes, all for the best member
        best = max(members, key=quality.get)
        return [Vote(best, list(members))] * 3

    res = run(run_rtv(list(quality), target=1, group_size=2, vote=best_always, seed=11, tag="final"))
    rounds = res.record["rounds"]
    assert [len(r["survivors"]) for r in rounds] == [4, 2, 1]
    for rd in rounds:
        for g in rd["groups"]:
            assert g["winner"] == max(g["members"], key=quality.get) and g["counts"][str(g["winner"])] == 3
        assert rd["survivors"] == [g["winner"] for g in rd["groups"]]
    assert res.survivors == [1]

    async def split(members, r, g):  # two of three votes for the weaker member: the majority rules
        lo, hi = sorted(members, key=quality.get)
        return [Vote(lo, list(members)), Vote(hi, list(members)), Vote(lo, list(members))]

    res = run(run_rtv(list(quality), target=2, group_size=2, vote=split, seed=11, tag="select_k"))
    for rd in res.record["rounds"]:
        for g in rd["groups"]:
            assert g["winner"] == min(g["members"], key=quality.get) and not g["tie_broken"]
    assert len(res.survivors) == 2 and len(res.record["rounds"]) == 2


def test_rtv_ties_between_votes_are_seeded():
    async def split_even(members, r, g):
        return [Vote(m, list(members)) for m in members]

    a = run(run_rtv([0, 1, 2, 3], target=1, group_size=2, vote=split_even, seed=3, tag="x"))
    b = run(run_rtv([0, 1, 2, 3], target=1, group_size=2, vote=split_even, seed=3, tag="x"))
    assert a.record == b.record
    assert all(g["tie_broken"] for rd in a.record["rounds"] for g in rd["groups"])


# ---- the LLM judge, scripted -----------------------------------------------------------------------------
def quality_judge(body):
    """Votes for the summary with the highest `quality=` number; counts what it is asked."""
    prompt = body["messages"][-1]["content"]
    if prompt.startswith("<summarize_attempt>"):
        q = re.findall(r"quality=(\d+)", prompt)
        return json.dumps({"hypotheses": ["h"], "key_decisions": [f"ran:\n```bash\necho quality={q[-1]}\n```"],
                           "progress": f"reached quality {q[-1]}", "failure_modes": [], "final_state": "submitted"})
    blocks = re.findall(r'<summary id="(\d+)">\n(.*?)\n</summary>', prompt, re.DOTALL)
    best = max(blocks, key=lambda b: int(re.search(r"quality=(\d+)", b[1]).group(1)))
    return json.dumps({"rationale": "highest quality", "best": int(best[0])})


def models_for(loopback_model):
    cfg = loopback_model.model_config("judge")
    return lambda key, role: LLM(cfg, role)


def test_rtv_with_a_scripted_llm_judge(loopback_model, tmp_path):
    loopback_model.responder = quality_judge
    quality = [4, 1, 9, 3, 7, 2]
    summaries = {i: f"progress: quality={q}" for i, q in enumerate(quality)}
    log = EventLog(tmp_path / "t.jsonl", trial_key="k")
    rec = AttemptRecorder(log, attempt=-1)
    judge = SummaryJudge(RTVParams(votes=3), models_for(loopback_model), instruction=INSTRUCTION, seed=7)
    res = run(run_rtv(list(summaries), target=1, group_size=2, vote=judge.vote_fn(summaries, sink=rec, tag="final"),
                      seed=7, tag="final"))
    assert res.survivors == [2]
    n_votes = 0
    for rd in res.record["rounds"]:
        for g in rd["groups"]:
            if g["bye"]:
                continue
            assert g["winner"] == max(g["members"], key=lambda i: quality[i])
            assert len(g["votes"]) == 3 and all(v["choice"] == g["winner"] for v in g["votes"])
            # each vote saw the group in its own order
            assert all(sorted(v["order"]) == sorted(g["members"]) for v in g["votes"])
            n_votes += 3
    log.close()
    calls = [e for e in read_jsonl(log.path) if e["type"] == "verifier_call"]
    assert len(calls) == n_votes == len(loopback_model.requests)
    assert all(c["role"] == "judge" and c["messages"][1]["content"].startswith("<judge_attempts>") for c in calls)
    assert rec.usage["judge"].calls == n_votes


# ---- summaries -----------------------------------------------------------------------------------------
def transcript(commands: list[str], rcs: list[int] | None = None, submitted=True, context: str | None = None):
    msgs = [{"role": "system", "content": "sys"},
            {"role": "user", "content": f"Please solve this task:\n\n<task>\n{INSTRUCTION}\n</task>" + (f"\n\n{context}" if context else "")}]
    for cmd, rc in zip(commands, rcs or [0] * len(commands)):
        msgs.append({"role": "assistant", "content": f"THOUGHT: trying {cmd}\n\n```bash\n{cmd}\n```"})
        msgs.append({"role": "user", "content": f"<returncode>{rc}</returncode>\n<output>\nout of {cmd}\n</output>"})
    if submitted:
        msgs.append({"role": "assistant", "content": f"THOUGHT: done\n\n```bash\n{SUBMIT}\n```"})
    return msgs


def attempt(index, stage, commands, passed, *, rcs=None, submitted=True, context_indices=(), context=None, turns=None):
    return AttemptResult(index=index, label=stage, stage=stage, reward=float(passed), passed=passed,
                         ending="pass" if passed else "wrong_submission",
                         stop_reason="submitted" if submitted else "step_limit",
                         turns=turns or len(commands) + submitted, actions=list(commands),
                         transcript=transcript(commands, rcs, submitted, context), context_indices=list(context_indices))


def test_summaries_never_see_the_verdict():
    a = attempt(0, "iter0", ["ls", "make"], True)
    b = attempt(1, "iter0", ["ls", "make"], False)
    prompt_a = summarizer_messages(a, INSTRUCTION, "sys", 60_000)
    assert prompt_a == summarizer_messages(b, INSTRUCTION, "sys", 60_000)
    assert fallback_summary(a) == fallback_summary(b)
    # A context block the attempt was given is not part of what gets summarized.
    c = attempt(2, "iter1", ["ls", "make"], True, context="<attempt_summary index=\"1\">\nsecret\n</attempt_summary>")
    assert "secret" not in summarizer_messages(c, INSTRUCTION, "sys", 60_000)[1]["content"]


def test_fallback_summary_is_structured_and_bounded():
    a = attempt(0, "iter0", ["ls", "make", "make"], False, rcs=[0, 2, 2], submitted=False)
    s = fallback_summary(a)
    assert set(s) == {"hypotheses", "key_decisions", "progress", "failure_modes", "final_state"}
    assert s["key_decisions"][1] == "ran:\n```bash\nmake\n```"
    assert any("exit code 2" in f for f in s["failure_modes"]) and any("repeated" in f for f in s["failure_modes"])
    assert s["final_state"].startswith("not submitted")
    long = attempt(1, "iter0", [f"echo {'x' * 3000} {i}" for i in range(60)], True)
    text = render_summary(fallback_summary(long, max_command_chars=600), 4000)
    assert len(text) <= 4100 and text.count("```") % 2 == 0


# ---- strategies with a scripted start_attempt ------------------------------------------------------------
class Attempts:
    """start_attempt for tests: attempt k of an iteration reaches a quality set by `plan(stage,
    context_indices, k)`; it passes when quality >= 5."""

    def __init__(self, plan):
        self.plan, self.results, self.contexts = plan, [], {}
        self.counter = {}

    async def __call__(self, stage, context, context_indices):
        index = len(self.results)
        self.results.append(None)
        k = self.counter[stage] = self.counter.get(stage, -1) + 1
        q = self.plan(stage, list(context_indices), k, self)
        await asyncio.sleep(0.001 * ((index * 7) % 5))  # finish out of order
        a = attempt(index, stage, [f"echo quality={q}"], q >= 5, context_indices=context_indices, turns=q + 1)
        self.results[index] = a
        self.contexts[index] = context
        return a

    def quality(self, index):
        return int(re.search(r"quality=(\d+)", self.results[index].actions[0]).group(1))


TASK = Task(id="t", format="harbor", instruction=INSTRUCTION)


def test_pdr_selects_k_conditions_iteration_1_and_picks_the_final(loopback_model, tmp_path):
    loopback_model.responder = quality_judge
    iter0 = [3, 8, 6, 1]

    def plan(stage, ctx, k, atts):
        if stage == "iter0":
            return iter0[k]
        return max(atts.quality(i) for i in ctx) + [-1, 1, 0, -3][k]

    atts = Attempts(plan)
    params = PDRParams(n=4, k=2, group_size=2, votes=3)
    strategy = PDR(params, models=models_for(loopback_model), seed=5)
    log = EventLog(tmp_path / "t.jsonl", trial_key="k")
    out = run(strategy.run(TASK, atts, AttemptRecorder(log, attempt=-1)))
    rec = out.record
    assert [s["stage"] for s in rec["stages"]] == ["iter0", "select_k", "iter1", "final"]
    sel = rec["stages"][1]
    for g in sel["tournament"]["rounds"][0]["groups"]:  # every group kept its best member
        assert g["winner"] == max(g["members"], key=atts.quality)
    assert len(sel["selected"]) == 2 and 1 in sel["selected"]  # the best attempt always survives
    for a in out.attempts[4:]:  # iteration 1 saw exactly the K selected summaries
        assert a.stage == "iter1" and a.context_indices == sel["selected"]
        text = atts.contexts[a.index]
        assert text.count("<attempt_summary") == 2
        for i in sel["selected"]:
            assert f"quality={atts.quality(i)}" in text
    final = rec["stages"][3]
    assert out.final.index == final["selected"][0] == max(range(4, 8), key=atts.quality)
    assert rec["final"] == out.final.index and out.final.stage == "iter1"
    assert set(rec["summaries"]) == {str(i) for i in range(8)}
    assert all(s["source"] == "llm" for s in rec["summaries"].values())
    su = rec["stage_usage"]
    assert su["select_k"]["judge"]["calls"] == 2 * 3 and su["final"]["judge"]["calls"] == 3 * 3
    assert su["iter0"]["summarizer"]["calls"] == 4
    log.close()
    events = list(read_jsonl(log.path))
    assert sum(e["type"] == "summary" for e in events) == 8
    assert sum(e["type"] == "verifier_call" and e["role"] == "judge" for e in events) == 15


def test_pdr_random_k_and_single_contexts():
    atts = Attempts(lambda stage, ctx, k, a: 6 if stage == "iter0" else 2)
    params = PDRParams(n=3, k=2, context="random_k", final="random", summary_mode="deterministic")
    out = run(PDR(params, models=None, seed=1).run(TASK, atts, None))
    ctxs = [a.context_indices for a in out.attempts[3:]]
    assert all(len(c) == 2 and set(c) <= {0, 1, 2} for c in ctxs)
    assert [s["stage"] for s in out.record["stages"]] == ["iter0", "iter1", "final"]
    assert set(out.record["summaries"]) == {"0", "1", "2"}  # a random final needs no summaries of iteration 1
    atts = Attempts(lambda stage, ctx, k, a: 6)
    out = run(PDR(PDRParams(n=3, k=1, context="single", final="oracle", summary_mode="deterministic"),
                  models=None, seed=1).run(TASK, atts, None))
    assert [a.context_indices for a in out.attempts[3:]] == [[0], [1], [2]]


def test_pdr_with_three_iterations_names_its_stages():
    atts = Attempts(lambda stage, ctx, k, a: 5 + k)
    out = run(PDR(PDRParams(n=2, k=1, iterations=3, select="oracle", final="oracle", summary_mode="deterministic"),
                  models=None, seed=2).run(TASK, atts, None))
    assert [s["stage"] for s in out.record["stages"]] == [
        "iter0", "select_k", "iter1", "select_k_after_iter1", "iter2", "final"]
    assert [stages.stage_label(s["stage"]) for s in out.record["stages"]] == [
        "Iter 0", "Select-K", "Iter 1", "Select-K (iter 1)", "Iter 2", "Final"]


def test_best_of_n_selectors(loopback_model):
    loopback_model.responder = quality_judge
    qualities = [2, 7, 4, 9, 1]
    for selector, expect in (("rtv", 3), ("judge", 3), ("oracle", None), ("random", None)):
        atts = Attempts(lambda stage, ctx, k, a: qualities[k])
        out = run(BestOfN(BestOfNParams(n=5, selector=selector, votes=2, summary_mode="deterministic"),
                          models=models_for(loopback_model), seed=3).run(TASK, atts, None))
        assert len(out.attempts) == 5 and out.record["kind"] == "best_of_n"
        if expect is not None:
            assert out.final.index == expect
        if selector == "oracle":
            assert out.final.passed
        if selector in ("oracle", "random"):
            assert out.record["summaries"] == {}
    flat = out.record  # random: a seeded pick, the same on a rerun
    again = run(BestOfN(BestOfNParams(n=5, selector="random"), models=None, seed=3).run(
        TASK, Attempts(lambda stage, ctx, k, a: qualities[k]), None))
    assert again.final.index == flat["final"]


def test_judge_failures_fall_back_to_the_seeded_tie_break(loopback_model):
    loopback_model.responder = lambda body: "no idea"
    atts = Attempts(lambda stage, ctx, k, a: [1, 9][k])
    out = run(BestOfN(BestOfNParams(n=2, votes=2, judge_tries=1, summary_mode="deterministic"),
                      models=models_for(loopback_model), seed=3).run(TASK, atts, None))
    g = out.record["stages"][-1]["tournament"]["rounds"][0]["groups"][0]
    assert g["invalid_votes"] == 2 and g["tie_broken"]


# ---- stage metrics on hand-built trials ------------------------------------------------------------------
def trial_row(task, trial, iter0, s, iter1, f):
    """N=2, K=1 PDR trial: iter0/iter1 are [(passed, turns)] x2; s and f the picked indices."""
    atts = [{"index": i, "stage": "iter0", "passed": p, "ending": "pass" if p else "wrong_submission", "turns": t,
             "context": []} for i, (p, t) in enumerate(iter0)]
    atts += [{"index": 2 + i, "stage": "iter1", "passed": p, "ending": "pass" if p else "wrong_submission", "turns": t,
              "context": [s]} for i, (p, t) in enumerate(iter1)]

    def tour(members, winner):
        return {"method": "rtv", "target": 1, "entrants": members,
                "rounds": [{"round": 1, "entrants": members, "survivors": [winner],
                            "groups": [{"members": members, "bye": False, "winner": winner}]}], "survivors": [winner]}

    usage = {"iter0": {"generator": {"input": 100, "output": 10, "calls": 2}},
             "select_k": {"judge": {"input": 50, "output": 5, "calls": 1}}}
    record = {"kind": "pdr", "final": f, "stage_usage": usage, "stages": [
        {"stage": "iter0", "kind": "iteration", "attempts": [0, 1]},
        {"stage": "select_k", "kind": "select", "selected": [s], "tournament": tour([0, 1], s)},
        {"stage": "iter1", "kind": "iteration", "attempts": [2, 3]},
        {"stage": "final", "kind": "select", "selected": [f], "tournament": tour([2, 3], f)}]}
    return {"task_id": task, "trial": trial, "passed": atts[f]["passed"], "attempts": atts, "strategy_record": record}


T, F = True, False
ROWS = [trial_row("a", 0, [(F, 10), (T, 6)], 1, [(T, 4), (F, 8)], 2),
        trial_row("a", 1, [(T, 5), (F, 9)], 1, [(F, 7), (F, 7)], 3),
        trial_row("b", 0, [(F, 12), (F, 12)], 0, [(F, 9), (T, 3)], 2)]


def test_stage_table_by_hand():
    wide, long = stages.stage_table(ROWS)
    # per task then mean: a = (.5+.5)/2, b = 0 ...
    assert wide.iloc[0].to_dict() == pytest.approx({"Iter 0": 0.25, "Select-K": 0.25, "Iter 1": 0.375, "Final": 0.25})
    row = long.set_index("stage")
    assert row.loc["Iter 0", "input_tokens"] == 100 and row.loc["Iter 0", "generator_out"] == 10
    assert row.loc["Select-K", "judge_out"] == 5 and row.loc["Select-K", "cumulative_tokens"] == 165
    assert row.loc["Iter 1", "output_tokens"] == 0


def test_steps_rounds_accuracy_strata_transitions_by_hand():
    st = stages.steps_table(ROWS).set_index("iteration")
    assert st.loc["Iter 0"].to_dict() == pytest.approx(
        {"attempts": 6, "pass@1": 2 / 6, "steps_all": 9.0, "steps_passing": 5.5, "steps_failing": 10.75})
    assert st.loc["Iter 1", "steps_passing"] == 3.5 and st.loc["Iter 1", "steps_failing"] == 7.75
    rd = stages.rounds_table(ROWS).set_index(["rtv", "round"])
    assert rd.loc[("Select-K", 0), "avg_pass@1"] == pytest.approx(0.25) and rd.loc[("Select-K", 0), "pass@N"] == 0.5
    assert rd.loc[("Select-K", 1), "avg_pass@1"] == pytest.approx(0.25)
    assert rd.loc[("Final", 0), "avg_pass@1"] == pytest.approx(0.375) and rd.loc[("Final", 0), "pass@N"] == 0.75
    assert rd.loc[("Final", 1), "avg_pass@1"] == pytest.approx(0.25)
    ga = stages.group_accuracy_table(ROWS).set_index(["rtv", "round"])
    assert ga.loc[("Select-K", "all"), "mixed_groups"] == 2 and ga.loc[("Select-K", "all"), "accuracy"] == 0.5
    assert ga.loc[("Final", "all"), "accuracy"] == 0.5 and ga.loc[("all", "all"), "groups"] == 6
    assert ga.loc[("all", "all"), "accuracy"] == 0.5
    sb = stages.stratified_table(ROWS).set_index("context_passing")
    assert sb.loc["0/1"].to_dict() == {"iteration": "Iter 1", "attempts": 4, "trials": 2, "pass@1": 0.25}
    assert sb.loc["1/1", "pass@1"] == 0.5
    tm = stages.transition_matrix(ROWS)
    assert tm.drop(columns="Iter 0 passes").to_numpy().tolist() == [[0, 1, 0], [1, 1, 0], [0, 0, 0]]


def test_stage_sections_skip_runs_without_staged_trials():
    import pandas as pd

    from tbscale.analysis.report import ReportContext
    from tbscale.analysis.tables import ROLES

    df = pd.DataFrame([{"label": "base", "policy": "baseline", "trajectory": "single", "task_id": "a", "passed": True,
                        "n_attempts": 1, "strategy_record": None, "attempts": None,
                        **{f"{r}_{k}": 1.0 for r in ROLES for k in ("input", "output")}}])
    ctx = ReportContext(df=df, run_dirs=[], out_dir=Path("/nonexistent"), baseline=None, plots=False)
    stages.stage_sections(ctx)
    assert [s.key for s in ctx.sections] == ["role_tokens", "cost_success"]
    assert math.isnan(ctx.sections[1].frame.loc[0, "Pass@3"])


# ---- the simulated roles --------------------------------------------------------------------------------
def test_simulated_judge_and_refiner_read_only_their_prompts():
    from tbscale_sim.judges import context_quality
    from tbscale.strategies.rtv import judge_messages

    steps = ["echo step-one", "echo step-two"]
    sim.register_task(INSTRUCTION, steps)
    solved = render_summary(fallback_summary(attempt(0, "iter0", steps, False)))  # its verdict is not in the text
    partial = render_summary(fallback_summary(attempt(1, "iter0", steps[:1], True)))
    prompt = judge_messages(INSTRUCTION, [partial, solved], "sys")
    votes = [json.loads(sim.simulate("judge", prompt, 1, s, {"accuracy": 1.0})[0])["best"] for s in range(10)]
    assert votes == [2] * 10
    from tbscale.agent.templates import render

    ctx_good = render("context_summaries", None, summaries=[solved, solved])
    ctx_half = render("context_summaries", None, summaries=[solved, partial])
    assert context_quality(f"<task>\n{INSTRUCTION}\n</task>\n{ctx_good}") == 1.0
    assert context_quality(f"<task>\n{INSTRUCTION}\n</task>\n{ctx_half}") == 0.5
    assert context_quality(INSTRUCTION) is None


# ---- end to end in Docker: PDR and Turn-BoN inside PDR report every stage metric ----------------------
@pytest.mark.docker
@pytest.mark.slow
def test_pdr_and_turn_bon_inside_pdr_end_to_end(tmp_path):
    import yaml

    from tbscale.analysis.report import build_report
    from tbscale.runner import load_experiment
    from tbscale.runner import Runner
    from tbscale.tasks import load_tasks

    pdr = {"name": "pdr", "n": 2, "k": 1, "votes": 2, "judge": "judge", "summarizer": "summarizer"}
    cfg = {
        "name": "e2e", "tasks": {"path": str(REPO / "tasks"), "include": ["extract-emails"]}, "trials": 1,
        "concurrency": 4, "models": {
            "policy": {"model": "sim/refiner", "sim": {"skill": 0.6}},
            "selector": {"model": "sim/selector"}, "judge": {"model": "sim/judge"},
            "summarizer": {"model": "sim/summarizer"}},
        "settings": [{"name": "pdr", "generator": "policy", "trajectory": pdr},
                     {"name": "pdr_turn_bon", "generator": "policy", "trajectory": pdr,
                      "policy": {"name": "turn_bon", "n": 2, "selector": "selector"}}],
        "limits": {"max_turns": 15, "command_timeout_sec": 30}}
    path = tmp_path / "e2e.yaml"
    path.write_text(yaml.safe_dump(cfg))
    exp = load_experiment(path)
    tasks, _ = load_tasks(Path(exp.tasks.path), include=exp.tasks.include)
    run_dir = tmp_path / "run"
    counters = run(Runner(exp, tasks, run_dir).run())
    assert counters.done == 2
    rows = [json.loads(line) for line in (run_dir / "trials.jsonl").read_text().splitlines()]
    for r in rows:
        assert r["n_attempts"] == 4 and r["strategy_record"]["kind"] == "pdr"
        assert [a["stage"] for a in r["attempts"]] == ["iter0", "iter0", "iter1", "iter1"]
        assert {"summarizer", "judge", "generator"} <= set(r["tokens"])
    tb = next(r for r in rows if r["setting"] == "pdr_turn_bon")
    assert tb["tokens"]["selector"]["calls"] > 0  # Turn-BoN ran inside the PDR attempts
    ctx = build_report([run_dir], Console(file=io.StringIO(), width=200), plots=False)
    keys = {s.key for s in ctx.sections}
    assert {"stages", "stage_costs", "stage_steps", "rtv_rounds", "rtv_accuracy", "context_strata", "transitions",
            "role_tokens", "cost_success"} <= keys
    table = next(s for s in ctx.sections if s.key == "stages").frame
    assert list(table.columns) == ["setting", "Iter 0", "Select-K", "Iter 1", "Final"]
    assert set(table["setting"]) == {"pdr", "pdr_turn_bon"} and table.drop(columns="setting").notna().all().all()
    events = list(read_jsonl(run_dir / rows[0]["trajectory_path"]))
    assert any(e["type"] == "summary" for e in events) and any(e["type"] == "verifier_call" for e in events)


def test_config_errors_name_the_parameter():
    from tbscale.strategies import validate_component

    with pytest.raises(ValueError, match=r"^k: k \(5\) cannot exceed n \(4\)"):
        validate_component("trajectory", "pdr", {"n": 4, "k": 5}, {})
    with pytest.raises(ValueError, match="judge: 'x' is not a key"):
        validate_component("trajectory", "pdr", {"judge": "x"}, {})
    with pytest.raises(ValueError, match="summarizer: 'y' is not a key"):
        validate_component("trajectory", "best_of_n", {"summarizer": "y"}, {})
    p = validate_component("trajectory", "pdr", {}, {})
    assert (p.n, p.iterations, p.k, p.group_size, p.votes) == (16, 2, 4, 2, 8)  # the paper's defaults
