"""Upper bounds on what a config may ask for, refused at load time with a message naming the
limit. A typo (`trials: 1000000000`) or a hostile file (a YAML alias bomb) would otherwise run the
machine out of memory long after the run began. Each bound can be raised for a run that truly
needs more, through its environment variable."""

from __future__ import annotations

import os
from dataclasses import dataclass

from tbscale.errors import TbscaleError


@dataclass(frozen=True)
class Bound:
    default: int
    env: str
    what: str  # "<limit> <what>", e.g. "10000 trials per setting and task"


BOUNDS: dict[str, Bound] = {
    "trials": Bound(10_000, "TBSCALE_MAX_TRIALS", "trials per setting and task"),
    "planned_trials": Bound(1_000_000, "TBSCALE_MAX_PLANNED_TRIALS",
                            "trials in one run (settings x tasks x trials)"),
    "concurrency": Bound(512, "TBSCALE_MAX_CONCURRENCY", "trials at once"),
    "max_turns": Bound(10_000, "TBSCALE_MAX_TURNS", "turns per attempt"),
    "settings": Bound(1_000, "TBSCALE_MAX_SETTINGS", "settings in one experiment"),
    "yaml_bytes": Bound(5_000_000, "TBSCALE_MAX_YAML_BYTES", "bytes in a YAML file"),
    "yaml_values": Bound(1_000_000, "TBSCALE_MAX_YAML_VALUES",
                         "values in a YAML file once its aliases (*name) are expanded"),
}


def limit(name: str) -> int:
    """The bound in force: its environment variable when set (a positive integer), else the default."""
    bound = BOUNDS[name]
    raw = os.environ.get(bound.env)
    if raw is None or not raw.strip():
        return bound.default
    try:
        value = int(raw.strip().replace("_", ""))
    except ValueError:
        value = 0
    if value < 1:
        raise TbscaleError(f"{bound.env}: must be a positive integer, got {raw!r}")
    return value


def over_limit(name: str, value: int) -> str | None:
    """The message for `value` above the bound `name`, or None when it is within it."""
    top = limit(name)
    if value <= top:
        return None
    bound = BOUNDS[name]
    return (f"{value:,} is above the limit of {top:,} {bound.what}; "
            f"if you mean it, raise the limit with {bound.env}={value}")


def check(name: str, value: int, where: str) -> None:
    problem = over_limit(name, value)
    if problem:
        raise TbscaleError(f"{where}: {problem}")
