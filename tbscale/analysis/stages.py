"""Report sections for staged trajectory strategies (best_of_n, pdr; pdr-rtv.txt Sections 3-4) and
the token-cost view of every strategy (mid-harness.txt).

Read from each trial row's `attempts` (index, stage, passed, turns, context, usage per attempt)
and `strategy_record` (stages in order; each selection's tournament with every round, group and
vote; tokens per stage and role):

- stage pass@1 (Table 3): Iter 0, Select-K, Iter 1, Final, averaged over trials then tasks, and
  the tokens each stage cost;
- steps per iteration, all / passing / failing attempts (Table 4);
- per tournament round, the survivors' average pass@1 and pass@N (Figures 11-12);
- groupwise selection accuracy: among groups holding a passing and a failing attempt, the share
  whose winner passed (Table 6);
- iteration-1 pass@1 stratified by how many of the attempt's K context attempts passed (Tables 2, 5);
- the iteration 0 -> 1 pass-count transition matrix, per trial (Figure 8);
- tokens per role (generator, selector, verifier, summarizer, judge) for every setting, and
  Pass@1 / Pass@3 against total tokens (mid-harness: success vs estimated cost).

Every pure function takes plain rows (dicts), so it is testable without a run.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import numpy as np
import pandas as pd

from tbscale.analysis import metrics
from tbscale.analysis.context import ReportContext, Section
from tbscale.analysis.records import attempt_passed, attempts_of, mean, strategy_rows, task_mean
from tbscale.analysis.tables import ROLES, settings_order

STAGED = ("pdr", "best_of_n")


# ---- reading rows --------------------------------------------------------------------------------
def _record(row: dict[str, Any]) -> dict[str, Any] | None:
    rec = row.get("strategy_record")
    return rec if isinstance(rec, dict) and rec.get("kind") in STAGED else None


def stage_label(stage: str) -> str:
    if stage.startswith("iter"):
        return f"Iter {stage[4:]}"
    if stage == "select_k":
        return "Select-K"
    if stage.startswith("select_k_after_iter"):
        return f"Select-K (iter {stage.rsplit('iter', 1)[1]})"
    return {"final": "Final"}.get(stage, stage)


def stage_order(stage: str) -> tuple[int, int]:
    """Sort key: iteration t, then the selection after it; Final last."""
    if stage == "final":
        return (10**6, 0)
    if stage.startswith("iter") and stage[4:].isdigit():
        return (int(stage[4:]), 0)
    if stage == "select_k":
        return (0, 1)
    if stage.startswith("select_k_after_iter"):
        return (int(stage.rsplit("iter", 1)[1]), 1)
    return (10**5, 0)


def trial_stages(row: dict[str, Any]) -> list[dict[str, Any]]:
    """One trial's stages in order: label, pass rate of the attempts the stage holds (an
    iteration's attempts, a selection's survivors; Final: the returned attempt), and count."""
    rec, atts = _record(row), attempts_of(row)
    if rec is None:
        return []
    out = []
    for st in rec.get("stages", []):
        if st["kind"] == "iteration":
            members = st["attempts"]
        elif st["stage"] == "final":
            members = [rec.get("final", st["selected"][0])]
        else:
            members = st["selected"]
        vals = [attempt_passed(atts.get(i)) for i in members]
        out.append({"stage": st["stage"], "label": stage_label(st["stage"]), "pass": float(mean(vals)) if vals else math.nan,
                    "count": len(members)})
    return out


# ---- tables --------------------------------------------------------------------------------------
def stage_table(rows: list[dict[str, Any]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(wide: one row per setting with a pass@1 column per stage; long: per stage, pass@1 and
    tokens per trial by role). `rows` are one setting's trials."""
    per_stage: dict[str, list[tuple[str, float]]] = defaultdict(list)
    order: list[str] = []
    usage: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    counts: dict[str, list[int]] = defaultdict(list)
    for r in rows:
        for st in trial_stages(r):
            if st["stage"] not in order:
                order.append(st["stage"])
            per_stage[st["stage"]].append((r["task_id"], st["pass"]))
            counts[st["stage"]].append(st["count"])
    for r in rows:
        su = (_record(r) or {}).get("stage_usage", {})
        for stage in order:
            for role in ROLES:
                u = su.get(stage, {}).get(role, {})
                usage[stage][f"{role}_in"].append(float(u.get("input", 0)))
                usage[stage][f"{role}_out"].append(float(u.get("output", 0)))
                usage[stage][f"{role}_calls"].append(float(u.get("calls", 0)))
    order.sort(key=stage_order)
    wide = {stage_label(s): task_mean(per_stage[s]) for s in order}
    long = []
    cum = 0.0
    for s in order:
        u = {k: float(mean(v)) if v else 0.0 for k, v in usage[s].items()}
        tin = sum(u.get(f"{role}_in", 0) for role in ROLES)
        tout = sum(u.get(f"{role}_out", 0) for role in ROLES)
        cum += tin + tout
        long.append({"stage": stage_label(s), "pass@1": task_mean(per_stage[s]),
                     "attempts": float(mean(counts[s])), "input_tokens": tin, "output_tokens": tout,
                     **{f"{role}_out": u.get(f"{role}_out", 0.0) for role in ROLES},
                     "calls": sum(u.get(f"{role}_calls", 0) for role in ROLES), "cumulative_tokens": cum})
    return pd.DataFrame([wide]), pd.DataFrame(long)


def steps_table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """pdr-rtv Table 4: mean steps (turns) per attempt of each iteration, all / passing / failing."""
    by: dict[str, list[tuple[int, bool]]] = defaultdict(list)
    for r in rows:
        atts = attempts_of(r)
        for st in (_record(r) or {}).get("stages", []):
            if st["kind"] == "iteration":
                by[st["stage"]] += [(int(atts[i]["turns"]), attempt_passed(atts[i])) for i in st["attempts"] if i in atts]
    out = []
    for stage, vals in by.items():
        turns = np.array([t for t, _ in vals], float)
        ok = np.array([p for _, p in vals], bool)
        out.append({"iteration": stage_label(stage), "attempts": len(vals), "pass@1": float(ok.mean()) if len(ok) else math.nan,
                    "steps_all": float(turns.mean()) if len(turns) else math.nan,
                    "steps_passing": float(turns[ok].mean()) if ok.any() else math.nan,
                    "steps_failing": float(turns[~ok].mean()) if (~ok).any() else math.nan})
    return pd.DataFrame(out)


def _tournaments(row: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(st["stage"], st["tournament"]) for st in (_record(row) or {}).get("stages", [])
            if st["kind"] == "select" and st.get("tournament")]


def rounds_table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """pdr-rtv Figures 11-12: per RTV instance and round (0 = the entrants), the survivors'
    average pass@1 and pass@N (any survivor passes), averaged over trials then tasks."""
    pass1: dict[tuple[str, int], list[tuple[str, float]]] = defaultdict(list)
    passn: dict[tuple[str, int], list[tuple[str, float]]] = defaultdict(list)
    size: dict[tuple[str, int], list[int]] = defaultdict(list)
    for r in rows:
        atts = attempts_of(r)
        for stage, t in _tournaments(r):
            if t.get("method") not in ("rtv", "judge"):
                continue
            pools = [(0, t["entrants"])] + [(rd["round"], rd["survivors"]) for rd in t.get("rounds", [])]
            for rd, members in pools:
                vals = [attempt_passed(atts.get(i)) for i in members]
                pass1[(stage, rd)].append((r["task_id"], float(mean(vals))))
                passn[(stage, rd)].append((r["task_id"], float(any(vals))))
                size[(stage, rd)].append(len(members))
    out = [{"rtv": stage_label(stage), "round": rd, "survivors": float(mean(size[(stage, rd)])),
            "avg_pass@1": task_mean(pass1[(stage, rd)]), "pass@N": task_mean(passn[(stage, rd)])}
           for stage, rd in pass1]
    return pd.DataFrame(out)


def group_accuracy_table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """pdr-rtv Table 6: among groups holding both a passing and a failing attempt, the share where
    the winner passed; per RTV instance and round, and over all groups."""
    acc: dict[tuple[str, str], list[bool]] = defaultdict(list)
    groups_all: dict[tuple[str, str], int] = defaultdict(int)
    for r in rows:
        atts = attempts_of(r)
        for stage, t in _tournaments(r):
            if t.get("method") not in ("rtv", "judge"):
                continue
            for rd in t.get("rounds", []):
                for g in rd["groups"]:
                    if g.get("bye"):
                        continue
                    vals = [attempt_passed(atts.get(i)) for i in g["members"]]
                    winners = g.get("winners") or [g.get("winner")]
                    for key in ((stage_label(stage), str(rd["round"])), (stage_label(stage), "all"), ("all", "all")):
                        groups_all[key] += 1
                        if any(vals) and not all(vals):
                            acc[key].append(all(attempt_passed(atts.get(w)) for w in winners))
    out = []
    for key in sorted(groups_all, key=lambda k: (k[0] == "all", k[0], k[1] == "all", k[1])):
        v = acc.get(key, [])
        out.append({"rtv": key[0], "round": key[1], "groups": groups_all[key], "mixed_groups": len(v),
                    "accuracy": float(mean(v)) if v else math.nan})
    return pd.DataFrame(out)


def stratified_table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """pdr-rtv Tables 2 and 5: pass@1 of refined attempts (iteration >= 1), bucketed by how many
    of the attempts in their context passed."""
    by: dict[tuple[str, int, int], list[bool]] = defaultdict(list)
    trials: dict[tuple[str, int, int], set] = defaultdict(set)
    for r in rows:
        atts = attempts_of(r)
        for a in atts.values():
            ctx = a.get("context") or []
            if not ctx:
                continue
            c = sum(attempt_passed(atts.get(int(i))) for i in ctx)
            key = (a["stage"], c, len(ctx))
            by[key].append(attempt_passed(a))
            trials[key].add((r["task_id"], r["trial"]))
    out = [{"iteration": stage_label(s), "context_passing": f"{c}/{k}", "attempts": len(v), "trials": len(trials[(s, c, k)]),
            "pass@1": float(mean(v))} for (s, c, k), v in sorted(by.items())]
    return pd.DataFrame(out)


def transition_matrix(rows: list[dict[str, Any]], src: str = "iter0", dst: str = "iter1") -> pd.DataFrame:
    """pdr-rtv Figure 8: trials counted by (passes among the N attempts of `src`, passes among
    those of `dst`). Mass above the diagonal: refinement helped."""
    pairs, n_max = [], 0
    for r in rows:
        atts = attempts_of(r)
        its = {st["stage"]: st["attempts"] for st in (_record(r) or {}).get("stages", []) if st["kind"] == "iteration"}
        if src in its and dst in its:
            c0 = sum(attempt_passed(atts.get(i)) for i in its[src])
            c1 = sum(attempt_passed(atts.get(i)) for i in its[dst])
            pairs.append((c0, c1))
            n_max = max(n_max, len(its[src]), len(its[dst]))
    if not pairs:
        return pd.DataFrame()
    m = np.zeros((n_max + 1, n_max + 1), int)
    for c0, c1 in pairs:
        m[c0, c1] += 1
    frame = pd.DataFrame(m, columns=[f"{stage_label(dst)}={j}" for j in range(n_max + 1)])
    frame.insert(0, f"{stage_label(src)} passes", list(range(n_max + 1)))
    return frame


def role_tokens_table(df: pd.DataFrame) -> pd.DataFrame:
    """Tokens per trial by role (input and output), every setting."""
    out = []
    for lab in settings_order(df):
        sub = df[df["label"] == lab]
        row: dict[str, Any] = {"setting": lab, "policy": sub.iloc[0]["policy"], "trajectory": sub.iloc[0]["trajectory"]}
        for role in ROLES:
            row[f"{role}_in"] = sub[f"{role}_input"].mean()
            row[f"{role}_out"] = sub[f"{role}_output"].mean()
        row["total_tokens"] = sum(row[f"{r}_in"] + row[f"{r}_out"] for r in ROLES)
        out.append(row)
    return pd.DataFrame(out)


def cost_success_table(df: pd.DataFrame) -> pd.DataFrame:
    """mid-harness: Pass@1 and Pass@3 (unbiased, over trials) against total tokens per trial."""
    out = []
    for lab in settings_order(df):
        sub = df[df["label"] == lab]
        counts = sub.groupby("task_id")["passed"].agg(["size", "sum"])
        pairs = list(zip(counts["size"].astype(int), counts["sum"].astype(int)))
        p1 = metrics.mean_pass_at_k(pairs, 1)
        p3 = metrics.mean_pass_at_k(pairs, 3) if all(n >= 3 for n, _ in pairs) else math.nan
        tokens = sum(sub[f"{r}_input"] + sub[f"{r}_output"] for r in ROLES)
        out.append({"setting": lab, "policy": sub.iloc[0]["policy"], "trajectory": sub.iloc[0]["trajectory"],
                    "Pass@1": p1, "Pass@3": p3, "total_tokens": float(tokens.mean()),
                    "tokens_for_3": 3 * float(tokens.mean()),
                    "output_tokens": float(sum(sub[f"{r}_output"] for r in ROLES).mean()),
                    "attempts_per_trial": float(sub["n_attempts"].mean())})
    return pd.DataFrame(out)


def _with_setting(frame: pd.DataFrame, lab: str) -> pd.DataFrame:
    frame = frame.copy()
    frame.insert(0, "setting", lab)
    return frame


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    frames = [f for f in frames if not f.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


# ---- the report section ------------------------------------------------------------------------------
def stage_sections(ctx: ReportContext) -> None:
    df = ctx.df
    wide, long, steps, rounds, groups, strat, trans = [], [], [], [], [], [], []
    stage_keys: dict[str, tuple[int, int]] = {}
    for lab, rows in strategy_rows(df, STAGED):  # one setting's records at a time
        for r in rows:
            for st in (_record(r) or {}).get("stages", []):
                stage_keys.setdefault(stage_label(st["stage"]), stage_order(st["stage"]))
        w, lg = stage_table(rows)
        wide.append(_with_setting(w, lab))
        long.append(_with_setting(lg, lab))
        steps.append(_with_setting(steps_table(rows), lab))
        rounds.append(_with_setting(rounds_table(rows), lab))
        groups.append(_with_setting(group_accuracy_table(rows), lab))
        strat.append(_with_setting(stratified_table(rows), lab))
        tm = transition_matrix(rows)
        if not tm.empty:
            trans.append(_with_setting(tm, lab))
    if wide:
        _staged_sections(ctx, wide, long, steps, rounds, groups, strat, trans, stage_keys)
    _common_sections(ctx)


def _staged_sections(ctx: ReportContext, wide, long, steps, rounds, groups, strat, trans,
                     stage_keys: dict[str, tuple[int, int]]) -> None:
    wide_f = _concat(wide)
    stage_cols = tuple(sorted((c for c in wide_f.columns if c != "setting"), key=lambda c: stage_keys.get(c, (0, 0))))
    wide_f = wide_f[["setting", *stage_cols]]
    ctx.sections.append(Section("stages", "Average pass@1 at each stage (pdr-rtv Table 3)", wide_f,
                                "Iter t: attempts of iteration t; Select-K: the K kept as refinement context; "
                                "Final: the returned attempt. Mean over a trial's attempts, then trials, then tasks.",
                                stage_cols))
    ctx.sections.append(Section("stage_costs", "Pass@1 and tokens per stage", _concat(long),
                                "Tokens per trial spent in each stage (an iteration: its attempts and their "
                                "summaries; a selection: the judge's votes); cumulative_tokens adds up the stages.",
                                ("pass@1",)))
    ctx.sections.append(Section("stage_steps", "Steps per iteration, passing and failing attempts (pdr-rtv Table 4)",
                                _concat(steps), "", ("pass@1",)))
    ctx.sections.append(Section("rtv_rounds", "Survivors per tournament round (pdr-rtv Figures 11-12)", _concat(rounds),
                                "Round 0 is the pool entering the tournament. avg_pass@1: share of survivors "
                                "that pass; pass@N: some survivor passes.", ("avg_pass@1", "pass@N")))
    ctx.sections.append(Section("rtv_accuracy", "Groupwise selection accuracy (pdr-rtv Table 6)", _concat(groups),
                                "Among groups holding both a passing and a failing attempt, the share where a "
                                "passing one was chosen.", ("accuracy",)))
    st = _concat(strat)
    if not st.empty:
        ctx.sections.append(Section("context_strata", "Refined pass@1 by passing context attempts (pdr-rtv Tables 2, 5)",
                                    st, "Each refined attempt is bucketed by how many of the K attempts in its "
                                        "context passed.", ("pass@1",)))
    tr = _concat(trans)
    if not tr.empty:
        ctx.sections.append(Section("transitions", "Pass-count transitions, iteration 0 -> 1 (pdr-rtv Figure 8)", tr,
                                    "Trials counted by passes among the N iteration-0 attempts (rows) and the "
                                    "N iteration-1 attempts (columns)."))


def _common_sections(ctx: ReportContext) -> None:
    df = ctx.df
    ctx.sections.append(Section("role_tokens", "Tokens per trial by role", role_tokens_table(df),
                                "Mean input and output tokens per trial for each role."))
    cs = cost_success_table(df)
    ctx.sections.append(Section("cost_success", "Pass@1 and Pass@3 against total tokens (mid-harness)", cs,
                                "Pass@k: unbiased estimator over trials (Pass@3 needs at least 3 trials per task); "
                                "total_tokens: input + output of every role, per trial; tokens_for_3: what the three "
                                "trials behind Pass@3 cost.", ("Pass@1", "Pass@3")))
    if ctx.plots:
        _plot_cost_success(ctx, cs)


def _plot_cost_success(ctx: ReportContext, cs: pd.DataFrame) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for col, xcol, marker in (("Pass@1", "total_tokens", "o"), ("Pass@3", "tokens_for_3", "s")):
        ok = cs[col].notna()
        if ok.any():
            ax.scatter(cs.loc[ok, xcol], 100 * cs.loc[ok, col], marker=marker, label=f"{col} ({'1' if col == 'Pass@1' else '3'} trial{'s' if col == 'Pass@3' else ''})")
            for _, r in cs[ok].iterrows():
                ax.annotate(r["setting"], (r[xcol], 100 * r[col]), fontsize=7, xytext=(3, 3),
                            textcoords="offset points")
    ax.set_xscale("log")
    ax.set_xlabel("total tokens spent (log): one trial for Pass@1, three for Pass@3")
    ax.set_ylabel("success (%)")
    ax.set_title("Success against token cost" + (" (simulated models)" if ctx.simulated else ""))
    ax.legend()
    fig.tight_layout()
    ctx.out_dir.mkdir(parents=True, exist_ok=True)
    path = ctx.out_dir / "cost_success.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    ctx.images.append(("Pass@1 and Pass@3 against total tokens", path))
