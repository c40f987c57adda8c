"""What makes a trial line believable, without the typed model (the viewer reads trial lines
without importing pydantic): rewards that are numbers, a pass that is one, and names and paths that
stay inside the run folder (readers open `trajectory_path`; exports name files after `setting`).
The trial model (types/results.py) and the chunked reader (rundata/lines.py) apply the same rule."""

from __future__ import annotations

import math
from typing import Any

# A reward at or above this passes (1.0, less floating-point noise).
PASS_THRESHOLD = 1.0 - 1e-9

# The fields a trial line cannot lack, and their JSON types (as TrialResult declares them).
REQUIRED = {"schema_version": int, "run": str, "setting": str, "setting_key": str, "trial_key": str, "task_id": str,
            "trial": int, "ending": str}


def _finite(value: Any) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value))


def verdict_problem(reward: Any, rewards: Any, passed: Any, ending: Any, steps: Any = None,
                    attempts: Any = None) -> str | None:
    """Why a trial line's verdict cannot be true, or None. Every reward must be a finite number
    (NaN and infinity are not rewards), and a pass must be one: ending `pass`, and a reward (when
    the line gives one) at or above PASS_THRESHOLD. Such a line is corrupt: read around, never counted (let alone as a pass).
    Takes plain values (the chunked reader checks lines without building the model)."""
    if not _finite(reward):
        return f"reward: {reward!r} is not a finite number"
    for key, value in (rewards or {}).items():
        if not _finite(value):
            return f"rewards.{key}: {value!r} is not a finite number"
    for kind, items in (("steps", steps), ("attempts", attempts)):
        for i, item in enumerate(items or []):
            r = item.get("reward") if isinstance(item, dict) else getattr(item, "reward", None)
            if not _finite(r):
                return f"{kind}[{i}].reward: {r!r} is not a finite number"
    if passed is True:
        if ending != "pass":
            return f"passed: true with ending {ending!r} (only `pass` passes)"
        if reward is not None and reward < PASS_THRESHOLD:
            return f"passed: true with reward {reward!r} (a pass has a reward of at least 1)"
    return None


def place_problem(setting: Any, trajectory_path: Any = None, artifacts_path: Any = None) -> str | None:
    """Why a line's setting name or file paths would lead a reader out of the run folder, or None."""
    if isinstance(setting, str) and (setting in ("", ".", "..") or "/" in setting or "\\" in setting
                                     or "\x00" in setting):
        return f"setting: {setting!r} cannot name a file"
    for name, value in (("trajectory_path", trajectory_path), ("artifacts_path", artifacts_path)):
        if value is None:
            continue
        if (not isinstance(value, str) or not value or value.startswith("/") or "\\" in value or "\x00" in value
                or ".." in value.split("/")):
            return f"{name}: {value!r} is not a path inside the run folder"
    return None


def line_problem(obj: Any) -> str | None:
    """A light check of one trial line read as JSON: the required fields with their types, and the
    verdict. The typed reader checks more; this is what readers that skip it must not miss."""
    if not isinstance(obj, dict):
        return "not a JSON object"
    for name, kind in REQUIRED.items():
        if name not in obj:
            return f"{name}: Field required"
        value = obj[name]
        if isinstance(value, bool) or not isinstance(value, kind):
            return f"{name}: {value!r} is not {'an integer' if kind is int else 'a string'}"
    if not isinstance(obj.get("passed", False), bool):
        return f"passed: {obj['passed']!r} is not true or false"
    rewards = obj.get("rewards")
    if rewards is not None and not isinstance(rewards, dict):
        return "rewards: not a mapping"
    return verdict_problem(obj.get("reward"), rewards, obj.get("passed", False), obj["ending"],
                           obj.get("steps") if isinstance(obj.get("steps"), list) else None,
                           obj.get("attempts") if isinstance(obj.get("attempts"), list) else None) \
        or place_problem(obj["setting"], obj.get("trajectory_path"), obj.get("artifacts_path"))
