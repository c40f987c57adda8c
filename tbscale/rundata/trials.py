"""Finished trials as a table: the trial lines of one or more run folders, read through the typed
model, into one pandas DataFrame (one row per trial) that the analyses share.

Only trials that belong to a run's current configuration are kept: a line whose setting key, task
content or trial index the manifest no longer names (the config changed, a task was edited, fewer
trials were asked for) is set aside and counted, so a report never mixes two configurations.
Infrastructure errors stay in the table, flagged; the analyses decide what to do with them.
Reading is streamed: each line is validated and reduced to a tuple of its columns at once, so
memory grows with the columns kept, not with the lines' size; per-attempt records and strategy
records stay JSON text until a section asks for them.
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


_SCALARS = ("run", "setting", "setting_key", "trial_key", "task_id", "task_format", "task_hash", "trial", "seed",
            "agent", "policy", "n", "trajectory", "generator_model", "selector_model", "simulated", "oracle_selection",
            "passed", "ending", "stop_reason", "infra_error", "turns", "selection_turns", "selector_fallbacks",
            "n_attempts", "final_attempt", "trajectory_path", "imported_from", "source", "rewards", "reward_key")
_DERIVED = ("run_dir", "simulated_roles", "reward", "cost_usd", "trial_wall", "error_type", "strategy_kind",
            "policy_params", "attempts", "strategy_record", "steps")
_TOKENS = tuple(f"{role}_{k}" for role in ROLES for k in (*TOKEN_KINDS, "cost"))
COLUMNS = (*_SCALARS, *_DERIVED, *_TOKENS, "other_input", "other_output")


def _row(r: TrialResult, run_dir: str) -> tuple:
    """One trial as a tuple in COLUMNS order (tuples, not dicts: 100k rows stay small)."""
    tokens = []
    for role in ROLES:
        u = r.tokens.get(role)
        if u is None:
            tokens += (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
        else:
            tokens += (float(u.input), float(u.output), float(u.reasoning), float(u.cached), float(u.calls),
                       math.nan if u.cost_usd is None else u.cost_usd)
    # Roles beyond the five (a strategy's own) still count in totals.
    other = [u for role, u in r.tokens.items() if role not in ROLES]
    multi = r.n_attempts > 1
    return (*(getattr(r, name) for name in _SCALARS),
            run_dir, tuple(r.simulated_roles), math.nan if r.reward is None else r.reward,
            math.nan if r.cost_usd is None else r.cost_usd, r.timing.get("trial_wall", math.nan),
            r.error.type if r.error else None, (r.strategy_record or {}).get("kind"),
            json.dumps(r.policy_params, sort_keys=True) if r.policy_params else None,
            # Kept as JSON text: nested records of 100k trials as Python objects would take gigabytes;
            # the sections that read them decode only the trials they need (analysis/records.py).
            json.dumps([a.model_dump() for a in r.attempts or []]) if multi else None,
            json.dumps(r.strategy_record) if r.strategy_record else None,
            [st.model_dump() for st in r.steps] if r.steps else None,
            *tokens, float(sum(u.input for u in other)), float(sum(u.output for u in other)))


class _ChunkedRows:
    """Row tuples turned into a DataFrame every CHUNK rows, so the boxed Python values of at most
    one chunk are alive at a time; superseded rows are dropped when the frames are joined."""

    CHUNK = 10_000

    def __init__(self) -> None:
        self.frames: list[pd.DataFrame] = []
        self.pending: list[tuple] = []
        self.dropped: set[int] = set()
        self.count = 0

    def append(self, row: tuple) -> int:
        self.pending.append(row)
        self.count += 1
        if len(self.pending) >= self.CHUNK:
            self._flush()
        return self.count - 1

    def drop(self, index: int) -> None:
        self.dropped.add(index)

    @property
    def kept(self) -> int:
        return self.count - len(self.dropped)

    def _flush(self) -> None:
        if self.pending:
            self.frames.append(pd.DataFrame.from_records(self.pending, columns=COLUMNS))
            self.pending = []

    def frame(self) -> pd.DataFrame:
        self._flush()
        df = pd.concat(self.frames, ignore_index=True) if len(self.frames) > 1 else self.frames[0]
        self.frames = []
        if self.dropped:
            df = df.drop(index=sorted(self.dropped)).reset_index(drop=True)
        return df


def read_trial_table(run_dirs: list[Path], *, current_only: bool = True) -> TrialTable:
    rows = _ChunkedRows()
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
                rows.drop(latest[ident])  # superseded
            latest[ident] = rows.append(_row(r, str(run)))
    if not rows.kept:
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
    df = rows.frame()
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
    for run, setting, oracle, sim_roles, generator in zip(*(df[c].tolist() for c in (
            "run", "setting", "oracle_selection", "simulated_roles", "generator_model"))):
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
