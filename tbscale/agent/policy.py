"""The action-level seam: an ActionPolicy is asked for the next action given the history and
returns the chosen response plus what it did (candidates, selector calls, scores) as events. The
agent loop calls it without knowing which policy it is; strategies implement it.

A policy that looks ahead (strategies/lookahead.py) runs candidates before choosing, each in its
own fork of the attempt's environment (`TurnContext.branches`, given when the backend can take
snapshots). Its Decision then carries the chosen command's result and the environment it ran in:
the loop records that observation instead of running the command again, and goes on in that
environment.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from tbscale.environments import Environment, ExecResult
from tbscale.logs import AttemptRecorder
from tbscale.tasks import Task
from tbscale.types import Action, Completion
from tbscale.types.messages import ChatMessage


class Branches(Protocol):
    """The attempt's environment as a policy may branch it (runner/forks.py). `open` snapshots the
    environment as it is now and starts `count` forks of it (each seen as the agent phase sees its
    environment: the agent's user and env); `adopt` makes one of them the attempt's environment and
    releases the former one, every other open fork and the snapshot; `discard` releases every open
    fork and the snapshot and keeps the environment. Forks run no process of their parent's."""

    async def open(self, count: int) -> list[Environment]: ...

    async def adopt(self, fork: Environment) -> Environment: ...

    async def discard(self) -> None: ...


@dataclass
class TurnContext:
    turn: int
    seed: int
    rec: AttemptRecorder
    task: Task
    branches: Branches | None = None  # None: the backend cannot fork (or the agent was given none)
    command_timeout_sec: float | None = None  # what the loop would give the chosen command
    output_limit: int | None = None  # the bytes of output a command's stored observation keeps


@dataclass
class Decision:
    completion: Completion
    action: Action
    n_candidates: int = 1
    selected_index: int = 0
    selector_failed: bool = False
    result: ExecResult | None = None  # the chosen command already ran (in `env`): not run again
    env: Environment | None = None  # the environment the attempt goes on in (its fork), when it changed


class ActionPolicy(Protocol):
    async def decide(self, messages: list[ChatMessage], ctx: TurnContext) -> Decision: ...
