"""The Terminal-Bench legacy verifier: run-tests.sh with the tests beside it in /tests, run as the
legacy harness ran it (root, the image WORKDIR, TEST_DIR=/tests: the Task's `legacy` spec, carried
in `task.verifier`), and the verdict from the parser the task names (tasks/test_output.py). A
parse that finds no tests is a verifier error (`no_tests_parsed`), not a wrong answer."""

from __future__ import annotations

from tbscale.verifiers.result import VerifierContext, VerifierResult
from tbscale.verifiers.script import run_tests


def verify_terminal_bench(ctx: VerifierContext) -> VerifierResult:
    verifier = ctx.task.verifier
    return run_tests(ctx.env, verifier, ctx.task.reward, ctx.timeout_sec, env=verifier.env.resolve())
