"""The Harbor verifier: copy the task's tests in after the agent is done, run tests/test.sh, and
read /logs/verifier/reward.txt or reward.json.

Tests are copied in only here, after the agent's last action, so the agent can neither read nor
edit them; a reward file already there was written by the agent, so it is removed first.
"""

from __future__ import annotations

import json

from tbscale.verifiers.result import PASS_THRESHOLD, VerifierContext, VerifierResult


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


def verify_harbor(ctx: VerifierContext) -> VerifierResult:
    task, box, timeout_sec = ctx.task, ctx.env, ctx.timeout_sec
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
