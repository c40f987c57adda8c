"""Verifiers: run a task's tests in its container after the agent is done, read the reward, and
classify how the attempt ended (turn-bon Appendix D.2, Table 5).

Tests are copied in only here, after the agent's last action, so the agent can neither read nor
edit them. Each task format registers its verifier by name; SWE-bench adds its own.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from tbscale.env.docker import Sandbox
from tbscale.tasks import Task

ENDINGS = ("pass", "wrong_submission", "out_of_context", "time_limit", "agent_error")
# How each stop reason maps to an ending. Only an attempt the agent ended itself (by submitting)
# can pass; every other stop is a failure whatever the verifier says (Appendix D.2). A step limit
# is a budget running out, like the time limit; format-error and model-call limits are harness-side
# failures, like a dead sandbox.
STOP_TO_ENDING = {
    "context_window": "out_of_context",
    "output_length": "out_of_context",
    "time_limit": "time_limit",
    "step_limit": "time_limit",
    "format_errors": "agent_error",
    "model_error": "agent_error",
    "sandbox_error": "agent_error",
    "verifier_timeout": "agent_error",
    "reward_missing": "agent_error",
    "agent_error": "agent_error",
}
PASS_THRESHOLD = 1.0 - 1e-9


@dataclass
class VerifierResult:
    reward: float | None
    passed: bool
    output: str = ""
    error: str | None = None  # a stop reason: verifier_timeout, reward_missing, sandbox_error
    details: dict[str, Any] = field(default_factory=dict)


def classify_ending(stop_reason: str | None, verifier: VerifierResult | None) -> str:
    if stop_reason == "paused":
        return "unfinished"  # a prefix left to be continued; never a trial's final ending
    if stop_reason in (None, "submitted"):
        if verifier is None or verifier.error:
            return "agent_error"
        return "pass" if verifier.passed else "wrong_submission"
    return STOP_TO_ENDING.get(stop_reason, "agent_error")


def _parse_reward(raw: bytes | None, name: str) -> float | None:
    if raw is None:
        return None
    text = raw.decode("utf-8", errors="replace").strip()
    if name.endswith(".json"):
        data = json.loads(text)
        if isinstance(data, (int, float)):
            return float(data)
        if "reward" in data:
            return float(data["reward"])
        values = [float(v) for v in data.values() if isinstance(v, (int, float))]
        return sum(values) / len(values) if values else None
    return float(text.split()[0]) if text else None


def verify_harbor(task: Task, box: Sandbox, timeout_sec: float) -> VerifierResult:
    box.put_dir(task.tests_dir, task.tests_mount)
    # A reward file already there was written by the agent, not by the tests: remove it first.
    res = box.exec(f"mkdir -p /logs/verifier && rm -f /logs/verifier/reward.txt /logs/verifier/reward.json && "
                   f"{task.test_command}", timeout_sec, env=task.extra.get("verifier_env") or None)
    if res.timed_out:
        return VerifierResult(None, False, res.output, "verifier_timeout", {"exit_code": res.exit_code})
    for name in ("reward.txt", "reward.json"):
        raw = box.read_file(f"/logs/verifier/{name}")
        if raw is not None:
            try:
                reward = _parse_reward(raw, name)
            except (ValueError, json.JSONDecodeError, AttributeError):
                return VerifierResult(None, False, res.output, "reward_missing",
                                      {"exit_code": res.exit_code, "bad_reward": raw[:200].decode(errors="replace")})
            if reward is None:
                continue
            return VerifierResult(reward, reward >= PASS_THRESHOLD, res.output, None,
                                  {"exit_code": res.exit_code, "reward_file": name})
    return VerifierResult(None, False, res.output, "reward_missing", {"exit_code": res.exit_code})


_PYTEST_LINE = re.compile(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED)\s+(\S+)", re.MULTILINE)
_PYTEST_SUMMARY = re.compile(r"=+ (.*?) in [\d.]+s", re.MULTILINE)


def parse_pytest_output(output: str) -> dict[str, Any]:
    """Terminal-Bench's pytest parser: per-test results from `-rA` lines, else the summary line."""
    tests = {name: status for status, name in _PYTEST_LINE.findall(output)}
    counts: dict[str, int] = {}
    summaries = _PYTEST_SUMMARY.findall(output)
    if summaries:
        for part in summaries[-1].split(","):
            m = re.match(r"\s*(\d+) (\w+)", part)
            if m:
                counts[m.group(2)] = int(m.group(1))
    return {"tests": tests, "counts": counts}


def verify_terminal_bench(task: Task, box: Sandbox, timeout_sec: float) -> VerifierResult:
    box.put_dir(task.tests_dir, task.tests_mount)
    res = box.exec(task.test_command, timeout_sec, env={"TEST_DIR": task.tests_mount})
    if res.timed_out:
        return VerifierResult(None, False, res.output, "verifier_timeout", {"exit_code": res.exit_code})
    parsed = parse_pytest_output(res.output)
    if parsed["tests"]:
        passed = all(s in ("PASSED", "XFAIL", "SKIPPED") for s in parsed["tests"].values())
    elif parsed["counts"]:
        passed = parsed["counts"].get("passed", 0) > 0 and not any(
            parsed["counts"].get(k, 0) for k in ("failed", "error", "errors"))
    else:
        passed = res.exit_code == 0
    return VerifierResult(1.0 if passed else 0.0, passed, res.output, None,
                          {"exit_code": res.exit_code, **parsed})


VERIFIERS: dict[str, Callable[[Task, Sandbox, float], VerifierResult]] = {
    "harbor": verify_harbor,
    "terminal-bench": verify_terminal_bench,
}


def register_verifier(task_format: str, fn: Callable[[Task, Sandbox, float], VerifierResult]) -> None:
    VERIFIERS[task_format] = fn


def verify(task: Task, box: Sandbox, timeout_sec: float) -> VerifierResult:
    if task.format == "swebench" and "swebench" not in VERIFIERS:
        import tbscale.swebench  # noqa: F401  (registers its verifier)
    return VERIFIERS[task.format](task, box, timeout_sec)
