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

import random
from pathlib import Path
from typing import Literal

from pydantic import Field

from tbscale.errors import ContextWindowExceeded, ModelCallError
from tbscale.strategies import register_policy
from tbscale.strategies.base import Decision, TurnContext
from tbscale.strategies.baseline import TurnWindow, sample_candidates
from tbscale.strategies.render import parse_json_object, render_candidates, render_transcript

PROMPTS = Path(__file__).parent / "prompts"


class TurnBoNParams(TurnWindow):
    n: int = Field(4, ge=1, le=64)
    selector: str | None = Field(None, description="key of `models`; default: the generator (self-selection)")
    selector_tries: int = Field(3, ge=1)
    fallback: Literal["random_runnable", "first"] = "random_runnable"
    selector_system_prompt: str | None = Field(None, description="path to a file replacing ours")

    def model_refs(self):
        return {"selector": self.selector}


def selector_messages(messages, actions, system_prompt: str) -> list[dict]:
    n = len(actions)
    user = (f"{render_transcript(messages)}\n\n"
            f"There are {n} candidate next actions, numbered 0 to {n - 1}:\n\n{render_candidates(actions)}\n\n"
            'Respond with JSON: {"rationale": string, "selected_index": integer in [0, ' f"{n - 1}" "]}")
    return [{"role": "system", "content": system_prompt}, {"role": "user", "content": user}]


@register_policy("turn_bon", TurnBoNParams)
class TurnBoN:
    def __init__(self, params: TurnBoNParams, *, generator, models, tools=None, **_):
        self.p, self.generator, self.tools = params, generator, tools
        self.selector = models(params.selector, "selector") if params.selector else models(None, "selector")
        path = params.selector_system_prompt
        self.system_prompt = Path(path).read_text() if path else (PROMPTS / "selector_system.txt").read_text()

    async def decide(self, messages, ctx: TurnContext) -> Decision:
        comps, actions = await sample_candidates(self.generator, messages, self.p.n_at(ctx.turn, self.p.n), ctx,
                                                 self.tools)
        if len(comps) == 1:
            return Decision(comps[0], actions[0], 1, 0)
        index, rationale, failed, tries = await self._select(messages, actions, ctx)
        ctx.rec.event("selection", index=index, rationale=rationale, selector_failed=failed, tries=tries,
                      method="listwise", model=self.selector.name)
        return Decision(comps[index], actions[index], len(comps), index, failed)

    async def _select(self, messages, actions, ctx):
        prompt = selector_messages(messages, actions, self.system_prompt)
        problem = None
        for attempt in range(self.p.selector_tries):
            try:
                res = await self.selector.complete(prompt, n=1, seed=ctx.seed + 7919 * (attempt + 1), sink=ctx.rec)
            except (ModelCallError, ContextWindowExceeded) as e:
                problem = str(e)
                continue
            reply = res.completions[0].text
            obj = parse_json_object(reply)
            idx = obj.get("selected_index") if obj else None
            if isinstance(idx, bool) or not isinstance(idx, int) or not 0 <= idx < len(actions):
                problem = f"no valid selected_index in reply: {reply[:200]!r}"
                continue
            return idx, str(obj.get("rationale", "")), False, attempt + 1
        runnable = [i for i, a in enumerate(actions) if a.runnable] or list(range(len(actions)))
        idx = runnable[0] if self.p.fallback == "first" else random.Random(ctx.seed).choice(runnable)
        return idx, f"fallback ({self.p.fallback}) after selector failures: {problem}", True, self.p.selector_tries
