"""Adaptive Turn-BoN against plain Turn-BoN (docs/adaptive-turn-bon.md): what skipping the
selector when candidates agree saves, and what it costs in pass@1.

A pair is an adaptive Turn-BoN setting (`turn_bon` with `adaptive:`) and a plain Turn-BoN setting
with the same N (in general: a setting with `adaptive:` of a policy registered with
`adaptive=True`, and one of the same policy without), found in the report's runs (preferring one
with the same generator, selector and trajectory strategy), or named with
`tbscale report --adaptive-pair PLAIN ADAPTIVE`. Trials of
different settings share seeds by design, so the two settings ran the same tasks on the same seeds
and every difference is paired over tasks.

Where the counts come from: each trial's trajectory. Every turn that sampled more than one
candidate (a *choice turn*) has one `candidates` event; adaptive Turn-BoN writes on it the path
the turn took (`agreed_first`, `agreed_all` or `selected`). A plain Turn-BoN choice turn has no
path and always selects. Selector calls and tokens are the trial lines' own counts (every call,
retries included), so what the tables call saved is measured, not inferred from the paths.

Report sections
---------------
* ``adaptive_paths``: per setting of each pair, the choice turns and how each was decided, the
  share of turns decided by agreement (each skipped at least one selector call), candidates sampled
  per choice turn, selector and generator calls and tokens per trial, and pass@1 with its
  bootstrap interval.
* ``adaptive_vs_plain``: adaptive minus plain, per metric, as the mean over tasks of the per-task
  difference (each task's value is the mean over its trials), with a percentile interval and a
  two-sided p from a paired bootstrap over tasks (10,000 resamples, seed 0). A negative difference
  in calls or tokens is a saving.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tbscale.analysis import metrics
from tbscale.analysis.context import ReportContext, Section
from tbscale.analysis.tables import ROLES, by_label
from tbscale.errors import TbscaleError
from tbscale.runfiles import read_events
from tbscale.strategies import adaptive_settings, names
from tbscale.types.events import Candidates

N_RESAMPLES = 10_000
SEED = 0
AGREED = ("agreed_first", "agreed_all")
COUNT_COLUMNS = ("choice_turns", "agreed_first", "agreed_all", "selected", "samples")


def _settings(df: pd.DataFrame) -> dict[str, dict[str, Any]]:
    out = {}
    for lab, sub in by_label(df, ["label", "policy", "n", "policy_params", "generator_model", "selector_model",
                                  "trajectory"]).items():
        first = sub.iloc[0]
        out[lab] = {"policy": first["policy"], "n": int(first["n"]),
                    "adaptive": adaptive_settings(first["policy"], policy_params(first)),
                    "models": (first["generator_model"], first["selector_model"], first["trajectory"])}
    return out


def find_pairs(df: pd.DataFrame, explicit: list[str] | None = None) -> list[tuple[str, str]]:
    """(plain, adaptive) setting labels to compare: the named pair, else every adaptive setting
    of a policy that declares `adaptive` with a plain setting of the same policy and N (same models
    and trajectory first)."""
    info = _settings(df)
    if explicit:
        if len(explicit) != 2:
            raise TbscaleError("--adaptive-pair takes exactly two setting names: PLAIN ADAPTIVE")
        plain, adaptive = explicit
        for lab in (plain, adaptive):
            if lab not in info:
                raise TbscaleError(f"--adaptive-pair: no setting named {lab!r} (have: {', '.join(info)})")
        if info[adaptive]["adaptive"] is None:
            raise TbscaleError(f"--adaptive-pair: {adaptive!r} is not an adaptive Turn-BoN setting (its policy "
                               "has no `adaptive:`); give PLAIN first, then ADAPTIVE")
        return [(plain, adaptive)]
    pairs = []
    pairable = names("policy", adaptive=True)
    for lab, s in info.items():
        if s["adaptive"] is None or s["policy"] not in pairable:
            continue
        plain = [p for p, t in info.items() if t["policy"] == s["policy"] and t["adaptive"] is None and t["n"] == s["n"]]
        same = [p for p in plain if info[p]["models"] == s["models"]]
        if same or plain:
            pairs.append(((same or plain)[0], lab))
    return pairs


def trial_paths(path: Path) -> dict[str, int] | None:
    """Choice turns of one trial and how each was decided; None when the trajectory is missing.
    `samples` counts the candidates sampled on choice turns."""
    if not path.is_file():
        return None
    counts = dict.fromkeys(COUNT_COLUMNS, 0)
    for ev in read_events(path):
        if not isinstance(ev, Candidates) or ev.attempt is None or ev.attempt < 0:
            continue
        cands = ev.candidates
        if len(cands) < 2:
            continue  # one sample (baseline, or outside a turn window): no choice to make
        counts["choice_turns"] += 1
        counts["samples"] += len(cands)
        path_taken = ev.path
        counts[path_taken if path_taken in AGREED else "selected"] += 1
    return counts


def path_table(df: pd.DataFrame, labels: list[str]) -> pd.DataFrame:
    """One row per trial of the given settings: its path counts (NaN when unknown) and costs."""
    sub = df[df["label"].isin(labels)]
    rows = []
    for r in sub.itertuples(index=False):
        counts = trial_paths(Path(r.run_dir) / str(r.trajectory_path)) if r.trajectory_path else None
        row = {"label": r.label, "task_id": r.task_id, "passed": float(r.passed), "turns": float(r.turns),
               "selector_calls": r.selector_calls, "selector_tokens": r.selector_input + r.selector_output,
               "generator_calls": r.generator_calls, "generator_input": r.generator_input,
               "generator_output": r.generator_output,
               "total_tokens": sum(getattr(r, f"{role}_input") + getattr(r, f"{role}_output") for role in ROLES)
               + r.other_input + r.other_output}
        row.update({k: (np.nan if counts is None else float(counts[k])) for k in COUNT_COLUMNS})
        rows.append(row)
    return pd.DataFrame(rows)


def _pass_ci(trials: pd.DataFrame) -> tuple[float, float, float]:
    per_task = trials.groupby("task_id")["passed"].mean().to_numpy()
    return metrics.bootstrap_ci(per_task, n_resamples=N_RESAMPLES, seed=SEED)


def paths_section(trials: pd.DataFrame, pairs: list[tuple[str, str]]) -> pd.DataFrame:
    """One row per setting of the pairs (a plain setting paired twice is listed once)."""
    roles: dict[str, str] = {}
    for plain, adaptive in pairs:
        roles.setdefault(plain, "plain")
        roles[adaptive] = f"adaptive vs {plain}"
    rows = []
    for lab, role in roles.items():
        t = trials[trials["label"] == lab]
        choice = t["choice_turns"].sum(min_count=1)
        agreed = t["agreed_first"].sum(min_count=1) + t["agreed_all"].sum(min_count=1)
        mean, lo, hi = _pass_ci(t)
        rows.append({
            "setting": lab, "role": role, "pass@1 (95% CI)": f"{100 * mean:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]",
            "trials": len(t), "choice_turns": choice, "agreed_first": t["agreed_first"].sum(min_count=1),
            "agreed_all": t["agreed_all"].sum(min_count=1), "selected": t["selected"].sum(min_count=1),
            "agreed_share": agreed / choice if choice else np.nan,
            "samples_per_turn": t["samples"].sum(min_count=1) / choice if choice else np.nan,
            "selector_calls": t["selector_calls"].mean(), "selector_tokens": t["selector_tokens"].mean(),
            "generator_calls": t["generator_calls"].mean(), "generator_input": t["generator_input"].mean(),
            "generator_output": t["generator_output"].mean()})
    return pd.DataFrame(rows)


METRICS = (("pass@1", "passed"), ("selector calls / trial", "selector_calls"),
           ("selector tokens / trial", "selector_tokens"), ("generator calls / trial", "generator_calls"),
           ("generator input / trial", "generator_input"), ("generator output / trial", "generator_output"),
           ("all tokens / trial", "total_tokens"), ("turns / trial", "turns"))


def comparison_section(trials: pd.DataFrame, pairs: list[tuple[str, str]], n_resamples: int = N_RESAMPLES,
                       seed: int = SEED) -> pd.DataFrame:
    rows = []
    for plain, adaptive in pairs:
        a = trials[trials["label"] == plain].groupby("task_id")
        b = trials[trials["label"] == adaptive].groupby("task_id")
        shared = sorted(set(a.groups) & set(b.groups))
        if not shared:
            continue
        for name, col in METRICS:
            va = a[col].mean().loc[shared].to_numpy(float)
            vb = b[col].mean().loc[shared].to_numpy(float)
            res = metrics.paired_bootstrap(va, vb, n_resamples=n_resamples, seed=seed)
            rows.append({"setting": adaptive, "vs": plain, "metric": name, "plain": float(va.mean()),
                         "adaptive": float(vb.mean()), "diff": res.diff, "ci_lo": res.lo, "ci_hi": res.hi,
                         "p_value": res.p_value,
                         "saved_share": (0.0 - res.diff / va.mean()) + 0.0 if col != "passed" and va.mean() else np.nan,
                         "tasks": len(shared)})
    return pd.DataFrame(rows)


def adaptive_sections(ctx: ReportContext) -> None:
    pairs = find_pairs(ctx.df, ctx.adaptive_pair)
    if not pairs:
        return
    trials = path_table(ctx.df, sorted({lab for pair in pairs for lab in pair}))
    ctx.sections.append(Section(
        "adaptive_paths", "Adaptive Turn-BoN: how choice turns were decided", paths_section(trials, pairs),
        "choice_turns: turns that sampled more than one candidate; agreed_first: the first candidates agreed, "
        "so no more were sampled and no selector was called; agreed_all: all N agreed, no selector call; "
        "selected: the selector picked (every plain Turn-BoN choice turn). agreed_share: agreed turns / choice "
        "turns; samples_per_turn: candidates sampled per choice turn. Calls and tokens are means per trial, "
        "from the trial lines (retries included); selector_tokens: input + output. A generator call is one "
        "request: a turn that samples the rest after a disagreement makes two, and sends the prompt twice.",
        ("agreed_share",)))
    comparison = comparison_section(trials, pairs)
    if not comparison.empty:
        ctx.sections.append(Section(
            "adaptive_vs_plain", "Adaptive vs plain Turn-BoN (paired bootstrap over tasks)", comparison,
            f"setting: the adaptive setting; vs: its plain Turn-BoN pair; plain, adaptive: their means. "
            f"diff = adaptive - plain, the mean over tasks of each task's difference (a task's value is the mean "
            f"over its trials; settings share seeds). ci_lo/ci_hi: 95% percentile interval and p_value two-sided, "
            f"from a paired bootstrap over tasks ({N_RESAMPLES:,} resamples, seed {SEED}). A negative diff in "
            "calls or tokens is a saving; saved_share = -diff / plain."))


def policy_params(row) -> dict:
    """A trial's policy parameters (the trial table keeps them as JSON text)."""
    value = row.get("policy_params") if hasattr(row, "get") else None
    if isinstance(value, str):
        return json.loads(value)
    return value or {}
