"""The cost of forks per setting (docs/forks-and-lookahead.md): snapshots and forks per trial, the
seconds each took (p50 and p95 over every one of the setting's trials), and the candidate commands
a lookahead policy ran in forks with the exec time they added. Shown only when a run made any."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tbscale.analysis.context import ReportContext, Section
from tbscale.analysis.tables import by_label


def _pooled(values) -> list[float]:
    return [x for v in values if v for x in v]


def _pct(xs: list[float], q: float) -> float:
    return float(np.percentile(xs, q)) if xs else np.nan


def fork_table(df: pd.DataFrame) -> pd.DataFrame:
    rows = []
    cols = ["label", "snapshots", "forks", "fork_sec", "snapshot_sec", "candidate_execs", "candidate_exec_sec"]
    for lab, sub in by_label(df, cols).items():
        forks, snaps = _pooled(sub["fork_sec"]), _pooled(sub["snapshot_sec"])
        rows.append({"setting": lab, "trials": len(sub), "snapshots_per_trial": sub["snapshots"].mean(),
                     "snapshot_p50": _pct(snaps, 50), "snapshot_p95": _pct(snaps, 95),
                     "forks_per_trial": sub["forks"].mean(), "fork_p50": _pct(forks, 50), "fork_p95": _pct(forks, 95),
                     "candidate_execs_per_trial": sub["candidate_execs"].mean(),
                     "candidate_exec_sec_per_trial": sub["candidate_exec_sec"].mean()})
    return pd.DataFrame(rows)


def fork_sections(ctx: ReportContext) -> None:
    every = ctx.all_trials if ctx.all_trials is not None else ctx.df
    if every.empty or "forks" not in every or not (every["forks"].sum() or every["snapshots"].sum()
                                                   or every["candidate_execs"].sum()):
        return
    ctx.sections.append(Section("forks", "Snapshots and forks per trial", fork_table(every),
                                "Over every attempt of each trial: snapshots taken and forks started, with the "
                                "seconds each took (p50 and p95 over all of the setting's snapshots and forks); "
                                "candidate_execs: commands a lookahead policy ran in forks, and the exec seconds "
                                "they added per trial."))
