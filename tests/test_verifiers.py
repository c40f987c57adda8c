"""Action verifiers (mid-harness): pointwise and pairwise selection, their pure aggregation, the
logged verifier calls, self-verification, the simulated verifier, and the distillation export.

Model-backed tests drive the real path (LLM.complete -> litellm -> HTTP) against the scripted
loopback server, which forces known scores."""

from __future__ import annotations

import asyncio
import json
import random
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tbscale.logs import AttemptRecorder, EventLog, read_jsonl
from tbscale_sim import provider as sim
from tbscale.models.llm import LLM
from tbscale.strategies import entry, validate_component
from tbscale.strategies.base import TurnContext
from tbscale.models.replies import parse_json_reply
from tbscale.seeds import derive_rng as derived_rng
from tbscale.strategies.action_verifiers import (ListwiseParams, ListwiseVerifier, PairwiseParams, PairwiseVerifier,
                                                 PointwiseParams, PointwiseVerifier, margin_weighted_win_rates,
                                                 pair_margin, parse_pairwise, parse_pointwise, select_max, win_rates)
from tbscale_testing import Reply

TASK = "Write the sorted unique e-mail addresses of /app/docs to /app/emails.txt."
HISTORY = [{"role": "system", "content": "You are an agent."},
           {"role": "user", "content": f"Please solve this task:\n\n<task>\n{TASK}\n</task>"}]


def fenced(cmd: str) -> str:
    return f"THOUGHT: a step.\n\n```bash\n{cmd}\n```"


def commands_in(prompt: str) -> dict[str, str]:
    """label -> command of the candidates a verifier prompt shows (label '' for pointwise)."""
    return {label: cmd.strip() for label, cmd in
            re.findall(r'<candidate(?: label="([A-Z])")?>\n```bash\n(.*?)\n```\n</candidate>', prompt, re.DOTALL)}


def run(coro):
    return asyncio.run(coro)


class Models:
    """models(key, role) over loopback servers: 'gen' is the generator, 'ver' the verifier."""

    def __init__(self, gen_cfg, ver_cfg=None):
        self.cfgs = {"gen": gen_cfg, "ver": ver_cfg}

    def __call__(self, key, role):
        return LLM(self.cfgs[key or "gen"], role)


# ---- pure aggregation ------------------------------------------------------------------------------------
def test_select_max_takes_the_highest_and_ignores_missing_scores():
    assert select_max([3, None, 7, 5], random.Random(0)) == (2, [2])
    assert select_max([None, None], random.Random(0)) == (None, [])


def test_pointwise_tie_break_is_deterministic_under_a_seed():
    scores = [9, 4, 9, 9, 2]
    picks = {select_max(scores, derived_rng(seed, "pointwise", "tie"))[0] for seed in range(40)}
    assert picks == {0, 2, 3}  # every tied candidate can win, and only those
    for seed in range(10):  # the same seed always gives the same pick
        first = select_max(scores, derived_rng(seed, "pointwise", "tie"))
        assert all(select_max(scores, derived_rng(seed, "pointwise", "tie")) == first for _ in range(5))
    assert select_max(scores, random.Random(1), "first") == (0, [0, 2, 3])


def test_margin_weighted_win_rate_matches_a_hand_computed_example():
    # Scores on 1..10 (range 9): 0 beats 1 by 9-1, 2 beats 0 by 6-5, 2 beats 1 by 6-5.
    comparisons = [(0, 1, 8 / 9), (2, 0, 1 / 9), (2, 1, 1 / 9)]
    rates = margin_weighted_win_rates(3, comparisons)
    # Credits (1+m)/2 and (1-m)/2, averaged over each candidate's two comparisons:
    # c0 = ((1+8/9)/2 + (1-1/9)/2)/2 = 25/36, c1 = ((1-8/9)/2 + (1-1/9)/2)/2 = 1/4, c2 = ((1+1/9)/2)*2/2 = 5/9
    assert rates == pytest.approx([25 / 36, 1 / 4, 5 / 9])
    # The margin matters: by plain wins candidate 2 (two narrow wins) would lead instead.
    assert win_rates(3, comparisons) == pytest.approx([0.5, 0.0, 1.0])
    assert margin_weighted_win_rates(4, [(0, 1, 0.0)]) == [0.5, 0.5, None, None]


def test_pair_margin_from_scores_or_preference():
    assert pair_margin({"score_a": 8, "score_b": 2, "preference": "B"}, 1, 10) == pytest.approx(6 / 9)
    assert pair_margin({"score_a": None, "score_b": None, "preference": "B"}, 1, 10) == -1.0
    assert pair_margin({"score_a": None, "score_b": None, "preference": "tie"}, 1, 10) == 0.0


def test_reply_parsing():
    assert parse_pointwise('Sure.\n```json\n{"rationale": "ok", "score": 7}\n```', 1, 10)["score"] == 7
    assert parse_pointwise('{"score": 11}', 1, 10) is None
    assert parse_pointwise('{"score": true}', 1, 10) is None
    p = parse_pairwise('{"preference": "b"}', 1, 10)
    assert p["preference"] == "B" and p["score_a"] is None
    assert parse_pairwise('{"rationale": "x"}', 1, 10) is None
    # Fenced commands inside JSON strings survive (summaries quote commands that way).
    obj = parse_json_reply('{"key_decisions": ["ran:\\n```bash\\nls\\n```"]}')
    assert obj["key_decisions"] == ["ran:\n```bash\nls\n```"]


# ---- policies against scripted models ------------------------------------------------------------------
def _servers(loopback_model, gen_replies, verifier):
    """One server plays both roles: a request with n>1 (or the agent's messages) is the generator."""

    def responder(body):
        prompt = str(body["messages"][-1]["content"])
        if prompt.startswith("<verification"):
            return verifier(prompt)
        return [Reply(content=fenced(c) if c is not None else "I would rather not run anything.") for c in gen_replies]

    loopback_model.responder = responder
    cfg = loopback_model.model_config("scripted")
    return Models(cfg, cfg)


def _ctx(tmp_path, seed=123, name="t"):
    log = EventLog(tmp_path / f"{name}.jsonl", trial_key="k")
    rec = AttemptRecorder(log, attempt=0, label="attempt")
    return TurnContext(turn=1, seed=seed, rec=rec, task=None), log


def _events(log, type_):
    log.close()
    return [e for e in read_jsonl(log.path) if e["type"] == type_]


def test_pointwise_picks_the_best_score_and_breaks_ties_by_seed(loopback_model, tmp_path):
    cands = ["ls", "cat a.txt", "pwd", "cat b.txt"]
    scores = {"ls": 5, "cat a.txt": 9, "pwd": 2, "cat b.txt": 9}
    models = _servers(loopback_model, cands, lambda p: json.dumps(
        {"rationale": "scripted", "score": scores[commands_in(p)[""]]}))
    params = PointwiseParams(n=4, verifier="ver")
    picks = []
    for i in range(3):
        policy = PointwiseVerifier(params, generator=models("gen", "generator"), models=models)
        ctx, log = _ctx(tmp_path, seed=123, name=f"p{i}")
        d = run(policy.decide(HISTORY, ctx))
        picks.append(d.selected_index)
        sel = _events(log, "selection")[0]
        assert sel["scores"] == [5, 9, 2, 9] and sel["tied"] == [1, 3]
        calls = _events(log, "verifier_call")
        assert len(calls) == 4 and all(c["method"] == "pointwise" and c["messages"] and c["response"] for c in calls)
        assert {c["candidate"]: c["parsed"]["score"] for c in calls} == {0: 5, 1: 9, 2: 2, 3: 9}
    assert len(set(picks)) == 1 and picks[0] in (1, 3)
    expected = select_max([5, 9, 2, 9], derived_rng(123, "pointwise", "tie"))[0]
    assert picks[0] == expected
    # Another seed may break the tie the other way; over many seeds both tied candidates win.
    assert {select_max([5, 9, 2, 9], derived_rng(s, "pointwise", "tie"))[0] for s in range(30)} == {1, 3}


def test_pointwise_judges_each_distinct_command_once_and_never_an_unrunnable_one(loopback_model, tmp_path):
    models = _servers(loopback_model, ["ls", "ls", None, "echo hi"], lambda p: json.dumps(
        {"score": 3 if commands_in(p)[""] == "ls" else 8}))
    policy = PointwiseVerifier(PointwiseParams(n=4, verifier="ver"), generator=models("gen", "generator"), models=models)
    ctx, log = _ctx(tmp_path)
    d = run(policy.decide(HISTORY, ctx))
    assert d.selected_index == 3 and d.n_candidates == 4
    calls = _events(log, "verifier_call")
    assert sorted(c["candidate"] for c in calls) == [0, 3]  # the duplicate and the unrunnable one are not asked


def test_pairwise_ranks_by_margin_weighted_win_rate(loopback_model, tmp_path):
    # The hand-computed example above, played by a scripted verifier: pair -> scores.
    cands = ["cmd0", "cmd1", "cmd2"]
    table = {frozenset({"cmd0", "cmd1"}): {"cmd0": 9, "cmd1": 1},
             frozenset({"cmd0", "cmd2"}): {"cmd0": 5, "cmd2": 6},
             frozenset({"cmd1", "cmd2"}): {"cmd1": 5, "cmd2": 6}}

    def verifier(prompt):
        shown = commands_in(prompt)
        s = table[frozenset(shown.values())]
        a, b = s[shown["A"]], s[shown["B"]]
        return json.dumps({"rationale": "scripted", "score_a": a, "score_b": b,
                           "preference": "A" if a > b else "B" if b > a else "tie"})

    models = _servers(loopback_model, cands, verifier)
    for aggregation, winner in (("margin", 0), ("wins", 2)):
        policy = PairwiseVerifier(PairwiseParams(n=3, verifier="ver", aggregation=aggregation),
                                  generator=models("gen", "generator"), models=models)
        ctx, log = _ctx(tmp_path, name=aggregation)
        d = run(policy.decide(HISTORY, ctx))
        assert d.selected_index == winner
        sel = _events(log, "selection")[0]
        expected = [25 / 36, 1 / 4, 5 / 9] if aggregation == "margin" else [0.5, 0.0, 1.0]
        assert sel["scores"] == pytest.approx(expected)
        assert sel["pairs_asked"] == 3


def test_pairwise_both_orders_asks_each_pair_twice(loopback_model, tmp_path):
    models = _servers(loopback_model, ["a1", "a2", "a3"], lambda p: json.dumps(
        {"score_a": 5, "score_b": 5, "preference": "tie"}))
    policy = PairwiseVerifier(PairwiseParams(n=3, verifier="ver", both_orders=True),
                              generator=models("gen", "generator"), models=models)
    ctx, log = _ctx(tmp_path)
    run(policy.decide(HISTORY, ctx))
    pairs = sorted(tuple(c["pair"]) for c in _events(log, "verifier_call"))
    assert pairs == [(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)]


def test_listwise_and_failed_verifier_fallback(loopback_model, tmp_path):
    models = _servers(loopback_model, ["x1", "x2"], lambda p: json.dumps({"selected_index": 1}))
    policy = ListwiseVerifier(ListwiseParams(n=2, verifier="ver"), generator=models("gen", "generator"), models=models)
    ctx, log = _ctx(tmp_path, name="list")
    assert run(policy.decide(HISTORY, ctx)).selected_index == 1
    # A verifier that never answers usably: every call fails, the seeded fallback runs, the turn is marked.
    models = _servers(loopback_model, ["y1", "y2"], lambda p: "I cannot decide.")
    policy = PointwiseVerifier(PointwiseParams(n=2, verifier="ver", tries=2), generator=models("gen", "generator"),
                               models=models)
    ctx, log = _ctx(tmp_path, name="fail")
    d = run(policy.decide(HISTORY, ctx))
    assert d.selector_failed
    sel = _events(log, "selection")[0]
    assert sel["selector_failed"] and sel["rationale"] == "every verifier call failed"
    assert all(c["parsed"] is None and c["calls"] == 2 for c in _events(log, "verifier_call"))


def test_self_verification_uses_the_generator_in_the_verifier_role(loopback_model, tmp_path):
    models = _servers(loopback_model, ["ls", "pwd"], lambda p: json.dumps({"score": 7 if "pwd" in p else 3}))
    policy = PointwiseVerifier(PointwiseParams(n=2), generator=models("gen", "generator"), models=models)
    ctx, log = _ctx(tmp_path)
    d = run(policy.decide(HISTORY, ctx))
    assert d.selected_index == 1
    assert set(ctx.rec.usage) == {"generator", "verifier"} and ctx.rec.usage["verifier"].calls == 2
    calls = _events(log, "verifier_call")
    assert all(c["self_verification"] for c in calls)


def test_config_validation_names_bad_verifier_keys():
    validate_component("policy", "verify_pairwise", {"n": 4, "verifier": "v"}, {"v": object()})
    with pytest.raises(ValueError, match="verifier: 'nope' is not a key"):
        validate_component("policy", "verify_pointwise", {"verifier": "nope"}, {})
    with pytest.raises(ValueError, match="^scale_max: scale_max must be greater"):
        validate_component("policy", "verify_pointwise", {"scale_min": 5, "scale_max": 5}, {})
    assert entry("policy", "verify_listwise").params is ListwiseParams


# ---- the simulated verifier ------------------------------------------------------------------------------
def test_simulated_verifier_scores_the_reference_step_highest():
    from tbscale.strategies.action_verifiers import pairwise_messages, pointwise_messages
    from tbscale.types.actions import Action

    steps = ["grep -rho foo /app/docs > /app/emails.txt", "cat /app/emails.txt"]
    sim.register_task(TASK, steps)
    good, rerun_hist = Action("command", steps[0]), Action("command", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")
    acc = {"accuracy": 1.0}
    hi = [json.loads(sim.simulate("verifier", pointwise_messages(HISTORY, good, "s", 1, 10), 1, s, acc)[0])["score"]
          for s in range(20)]
    lo = [json.loads(sim.simulate("verifier", pointwise_messages(HISTORY, rerun_hist, "s", 1, 10), 1, s, acc)[0])["score"]
          for s in range(20)]
    assert min(hi) >= 8 and max(lo) <= 2
    pref = json.loads(sim.simulate("verifier", pairwise_messages(HISTORY, rerun_hist, good, "s", 1, 10), 1, 0, acc)[0])
    assert pref["preference"] == "B" and pref["score_b"] > pref["score_a"]
    # accuracy 0: scores are uniform, so the premature submission sometimes beats the right step.
    noisy = [json.loads(sim.simulate("verifier", pointwise_messages(HISTORY, rerun_hist, "s", 1, 10), 1, s,
                                     {"accuracy": 0.0})[0])["score"] for s in range(60)]
    assert max(noisy) >= 8


# ---- export ------------------------------------------------------------------------------------------------
def _fake_run(tmp_path: Path, simulated=False) -> Path:
    run = tmp_path / "run1"
    (run / "trajectories" / "t1").mkdir(parents=True)
    (run / "trials.jsonl").write_text(json.dumps({"trial_key": "k"}) + "\n")
    log = EventLog(run / "trajectories" / "t1" / "s__t0__k.jsonl", trial_key="k", task_id="t1", setting="s", trial=0,
                   seed=1, simulated=simulated)
    rec = AttemptRecorder(log, attempt=0)
    rec.turn = 3
    msgs = [{"role": "system", "content": "sys"}, {"role": "user", "content": "<verification kind=\"pairwise\">..."}]
    rec.event("verifier_call", role="verifier", method="pairwise", model="m", messages=msgs,
              response='{"score_a": 8, "score_b": 2, "preference": "A"}',
              parsed={"score_a": 8, "score_b": 2, "preference": "A"}, pair=[1, 0], margin=0.667, self_verification=False)
    rec.event("verifier_call", role="verifier", method="pairwise", model="m", messages=msgs, response="junk",
              parsed=None, pair=[0, 2])
    rec.event("attempt_end", ending="pass", reward=1.0)
    trial = AttemptRecorder(log, attempt=-1)
    trial.event("verifier_call", role="judge", method="final", model="j", messages=msgs, response='{"best": 1}',
                parsed={"best": 0, "order": [0, 1]}, round=1, group=0, vote=0)
    AttemptRecorder(log, attempt=1).event("attempt_end", ending="wrong_submission", reward=0.0)
    log.close()
    return run


def test_export_writes_training_rows(tmp_path):
    from tbscale.analysis.export_verifier import export_verifier_data, load

    run = _fake_run(tmp_path)
    out = tmp_path / "out.jsonl"
    counts = export_verifier_data([run], out)
    rows = load(out)
    assert counts["written"] == 2 and counts["skipped_unparsed"] == 1
    v = next(r for r in rows if r["role"] == "verifier")
    assert v["messages"][1]["content"].startswith("<verification") and v["response"].startswith("{")
    assert v["parsed"]["preference"] == "A" and v["pair"] == [1, 0] and v["margin"] == 0.667
    assert v["outcome"] == {"reward": 1.0, "ending": "pass"} and v["turn"] == 3 and v["task_id"] == "t1"
    j = next(r for r in rows if r["role"] == "judge")
    assert j["labels"] == {"order": [0, 1], "passed": [True, False]} and j["outcome"] is None
    only = export_verifier_data([run], out, roles=["judge"])
    assert only["written"] == 1 and only["filtered"] == 2


def test_export_command_line(tmp_path):
    from tbscale.cli import app

    run = _fake_run(tmp_path, simulated=True)
    out = tmp_path / "o.jsonl"
    res = CliRunner().invoke(app, ["export", "verifier-data", str(run), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "wrote 0 of 3 calls" in res.output and out.read_text() == ""
    res = CliRunner().invoke(app, ["export", "verifier-data", str(run), "-o", str(out), "--include-simulated",
                                   "--method", "pairwise"])
    assert res.exit_code == 0, res.output
    assert "wrote 1 of 3 calls" in res.output and len(out.read_text().splitlines()) == 1
    res = CliRunner().invoke(app, ["export", "verifier-data", str(tmp_path / "missing"), "-o", str(out)])
    assert res.exit_code == 2
