"""What a verifier returns, and how an attempt's stop reason and verdict make its ending
(turn-bon Appendix D.2, Table 5; with `verifier_error` kept apart from wrong answers)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from tbscale.environments import Environment, StartSpec
from tbscale.tasks import Task
from tbscale.types.results import PASS_THRESHOLD  # noqa: F401  (re-exported)

# How each stop reason maps to an ending. Only an attempt the agent ended itself (by submitting)
# can pass; every other stop is a failure whatever the verifier says (Appendix D.2). A step limit
# is a budget running out, like the time limit; format-error and model-call limits are harness-side
# failures, like a dead sandbox. A verifier that could not give a verdict is its own ending.
STOP_TO_ENDING = {
    "context_window": "out_of_context",
    "output_length": "out_of_context",
    "time_limit": "time_limit",
    "step_limit": "time_limit",
    "format_errors": "agent_error",
    "model_error": "agent_error",
    "sandbox_error": "agent_error",
    "image_build_error": "agent_error",
    "healthcheck_failed": "agent_error",
    "task_refused": "agent_error",
    "agent_error": "agent_error",
    "verifier_obstructed": "wrong_submission",  # the agent broke what the verifier needs: its failure
    "verifier_timeout": "verifier_error",
    "reward_missing": "verifier_error",
    "tests_not_run": "verifier_error",
    "no_tests_parsed": "verifier_error",
    "verifier_error": "verifier_error",
}


@dataclass
class VerifierResult:
    reward: float | None
    passed: bool
    output: str = ""
    error: str | None = None  # a stop reason: verifier_timeout, reward_missing, tests_not_run, sandbox_error, ...
    details: dict[str, Any] = field(default_factory=dict)
    rewards: dict[str, float] | None = None  # every key of a reward.json


@dataclass
class VerifierContext:
    """What a verifier may use: the attempt's environment as the agent left it, its spec (to start
    a fresh one from, for a separate verifier environment or SWE-bench grading), and a way to
    start one."""

    task: Task
    env: Environment
    timeout_sec: float
    spec: StartSpec
    start: Callable[[StartSpec], Environment]


def classify_ending(stop_reason: str | None, verifier: VerifierResult | None) -> str:
    if stop_reason == "paused":
        return "unfinished"  # a prefix left to be continued; never a trial's final ending
    if stop_reason in (None, "submitted"):
        if verifier is None:
            return "agent_error"
        if verifier.error:
            return STOP_TO_ENDING.get(verifier.error, "verifier_error")
        return "pass" if verifier.passed else "wrong_submission"
    return STOP_TO_ENDING.get(stop_reason, "agent_error")
