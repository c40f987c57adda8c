"""What an importer reads out of another harness's run: trials and their turns."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tbscale.types.actions import FINISH_MARKER
from tbscale.types.results import PASS_THRESHOLD  # noqa: F401  (one threshold, re-exported)


@dataclass
class ImportedTurn:
    text: str
    command: str | None
    runnable: bool
    parse_error: str | None = None
    reasoning: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    output: str | None = None
    exit_code: int | None = None
    usage: dict[str, Any] | None = None  # input, output, reasoning, cached, cost_usd
    finish_reason: str | None = None

    @property
    def submission(self) -> bool:
        return self.runnable and FINISH_MARKER in (self.command or "")


@dataclass
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
    tokens: dict[str, Any]
    instruction: str | None = None
    verifier_output: str | None = None
    error: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    trial: int = 0
    infra_error: bool = False  # the source harness, not the agent, failed (left out of pass@1)
    timing: dict[str, float] = field(default_factory=dict)
    verifier_details: dict[str, Any] = field(default_factory=dict)  # test results, patch, recording
    steps: list[dict[str, Any]] | None = None  # multi-step trials: StepResult fields per step
    rewards: dict[str, float] | None = None
    order: tuple[Any, ...] = ()  # how trials of one task are numbered (run, then attempt)


@dataclass
class ImportResult:
    run_dir: Path
    format: str
    trials: int
    tasks: int
    warnings: list[str] = field(default_factory=list)
    manifest_extra: dict[str, Any] = field(default_factory=dict)  # e.g. the numbers the source published


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
