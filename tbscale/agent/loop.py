"""The bash agent loop, in the style of mini-swe-agent.

Each turn the action policy (baseline, Turn-BoN, a verifier, ...) returns one chosen response;
its single bash command runs in the container and the observation goes back into the history.
The attempt ends when a command's first output line is the finish marker, or when a limit is
hit: each limit raises the exception whose stop reason `verify.classify_ending` maps to an ending.
The loop does not know which policy it runs.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from tbscale.agent.policy import ActionPolicy, Branches, TurnContext
from tbscale.agent.templates import format_observation, render
from tbscale.config import Limits
from tbscale.environments import Environment
from tbscale.errors import (AgentTimeout, AttemptStopped, ContextWindowExceeded, FormatErrorLimit,
                            OutputLengthExceeded, SegmentDone, StepLimitReached)
from tbscale.logs import AttemptRecorder
from tbscale.secrets import redact_file
from tbscale.tasks import Task
from tbscale.types.actions import FINISH_MARKER, ends_attempt
from tbscale.types.messages import ChatMessage

def _estimate_tokens(messages: list[ChatMessage]) -> int:
    # ~4 characters a token: a cheap guard; providers' own context errors are caught as well.
    return sum(len(str(m.get("content") or "")) for m in messages) // 4


def assistant_message(completion) -> ChatMessage:
    """The chosen response as it enters the history; tool calls are kept so that the provider
    sees its own call answered."""
    msg: ChatMessage = {"role": "assistant", "content": completion.text}
    if completion.tool_calls:
        msg["tool_calls"] = [{"id": c.get("id") or f"call_{i}", "type": "function",
                              "function": {"name": c.get("name"), "arguments": c.get("arguments")}}
                             for i, c in enumerate(completion.tool_calls)]
    return msg


def reply_messages(completion, text: str) -> list[ChatMessage]:
    """What the harness answers: a tool result for every tool call (providers require one), else
    a user message."""
    if completion.tool_calls:
        return [{"role": "tool", "tool_call_id": c.get("id") or f"call_{i}", "content": text}
                for i, c in enumerate(completion.tool_calls)]
    return [{"role": "user", "content": text}]


@dataclass
class AttemptOutcome:
    stop_reason: str  # "submitted" or an AttemptStopped.stop_reason
    turns: int
    format_errors: int
    messages: list[ChatMessage] = field(repr=False, default_factory=list)
    actions: list[str] = field(default_factory=list)
    error: str | None = None
    error_type: str | None = None  # the exception class that stopped the attempt


@dataclass
class LoopContext:
    """What the loop works with for one attempt, fixed while it runs."""

    task: Task
    env: Environment
    policy: ActionPolicy
    limits: Limits
    rec: AttemptRecorder
    seed: int
    prompts: dict[str, str] | None
    context_window: int | None  # history tokens the model takes (None: no check)
    deadline: float  # time.monotonic() by which the attempt must end
    turns: range  # the turns this run may take (a continued prefix starts after its own)
    branches: Branches | None = None  # forks of `env` for a policy that looks ahead (agent/policy.py)


async def run_agent(task: Task, box: Environment, policy: ActionPolicy, limits: Limits, rec: AttemptRecorder,
                    *, seed: int, context: str | None = None, prompts: dict[str, str] | None = None,
                    context_window: int | None = None, time_budget_sec: float | None = None,
                    action_format: str = "fenced", history: list[ChatMessage] | None = None,
                    max_new_turns: int | None = None, branches: Branches | None = None) -> AttemptOutcome:
    """Run one attempt of the bash agent in `box`. Never raises for attempt-ending conditions:
    they come back as the outcome's stop_reason (and an `end`-worthy error message)."""
    budget = time_budget_sec or limits.agent_timeout_sec or task.agent_timeout_sec
    start = time.monotonic()
    if history:  # continuing a prefix whose commands were replayed in this container
        messages = [dict(m) for m in history]
    else:
        workdir = box.workdir or (await asyncio.to_thread(box.exec, "pwd", 10)).output.strip() or "/"
        messages = [
            {"role": "system", "content": render("system", prompts, workdir=workdir, finish_marker=FINISH_MARKER,
                                                 action_format=action_format)},
            {"role": "user", "content": render("instance", prompts, instruction=task.instruction, context=context,
                                               max_turns=limits.max_turns, time_budget=f"{budget / 60:.0f} minutes")},
        ]
    first_turn = 1 + sum(m["role"] == "assistant" for m in messages)
    last_turn = limits.max_turns if max_new_turns is None else min(limits.max_turns, first_turn + max_new_turns - 1)
    ctx = LoopContext(task=task, env=box, policy=policy, limits=limits, rec=rec, seed=seed, prompts=prompts,
                      context_window=context_window, deadline=start + budget, turns=range(first_turn, last_turn + 1),
                      branches=branches)
    outcome = AttemptOutcome("agent_error", first_turn - 1, 0, messages)
    try:
        async with asyncio.timeout(budget + 30):  # a backstop: the checks below should fire first
            await _loop(ctx, outcome)
    except AttemptStopped as e:
        outcome.stop_reason, outcome.error, outcome.error_type = e.stop_reason, str(e) or None, type(e).__name__
    except TimeoutError:
        outcome.stop_reason, outcome.error = "time_limit", f"attempt ran past its {budget:.0f} s budget"
        outcome.error_type = "TimeoutError"
    return outcome


async def run_command(box: Environment, command: str, timeout: float, limits: Limits, rec: AttemptRecorder):
    """Run one command and record its observation: the stored output is capped (head and tail,
    with the elided byte count), and the whole output goes to a side file only when configured."""
    side = rec.side_file("output.txt") if limits.keep_full_output else None
    result = await asyncio.to_thread(box.exec, command, timeout, output_limit=limits.stored_output_max_bytes, tee=side)
    if side is not None and side.exists():
        # the stored output is redacted as its event is written; the whole one is raw bytes
        await asyncio.to_thread(redact_file, side)
    record_observation(rec, result, rec.relative(side) if side is not None else None)
    return result


def record_observation(rec: AttemptRecorder, result, full_output: str | None = None) -> None:
    """The `observation` event of the command that ran (here, or already in a fork)."""
    extra = {"output_bytes": result.output_bytes, "elided_bytes": result.elided_bytes} if result.elided_bytes else {}
    if full_output is not None:
        extra["full_output"] = full_output
    rec.event("observation", exit_code=result.exit_code, output=result.output, timed_out=result.timed_out,
              duration_sec=round(result.duration_sec, 4), **extra)


async def _loop(ctx: LoopContext, outcome: AttemptOutcome) -> None:
    """The turns: ask the policy, run its command, answer with the observation; each limit
    raises its AttemptStopped. `outcome.messages` is the history, extended in place."""
    messages, limits, rec = outcome.messages, ctx.limits, ctx.rec
    for turn in ctx.turns:
        rec.turn = outcome.turns = turn
        if time.monotonic() >= ctx.deadline:
            raise AgentTimeout("the attempt ran past its time budget")
        if ctx.context_window and _estimate_tokens(messages) > ctx.context_window:
            raise ContextWindowExceeded(f"history of ~{_estimate_tokens(messages)} tokens exceeds {ctx.context_window}")
        timeout = max(1.0, min(limits.command_timeout_sec, ctx.deadline - time.monotonic()))
        decision = await ctx.policy.decide(messages, TurnContext(
            turn=turn, seed=ctx.seed * 100_003 + turn, rec=rec, task=ctx.task, branches=ctx.branches,
            command_timeout_sec=timeout, output_limit=limits.stored_output_max_bytes))
        completion, action = decision.completion, decision.action
        if decision.env is not None:  # the policy ran its pick in a fork, which is now the environment
            ctx.env = decision.env
        messages.append(assistant_message(completion))
        if completion.finish_reason == "length":
            raise OutputLengthExceeded("the chosen response was cut off at the output-length limit")
        if not action.runnable:
            outcome.format_errors += 1
            rec.event("format_error", error=action.error, count=outcome.format_errors)
            if outcome.format_errors > limits.max_format_errors:
                raise FormatErrorLimit(f"{outcome.format_errors} responses could not be run")
            messages.extend(reply_messages(completion, render("format_error", ctx.prompts, error=action.error,
                                                              finish_marker=FINISH_MARKER)))
            continue
        rec.event("action", command=action.command, selected_index=decision.selected_index,
                  n_candidates=decision.n_candidates, **({"ran_in_fork": True} if decision.result else {}))
        if decision.result is not None:
            result = decision.result
            record_observation(rec, result)
        else:
            timeout = max(1.0, min(limits.command_timeout_sec, ctx.deadline - time.monotonic()))
            result = await run_command(ctx.env, action.command, timeout, limits, rec)
        outcome.actions.append(action.command)
        if ends_attempt(result.output):
            outcome.stop_reason = "submitted"
            return
        messages.extend(reply_messages(completion, format_observation(
            result.output, result.exit_code, result.timed_out, timeout, limits.observation_max_chars, ctx.prompts)))
    if ctx.turns.stop - 1 < limits.max_turns:
        raise SegmentDone(f"paused after turn {ctx.turns.stop - 1}")
    raise StepLimitReached(f"no submission within {limits.max_turns} turns")
