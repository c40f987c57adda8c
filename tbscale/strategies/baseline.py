"""The baseline action policy: sample one response and run it (Turn-BoN with N=1, no selector)."""

from __future__ import annotations

from tbscale.agent.actions import parse_action
from tbscale.strategies import register_policy
from tbscale.strategies.base import Decision, Params, TurnContext


class BaselineParams(Params):
    pass


@register_policy("baseline", BaselineParams)
class Baseline:
    def __init__(self, params: BaselineParams, *, generator, models, tools=None, **_):
        self.generator, self.tools = generator, tools

    async def decide(self, messages, ctx: TurnContext) -> Decision:
        result = await self.generator.complete(messages, n=1, seed=ctx.seed, tools=self.tools, sink=ctx.rec)
        completion = result.completions[0]
        action = parse_action(completion)
        ctx.rec.event("candidates", candidates=[candidate_record(completion, action)])
        return Decision(completion, action)


def candidate_record(completion, action) -> dict:
    """How a candidate is logged: everything the behaviour and cost analyses need."""
    return {"text": completion.text, "reasoning": completion.reasoning, "tool_calls": completion.tool_calls,
            "finish_reason": completion.finish_reason, "output_tokens": completion.output_tokens,
            "reasoning_tokens": completion.reasoning_tokens, "command": action.command,
            "runnable": action.runnable, "submission": action.is_submission, "parse_error": action.error}
