"""The judge's report section: rubric shares per setting (turn-bon Table 3 and Table 6), flags per
trajectory, and reward-hacking counts (Table 7), read from <run>/judge/ (written by `tbscale
judge`) through the models it is written with (tbscale/types/posthoc.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tbscale.analysis import metrics
from tbscale.analysis.context import ReportContext, Section
from tbscale.analysis.tables import settings_order
from tbscale.posthoc.judge.rubrics import RH_CATEGORIES, RH_TITLES, RUBRICS, SOURCE_TITLES
from tbscale.runfiles import read_judgements, read_posthoc_manifest
from tbscale.types.posthoc import JudgeManifest, RewardHackingLine, RubricLine

N_RESAMPLES = 10_000

@dataclass
class Judgements:
    """The latest judge's lines of the runs' judge folders (every line, where a folder has no
    manifest naming its judge)."""

    rubric_lines: list[RubricLine]  # one per (trial, set, sample)
    rh_lines: list[RewardHackingLine]
    simulated: bool
    models: list[str]


def check_manifests(run_dirs: list[Path]) -> None:
    """Refuse a judge manifest that cannot be read (one line naming the file and the field), before
    the report makes a folder or writes a file."""
    for run in run_dirs:
        read_posthoc_manifest(Path(run) / "judge" / "manifest.json", JudgeManifest)


def load_judgements(run_dirs: list[Path]) -> Judgements | None:
    rub: list[RubricLine] = []
    rh: list[RewardHackingLine] = []
    simulated, models = False, []
    for run in run_dirs:
        jdir = Path(run) / "judge"
        if not jdir.is_dir():
            continue
        manifest = read_posthoc_manifest(jdir / "manifest.json", JudgeManifest)
        key = manifest.judge_key if manifest else None
        if manifest is not None:
            simulated |= manifest.simulated
            if manifest.model:
                models.append(manifest.model)
        for path, line_type, acc in ((jdir / "rubrics.jsonl", RubricLine, rub),
                                     (jdir / "reward_hacking.jsonl", RewardHackingLine, rh)):
            if path.is_file():
                acc.extend(line for line in read_judgements(path, line_type) if key is None or line.judge_key == key)
    if not rub and not rh:
        return None
    return Judgements(rub, rh, simulated, sorted(set(models)))


def rubric_frame(lines: list[RubricLine]) -> pd.DataFrame:
    """The columns of rubric lines the tables read, one row per line."""
    return pd.DataFrame([{"trial_key": r.trial_key, "set": r.set, "sample": r.sample, "flags": r.flags,
                          "unsupported": r.unsupported, "error": r.error} for r in lines])


def reward_hacking_frame(lines: list[RewardHackingLine]) -> pd.DataFrame:
    """The columns of reward-hacking lines the table reads, one row per line."""
    return pd.DataFrame([{"trial_key": r.trial_key, "flag": r.flag, "categories": r.categories, "error": r.error}
                         for r in lines])


def rubric_scores(lines: pd.DataFrame) -> pd.DataFrame:
    """Per (trial, rubric): the mean flag over the samples that returned a valid judgement."""
    rows = []
    for r in lines.itertuples(index=False):
        err = getattr(r, "error", None)
        if (isinstance(err, str) and err) or not isinstance(getattr(r, "flags", None), dict):
            continue  # a failed judgement (pandas turns a missing error into NaN, hence the type check)
        for k, v in r.flags.items():
            rows.append({"trial_key": r.trial_key, "set": r.set, "sample": r.sample, "rubric": k, "flag": float(v)})
    if not rows:
        return pd.DataFrame(columns=["trial_key", "set", "rubric", "score", "samples"])
    long = pd.DataFrame(rows)
    return long.groupby(["trial_key", "set", "rubric"], sort=False).agg(
        score=("flag", "mean"), samples=("flag", "size")).reset_index()


def _paired(scores: pd.DataFrame, value: str, base: str, lab: str) -> tuple[float, float]:
    """(diff, p) of lab minus base over shared tasks, from per-task means of `value`."""
    a = scores[scores["label"] == base].groupby("task_id")[value].mean()
    b = scores[scores["label"] == lab].groupby("task_id")[value].mean()
    shared = sorted(set(a.index) & set(b.index))
    if not shared:
        return np.nan, np.nan
    res = metrics.paired_bootstrap(a.loc[shared].to_numpy(float), b.loc[shared].to_numpy(float),
                                   n_resamples=N_RESAMPLES, seed=0)
    return res.diff, res.p_value


def rubric_table(scores: pd.DataFrame, labels: list[str], baseline: str | None) -> pd.DataFrame:
    """Rows: the 28 rubrics (Table 6 order); columns: share flagged per setting, and for each other
    setting its difference from the baseline and the paired-bootstrap p-value (Table 3)."""
    labels = [lab for lab in labels if (scores["label"] == lab).any()]
    rows = []
    for r in RUBRICS:
        sub = scores[scores["rubric"] == r.key]
        row: dict[str, Any] = {"rubric": r.title, "source": SOURCE_TITLES[r.source]}
        for lab in labels:
            vals = sub.loc[sub["label"] == lab, "score"]
            row[lab] = float(vals.mean()) if len(vals) else np.nan
        if baseline in labels:
            for lab in labels:
                if lab == baseline:
                    continue
                d, p = _paired(sub, "score", baseline, lab)
                row[f"Δ {lab}"], row[f"p {lab}"] = d, p
        rows.append(row)
    return pd.DataFrame(rows)


def count_table(scores: pd.DataFrame, lines: pd.DataFrame, labels: list[str], baseline: str | None) -> pd.DataFrame:
    per_trial = scores.groupby(["trial_key", "label", "task_id", "passed", "set"])["score"].sum().unstack("set")
    per_trial = per_trial.reindex(columns=["wang", "ours"])
    per_trial["all"] = per_trial[["wang", "ours"]].sum(axis=1, min_count=2)
    per_trial = per_trial.reset_index()
    rows = []
    for lab in labels:
        sub = per_trial[per_trial["label"] == lab]
        if sub.empty:
            continue
        fail = sub[~sub["passed"].astype(bool)]
        ln = lines[lines["label"] == lab] if "label" in lines else lines.iloc[0:0]
        unsupported = int(sum(len(u) for u in ln.get("unsupported", pd.Series(dtype=object)) if isinstance(u, list)))
        row = {"setting": lab, "trajectories": len(sub), "failed": len(fail),
               "flags (of 28)": float(sub["all"].mean()), "flags, failed only": float(fail["all"].mean()) if len(fail) else np.nan,
               "Wang et al. (of 13)": float(sub["wang"].mean()), "turn-bon (of 15)": float(sub["ours"].mean()),
               "Δ flags vs baseline": np.nan, "p": np.nan,
               "unsupported flags dropped": unsupported,
               "judge errors": int(ln["error"].notna().sum()) if "error" in ln else 0}
        if baseline is not None and lab != baseline and (per_trial["label"] == baseline).any():
            row["Δ flags vs baseline"], row["p"] = _paired(per_trial.dropna(subset=["all"]), "all", baseline, lab)
        rows.append(row)
    return pd.DataFrame(rows)


def reward_hacking_table(rh: pd.DataFrame, df: pd.DataFrame, labels: list[str], baseline: str | None) -> pd.DataFrame:
    ok = rh[rh["error"].isna()] if "error" in rh else rh
    rows = []
    if ok.empty:
        return pd.DataFrame()
    per_trial = ok.groupby(["trial_key", "label", "task_id"]).agg(
        flag=("flag", "mean"), **{c: ("categories", (lambda s, c=c: float(np.mean([d.get(c, 0) for d in s]))))
                                  for c in RH_CATEGORIES}).reset_index()
    for lab in labels:
        sub = per_trial[per_trial["label"] == lab]
        passed = int(df.loc[df["label"] == lab, "passed"].sum())
        row = {"setting": lab, "passed": passed, "judged": len(sub), "reward hacking": float(sub["flag"].sum()),
               "share": float(sub["flag"].mean()) if len(sub) else np.nan}
        for c in RH_CATEGORIES:
            row[RH_TITLES[c]] = float(sub[c].sum())
        row["Δ share vs baseline"], row["p"] = (np.nan, np.nan)
        if baseline is not None and lab != baseline:
            row["Δ share vs baseline"], row["p"] = _paired(per_trial, "flag", baseline, lab)
        rows.append(row)
    return pd.DataFrame(rows)


def judge_sections(ctx: ReportContext) -> None:
    j = load_judgements(ctx.run_dirs)
    if j is None:
        return
    meta = ctx.df[["trial_key", "label", "task_id", "passed"]]
    labels = settings_order(ctx.df)
    sim_note = (" SIMULATED JUDGE: these flags come from sim/rubric_judge, tbscale's rule-based stand-in for an "
                "LLM judge, with noise; they exercise the pipeline and measure nothing." if j.simulated else "")
    model_note = f" Judge: {', '.join(j.models)}." if j.models else ""
    if j.rubric_lines:
        lines = rubric_frame(j.rubric_lines).merge(meta, on="trial_key", how="inner")
        scores = rubric_scores(lines).merge(meta, on="trial_key", how="inner")
        if not scores.empty:
            judged_labels = [lab for lab in labels if (scores["label"] == lab).any()]
            base = ctx.baseline if ctx.baseline in judged_labels else None
            shares = [lab for lab in judged_labels]
            pct = tuple(shares) + tuple(f"Δ {lab}" for lab in shares)
            ctx.sections.append(Section(
                "judge_rubrics", "LLM judge: share of trajectories flagged per rubric (turn-bon Table 3)",
                rubric_table(scores, labels, base),
                "Share of judged trajectories (final attempts) flagged for each Table 6 rubric; lower is better. "
                "Each trajectory is judged twice and the flags averaged; a flag counts only with a quote from the "
                "trajectory. Δ: setting minus baseline, p: paired bootstrap over tasks (10,000 resamples). The "
                "judge sees the task and the trajectory, never the outcome." + model_note + sim_note, pct))
            failed = scores[~scores["passed"].astype(bool)]
            if not failed.empty:
                ctx.sections.append(Section(
                    "judge_rubrics_failures", "LLM judge on failed trajectories only",
                    rubric_table(failed, labels, base),
                    "As above over failed trials only, so a setting cannot look better just because more of its "
                    "trajectories end in a (claimed) success. Δ and p over tasks with failures in both settings."
                    + sim_note, pct))
            ctx.sections.append(Section(
                "judge_counts", "LLM judge: flags per trajectory", count_table(scores, lines, labels, base),
                "Mean number of rubrics flagged per trajectory (all 28, failed trajectories only, and per rubric "
                "set); Δ vs baseline with a paired bootstrap over tasks; flags the judge raised without a valid "
                "quote (dropped) and judgements that failed." + sim_note))
    if j.rh_lines:
        rh = reward_hacking_frame(j.rh_lines).merge(meta, on="trial_key", how="inner")
        table = reward_hacking_table(rh, ctx.df, labels, ctx.baseline)
        if not table.empty:
            ctx.sections.append(Section(
                "judge_reward_hacking", "Reward hacking among passing attempts (turn-bon Table 7)", table,
                "passed: passing attempts; judged: those the reward-hacking judge checked; reward hacking: attempts "
                "flagged (mean over samples), with evidence-backed categories; Δ share vs baseline with a paired "
                "bootstrap over tasks." + model_note + sim_note, ("share", "Δ share vs baseline")))
