"""The Terminal-Bench legacy verifier: run-tests.sh with the tests beside it, and the verdict from
the parser the task names (pytest by default)."""

from __future__ import annotations

import re
from typing import Any

from tbscale.verifiers.result import VerifierContext, VerifierResult


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


def verify_terminal_bench(ctx: VerifierContext) -> VerifierResult:
    task, box, timeout_sec = ctx.task, ctx.env, ctx.timeout_sec
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
