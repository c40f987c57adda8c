"""Task verifiers: run a task's tests after the agent is done and give a reward. Each task format
has its verifier module, imported when a task of that format is first verified."""

from __future__ import annotations

import importlib
from typing import Callable

from tbscale.verifiers.result import (PASS_THRESHOLD, STOP_TO_ENDING, VerifierContext, VerifierResult,
                                      classify_ending)

# task format -> "module:function"
VERIFIERS: dict[str, str] = {
    "harbor": "tbscale.verifiers.harbor:verify_harbor",
    "terminal-bench": "tbscale.verifiers.terminal_bench:verify_terminal_bench",
    "swebench": "tbscale.verifiers.swebench:verify_swebench",
}


def verifier_for(task_format: str) -> Callable[[VerifierContext], VerifierResult]:
    if task_format not in VERIFIERS:
        raise ValueError(f"no verifier for task format {task_format!r} (known: {', '.join(sorted(VERIFIERS))})")
    module, fn = VERIFIERS[task_format].split(":")
    return getattr(importlib.import_module(module), fn)


def verify(ctx: VerifierContext) -> VerifierResult:
    return verifier_for(ctx.task.format)(ctx)


__all__ = ["PASS_THRESHOLD", "STOP_TO_ENDING", "VERIFIERS", "VerifierContext", "VerifierResult", "classify_ending",
           "verifier_for", "verify"]
