"""Finished trials as a table: the trial lines of one or more run folders, read through the typed
model, into one pandas DataFrame (one row per trial) that the analyses share.

Only trials that belong to a run's current configuration are kept: a line whose setting key, task
content or trial index the manifest no longer names (the config changed, a task was edited, fewer
trials were asked for) is set aside and counted, so a report never mixes two configurations.
Infrastructure errors stay in the table, flagged; the analyses decide what to do with them.
Reading is streamed: each line is validated and reduced to its columns at once, so memory grows
with the columns kept, not with the lines' size.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from tbscale.errors import TbscaleError
from tbscale.logs import ReadProblems, read_trials
from tbscale.types.results import TrialResult

ROLES = ("generator", "selector", "verifier", "summarizer", "judge")
TOKEN_KINDS = ("input", "output", "reasoning", "cached", "calls")
# Per-trial structures kept as Python objects (None for the common single-attempt trial).
OBJECT_COLUMNS = ("policy_params", "trajectory_params", "attempts", "strategy_record", "rewards", "steps",
                  "simulated_roles")


@dataclass
class TrialTable:
    df: pd.DataFrame
    run_dirs: list[Path]
    set_aside: dict[str, int] = field(default_factory=dict)  # run -> trial lines not in its current config
    problems: list[ReadProblems] = field(default_factory=list)


def find_run_dirs(paths: list[Path]) -> list[Path]:
    """Run folders (holding trials.jsonl) named directly, or found one level below."""
    runs: list[Path] = []
    for p in map(Path, paths):
        if (p / "trials.jsonl").is_file():
            runs.append(p)
        elif p.is_dir():
            runs.extend(sorted(d for d in p.iterdir() if (d / "trials.jsonl").is_file()))
        elif p.exists():
            raise TbscaleError(f"{p}: a file, not a run folder (give the folder holding trials.jsonl)")
        else:
            raise TbscaleError(f"{p}: no such run folder")
    if not runs:
        raise TbscaleError(f"{', '.join(map(str, paths))}: no runs found (no trials.jsonl); runs made by other "
                           "harnesses are read with `tbscale import` or `tbscale report --import`")
    return runs


def current_config(run_dir: Path) -> dict[str, Any] | None:
    """What the run's manifest says its configuration is now (None for runs without one)."""
    path = Path(run_dir) / "manifest.json"
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text()).get("current")
    except (json.JSONDecodeError, AttributeError):
        return None


def belongs(row: TrialResult, current: dict[str, Any] | None) -> bool:
    if not current:
        return True
    keys = current.get("setting_keys") or {}
    if keys.get(row.setting) != row.setting_key:
        return False
    if row.trial >= int(current.get("trials", row.trial + 1)):
        return False
    hashes = current.get("task_hashes") or {}
    return not (row.task_hash and row.task_id in hashes and hashes[row.task_id] != row.task_hash)


def _row_columns(r: TrialResult, run_dir: str) -> dict[str, Any]:
    single = r.n_attempts <= 1
    out: dict[str, Any] = {
        "run_dir": run_dir, "run": r.run, "setting": r.setting, "setting_key": r.setting_key, "trial_key": r.trial_key,
        "task_id": r.task_id, "task_format": r.task_format, "task_hash": r.task_hash, "trial": r.trial, "seed": r.seed,
        "agent": r.agent, "policy": r.policy, "n": r.n, "trajectory": r.trajectory,
        "generator_model": r.generator_model, "selector_model": r.selector_model, "simulated": r.simulated,
        "simulated_roles": tuple(r.simulated_roles), "oracle_selection": r.oracle_selection,
        "reward": math.nan if r.reward is None else r.reward, "passed": r.passed, "ending": r.ending,
        "stop_reason": r.stop_reason, "infra_error": r.infra_error, "turns": r.turns,
        "selection_turns": r.selection_turns, "selector_fallbacks": r.selector_fallbacks,
        "cost_usd": math.nan if r.cost_usd is None else r.cost_usd,
        "trial_wall": r.timing.get("trial_wall", math.nan), "n_attempts": r.n_attempts,
        "final_attempt": r.final_attempt, "trajectory_path": r.trajectory_path,
        "error_type": r.error.type if r.error else None, "imported_from": r.imported_from, "source": r.source,
        "policy_params": r.policy_params, "trajectory_params": r.trajectory_params,
        "attempts": None if single else [a.model_dump() for a in r.attempts or []],
        "strategy_record": r.strategy_record, "rewards": r.rewards,
        "steps": [s.model_dump() for s in r.steps] if r.steps else None,
    }
    for role in ROLES:
        u = r.tokens.get(role)
        for k in TOKEN_KINDS:
            out[f"{role}_{k}"] = float(getattr(u, k)) if u is not None else 0.0
        out[f"{role}_cost"] = (math.nan if u.cost_usd is None else u.cost_usd) if u is not None else 0.0
    # Roles beyond the five (a strategy's own) still count in totals.
    other = [u for role, u in r.tokens.items() if role not in ROLES]
    out["other_input"] = float(sum(u.input for u in other))
    out["other_output"] = float(sum(u.output for u in other))
    return out


def read_trial_table(run_dirs: list[Path], *, current_only: bool = True) -> TrialTable:
    columns: list[dict[str, Any]] = []
    table = TrialTable(pd.DataFrame(), list(run_dirs))
    for run in run_dirs:
        problems = ReadProblems(Path(run) / "trials.jsonl")
        table.problems.append(problems)
        current = current_config(run) if current_only else None
        latest: dict[str, int] = {}
        for r in read_trials(Path(run) / "trials.jsonl", problems):
            if not belongs(r, current):
                table.set_aside[str(run)] = table.set_aside.get(str(run), 0) + 1
                continue
            # One trial per (setting, task, trial index): a later line (a rerun) wins.
            ident = f"{r.run}\0{r.setting}\0{r.task_id}\0{r.trial}"
            if ident in latest:
                columns[latest[ident]] = None  # superseded
            latest[ident] = len(columns)
            columns.append(_row_columns(r, str(run)))
    rows = [c for c in columns if c is not None]
    if not rows:
        bad = sum(len(p.corrupt) for p in table.problems)
        where = ", ".join(map(str, run_dirs))
        if bad:
            first = next(p for p in table.problems if p.corrupt)
            raise TbscaleError(f"{where}: trials.jsonl has no readable trial lines ({bad} unreadable; first: "
                               f"{first.path} line {first.corrupt[0][0]}: {first.corrupt[0][1]})")
        if table.set_aside:
            raise TbscaleError(f"{where}: none of the {sum(table.set_aside.values())} trial lines belongs to the "
                               "run's current configuration")
        raise TbscaleError(f"{where}: trials.jsonl is empty")
    df = pd.DataFrame(rows)
    df["label"] = setting_labels(df)
    df["passed"] = df["passed"].astype(bool)
    table.df = df
    return table


def setting_labels(df: pd.DataFrame) -> list[str]:
    """How each trial's setting is named in every table and plot: by run name too when settings of
    several runs share a name; marked when an oracle chose (an upper bound, not a strategy's
    result) or when a simulated model played some of its roles beside a real one."""
    multi = df.groupby("setting")["run"].nunique()
    clash = set(multi[multi > 1].index)
    labels = []
    for run, setting, oracle, sim_roles, generator in zip(df["run"], df["setting"], df["oracle_selection"],
                                                          df["simulated_roles"], df["generator_model"]):
        label = f"{run}/{setting}" if setting in clash else setting
        if oracle:
            label += " (oracle upper bound)"
        if sim_roles and not str(generator or "").startswith("sim/"):
            label += f" [simulated {', '.join(sim_roles)}]"
        labels.append(label)
    return labels


def load_trials(run_dirs: list[Path], *, current_only: bool = True) -> pd.DataFrame:
    """The trials of `run_dirs` as one DataFrame (see read_trial_table); corrupt lines are warned
    about with their line numbers."""
    table = read_trial_table(run_dirs, current_only=current_only)
    for p in table.problems:
        p.warn()
    return table.df
