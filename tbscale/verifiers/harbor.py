"""The Harbor verifier: after the agent is done, copy tests/ in (then a step's own tests/), run
/tests/test.sh as the verifier's user with the verifier env, and read /logs/verifier/reward.json or
reward.txt (verifiers/script.py).

Tests are copied in only here, after the agent's last action, so the agent can neither read nor
edit them; a reward file already there was written by the agent, so it is removed first. The
separate verifier mode (its own container, the artifacts put back) is run by the runner, which
owns the environments; it ends in the same `run_tests`.
"""

from __future__ import annotations

from tbscale.verifiers.result import VerifierContext, VerifierResult
from tbscale.verifiers.script import run_tests


def verify_harbor(ctx: VerifierContext) -> VerifierResult:
    verifier = ctx.task.verifier
    return run_tests(ctx.env, verifier, ctx.task.reward, ctx.timeout_sec, env=verifier.env.resolve())
