"""Agents, registered by name: what acts in an attempt's environment.

- `bash`: the model-driven agent loop (agent/loop.py) with an action policy chosen by config;
- `oracle`: runs the task's reference solution (it must pass: `tbscale tasks check`);
- `nop`: does nothing and submits (it must fail).
A new agent registers here and needs no change to the runner.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from tbscale.agent.loop import AttemptOutcome, run_agent, run_command
from tbscale.agent.policy import ActionPolicy, Branches
from tbscale.config import Limits
from tbscale.environments import Environment, PhaseView
from tbscale.logs import AttemptRecorder
from tbscale.tasks import Task
from tbscale.types.messages import ChatMessage


@dataclass
class AgentRun:
    """One attempt as an agent sees it. `history` and `max_new_turns` continue a prefix."""

    task: Task
    env: Environment
    rec: AttemptRecorder
    limits: Limits
    seed: int
    prompts: dict[str, str] = field(default_factory=dict)
    context: str | None = None
    history: list[ChatMessage] | None = None
    max_new_turns: int | None = None
    user: str = ""
    branches: Branches | None = None  # forks of `env`, for a policy that looks ahead


class Agent(Protocol):
    uses_model: bool

    async def run(self, run: AgentRun) -> AttemptOutcome: ...


_AGENTS: dict[str, Callable[..., Agent]] = {}


def register_agent(name: str):
    def deco(factory):
        _AGENTS[name] = factory
        return factory
    return deco


def agent_names() -> list[str]:
    return sorted(_AGENTS)


def create_agent(name: str, **options: Any) -> Agent:
    if name not in _AGENTS:
        raise ValueError(f"unknown agent {name!r} (known: {', '.join(agent_names())})")
    return _AGENTS[name](**options)


def uses_model(name: str) -> bool:
    return bool(getattr(_AGENTS.get(name), "uses_model", False))


@register_agent("bash")
class BashAgent:
    uses_model = True

    def __init__(self, *, policy: ActionPolicy, action_format: str = "fenced", context_window: int | None = None,
                 **_):
        self.policy, self.action_format, self.context_window = policy, action_format, context_window

    async def run(self, run: AgentRun) -> AttemptOutcome:
        return await run_agent(run.task, run.env, self.policy, run.limits, run.rec, seed=run.seed,
                               context=run.context, prompts=run.prompts, action_format=self.action_format,
                               history=run.history, max_new_turns=run.max_new_turns,
                               context_window=self.context_window, branches=run.branches)


@register_agent("oracle")
class OracleAgent:
    """Runs the reference solution as one action, with the solution's own environment variables
    (`[solution].env`, resolved from the host, and DEBIAN_FRONTEND=noninteractive), as the agent's
    user (the environment it is given runs commands as that user). A Terminal-Bench task with only
    a solution.yaml runs its commands in order."""

    uses_model = False

    def __init__(self, **_):
        pass

    async def run(self, run: AgentRun) -> AttemptOutcome:
        task = run.task
        env = {"DEBIAN_FRONTEND": "noninteractive", **task.solution.env.resolve()}
        box = PhaseView(run.env, env=env)
        limits = run.limits.model_copy(update={"command_timeout_sec": task.agent_timeout_sec})
        if task.solution_dir is None:
            commands = [c["command"] for c in (task.legacy.solution_commands if task.legacy else [])]
            if not commands:
                return AttemptOutcome("agent_error", 0, 0, error=f"task {task.id} has no reference solution")
            for turn, command in enumerate(commands, 1):
                run.rec.turn = turn
                run.rec.event("action", command=command, selected_index=0, n_candidates=1)
                result = await run_command(box, command, task.agent_timeout_sec, limits, run.rec)
                if result.timed_out:
                    return AttemptOutcome("time_limit", turn, 0, actions=commands[:turn])
            return AttemptOutcome("submitted", len(commands), 0, actions=commands)
        await asyncio.to_thread(run.env.exec, "rm -rf /solution", 60, user="0")
        await asyncio.to_thread(run.env.put_dir, task.solution_dir, "/solution")
        run.rec.turn = 1
        run.rec.event("action", command=task.solution_command, selected_index=0, n_candidates=1)
        result = await run_command(box, task.solution_command, task.agent_timeout_sec, limits, run.rec)
        return AttemptOutcome("time_limit" if result.timed_out else "submitted", 1, 0,
                              actions=[task.solution_command])


@register_agent("nop")
class NopAgent:
    """Does nothing and submits: a task whose tests pass untouched is broken."""

    uses_model = False

    def __init__(self, **_):
        pass

    async def run(self, run: AgentRun) -> AttemptOutcome:
        return AttemptOutcome("submitted", 0, 0)
