"""The baseline action policy: sample one response and run it (Turn-BoN with N=1, no selector)."""

from __future__ import annotations

from pydantic import Field

from tbscale.strategies.registry import register_policy
from tbscale.strategies.base import Decision, Params, TurnContext
from tbscale.types.actions import parse_action


class BaselineParams(Params):
    pass


@register_policy("baseline", BaselineParams, baseline=True)
class Baseline:
    def __init__(self, params: BaselineParams, *, generator, models, tools=None, **_):
        self.generator, self.tools = generator, tools

    async def decide(self, messages, ctx: TurnContext) -> Decision:
        comps, actions = await sample_candidates(self.generator, messages, 1, ctx, self.tools)
        return Decision(comps[0], actions[0])


async def sample_candidates(generator, messages, n: int, ctx: TurnContext, tools=None):
    """Sample n responses on the same history, parse each, and log them as one `candidates`
    event: the first half of every sample-then-choose policy."""
    result = await generator.complete(messages, n=n, seed=ctx.seed, tools=tools, sink=ctx.rec)
    comps = result.completions[:n]
    actions = [parse_action(c) for c in comps]
    ctx.rec.event("candidates", candidates=[candidate_record(c, a) for c, a in zip(comps, actions)])
    return comps, actions


class TurnWindow(Params):
    """Best-of-N only inside a window of turns (the turn-bon paper's future work, to cut cost);
    outside it the policy samples once, like the baseline."""

    first_turn: int = Field(1, ge=1)
    last_turn: int | None = Field(None, ge=1)

    def n_at(self, turn: int, n: int) -> int:
        return n if turn >= self.first_turn and (self.last_turn is None or turn <= self.last_turn) else 1


def candidate_record(completion, action) -> dict:
    """How a candidate is logged: everything the behaviour and cost analyses need."""
    return {"text": completion.text, "reasoning": completion.reasoning, "tool_calls": completion.tool_calls,
            "finish_reason": completion.finish_reason, "output_tokens": completion.output_tokens,
            "reasoning_tokens": completion.reasoning_tokens, "command": action.command,
            "runnable": action.runnable, "submission": action.is_submission, "parse_error": action.error}
