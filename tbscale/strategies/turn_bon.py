"""Turn-level best-of-N (turn-bon.txt): each turn the generator samples N candidates on the same
history, a listwise selector sees the transcript and the N candidates (without reasoning) and
returns JSON with `selected_index`; only that candidate runs.

The N candidates come from one request with n=N where the provider takes it, else N concurrent
requests, so a turn costs about one generator call plus one selector call in wall time. A
selector reply that cannot be used is retried; when every try fails, the fallback (a seeded random
runnable candidate, by default) is taken and the turn is marked `selector_failed`, so behaviour
statistics can exclude it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tbscale.models.replies import SEED_STRIDE, ask_json, parse_json_reply
from tbscale.seeds import derive_rng
from tbscale.strategies import register_policy
from tbscale.strategies.base import Decision, TurnContext
from tbscale.strategies.baseline import TurnWindow, sample_candidates
from tbscale.strategies.calls import read_prompt
from tbscale.strategies.render import (
    fit_transcript,
    render_candidates,
    transcript_budget,
)


class TurnBoNParams(TurnWindow):
    n: int = Field(4, ge=1, le=64)
    selector: str | None = Field(None, description="key of `models`; default: the generator (self-selection)")
    selector_tries: int = Field(3, ge=1)
    fallback: Literal["random_runnable", "first"] = "random_runnable"
    selector_system_prompt: str | None = Field(None, description="path to a file replacing ours")

    def model_refs(self):
        return {"selector": self.selector}


def selector_messages(messages, actions, system_prompt: str, budget: int | None = None) -> list[dict]:
    n = len(actions)
    user = (f"{fit_transcript(messages, budget)[0]}\n\n"
            f"There are {n} candidate next actions, numbered 0 to {n - 1}:\n\n{render_candidates(actions)}\n\n"
            'Respond with JSON: {"rationale": string, "selected_index": integer in [0, ' f"{n - 1}" "]}")
    return [{"role": "system", "content": system_prompt}, {"role": "user", "content": user}]


def parse_selection(reply: str, n: int) -> tuple[int, str] | None:
    """(selected_index, rationale) from a selector reply, or None when it names no valid index."""
    obj = parse_json_reply(reply)
    idx = obj.get("selected_index") if obj else None
    if isinstance(idx, bool) or not isinstance(idx, int) or not 0 <= idx < n:
        return None
    return idx, str(obj.get("rationale", ""))


@register_policy("turn_bon", TurnBoNParams)
class TurnBoN:
    def __init__(self, params: TurnBoNParams, *, generator, models, tools=None, **_):
        self.p, self.generator, self.tools = params, generator, tools
        self.selector = models(params.selector, "selector")
        self.system_prompt = read_prompt(params.selector_system_prompt, "selector_system.txt")

    async def decide(self, messages, ctx: TurnContext) -> Decision:
        comps, actions = await sample_candidates(self.generator, messages, self.p.n_at(ctx.turn, self.p.n), ctx,
                                                 self.tools)
        if len(comps) == 1:
            return Decision(comps[0], actions[0], 1, 0)
        shown = render_candidates(actions)
        budget = transcript_budget(self.selector, len(self.system_prompt) + len(shown) + 500)
        elided = fit_transcript(messages, budget)[1]
        prompt = selector_messages(messages, actions, self.system_prompt, budget)
        parsed, reply, problem, tries = await ask_json(self.selector, prompt, lambda t: parse_selection(t, len(actions)),
                                                       seed=ctx.seed + SEED_STRIDE, sink=ctx.rec,
                                                       tries=self.p.selector_tries)
        failed = parsed is None
        if failed:
            runnable = [i for i, a in enumerate(actions) if a.runnable] or list(range(len(actions)))
            index = runnable[0] if self.p.fallback == "first" else derive_rng(ctx.seed, "fallback").choice(runnable)
            rationale = f"fallback ({self.p.fallback}) after selector failures: {problem}"
        else:
            index, rationale = parsed
        ctx.rec.event("selection", index=index, rationale=rationale, selector_failed=failed, tries=tries,
                      method="listwise", model=self.selector.name, **({"prompt_elided_chars": elided} if elided else {}))
        return Decision(comps[index], actions[index], len(comps), index, failed)
