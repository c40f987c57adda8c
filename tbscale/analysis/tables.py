"""The report's tables as pandas DataFrames, computed from the trial table (tbscale.rundata).

Each function takes the trials DataFrame (one row per trial, see `load_trials`) and returns a
table with one row per setting (or per setting and k). Per-task values come first, then means
over tasks, so every interval is a bootstrap over tasks (SPEC: metric definitions).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd

from tbscale.analysis import metrics
from tbscale.errors import TbscaleError
from tbscale.rundata.trials import ROLES, load_trials  # noqa: F401  (the analyses' entry points)
from tbscale.runfiles import find_run_dirs  # noqa: F401
from tbscale.strategies import names
from tbscale.types.results import ENDINGS


def settings_order(df: pd.DataFrame) -> list[str]:
    """Setting labels in order of first appearance (pd.unique keeps it; no Python loop over rows)."""
    return list(pd.unique(df["label"])) if len(df) else []


def by_label(df: pd.DataFrame, cols: list[str] | None = None) -> ByLabel:
    return ByLabel(df, cols)


class ByLabel(Mapping):
    """Each setting's trials (only `cols`, when given), in settings_order: one grouping pass
    instead of a full-table boolean filter per setting. Rows keep their order and index. A
    setting's rows are copied out when asked for, so only one setting's copy need be alive."""

    def __init__(self, df: pd.DataFrame, cols: list[str] | None = None):
        self.frame = df if cols is None else df[[c for c in dict.fromkeys(cols) if c in df.columns]]
        self.positions = df.groupby("label", sort=False).indices if len(df) else {}
        self.labels = settings_order(df)

    def __getitem__(self, label: str) -> pd.DataFrame:
        return self.frame.take(self.positions[label])

    def __iter__(self) -> Iterator[str]:
        return iter(self.labels)

    def __len__(self) -> int:
        return len(self.labels)


def baseline_label(df: pd.DataFrame, explicit: str | None = None) -> str | None:
    """The setting that costs are compared with: named, else the first whose policy and trajectory
    strategy are both registered as the baseline (one sample per turn, one attempt), with the bash agent."""
    labels = settings_order(df)
    if explicit:
        if explicit not in labels:
            raise TbscaleError(f"--baseline: no setting named {explicit!r} (have: {', '.join(labels)})")
        return explicit
    policies, trajectories = names("policy", baseline=True), names("trajectory", baseline=True)
    for lab, sub in by_label(df, ["label", "policy", "trajectory", "agent"]).items():
        first = sub.iloc[0]
        if first["policy"] in policies and first["trajectory"] in trajectories and first["agent"] == "bash":
            return lab
    return None


def per_task(df: pd.DataFrame, label: str) -> pd.DataFrame:
    return _per_task(df[df["label"] == label])


def _per_task(sub: pd.DataFrame) -> pd.DataFrame:
    """Trials run (n), passed (c) and pass rate per task, tasks sorted, of one setting's trials."""
    return sub.groupby("task_id").agg(n=("passed", "size"), c=("passed", "sum"),
                                      pass_rate=("passed", "mean")).reset_index()


def scored(df: pd.DataFrame, include_infra_errors: bool = False) -> pd.DataFrame:
    """The trials that measure the agent: without those the harness failed (model endpoint,
    container engine, image build, verifier), unless they are asked for as failures."""
    if include_infra_errors or not df["infra_error"].any():
        return df  # not a filtered copy of a 100k-row table when nothing is left out
    return df[~df["infra_error"]]


def summary(df: pd.DataFrame, n_resamples: int = 10_000, seed: int = 0,
            all_trials: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per setting: pass@1 with its bootstrap interval over tasks, turns and cost, over the
    trials in `df`; `infra_errors` counts the trials of `all_trials` (default: df) left out of it,
    and `fallback` is the share of selection turns where every selector call failed."""
    all_trials = df if all_trials is None else all_trials
    out = []
    every_by = by_label(all_trials, ["label", "agent", "policy", "n", "trajectory", "generator_model", "selector_model",
                                     "task_id", "infra_error", "selection_turns", "cost_usd", "selector_fallbacks",
                                     "tampered", "ending"])
    scored_by = by_label(df, ["label", "task_id", "passed", "turns"])
    empty = df.iloc[:0][["label", "task_id", "passed", "turns"]]
    # The bootstraps (most of the time at scale) run on two threads: numpy draws and averages the
    # resamples without holding the GIL, and each interval has its own seeded generator, so the
    # numbers are those of running them one after the other.
    with ThreadPoolExecutor(max_workers=2) as pool:
        for lab, every in every_by.items():
            sub = scored_by.get(lab, empty)
            first = every.iloc[0]
            row = {"setting": lab, "agent": first["agent"], "policy": first["policy"], "N": int(first["n"]),
                   "trajectory": first["trajectory"], "generator": first["generator_model"],
                   "selector": first["selector_model"], "tasks": every["task_id"].nunique(), "trials": len(sub),
                   "infra_errors": int(every["infra_error"].sum()), "tampered": int(every["tampered"].sum()),
                   "tampered_pass": int((every["ending"] == "tampered").sum())}
            ci = None
            if len(sub):
                ci = pool.submit(metrics.bootstrap_ci, _per_task(sub)["pass_rate"].to_numpy(),
                                 n_resamples=n_resamples, seed=seed)
            selections = every["selection_turns"].sum()
            row.update({"pass@1": np.nan, "ci_lo": np.nan, "ci_hi": np.nan, "turns_mean": sub["turns"].mean(),
                        "turns_solved": sub.loc[sub["passed"], "turns"].mean(),
                        "cost_usd_per_trial": every["cost_usd"].mean(skipna=False),
                        "fallback": every["selector_fallbacks"].sum() / selections if selections else np.nan})
            out.append((row, ci))
        for row, ci in out:
            if ci is not None:
                row["pass@1"], row["ci_lo"], row["ci_hi"] = ci.result()
    return pd.DataFrame([row for row, _ in out])


def pass_k(df: pd.DataFrame) -> pd.DataFrame:
    frames = []
    for lab, sub in by_label(df, ["label", "task_id", "passed"]).items():
        pt = _per_task(sub)
        curve = metrics.pass_at_k_curve(list(zip(pt["n"].astype(int).tolist(), pt["c"].astype(int).tolist())))
        curve.insert(0, "setting", lab)
        frames.append(curve)
    return pd.concat(frames, ignore_index=True)


def costs(df: pd.DataFrame, baseline: str | None) -> pd.DataFrame:
    """turn-bon Table 1: per-attempt generator output tokens (all N candidates), selector output
    tokens, and (generator + selector output) as a ratio to the baseline's generator output; plus
    every other role's output tokens and the input side, for strategies beyond Turn-BoN; and the
    environment side forks add: candidate commands a lookahead policy ran in forks (the picks
    included) and the exec seconds of those beyond the picks, and the forks started and the
    seconds spent taking snapshots and starting forks (a lookahead policy, CER on forks), per trial."""
    base_gen = None
    if baseline is not None:
        base_gen = df.loc[df["label"] == baseline, "generator_output"].mean()
    rows = []
    cols = ["label", "turns", "cost_usd", "candidate_execs", "candidate_exec_sec", "forks", "fork_sec", "snapshot_sec",
            *(f"{r}_{k}" for r in ROLES for k in ("input", "output"))]
    for lab, sub in by_label(df, cols).items():
        gen, sel = sub["generator_output"].mean(), sub["selector_output"].mean()
        other = sum(sub[f"{r}_output"].mean() for r in ("verifier", "summarizer", "judge"))
        total = gen + sel + other
        rows.append({
            "setting": lab, "generator_out": gen, "selector_out": sel, "other_out": other,
            "total_out": total, "total_vs_baseline": (total / base_gen) if base_gen else np.nan,
            "input_tokens": sum(sub[f"{r}_input"].mean() for r in ROLES),
            "avg_turns": sub["turns"].mean(), "cost_usd": sub["cost_usd"].mean(),
            "candidate_execs": _mean_or_zero(sub, "candidate_execs"),
            "candidate_exec_sec": _mean_or_zero(sub, "candidate_exec_sec"),
            "forks": _mean_or_zero(sub, "forks"), "snapshot_fork_sec": snapshot_fork_sec(sub),
        })
    return without_unused_environment_columns(pd.DataFrame(rows))


CANDIDATE_COLUMNS = ("candidate_execs", "candidate_exec_sec")
FORK_COLUMNS = ("forks", "snapshot_fork_sec")
# The seconds of environment time a setting's forks add per trial: the Pareto frontier's second cost.
ENVIRONMENT_SEC = ("candidate_exec_sec", "snapshot_fork_sec")


def without_unused_environment_columns(table: pd.DataFrame) -> pd.DataFrame:
    """The candidate-execution columns only where some setting ran candidates in forks, and the
    fork columns only where some setting made forks (or spent seconds on snapshots): a run without
    forks keeps the tables it always had."""
    for group in (CANDIDATE_COLUMNS, FORK_COLUMNS):
        if all(c in table.columns and not table[c].fillna(0).any() for c in group):
            table = table.drop(columns=list(group))
    return table


def environment_notes(table: pd.DataFrame) -> list[str]:
    """What the environment columns a table has say (none for a run without forks)."""
    notes = []
    if "candidate_execs" in table.columns:
        notes.append("candidate_execs and candidate_exec_sec: commands a lookahead policy ran in forks per trial and "
                     "the exec seconds they added")
    if "forks" in table.columns:
        notes.append("forks and snapshot_fork_sec: forks started per trial (a lookahead candidate's or a CER "
                     "continuation's) and the seconds per trial spent taking snapshots and starting forks")
    return notes


def _mean_or_zero(sub: pd.DataFrame, col: str) -> float:
    """A column's mean; 0 for tables without it (runs imported from other harnesses run no forks)."""
    return float(sub[col].mean()) if col in sub.columns and len(sub) else 0.0


def snapshot_fork_sec(sub: pd.DataFrame) -> float:
    """The seconds a trial spent taking snapshots and starting forks (the sum of its `snapshot_sec`
    and `fork_sec`), mean over the trials; 0 for tables without them."""
    if not len(sub):
        return 0.0
    per_trial = np.zeros(len(sub))
    for col in ("snapshot_sec", "fork_sec"):
        if col in sub.columns:
            per_trial += [float(sum(v)) if isinstance(v, (tuple, list)) else 0.0 for v in sub[col]]
    return float(per_trial.mean())


def endings(df: pd.DataFrame) -> pd.DataFrame:
    """turn-bon Table 2: the share of attempts ending each way; `infra_error` is the share whose
    cause was the harness (they also appear under their ending, mostly agent_error)."""
    rows = []
    for lab, sub in by_label(df, ["label", "ending", "infra_error"]).items():
        counts = sub["ending"].value_counts()
        rows.append({"setting": lab, "attempts": len(sub),
                     **{e: counts.get(e, 0) / len(sub) for e in ENDINGS},
                     "infra_error": float(sub["infra_error"].mean())})
    return pd.DataFrame(rows)


def compare(df: pd.DataFrame, a: str, b: str, n_resamples: int = 10_000, seed: int = 0) -> pd.DataFrame:
    """B minus A on the tasks both ran: pass@1, pass@k and consistency@k (k up to the fewest trials
    a shared task has) and turns, with paired bootstrap intervals and p-values over tasks."""
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

    def add(metric: str, va, vb, tasks: int):
        res = metrics.paired_bootstrap(np.asarray(va, float), np.asarray(vb, float), n_resamples=n_resamples, seed=seed)
        rows.append({"metric": metric, a: float(np.mean(va)), b: float(np.mean(vb)), "diff": res.diff,
                     "ci_lo": res.lo, "ci_hi": res.hi, "p_value": res.p_value, "tasks": tasks})

    add("pass@1", pa["pass_rate"], pb["pass_rate"], len(shared))
    # At k > 1, the shared tasks where both settings have k trials (a task that lost trials to
    # infrastructure errors has fewer).
    for k in range(2, int(max(pa["n"].max(), pb["n"].max())) + 1):
        both = (pa["n"] >= k).to_numpy() & (pb["n"] >= k).to_numpy()
        if not both.any():
            break
        sa, sb = pa[both], pb[both]
        add(f"pass@{k}", [metrics.pass_at_k(int(n), int(c), k) for n, c in zip(sa["n"], sa["c"])],
            [metrics.pass_at_k(int(n), int(c), k) for n, c in zip(sb["n"], sb["c"])], int(both.sum()))
    for k in range(1, int(max(pa["n"].max(), pb["n"].max())) + 1):
        both = (pa["n"] >= k).to_numpy() & (pb["n"] >= k).to_numpy()
        if not both.any():
            break
        add(f"consistency@{k}", (pa["c"][both] >= k).astype(float), (pb["c"][both] >= k).astype(float),
            int(both.sum()))
    ta = df[df["label"] == a].groupby("task_id")["turns"].mean().loc[shared]
    tb = df[df["label"] == b].groupby("task_id")["turns"].mean().loc[shared]
    if ta.any() or tb.any():  # runs imported without turns (terminal-bench results) have none to compare
        add("turns", ta, tb, len(shared))
    return pd.DataFrame(rows)
