"""Finished trials as a table: the trial lines of one or more run folders, read through the typed
model, into one pandas DataFrame (one row per trial) that the analyses share.

Only trials that belong to a run's current configuration are kept: a line whose setting key, task
content or trial index the manifest no longer names (the config changed, a task was edited, fewer
trials were asked for) is set aside and counted, so a report never mixes two configurations.
Infrastructure errors stay in the table, flagged; the analyses decide what to do with them.
Reading is streamed: lines are validated through the model a chunk at a time
(runfiles.trial_chunks) and reduced to their columns at once, so memory grows with the columns
kept, not with the lines' size; per-attempt records and strategy records stay packed JSON
(rundata/compact.py) until a section asks for them.
"""

from __future__ import annotations

import gc
import itertools
import json
import math
import operator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tbscale.errors import TbscaleError
from tbscale.jsonl import ReadProblems
from tbscale.rundata.compact import pack_json, system_allocator
from tbscale.runfiles import holders_visible, manifest_of, run_holder, trial_chunks
from tbscale.types.completion import Usage
from tbscale.types.manifest import CurrentConfig
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
    running: str | None = None  # who is running trials into it now (runfiles.run_holder)


@dataclass
class TrialTable:
    df: pd.DataFrame
    run_dirs: list[Path]
    set_aside: dict[str, int] = field(default_factory=dict)  # run -> trial lines not in its current config
    problems: list[ReadProblems] = field(default_factory=list)
    plans: list[RunPlan] = field(default_factory=list)  # runs whose manifest names a plan


def current_config(run_dir: Path) -> CurrentConfig | None:
    """What the run's manifest says its configuration is now (None for runs without one)."""
    manifest = manifest_of(run_dir)
    return manifest.current if manifest is not None else None


def run_plan(run_dir: Path) -> RunPlan | None:
    """The plan the run's manifest records (manifests written before `planned_trials` existed give
    it by settings x tasks x trials); None when there is none (imported runs, no manifest)."""
    manifest = manifest_of(run_dir)
    current = manifest.current if manifest is not None else None
    if current is None:
        return None
    tasks = set(current.task_hashes) if current.task_hashes is not None else None
    planned = current.planned_trials
    if planned is None:
        if current.trials is None or tasks is None:
            return None
        planned = {s: len(tasks) * current.trials for s in current.settings}
    planned = {k: v for k, v in planned.items() if v >= 0}
    last = manifest.invocations[-1] if manifest.invocations else None
    stopped = last.stopped if last is not None else None
    running = run_holder(run_dir) if last is not None and last.finished_at is None else None
    if running:
        stopped = None  # not stopped: still going
    elif stopped is None and last is not None and last.finished_at is None:
        stopped = "its last invocation never recorded its end (the process was killed" + (
            ")" if holders_visible() else ", or is still running)")
    elif stopped is None and last is not None and last.crashed:
        stopped = f"{last.crashed} trials crashed in its last invocation and were not recorded (see crashes.log)"
    return RunPlan(str(run_dir), planned, tasks, stopped or None, running)


def belongs(row: TrialResult, current: CurrentConfig | None) -> bool:
    """Whether a trial line belongs to the run's current configuration: its setting's identity, its
    trial index and its task's content are the ones the manifest names now."""
    if current is None:
        return True
    if current.setting_keys.get(row.setting) != row.setting_key:
        return False
    if current.trials is not None and row.trial >= current.trials:
        return False
    hashes = current.task_hashes or {}
    return not (row.task_hash and row.task_id in hashes and hashes[row.task_id] != row.task_hash)


_SCALARS = ("run", "setting", "setting_key", "trial_key", "task_id", "task_format", "task_hash", "trial", "seed",
            "agent", "policy", "n", "trajectory", "generator_model", "selector_model", "simulated", "oracle_selection",
            "passed", "ending", "stop_reason", "infra_error", "turns", "selection_turns", "selector_fallbacks",
            "n_attempts", "final_attempt", "trajectory_path", "imported_from", "source", "rewards", "reward_key",
            "snapshots", "forks", "candidate_execs", "candidate_exec_sec")
_DERIVED = ("run_dir", "simulated_roles", "reward", "cost_usd", "trial_wall", "error_type", "strategy_kind",
            "policy_params", "attempts", "strategy_record", "steps", "not_enforced", "tampered", "tampering_kinds",
            "packages_settled", "fork_sec", "snapshot_sec", "history_exposed", "history_reads")
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


_USAGE_FIELDS = operator.itemgetter("input", "output", "reasoning", "cached", "calls", "cost_usd")


def _token_columns(tokens: list[dict[str, Usage]]) -> dict[str, np.ndarray]:
    """The per-role token columns (a missing role: zeros) and the other roles' input and output,
    from each trial's usage per role, flattened a field at a time."""
    m = len(tokens)
    cols = {name: np.zeros(m) for name in _TOKENS}
    other_in, other_out = np.zeros(m), np.zeros(m)
    owner: list[int] = []
    keys: list[str] = []
    usages: list[Usage] = []
    for i, usage in enumerate(tokens):
        if usage:
            owner.extend([i] * len(usage))
            keys.extend(usage)
            usages.extend(usage.values())
    if not owner:
        return {**cols, "other_input": other_in, "other_output": other_out}
    owner_a, keys_a = np.asarray(owner, dtype=np.intp), np.asarray(keys, dtype=object)
    # One row per usage, a column per field (an unknown cost, None, becomes NaN).
    grid = np.array(list(map(_USAGE_FIELDS, (u.__dict__ for u in usages))), dtype=float)
    values = {kind: grid[:, j] for j, kind in enumerate(("input", "output", "reasoning", "cached", "calls", "cost"))}
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


_TAKE = ("simulated_roles", "reward", "cost_usd", "timing", "error", "policy_params", "n_attempts", "attempts",
         "strategy_record", "steps", "not_enforced", "tampering", "package_updates", "debian_packages", "tokens", "fork_sec", "snapshot_sec",
         "repositories", "history_reads")
_GET = operator.itemgetter(*_SCALARS, *_TAKE)  # of a model's __dict__: its fields' values


def _columns(trials: list[TrialResult], run_dir: str) -> dict[str, Any]:
    """Kept trial lines (their models) as the table's columns (lists or arrays); `trials` is emptied."""
    m = len(trials)
    values = dict(zip((*_SCALARS, *_TAKE), map(list, zip(*map(_GET, (t.__dict__ for t in trials))))))
    trials.clear()  # the caller's list: the models go now, their values stay in the columns
    out: dict[str, Any] = {name: values[name] for name in _SCALARS}
    attempts: list[bytes | None] = [None] * m
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
        "error_type": [e.type if e else None for e in values["error"]],
        "strategy_kind": [(r or {}).get("kind") for r in records],
        "policy_params": _params_text(values["policy_params"]), "attempts": attempts,
        "strategy_record": [pack_json(r) if r else None for r in records],
        "steps": [[x.model_dump() for x in s] if s else None for s in values["steps"]],
        # (key, why) pairs, or None: the task keys the trial did not carry out as written
        "not_enforced": [tuple((x.key, x.why) for x in v) if v else None for v in values["not_enforced"]],
        "tampered": np.array([bool(t) for t in values["tampering"]], dtype=bool),
        "tampering_kinds": [",".join(sorted({e.kind for e in t})) if t else None for t in values["tampering"]],
        # the published releases and Debian packages that settled entries (`pip==26.3`,
        # `python3.11-minimal=3.11.2-6+deb12u9`: as pip and apt name a version), or None
        "packages_settled": [",".join(sorted({f"{u['package']}=={u['version']}" for u in v}
                                             | {f"{d['package']}={d['version']}" for d in debs})) or None
                             for v, debs in zip(values["package_updates"], values["debian_packages"])],
        # seconds of each fork and snapshot (docs/forks-and-lookahead.md), None for a trial with none
        "fork_sec": [tuple(v) if v else None for v in values["fork_sec"]],
        "snapshot_sec": [tuple(v) if v else None for v in values["snapshot_sec"]],
        # a repository the agent was given kept commits committed after its HEAD, which HEAD does not
        # lead to (runner/repository_history.py), and how many of its commands read past HEAD
        # (shell/git_history.py)
        "history_exposed": np.array([any(r.left_after_head for r in v) for v in values["repositories"]], dtype=bool),
        "history_reads": np.array([len(v) for v in values["history_reads"]], dtype=np.int64),
    })
    out.update(_token_columns(values["tokens"]))
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
    # The cyclic garbage collector is paused while the table is built: its rows make no cycles,
    # and collections that each walk every object alive would make the time grow faster than
    # the number of lines.
    enabled = gc.isenabled()
    gc.disable()
    try:
        for folder, run in enumerate(run_dirs):
            problems = ReadProblems(Path(run) / "trials.jsonl")
            table.problems.append(problems)
            current = current_config(run) if current_only else None
            plan = run_plan(run) if current_only else None
            if plan is not None:
                table.plans.append(plan)
            for chunk in trial_chunks(Path(run) / "trials.jsonl", problems):
                kept = [line.trial for line in chunk]
                if current is not None:
                    kept = [t for t in kept if belongs(t, current)]
                    if len(kept) < len(chunk):
                        table.set_aside[str(run)] = table.set_aside.get(str(run), 0) + len(chunk) - len(kept)
                del chunk  # the lines' models are freed as their columns are taken (_columns)
                if kept:
                    rows.append(_columns(kept, str(run)), folder)
    finally:
        if enabled:
            gc.enable()
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
