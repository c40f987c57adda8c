"""The action-level seam: an ActionPolicy is asked for the next action given the history and
returns the chosen response plus what it did (candidates, selector calls, scores) as events. The
agent loop calls it without knowing which policy it is; strategies implement it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from tbscale.logs import AttemptRecorder
from tbscale.tasks import Task
from tbscale.types import Action, Completion


@dataclass
class TurnContext:
    turn: int
    seed: int
    rec: AttemptRecorder
    task: Task


@dataclass
class Decision:
    completion: Completion
    action: Action
    n_candidates: int = 1
    selected_index: int = 0
    selector_failed: bool = False


class ActionPolicy(Protocol):
    async def decide(self, messages: list[dict[str, Any]], ctx: TurnContext) -> Decision: ...
