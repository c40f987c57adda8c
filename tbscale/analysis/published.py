"""Imported runs next to the numbers their source published: the `published` table.

A terminal-bench run states its own accuracy in its results.json (resolved trials over all trials:
a trial with no verdict, whatever the cause, counts as a failure). For every such run imported
(`imported_from.published` in the manifest) the table shows that number, what the imported trials
give when counted the same way ("as published"; it must match), and tbscale's pass@1, which sets
apart the trials the harness failed (infrastructure errors) and averages over tasks. Each setting
also gets a row over all its runs, with pass@k at the largest k every task reached, beside the
pass@k the source stated when it stated one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tbscale.analysis import metrics
from tbscale.analysis.context import ReportContext, Section
from tbscale.runfiles import manifest_of
from tbscale.types.manifest import PublishedRun

AGENT_NORMAL = ("unset", "none")  # terminal-bench failure modes that mean nothing went wrong


def published_runs(run_dir: Path) -> list[PublishedRun]:
    manifest = manifest_of(run_dir)
    if manifest is None or manifest.imported_from is None:
        return []
    return manifest.imported_from.published or []


def _of_run(trials: pd.DataFrame, path: str) -> pd.DataFrame:
    src = trials["source"].astype(str)
    return trials[(src == path) | src.str.startswith(path + "/") | src.str.startswith(path + "#")]


def _pass_at_1(trials: pd.DataFrame) -> float:
    scored = trials[~trials["infra_error"]]
    if scored.empty:
        return np.nan
    return float(scored.groupby("task_id")["passed"].mean().mean())


def _row(setting: str, run: str, trials: pd.DataFrame, stated: float | None) -> dict[str, Any]:
    resolved = int((trials["reward"] >= 1.0).sum())
    as_published = resolved / len(trials) if len(trials) else np.nan
    late = trials["passed"] & ~trials["stop_reason"].isin(AGENT_NORMAL)
    return {"setting": setting, "run": run, "trials": len(trials), "tasks": int(trials["task_id"].nunique()),
            "stated_accuracy": np.nan if stated is None else float(stated), "as_published": as_published,
            "matches": "-" if stated is None else ("yes" if abs(as_published - float(stated)) < 1e-9 else "NO"),
            "infra_errors": int(trials["infra_error"].sum()), "pass@1": _pass_at_1(trials),
            "passed_after_agent_failure": int(late.sum())}


def _mean_at_k(counts: pd.DataFrame, k: int) -> float:
    """pass@k over the tasks with at least k trials (NaN when none has)."""
    pairs = [(int(n), int(c)) for n, c in zip(counts["size"], counts["sum"]) if n >= k]
    return metrics.mean_pass_at_k(pairs, k) if pairs else np.nan


def published_table(ctx: ReportContext) -> pd.DataFrame | None:
    every = ctx.all_trials if ctx.all_trials is not None else ctx.df
    rows: list[dict[str, Any]] = []
    for run_dir in ctx.run_dirs:
        runs = published_runs(run_dir)
        if not runs:
            continue
        mine = every[every["run_dir"] == str(run_dir)]
        for setting, trials in mine.groupby("label", sort=False):
            entries = [r for r in runs if r.setting in (None, trials["setting"].iloc[0])]
            stated = []
            for r in entries:
                part = _of_run(trials, r.path)
                rows.append(_row(setting, r.run, part, r.accuracy))
                stated.append(r.accuracy)
            total = _row(setting, f"all {len(entries)} runs", trials,
                         float(np.mean(stated)) if stated and None not in stated else None)
            k = int(trials.groupby("task_id").size().max())
            resolved = (trials["reward"] >= 1.0).groupby(trials["task_id"]).agg(["size", "sum"])
            scored = trials[~trials["infra_error"]].groupby("task_id")["passed"].agg(["size", "sum"])
            total.update({"k": k, "pass@k_as_published": _mean_at_k(resolved, k), "pass@k": _mean_at_k(scored, k),
                          "tasks_at_k": int((scored["size"] >= k).sum())})
            stated_k = [r.pass_at_k.get(str(k)) for r in entries if r.pass_at_k]
            total["stated_pass@k"] = stated_k[0] if len(stated_k) == 1 and stated_k[0] is not None else np.nan
            rows.append(total)
    if not rows:
        return None
    frame = pd.DataFrame(rows)
    for col in ("k", "pass@k_as_published", "stated_pass@k", "pass@k", "tasks_at_k"):
        if col not in frame:
            frame[col] = np.nan
    return frame


def published_sections(ctx: ReportContext) -> None:
    frame = published_table(ctx)
    if frame is None:
        return
    ctx.sections.append(Section(
        "published", "Imported runs against their published numbers", frame,
        "stated_accuracy: what the run's own results.json says; as_published: resolved trials over all trials "
        "of the import, counted as the leaderboard counts (it must match); pass@1: tbscale's, infrastructure "
        "errors (no verdict: test timeout, unparsable tests, agent not installed, harness failure) set apart, "
        "mean over tasks; passed_after_agent_failure: resolved trials whose agent timed out or failed (the "
        "harness ran the tests anyway and counted them). The 'all runs' row: stated_accuracy is the mean of "
        "the runs'; k is the most trials a task has; pass@k_as_published counts as terminal-bench does (every "
        "trial, unresolved = failed) beside stated_pass@k, what the run stated; pass@k sets infrastructure "
        "errors apart, over the tasks_at_k tasks that still have k measured trials.",
        ("stated_accuracy", "as_published", "pass@1", "pass@k_as_published", "stated_pass@k", "pass@k")))
