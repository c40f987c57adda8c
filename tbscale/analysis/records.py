"""The trials of multi-attempt strategies as row dicts, for the sections that read their attempts
and strategy records (stages of best_of_n and pdr, CER rounds).

Only the rows whose strategy record is of the asked kind are turned into dicts, so a report over
100k single-attempt trials does not convert its whole table to find none. Each row also gets back
its per-role `tokens` mapping (the table keeps tokens as flat columns)."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Iterable, Iterator

import pandas as pd
from typing_extensions import TypedDict

from tbscale.analysis.tables import ROLES, by_label
from tbscale.rundata.compact import unpack_json
from tbscale.rundata.trials import TOKEN_KINDS
from tbscale.strategies.cer_records import CerRecord
from tbscale.strategies.stage_records import StagedRecord
from tbscale.types.results import AttemptBriefJSON


# What the stage and CER sections read of a trial (converting only these keeps it fast).
RECORD_COLUMNS = ["label", "task_id", "trial", "passed", "ending", "reward", "turns", "n_attempts", "final_attempt",
                  "attempts", "strategy_record", "cost_usd"]


class StrategyRow(TypedDict, total=False):
    """A multi-attempt trial as the stage and CER sections read it: RECORD_COLUMNS of its trial
    line, `attempts` and `strategy_record` decoded, and its tokens per role and kind (when asked
    for; the flat token columns ride along). A row built by hand in a test may leave keys out."""

    label: str
    task_id: str
    trial: int
    passed: bool
    ending: str
    reward: float | None
    turns: int
    n_attempts: int
    final_attempt: int
    attempts: list[AttemptBriefJSON] | None
    strategy_record: StagedRecord | CerRecord | None
    cost_usd: float | None
    tokens: dict[str, dict[str, float]]


def strategy_rows(df: pd.DataFrame, kinds: Iterable[str]) -> Iterator[tuple[str, list[StrategyRow]]]:
    """(label, row dicts) for each setting with trials whose strategy record's kind is one of
    `kinds`, one setting at a time: records are decoded per setting and freed when the caller moves
    on, so the peak is one setting's records, not every trial's."""
    for lab, rows in iter_strategy_rows(df, kinds):
        yield lab, list(rows)


def iter_strategy_rows(df: pd.DataFrame, kinds: Iterable[str], tokens: bool = True
                       ) -> Iterator[tuple[str, Iterator[StrategyRow]]]:
    """As strategy_rows, but each setting's rows come one at a time, decoded as they are asked for:
    a section that reads each trial once (stages.py) never holds more than one trial's records.
    Without `tokens` the rows leave out the per-role token mapping and columns."""
    kinds = set(kinds)
    if df.empty or "strategy_record" not in df.columns:
        return
    if "strategy_kind" in df.columns:
        mask = df["strategy_kind"].isin(kinds)
    else:  # a table built by hand, records as dicts
        mask = df["strategy_record"].map(lambda r: isinstance(r, dict) and r.get("kind") in kinds).astype(bool)
    if not mask.any():
        return
    token_cols = [f"{role}_{k}" for role in ROLES for k in TOKEN_KINDS] if tokens else []
    sub = df.loc[mask, [c for c in (*RECORD_COLUMNS, *token_cols) if c in df.columns]]
    for lab, part in by_label(sub).items():
        yield lab, _decoded(part, tokens)


def _decoded(part: pd.DataFrame, tokens: bool) -> Iterator[StrategyRow]:
    cols = list(part.columns)
    # Plain columns as lists; the packed records element by element, so only one trial's records
    # are decoded at a time.
    values = [iter(part[c].array) if c in ("attempts", "strategy_record") else part[c].tolist() for c in cols]
    for row in zip(*values):
        r: StrategyRow = dict(zip(cols, row))  # type: ignore[assignment]  (the columns are StrategyRow's keys)
        for key in ("attempts", "strategy_record"):
            if isinstance(r.get(key), (bytes, str)):
                r[key] = unpack_json(r[key])
        if tokens:
            r["tokens"] = {role: {k: r.get(f"{role}_{k}", 0.0) for k in TOKEN_KINDS} for role in ROLES
                           if any(r.get(f"{role}_{k}") for k in TOKEN_KINDS)}
        yield r


def attempts_of(row: StrategyRow) -> dict[int, AttemptBriefJSON]:
    atts = row.get("attempts")
    return {int(a["index"]): a for a in atts} if isinstance(atts, list) else {}


def attempt_passed(a: AttemptBriefJSON | None) -> bool:
    return bool(a and a.get("passed") and a.get("ending", "pass") == "pass")


def mean(values) -> float:
    """The mean of a short list of numbers (plain Python: numpy's overhead dominates at this size)."""
    values = list(values)
    return sum(values) / len(values) if values else math.nan


def task_mean(values: Iterable[tuple[str, float | None]]) -> float:
    """Mean over tasks of the mean over a task's values (every figure is averaged per task first)."""
    by: dict[str, list[float]] = defaultdict(list)
    for task, v in values:
        if v is not None and not (isinstance(v, float) and math.isnan(v)):
            by[task].append(float(v))
    return mean(mean(v) for v in by.values()) if by else math.nan
