"""The report's tables as pandas DataFrames, computed from trials.jsonl rows.

Each function takes the trials DataFrame (one row per trial, see `load_trials`) and returns a
table with one row per setting (or per setting and k). Per-task values come first, then means
over tasks, so every interval is a bootstrap over tasks (SPEC: metric definitions).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tbscale.analysis import metrics
from tbscale.errors import TbscaleError
from tbscale.logs import read_jsonl
from tbscale.verify import ENDINGS

ROLES = ("generator", "selector", "verifier", "summarizer", "judge")
OPTIONAL_COLUMNS: dict[str, Any] = {
    "n_attempts": 1, "final_attempt": 0, "attempts": None, "strategy_record": None, "trajectory_path": None,
    "n": 1, "policy": "baseline", "trajectory": "single", "agent": "bash", "cost_usd": 0.0, "tokens": None,
    "simulated": False, "generator_model": None, "selector_model": None, "stop_reason": None,
}


def find_run_dirs(paths: list[Path]) -> list[Path]:
    """Run folders (holding trials.jsonl) named directly, or found one level below."""
    runs: list[Path] = []
    for p in paths:
        p = Path(p)
        if (p / "trials.jsonl").is_file():
            runs.append(p)
        elif p.is_dir():
            found = sorted(d for d in p.iterdir() if (d / "trials.jsonl").is_file())
            if not found:
                # A mini-swe-agent or Harbor folder: imported once into a run folder, then read.
                from tbscale.analysis.importers import auto_import

                imported = auto_import(p)
                found = [imported] if imported is not None else []
            runs.extend(found)
        else:
            raise TbscaleError(f"{p}: no such run folder")
    if not runs:
        raise TbscaleError(f"{', '.join(map(str, paths))}: no runs found (no trials.jsonl)")
    return runs


def load_trials(run_dirs: list[Path]) -> pd.DataFrame:
    rows: list[dict[str, Any]] = []
    for run in run_dirs:
        for r in read_jsonl(run / "trials.jsonl"):
            r["run_dir"] = str(run)
            rows.append(r)
    if not rows:
        raise TbscaleError(f"{', '.join(map(str, run_dirs))}: trials.jsonl is empty")
    df = pd.DataFrame(rows)
    # Columns that older or imported runs may lack, with the value a single-attempt trial has.
    for col, default in OPTIONAL_COLUMNS.items():
        if col not in df.columns:
            df[col] = [default] * len(df)
        else:
            df[col] = df[col].where(df[col].notna(), default) if default is not None else df[col]
    # One trial per (setting, task, trial index): a later line (a rerun) wins.
    df = df.drop_duplicates(subset=["run", "setting", "task_id", "trial"], keep="last")
    # Settings of several runs are told apart by run name when names collide.
    multi = df.groupby("setting")["run"].nunique()
    clash = set(multi[multi > 1].index)
    df["label"] = [f"{r}/{s}" if s in clash else s for r, s in zip(df["run"], df["setting"])]
    for role in ROLES:
        for k in ("input", "output", "reasoning", "cached", "calls"):
            df[f"{role}_{k}"] = [float((t or {}).get(role, {}).get(k, 0)) for t in df["tokens"]]
    df["passed"] = df["passed"].astype(bool)
    return df


def settings_order(df: pd.DataFrame) -> list[str]:
    return list(dict.fromkeys(df["label"]))


def baseline_label(df: pd.DataFrame, explicit: str | None = None) -> str | None:
    """The setting that costs are compared with: named, else the first baseline policy at N=1."""
    labels = settings_order(df)
    if explicit:
        if explicit not in labels:
            raise TbscaleError(f"--baseline: no setting named {explicit!r} (have: {', '.join(labels)})")
        return explicit
    for lab in labels:
        sub = df[df["label"] == lab].iloc[0]
        if sub["policy"] == "baseline" and sub["trajectory"] == "single" and sub["agent"] == "bash":
            return lab
    return None


def per_task(df: pd.DataFrame, label: str) -> pd.DataFrame:
    sub = df[df["label"] == label]
    return sub.groupby("task_id").agg(n=("passed", "size"), c=("passed", "sum"),
                                      pass_rate=("passed", "mean")).reset_index()


def summary(df: pd.DataFrame, n_resamples: int = 10_000, seed: int = 0) -> pd.DataFrame:
    out = []
    for lab in settings_order(df):
        sub = df[df["label"] == lab]
        pt = per_task(df, lab)
        mean, lo, hi = metrics.bootstrap_ci(pt["pass_rate"].to_numpy(), n_resamples=n_resamples, seed=seed)
        first = sub.iloc[0]
        out.append({
            "setting": lab, "agent": first["agent"], "policy": first["policy"], "N": int(first["n"]),
            "trajectory": first["trajectory"], "generator": first["generator_model"],
            "selector": first["selector_model"], "tasks": len(pt), "trials": len(sub),
            "pass@1": mean, "ci_lo": lo, "ci_hi": hi,
            "turns_mean": sub["turns"].mean(), "turns_solved": sub.loc[sub["passed"], "turns"].mean(),
            "cost_usd_per_trial": sub["cost_usd"].mean(),
        })
    return pd.DataFrame(out)


def pass_k(df: pd.DataFrame) -> pd.DataFrame:
    frames = []
    for lab in settings_order(df):
        pt = per_task(df, lab)
        curve = metrics.pass_at_k_curve(list(zip(pt["n"].astype(int), pt["c"].astype(int))))
        curve.insert(0, "setting", lab)
        frames.append(curve)
    return pd.concat(frames, ignore_index=True)


def costs(df: pd.DataFrame, baseline: str | None) -> pd.DataFrame:
    """turn-bon Table 1: per-attempt generator output tokens (all N candidates), selector output
    tokens, and (generator + selector output) as a ratio to the baseline's generator output; plus
    every other role's output tokens and the input side, for strategies beyond Turn-BoN."""
    base_gen = None
    if baseline is not None:
        base_gen = df.loc[df["label"] == baseline, "generator_output"].mean()
    rows = []
    for lab in settings_order(df):
        sub = df[df["label"] == lab]
        gen, sel = sub["generator_output"].mean(), sub["selector_output"].mean()
        other = sum(sub[f"{r}_output"].mean() for r in ("verifier", "summarizer", "judge"))
        total = gen + sel + other
        rows.append({
            "setting": lab, "generator_out": gen, "selector_out": sel, "other_out": other,
            "total_out": total, "total_vs_baseline": (total / base_gen) if base_gen else np.nan,
            "input_tokens": sum(sub[f"{r}_input"].mean() for r in ROLES),
            "avg_turns": sub["turns"].mean(), "cost_usd": sub["cost_usd"].mean(),
        })
    return pd.DataFrame(rows)


def endings(df: pd.DataFrame) -> pd.DataFrame:
    """turn-bon Table 2: the share of attempts ending each way."""
    rows = []
    for lab in settings_order(df):
        sub = df[df["label"] == lab]
        counts = sub["ending"].value_counts()
        rows.append({"setting": lab, "attempts": len(sub),
                     **{e: counts.get(e, 0) / len(sub) for e in ENDINGS}})
    return pd.DataFrame(rows)


def compare(df: pd.DataFrame, a: str, b: str, n_resamples: int = 10_000, seed: int = 0) -> pd.DataFrame:
    """B minus A on the tasks both ran: pass@1, consistency@k and turns, with paired bootstrap
    intervals and p-values over tasks."""
    labels = settings_order(df)
    for lab in (a, b):
        if lab not in labels:
            raise TbscaleError(f"--compare: no setting named {lab!r} (have: {', '.join(labels)})")
    pa, pb = per_task(df, a).set_index("task_id"), per_task(df, b).set_index("task_id")
    shared = sorted(set(pa.index) & set(pb.index))
    if not shared:
        raise TbscaleError(f"--compare: {a} and {b} share no tasks")
    pa, pb = pa.loc[shared], pb.loc[shared]
    rows = []

    def add(metric: str, va, vb):
        res = metrics.paired_bootstrap(np.asarray(va, float), np.asarray(vb, float), n_resamples=n_resamples, seed=seed)
        rows.append({"metric": metric, a: float(np.mean(va)), b: float(np.mean(vb)), "diff": res.diff,
                     "ci_lo": res.lo, "ci_hi": res.hi, "p_value": res.p_value, "tasks": len(shared)})

    add("pass@1", pa["pass_rate"], pb["pass_rate"])
    for k in range(1, int(min(pa["n"].min(), pb["n"].min())) + 1):
        add(f"consistency@{k}", (pa["c"] >= k).astype(float), (pb["c"] >= k).astype(float))
    ta = df[df["label"] == a].groupby("task_id")["turns"].mean().loc[shared]
    tb = df[df["label"] == b].groupby("task_id")["turns"].mean().loc[shared]
    add("turns", ta, tb)
    return pd.DataFrame(rows)
