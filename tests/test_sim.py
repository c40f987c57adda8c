"""The simulated model: honest about itself, and Turn-BoN's effect depends on selector accuracy."""

import json

import pytest

from tbscale_sim import provider as sim
from tbscale_sim.provider import SUBMIT, judge_candidates, parse_selector_prompt, progress, simulate
from tbscale.types.actions import parse_action
from tbscale.types import Completion
from tbscale.strategies.turn_bon import selector_messages

STEPS = ["mkdir -p /app/out", "cp /app/a /app/out/a", "python3 /app/check.py"]
INSTRUCTION = "Copy a into out and check it (sim test task)."


def history(executed: list[str]) -> list[dict]:
    msgs = [{"role": "system", "content": "sys"}, {"role": "user", "content": f"<task>\n{INSTRUCTION}\n</task>"}]
    for cmd in executed:
        msgs.append({"role": "assistant", "content": f"THOUGHT: x\n\n```bash\n{cmd}\n```"})
        msgs.append({"role": "user", "content": "<returncode>0</returncode>\n<output>\n</output>"})
    return msgs


def setup_module():
    sim.register_task(INSTRUCTION, STEPS)


def test_progress_counts_steps_in_order():
    assert progress(STEPS, ["ls", STEPS[0], "ls", STEPS[1]]) == 2
    assert progress(STEPS, [STEPS[1], STEPS[0]]) == 1  # out of order: only the first counts


def test_policy_skill_one_follows_the_solution_then_submits():
    msgs = history(STEPS[:1])
    texts = simulate("policy", msgs, 5, seed=1, params={"skill": 1.0})
    assert {parse_action(Completion(t)).command for t in texts} == {STEPS[1]}
    texts = simulate("policy", history(STEPS), 3, seed=1, params={"skill": 1.0})
    assert {parse_action(Completion(t)).command for t in texts} == {SUBMIT}


def test_policy_skill_zero_makes_only_mistakes():
    texts = simulate("policy", history(STEPS[:1]), 200, seed=3, params={"skill": 0.0})
    commands = [parse_action(Completion(t)).command for t in texts]
    assert STEPS[1] not in commands
    assert None in commands and SUBMIT in commands  # malformed replies and premature submissions occur


def test_policy_is_deterministic_under_a_seed():
    a = simulate("policy", history([]), 8, seed=42, params={"skill": 0.5})
    b = simulate("policy", history([]), 8, seed=42, params={"skill": 0.5})
    c = simulate("policy", history([]), 8, seed=43, params={"skill": 0.5})
    assert a == b and a != c


def _selector_prompt(executed, cands):
    actions = [parse_action(Completion(f"```bash\n{c}\n```" if c else "no block")) for c in cands]
    return selector_messages(history(executed), actions, "system")


def test_selector_prompt_round_trip():
    prompt = _selector_prompt(STEPS[:1], ["ls", None, STEPS[1]])
    executed, cands = parse_selector_prompt(prompt[-1]["content"])
    assert executed == STEPS[:1] and cands == ["ls", None, STEPS[1]]
    good, harmless = judge_candidates(STEPS, executed, cands)
    assert good == [2] and harmless == [0, 2]


def _pick_rate(accuracy: float, trials: int = 400) -> float:
    prompt = _selector_prompt(STEPS[:1], ["ls", SUBMIT, STEPS[1], "ls -la"])
    hits = 0
    for s in range(trials):
        reply = json.loads(simulate("selector", prompt, 1, seed=s, params={"accuracy": accuracy})[0])
        hits += reply["selected_index"] == 2
    return hits / trials


def test_accurate_selector_picks_the_right_candidate_random_does_not():
    assert _pick_rate(1.0) == 1.0
    assert 0.15 < _pick_rate(0.0) < 0.35  # uniform over 4 candidates
    assert 0.85 < _pick_rate(0.9) < 0.98


def test_unknown_task_still_answers():
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "some task it never saw"}]
    texts = simulate("policy", msgs, 4, seed=0, params={"skill": 0.5})
    assert all(parse_action(Completion(t)).runnable for t in texts)


@pytest.mark.litellm
def test_sim_provider_through_litellm():
    import asyncio

    from tbscale.config import ModelConfig
    from tbscale.models.llm import LLM

    llm = LLM(ModelConfig(model="sim/policy", sim={"skill": 1.0}), "generator")
    res = asyncio.run(llm.complete(history(STEPS[:2]), n=3, seed=5))
    assert len(res.completions) == 3 and res.usage.calls == 1
    assert res.usage.output > 0 and res.usage.input > 0 and res.usage.cost_usd == 0.0
    assert all(parse_action(c).command == STEPS[2] for c in res.completions)


def test_simulation_ignores_what_commands_printed():
    """Container output carries timestamps; the simulation must not depend on it, or simulated
    runs would differ from run to run."""
    a, b = history(STEPS[:1]), history(STEPS[:1])
    b[-1]["content"] = "<returncode>0</returncode>\n<output>\ntotal 4 Nov 30 07:01 out\n</output>"
    assert simulate("policy", a, 6, seed=9, params={"skill": 0.5}) == simulate("policy", b, 6, seed=9, params={"skill": 0.5})
    c = history(STEPS[:1])
    c[-1]["content"] = "<returncode>1</returncode>\n<output>\n</output>"  # a different return code counts
    assert simulate("policy", a, 6, seed=9, params={"skill": 0.5}) != simulate("policy", c, 6, seed=9, params={"skill": 0.5})
    pa = _selector_prompt(STEPS[:1], ["ls", STEPS[1]])
    pb = [dict(m) for m in pa]
    pb[-1]["content"] = pb[-1]["content"].replace("<output>\n</output>", "<output>\nat 07:02\n</output>")
    assert pa[-1]["content"] != pb[-1]["content"]
    assert simulate("selector", pa, 5, seed=1, params={"accuracy": 0.5}) == simulate("selector", pb, 5, seed=1, params={"accuracy": 0.5})
