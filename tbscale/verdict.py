"""What makes a trial line believable beyond its types: a pass that is one, and names and paths
that stay inside the run folder (readers open `trajectory_path`; exports name files after
`setting`). The trial model (types/results.py) applies both rules when a line is written and when it
is read; rewards that are not finite numbers (NaN, infinity) are refused by the models' own types
(`allow_inf_nan=False`)."""

from __future__ import annotations

# A reward at or above this passes (1.0, less floating-point noise).
PASS_THRESHOLD = 1.0 - 1e-9


def verdict_problem(reward: float | None, passed: bool, ending: str) -> str | None:
    """Why a trial line's verdict cannot be true, or None: a pass must be one (ending `pass`, and a
    reward, when the line gives one, at or above PASS_THRESHOLD). Such a line is corrupt: read
    around, never counted (let alone as a pass)."""
    if passed:
        if ending != "pass":
            return f"passed: true with ending {ending!r} (only `pass` passes)"
        if reward is not None and reward < PASS_THRESHOLD:
            return f"passed: true with reward {reward!r} (a pass has a reward of at least 1)"
    return None


def place_problem(setting: str, trajectory_path: str | None = None, artifacts_path: str | None = None) -> str | None:
    """Why a line's setting name or file paths would lead a reader out of the run folder, or None."""
    if setting in ("", ".", "..") or "/" in setting or "\\" in setting or "\x00" in setting:
        return f"setting: {setting!r} cannot name a file"
    for name, value in (("trajectory_path", trajectory_path), ("artifacts_path", artifacts_path)):
        if value is not None and (not value or value.startswith("/") or "\\" in value or "\x00" in value
                                  or (".." in value and ".." in value.split("/"))):
            return f"{name}: {value!r} is not a path inside the run folder"
    return None
