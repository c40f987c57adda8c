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

from tbscale.agent.actions import parse_action
from tbscale.errors import ContextWindowExceeded, ModelCallError
from tbscale.strategies import register_policy
from tbscale.strategies.base import Decision, Params, TurnContext
from tbscale.strategies.baseline import candidate_record
from tbscale.strategies.render import parse_json_object, render_candidates, render_transcript

PROMPTS = Path(__file__).parent / "prompts"


class TurnBoNParams(Params):
    n: int = Field(4, ge=1, le=64)
    selector: str | None = Field(None, description="key of `models`; default: the generator (self-selection)")
    selector_tries: int = Field(3, ge=1)
    fallback: Literal["random_runnable", "first"] = "random_runnable"
    # Future work named by the paper: best-of-N at some turns only. Turns outside the window
    # sample once, like the baseline.
    first_turn: int = Field(1, ge=1)
    last_turn: int | None = Field(None, ge=1)
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

    def _active(self, turn: int) -> bool:
        return turn >= self.p.first_turn and (self.p.last_turn is None or turn <= self.p.last_turn)

    async def decide(self, messages, ctx: TurnContext) -> Decision:
        n = self.p.n if self._active(ctx.turn) else 1
        result = await self.generator.complete(messages, n=n, seed=ctx.seed, tools=self.tools, sink=ctx.rec)
        comps = result.completions[:n]
        actions = [parse_action(c) for c in comps]
        ctx.rec.event("candidates", candidates=[candidate_record(c, a) for c, a in zip(comps, actions)])
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
