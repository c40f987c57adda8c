"""What an importer reads out of another harness's run (the import record): trials and their
turns, checked against their types as each importer builds them (pydantic dataclasses), and
written as a tbscale run folder by ingest/runs.py."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic.dataclasses import dataclass as checked

from tbscale.types.actions import FINISH_MARKER
from tbscale.types.completion import Usage
from tbscale.types.manifest import PublishedRun
from tbscale.types.messages import ToolCall
from tbscale.types.results import PASS_THRESHOLD, StepResult  # noqa: F401  (one threshold, re-exported)


@checked
class ImportedTurn:
    text: str
    command: str | None
    runnable: bool
    parse_error: str | None = None
    reasoning: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    output: str | None = None
    exit_code: int | None = None
    usage: Usage | None = None  # the reply's tokens and cost, when the source records them
    finish_reason: str | None = None

    @property
    def submission(self) -> bool:
        return self.runnable and FINISH_MARKER in (self.command or "")


@checked
class ImportedTrial:
    source: str
    task_id: str
    setting: str
    agent: str
    model: str | None
    turns: list[ImportedTurn]
    stop_reason: str
    ending: str
    reward: float | None
    passed: bool
    tokens: dict[str, Usage]
    instruction: str | None = None
    verifier_output: str | None = None
    error: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    trial: int = 0
    infra_error: bool = False  # the source harness, not the agent, failed (left out of pass@1)
    timing: dict[str, float] = field(default_factory=dict)
    verifier_details: dict[str, Any] = field(default_factory=dict)  # test results, patch, recording
    steps: list[StepResult] | None = None  # multi-step trials
    rewards: dict[str, float] | None = None
    order: tuple[Any, ...] = ()  # how trials of one task are numbered (run, then attempt)


@dataclass
class ImportResult:
    run_dir: Path
    format: str
    trials: int
    tasks: int
    warnings: list[str] = field(default_factory=list)
    published: list[PublishedRun] | None = None  # the runs' own numbers, when the source states them


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text(c.get("text") if isinstance(c, dict) else c) for c in content)
    return str(content)


def _safe(name: str) -> str:
    """`name` as a folder name that follows tbscale.names' rule (no '..', no leading dot)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).lstrip("._-")[:120].rstrip(".-") or "x"


def _short_model(model: str | None) -> str:
    return (model or "unknown-model").rsplit("/", 1)[-1]
