"""Running a task's test script and reading its verdict: Harbor tasks (reward files) and
Terminal-Bench legacy tasks (a parser over the test output) alike.

`run_tests` is one verification in an environment: tests copied in (shared mode; a separate
verifier's image already holds them), the command run as the verifier's user, in its folder, with
its env, under its time limit; then the verdict:

* reward files: `/logs/verifier/reward.json` (a flat object of numbers, every key kept) wins over
  `reward.txt` (one number, key `reward`); the scalar reward is the RewardSpec's primary key, or
  the only key;
* a parser: `tbscale.tasks.test_output` on the output; all tests passing is reward 1.

A verifier that could not give a verdict is an error, never a wrong answer: `verifier_timeout`
(the time limit), `tests_not_run` (the script could not be started: exit 126/127 and no reward),
`reward_missing` (no reward file, or one that is not numbers), `no_tests_parsed` (the parser found
no test results).
"""

from __future__ import annotations

import json
import math
import shlex
from typing import Any

from tbscale.tasks.model import RewardSpec, VerifierSpec
from tbscale.tasks.test_output import parse_test_output
from tbscale.verifiers.result import PASS_THRESHOLD, VerifierResult

LOGS = "/logs/verifier"
NOT_RUN_CODES = (126, 127)


class RewardFileError(ValueError):
    pass


def parse_reward_file(raw: bytes, name: str) -> dict[str, float]:
    """{key: value} from reward.json (a flat object of numbers) or reward.txt (one number)."""
    text = raw.decode("utf-8", errors="replace").strip()
    if not text:
        raise RewardFileError(f"{name} is empty")
    if name.endswith(".json"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise RewardFileError(f"{name} is not JSON ({e.msg})") from None
        if isinstance(data, (int, float)) and not isinstance(data, bool):
            return {"reward": float(data)}
        if not isinstance(data, dict) or not data:
            raise RewardFileError(f"{name} must be a flat object of numbers")
        out = {}
        for key, value in data.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise RewardFileError(f"{name}: {key!r} is not a number ({value!r})")
            out[str(key)] = float(value)
        return out
    try:
        value = float(text.split()[0])
    except ValueError:
        raise RewardFileError(f"{name} is not a number ({text[:40]!r})") from None
    if not math.isfinite(value):
        raise RewardFileError(f"{name} is not a finite number")
    return {"reward": value}


def read_rewards(box, reward: RewardSpec) -> tuple[dict[str, float] | None, str | None, str | None]:
    """(rewards, file read, problem) from /logs/verifier."""
    for name in reward.files:
        raw = box.read_file(f"{LOGS}/{name}")
        if raw is None:
            continue
        try:
            return parse_reward_file(raw, name), name, None
        except RewardFileError as e:
            return None, name, str(e)
    return None, None, None


def run_tests(box, verifier: VerifierSpec, reward: RewardSpec, timeout_sec: float, *,
              env: dict[str, str] | None = None, upload: bool | None = None,
              output_limit: int | None = 2_000_000) -> VerifierResult:
    """One verification in `box` (see the module doc). `env` is the resolved verifier env."""
    upload = verifier.upload_tests if upload is None else upload
    mount = verifier.tests_mount
    prep = [f"mkdir -p {LOGS}", f"rm -f {LOGS}/reward.txt {LOGS}/reward.json", f"chmod 777 {LOGS}"]
    if upload:
        prep.insert(0, f"rm -rf {shlex.quote(mount)}")
    res = box.exec(" && ".join(prep), 60, user="0")
    if res.exit_code != 0:
        return VerifierResult(None, False, res.output, "tests_not_run", {"stage": "prepare", "exit_code": res.exit_code})
    if upload:
        for folder in verifier.tests_dirs:
            box.put_dir(folder, mount)
        if verifier.tests_files:
            box.put_archive(dict(verifier.tests_files), mount)
    script = verifier.command.split()[-1] if verifier.command else ""
    if script.startswith("/"):
        box.exec(f"chmod +x {shlex.quote(script)} 2>/dev/null || true", 30, user="0")
    user = "" if verifier.user is None else str(verifier.user)
    res = box.exec(verifier.command, timeout_sec, env=dict(env or {}) or None, user=user, workdir=verifier.cwd,
                   output_limit=output_limit)
    details: dict[str, Any] = {"exit_code": res.exit_code, "duration_sec": round(res.duration_sec, 3)}
    if res.timed_out:
        return VerifierResult(None, False, res.output, "verifier_timeout", {**details, "timeout_sec": timeout_sec})
    if reward.source == "parser":
        parsed = parse_test_output(reward.parser_name or "pytest", res.output)
        details.update(parser=parsed.parser, tests=parsed.tests, parse_error=parsed.error,
                       legacy_resolved=parsed.legacy_resolved)
        if parsed.verdict == "no_tests_parsed":
            error = "tests_not_run" if res.exit_code in NOT_RUN_CODES else "no_tests_parsed"
            return VerifierResult(None, False, res.output, error, details)
        value = 1.0 if parsed.passed else 0.0
        return VerifierResult(value, parsed.passed, res.output, None, details, {"reward": value})
    rewards, name, problem = read_rewards(box, reward)
    if rewards is None:
        if problem:
            details["bad_reward"] = problem
        elif res.exit_code in NOT_RUN_CODES:
            return VerifierResult(None, False, res.output, "tests_not_run", details)
        return VerifierResult(None, False, res.output, "reward_missing", details)
    details["reward_file"] = name
    value = reward.primary(rewards)
    if value is None:
        details["bad_reward"] = f"{name} has no {reward.primary_key!r} key and more than one key"
        return VerifierResult(None, False, res.output, "reward_missing", details, rewards)
    return VerifierResult(value, value >= PASS_THRESHOLD, res.output, None, details, rewards)


def reward_key(reward: RewardSpec, rewards: dict[str, float] | None) -> str | None:
    """Which key of `rewards` is the scalar reward."""
    if not rewards:
        return None
    if reward.primary_key in rewards:
        return reward.primary_key
    return next(iter(rewards)) if len(rewards) == 1 else None
