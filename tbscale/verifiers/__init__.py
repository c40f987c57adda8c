"""Task verifiers: run a task's tests after the agent is done and give a reward. Each task format
has its verifier module (the SWE-bench one imports the swebench harness only when it runs)."""

from __future__ import annotations

from typing import Callable

from tbscale.verifiers.harbor import verify_harbor
from tbscale.verifiers.result import (PASS_THRESHOLD, STOP_TO_ENDING, VerifierContext, VerifierResult,
                                      classify_ending)
from tbscale.verifiers.swebench import verify_swebench
from tbscale.verifiers.terminal_bench import verify_terminal_bench

# task format -> its verifier
VERIFIERS: dict[str, Callable[[VerifierContext], VerifierResult]] = {
    "harbor": verify_harbor,
    "terminal-bench": verify_terminal_bench,
    "swebench": verify_swebench,
}


def verifier_for(task_format: str) -> Callable[[VerifierContext], VerifierResult]:
    if task_format not in VERIFIERS:
        raise ValueError(f"no verifier for task format {task_format!r} (known: {', '.join(sorted(VERIFIERS))})")
    return VERIFIERS[task_format]


def verify(ctx: VerifierContext) -> VerifierResult:
    return verifier_for(ctx.task.format)(ctx)


__all__ = ["PASS_THRESHOLD", "STOP_TO_ENDING", "VERIFIERS", "VerifierContext", "VerifierResult", "classify_ending",
           "verifier_for", "verify"]
