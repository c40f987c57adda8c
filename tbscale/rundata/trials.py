"""Finished trials as a table: the trial lines of one or more run folders, read through the typed
model, into one pandas DataFrame (one row per trial) that the analyses share.

Only trials that belong to a run's current configuration are kept: a line whose setting key, task
content or trial index the manifest no longer names (the config changed, a task was edited, fewer
trials were asked for) is set aside and counted, so a report never mixes two configurations.
Infrastructure errors stay in the table, flagged; the analyses decide what to do with them.
Reading is streamed: lines are validated a chunk at a time (rundata/lines.py) and reduced to
their columns at once, so memory grows with the columns kept, not with the lines' size;
per-attempt records and strategy records stay packed JSON (rundata/compact.py) until a section
asks for them.
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tbscale.errors import TbscaleError
from tbscale.jsonl import ReadProblems
from tbscale.rundata.compact import pack_json, system_allocator
from tbscale.rundata.lines import Entries, read_chunks
from tbscale.types.events import UsageRecord
from tbscale.types.results import TrialResult

ROLES = ("generator", "selector", "verifier", "summarizer", "judge")
TOKEN_KINDS = ("input", "output", "reasoning", "cached", "calls")


@dataclass
class RunPlan:
    """What a run folder's manifest says about its plan: the trials each setting should have, the
    tasks they run on, and why the last invocation ended early (None when it did not)."""

    run_dir: str
    planned: dict[str, int]  # setting -> trials in its plan
    tasks: set[str] | None  # the plan's task ids (None: not recorded)
    stopped: str | None = None


@dataclass
class TrialTable:
    df: pd.DataFrame
    run_dirs: list[Path]
    set_aside: dict[str, int] = field(default_factory=dict)  # run -> trial lines not in its current config
    problems: list[ReadProblems] = field(default_factory=list)
    plans: list[RunPlan] = field(default_factory=list)  # runs whose manifest names a plan


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


def _manifest(run_dir: Path) -> dict[str, Any] | None:
    path = Path(run_dir) / "manifest.json"
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def current_config(run_dir: Path) -> dict[str, Any] | None:
    """What the run's manifest says its configuration is now (None for runs without one)."""
    current = (_manifest(run_dir) or {}).get("current")
    return current if isinstance(current, dict) else None


def run_plan(run_dir: Path) -> RunPlan | None:
    """The plan the run's manifest records (manifests written before `planned_trials` existed give
    it by settings x tasks x trials); None when there is none (imported runs, no manifest)."""
    manifest = _manifest(run_dir) or {}
    current = manifest.get("current")
    if not isinstance(current, dict):
        return None
    tasks = current.get("task_hashes")
    tasks = set(tasks) if isinstance(tasks, dict) else None
    planned = current.get("planned_trials")
    if not isinstance(planned, dict):
        trials, settings = current.get("trials"), current.get("settings")
        if not (isinstance(trials, int) and isinstance(settings, list) and tasks is not None):
            return None
        planned = {str(s): len(tasks) * trials for s in settings}
    planned = {str(k): v for k, v in planned.items() if isinstance(v, int) and v >= 0}
    invocations = manifest.get("invocations")
    last = invocations[-1] if isinstance(invocations, list) and invocations and isinstance(invocations[-1], dict) \
        else {}
    stopped = last.get("stopped")
    if stopped is None and last and "finished_at" not in last:
        stopped = "its last invocation never recorded its end (the process was killed, or is still running)"
    elif stopped is None and isinstance(last.get("crashed"), int) and last["crashed"]:
        stopped = f"{last['crashed']} trials crashed in its last invocation and were not recorded (see crashes.log)"
    return RunPlan(str(run_dir), planned, tasks, str(stopped) if stopped else None)


def belongs(row: TrialResult, current: dict[str, Any] | None) -> bool:
    return _belongs(row.setting, row.setting_key, row.trial, row.task_id, row.task_hash, current)


def _belongs(setting: str, setting_key: str, trial: int, task_id: str, task_hash: str | None,
             current: dict[str, Any] | None) -> bool:
    if not current:
        return True
    keys = current.get("setting_keys") or {}
    if keys.get(setting) != setting_key:
        return False
    planned = current.get("trials")
    if isinstance(planned, int) and trial >= planned:
        return False
    hashes = current.get("task_hashes") or {}
    return not (task_hash and task_id in hashes and hashes[task_id] != task_hash)


_SCALARS = ("run", "setting", "setting_key", "trial_key", "task_id", "task_format", "task_hash", "trial", "seed",
            "agent", "policy", "n", "trajectory", "generator_model", "selector_model", "simulated", "oracle_selection",
            "passed", "ending", "stop_reason", "infra_error", "turns", "selection_turns", "selector_fallbacks",
            "n_attempts", "final_attempt", "trajectory_path", "imported_from", "source", "rewards", "reward_key")
_DERIVED = ("run_dir", "simulated_roles", "reward", "cost_usd", "trial_wall", "error_type", "strategy_kind",
            "policy_params", "attempts", "strategy_record", "steps", "not_enforced", "tampered", "tampering_kinds")
_TOKENS = tuple(f"{role}_{k}" for role in ROLES for k in (*TOKEN_KINDS, "cost"))
COLUMNS = (*_SCALARS, *_DERIVED, *_TOKENS, "other_input", "other_output")
_NAN = math.nan


def _nan_for_none(values: list[Any]) -> np.ndarray:
    return np.array([_NAN if v is None else v for v in values], dtype=float)


def _params_text(values: list[dict[str, Any]]) -> list[str | None]:
    """Policy parameters as sorted JSON text; the few distinct ones are encoded once each."""
    cache: dict[Any, str] = {}
    out: list[str | None] = []
    for p in values:
        if not p:
            out.append(None)
            continue
        try:
            key = tuple(p.items())
            text = cache.get(key)
            if text is None:
                text = cache[key] = json.dumps(p, sort_keys=True)
        except TypeError:  # unhashable values (lists, dicts): no caching
            text = json.dumps(p, sort_keys=True)
        out.append(text)
    return out


_USAGE_DEFAULTS = {n: f.default for n, f in UsageRecord.model_fields.items()}


def _token_columns(tokens: list[dict[str, dict[str, Any]]], entries: Entries | None = None) -> dict[str, np.ndarray]:
    """The per-role token columns (a missing role: zeros) and the other roles' input and output,
    from each trial's usage per role (plain dicts, see rundata/lines.py), or from the same usage
    already flattened a field at a time by the reader (`entries`)."""
    m = len(tokens)
    cols = {name: np.zeros(m) for name in _TOKENS}
    other_in, other_out = np.zeros(m), np.zeros(m)
    if entries is None:
        owner, keys, fields = [], [], {k: [] for k in _USAGE_DEFAULTS}
        for i, usage in enumerate(tokens):
            for role, u in usage.items():
                owner.append(i)
                keys.append(role)
                for k, default in _USAGE_DEFAULTS.items():
                    fields[k].append(u.get(k, default))
    else:
        owner, keys, fields = entries.owner, entries.keys, entries.fields
    if not owner:
        return {**cols, "other_input": other_in, "other_output": other_out}
    owner_a, keys_a = np.asarray(owner, dtype=np.intp), np.asarray(keys, dtype=object)
    values = {k: np.asarray(fields[k], dtype=float) for k in ("input", "output", "reasoning", "cached", "calls")}
    values["cost"] = np.array([_NAN if c is None else c for c in fields["cost_usd"]], dtype=float)
    for role in dict.fromkeys(keys):
        sel = keys_a == role
        rows = owner_a[sel]
        if role in ROLES:
            for kind in (*TOKEN_KINDS, "cost"):
                cols[f"{role}_{kind}"][rows] = values[kind][sel]
        else:  # roles beyond the five (a strategy's own) still count in totals
            other_in[rows] += values["input"][sel]
            other_out[rows] += values["output"][sel]
    return {**cols, "other_input": other_in, "other_output": other_out}


def _columns(values: dict[str, list[Any]], run_dir: str, entries: dict[str, Entries]) -> dict[str, Any]:
    """Kept lines (validated values, see rundata/lines.py) as the table's columns (lists or arrays)."""
    m = len(values["run"])
    out: dict[str, Any] = {name: values[name] for name in _SCALARS}
    attempts: list[str | None] = [None] * m
    for i, (n_attempts, atts) in enumerate(zip(values["n_attempts"], values["attempts"])):
        if n_attempts > 1:
            # Kept as packed JSON (compact.pack_json): nested records of 100k trials as Python objects
            # would take gigabytes; the sections that read them decode only the trials they need
            # (analysis/records.py).
            attempts[i] = pack_json(atts or [])
    records = values["strategy_record"]
    out.update({
        "run_dir": [run_dir] * m, "simulated_roles": [tuple(v) for v in values["simulated_roles"]],
        "reward": _nan_for_none(values["reward"]), "cost_usd": _nan_for_none(values["cost_usd"]),
        "trial_wall": np.array([t.get("trial_wall", _NAN) for t in values["timing"]], dtype=float),
        "error_type": [e["type"] if e else None for e in values["error"]],
        "strategy_kind": [(r or {}).get("kind") for r in records],
        "policy_params": _params_text(values["policy_params"]), "attempts": attempts,
        "strategy_record": [pack_json(r) if r else None for r in records],
        "steps": [s if s else None for s in values["steps"]],
        # (key, why) pairs, or None: the task keys the trial did not carry out as written
        "not_enforced": [tuple((x["key"], x["why"]) for x in v) if v else None for v in values["not_enforced"]],
        "tampered": np.array([bool(t) for t in values["tampering"]], dtype=bool),
        "tampering_kinds": [",".join(sorted({e.get("kind", "?") for e in t})) if t else None
                            for t in values["tampering"]],
    })
    out.update(_token_columns(values["tokens"], entries.get("tokens")))
    return out


class _ChunkedFrames:
    """Kept lines' columns turned into a DataFrame every CHUNK rows (as many as the trial table
    always had per frame, so each column's type is inferred as before), so the Python values of at
    most one frame are alive at a time; superseded rows (a trial's earlier lines) are dropped when
    the frames are joined."""

    CHUNK = 10_000

    def __init__(self) -> None:
        self.frames: list[pd.DataFrame] = []
        self.pending: list[dict[str, Any]] = []
        self.pending_rows = 0
        self.folders: list[np.ndarray] = []  # which run folder each row comes from
        self.count = 0

    def append(self, columns: dict[str, Any], folder: int) -> None:
        m = len(columns["run"])
        self.folders.append(np.full(m, folder))
        self.pending.append(columns)
        self.pending_rows += m
        self.count += m
        while self.pending_rows >= self.CHUNK:
            self._flush(self.CHUNK)


    def _flush(self, rows: int) -> None:
        """A frame of the first `rows` pending rows."""
        parts, taken, rest = [], 0, []
        for cols in self.pending:
            m = len(cols["run"])
            if taken + m <= rows:
                parts.append(cols)
            elif taken < rows:
                cut = rows - taken
                parts.append({k: v[:cut] for k, v in cols.items()})
                rest.append({k: v[cut:] for k, v in cols.items()})
            else:
                rest.append(cols)
            taken += m
        self.pending, self.pending_rows = rest, self.pending_rows - rows
        joined = {name: np.concatenate([p[name] for p in parts]) if isinstance(parts[0][name], np.ndarray)
                  else list(itertools.chain.from_iterable(p[name] for p in parts)) for name in COLUMNS}
        self.frames.append(pd.DataFrame(joined, columns=list(COLUMNS)))

    def frame(self) -> pd.DataFrame:
        if self.pending_rows:
            self._flush(self.pending_rows)
        frames, self.frames = self.frames, []
        if len(frames) == 1:
            df = frames[0]
        else:
            # Joined a column at a time, each frame's copy freed as its column is joined, so the
            # table is not held twice (pd.concat of the frames would).
            columns = {}
            for name in COLUMNS:
                columns[name] = pd.concat([f.pop(name) for f in frames], ignore_index=True)
            df = pd.DataFrame(columns, copy=False)
        # One trial per (setting, task, trial index) in a run folder: a later line (a rerun) wins.
        ident = df[["run", "setting", "task_id", "trial"]].assign(folder=np.concatenate(self.folders))
        superseded = ident.duplicated(keep="last").to_numpy()
        if superseded.any():
            df = df[~superseded].reset_index(drop=True)
        return df


def read_trial_table(run_dirs: list[Path], *, current_only: bool = True) -> TrialTable:
    with system_allocator():
        return _read_trial_table(run_dirs, current_only)


def _read_trial_table(run_dirs: list[Path], current_only: bool) -> TrialTable:
    rows = _ChunkedFrames()
    table = TrialTable(pd.DataFrame(), list(run_dirs))
    for folder, run in enumerate(run_dirs):
        problems = ReadProblems(Path(run) / "trials.jsonl")
        table.problems.append(problems)
        current = current_config(run) if current_only else None
        plan = run_plan(run) if current_only else None
        if plan is not None:
            table.plans.append(plan)
        for chunk in read_chunks(Path(run) / "trials.jsonl", problems):
            v = chunk.values
            corrupt = {i for i, model in chunk.models.items() if model is None}  # already reported
            keep = [i for i in range(len(chunk.numbers)) if i not in corrupt] if corrupt else range(len(chunk.numbers))
            if current:  # only readable lines are placed (a corrupt one's values are placeholders)
                fits = {i: _belongs(v["setting"][i], v["setting_key"][i], v["trial"][i], v["task_id"][i],
                                    v["task_hash"][i], current) for i in keep}
                table.set_aside[str(run)] = table.set_aside.get(str(run), 0) + sum(not ok for ok in fits.values())
                keep = [i for i in keep if fits[i]]
                if not table.set_aside[str(run)]:
                    del table.set_aside[str(run)]
            if keep:
                entries = chunk.entries
                if len(keep) < len(chunk.numbers):  # the reader's flattened entries no longer line up
                    v, entries = {name: [col[i] for i in keep] for name, col in v.items()}, {}
                rows.append(_columns(v, str(run), entries), folder)
    if not rows.count:
        bad = sum(len(p.corrupt) for p in table.problems)
        where = ", ".join(map(str, run_dirs))
        planned = sum(sum(p.planned.values()) for p in table.plans)
        stopped = "; ".join(p.stopped for p in table.plans if p.stopped)
        if planned and stopped and not bad:
            raise TbscaleError(f"{where}: no trial has finished (0 of {planned} planned); it stopped: {stopped}")
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
    # A label is a function of these columns: name each distinct combination once, not each trial.
    cols = ["run", "setting", "oracle_selection", "simulated_roles", "generator_model"]
    codes = df.groupby(cols, sort=False, dropna=False).ngroup().to_numpy()
    first = np.unique(codes, return_index=True)[1]  # each combination's first trial, in code order
    names = []
    for run, setting, oracle, sim_roles, generator in df[cols].take(first).itertuples(index=False):
        label = f"{run}/{setting}" if setting in clash else setting
        if oracle:
            label += " (oracle upper bound)"
        if sim_roles and not str(generator or "").startswith("sim/"):
            label += f" [simulated {', '.join(sim_roles)}]"
        names.append(label)
    return np.array(names, dtype=object)[codes].tolist()


def load_trials(run_dirs: list[Path], *, current_only: bool = True) -> pd.DataFrame:
    """The trials of `run_dirs` as one DataFrame (see read_trial_table); corrupt lines are warned
    about with their line numbers."""
    table = read_trial_table(run_dirs, current_only=current_only)
    for p in table.problems:
        p.warn()
    return table.df
