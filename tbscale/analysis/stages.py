"""Report sections for staged trajectory strategies (those registered with `record=RECORD_STAGED`:
best_of_n, pdr; pdr-rtv.txt Sections 3-4) and
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
from typing import Iterable

import numpy as np
import pandas as pd
from typing_extensions import TypedDict

from tbscale.analysis import metrics
from tbscale.analysis.context import ReportContext, Section
from tbscale.analysis.records import StrategyRow, attempt_passed, attempts_of, iter_strategy_rows, mean, task_mean
from tbscale.analysis.tables import ROLES, by_label
from tbscale.strategies import RECORD_STAGED, record_kinds
from tbscale.strategies.stage_records import StagedRecord, TournamentRecord, stage_label, stage_order
from tbscale.types.completion import UsageJSON
from tbscale.types.results import AttemptBriefJSON


# One stage of a trial: its name and label, the share of the attempts it holds that passed, and how
# many it holds (`pass` is a Python keyword: spelled the functional way).
TrialStage = TypedDict("TrialStage", {"stage": str, "label": str, "pass": float, "count": int})


def staged_kinds() -> frozenset[str]:
    """The trajectory strategies whose records are staged (they declare RECORD_STAGED)."""
    return record_kinds(RECORD_STAGED)


# ---- reading rows --------------------------------------------------------------------------------
def _record(row: StrategyRow) -> StagedRecord | None:
    rec = row.get("strategy_record")
    return rec if isinstance(rec, dict) and rec.get("kind") in staged_kinds() else None


def trial_stages(row: StrategyRow, atts: dict[int, AttemptBriefJSON] | None = None) -> list[TrialStage]:
    """One trial's stages in order: label, pass rate of the attempts the stage holds (an
    iteration's attempts, a selection's survivors; Final: the returned attempt), and count.
    `atts`: the row's attempts by index, when the caller has them already."""
    rec, atts = _record(row), attempts_of(row) if atts is None else atts
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
# Each table is an accumulator fed one trial at a time (`add`), then read (`frame`), so the report
# reads each staged trial's records once for all six tables and never holds a setting's decoded
# records at once; the functions below (stage_table, ...) run one over a list of rows.
class StageTable:
    """(wide: one row per setting with a pass@1 column per stage; long: per stage, pass@1 and
    tokens per trial by role)."""

    def __init__(self) -> None:
        self.per_stage: dict[str, list[tuple[str, float]]] = defaultdict(list)
        self.order: list[str] = []
        self.counts: dict[str, list[int]] = defaultdict(list)
        # Each trial's usage per stage (only that part of its record is kept): the tokens of a
        # stage are averaged over every trial, once every stage is known.
        self.stage_usage: list[dict[str, dict[str, UsageJSON]]] = []

    def add(self, r: StrategyRow, atts: dict[int, AttemptBriefJSON] | None = None) -> None:
        for st in trial_stages(r, atts):
            if st["stage"] not in self.order:
                self.order.append(st["stage"])
            self.per_stage[st["stage"]].append((r["task_id"], st["pass"]))
            self.counts[st["stage"]].append(st["count"])
        self.stage_usage.append((_record(r) or {}).get("stage_usage", {}))

    def frame(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        # Per stage and role, each trial's tokens, averaged over every trial. A trial without usage
        # for the stage adds 0.0, which leaves a float sum as it is, so only the others are listed
        # (most trials record none) and the sum is divided by the number of trials.
        usage: dict[str, dict[str, list[float]]] = {s: {f"{role}_{k}": [] for role in ROLES
                                                         for k in ("in", "out", "calls")} for s in self.order}
        for su in self.stage_usage:
            for stage in self.order:
                by_role = su.get(stage)
                if not by_role:
                    continue
                for role in ROLES:
                    u = by_role.get(role, {})
                    usage[stage][f"{role}_in"].append(float(u.get("input", 0)))
                    usage[stage][f"{role}_out"].append(float(u.get("output", 0)))
                    usage[stage][f"{role}_calls"].append(float(u.get("calls", 0)))
        trials = len(self.stage_usage)
        order = sorted(self.order, key=stage_order)
        wide = {stage_label(s): task_mean(self.per_stage[s]) for s in order}
        long = []
        cum = 0.0
        for s in order:
            u = {k: float(sum(v) / trials) for k, v in usage[s].items()}
            tin = sum(u.get(f"{role}_in", 0) for role in ROLES)
            tout = sum(u.get(f"{role}_out", 0) for role in ROLES)
            cum += tin + tout
            long.append({"stage": stage_label(s), "pass@1": task_mean(self.per_stage[s]),
                         "attempts": float(mean(self.counts[s])), "input_tokens": tin, "output_tokens": tout,
                         **{f"{role}_out": u.get(f"{role}_out", 0.0) for role in ROLES},
                         "calls": sum(u.get(f"{role}_calls", 0) for role in ROLES), "cumulative_tokens": cum})
        return pd.DataFrame([wide]), pd.DataFrame(long)


class StepsTable:
    """pdr-rtv Table 4: mean steps (turns) per attempt of each iteration, all / passing / failing."""

    def __init__(self) -> None:
        self.by: dict[str, list[tuple[int, bool]]] = defaultdict(list)

    def add(self, r: StrategyRow, atts: dict[int, AttemptBriefJSON] | None = None) -> None:
        atts = attempts_of(r) if atts is None else atts
        for st in (_record(r) or {}).get("stages", []):
            if st["kind"] == "iteration":
                self.by[st["stage"]] += [(int(atts[i]["turns"]), attempt_passed(atts[i])) for i in st["attempts"]
                                         if i in atts]

    def frame(self) -> pd.DataFrame:
        out = []
        for stage, vals in self.by.items():
            turns = np.array([t for t, _ in vals], float)
            ok = np.array([p for _, p in vals], bool)
            out.append({"iteration": stage_label(stage), "attempts": len(vals),
                        "pass@1": float(ok.mean()) if len(ok) else math.nan,
                        "steps_all": float(turns.mean()) if len(turns) else math.nan,
                        "steps_passing": float(turns[ok].mean()) if ok.any() else math.nan,
                        "steps_failing": float(turns[~ok].mean()) if (~ok).any() else math.nan})
        return pd.DataFrame(out)


def _tournaments(row: StrategyRow) -> list[tuple[str, TournamentRecord]]:
    return [(st["stage"], st["tournament"]) for st in (_record(row) or {}).get("stages", [])
            if st["kind"] == "select" and st.get("tournament")]


class RoundsTable:
    """pdr-rtv Figures 11-12: per RTV instance and round (0 = the entrants), the survivors'
    average pass@1 and pass@N (any survivor passes), averaged over trials then tasks."""

    def __init__(self) -> None:
        self.pass1: dict[tuple[str, int], list[tuple[str, float]]] = defaultdict(list)
        self.passn: dict[tuple[str, int], list[tuple[str, float]]] = defaultdict(list)
        self.size: dict[tuple[str, int], list[int]] = defaultdict(list)

    def add(self, r: StrategyRow, atts: dict[int, AttemptBriefJSON] | None = None) -> None:
        atts = attempts_of(r) if atts is None else atts
        for stage, t in _tournaments(r):
            if t.get("method") not in ("rtv", "judge"):
                continue
            pools = [(0, t["entrants"])] + [(rd["round"], rd["survivors"]) for rd in t.get("rounds", [])]
            for rd, members in pools:
                vals = [attempt_passed(atts.get(i)) for i in members]
                self.pass1[(stage, rd)].append((r["task_id"], float(mean(vals))))
                self.passn[(stage, rd)].append((r["task_id"], float(any(vals))))
                self.size[(stage, rd)].append(len(members))

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame([{"rtv": stage_label(stage), "round": rd, "survivors": float(mean(self.size[(stage, rd)])),
                              "avg_pass@1": task_mean(self.pass1[(stage, rd)]),
                              "pass@N": task_mean(self.passn[(stage, rd)])} for stage, rd in self.pass1])


class GroupAccuracyTable:
    """pdr-rtv Table 6: among groups holding both a passing and a failing attempt, the share where
    the winner passed; per RTV instance and round, and over all groups."""

    def __init__(self) -> None:
        self.acc: dict[tuple[str, str], list[bool]] = defaultdict(list)
        self.groups_all: dict[tuple[str, str], int] = defaultdict(int)

    def add(self, r: StrategyRow, atts: dict[int, AttemptBriefJSON] | None = None) -> None:
        atts = attempts_of(r) if atts is None else atts
        for stage, t in _tournaments(r):
            if t.get("method") not in ("rtv", "judge"):
                continue
            label = stage_label(stage)
            for rd in t.get("rounds", []):
                keys = ((label, str(rd["round"])), (label, "all"), ("all", "all"))
                for g in rd["groups"]:
                    if g.get("bye"):
                        continue
                    vals = [attempt_passed(atts.get(i)) for i in g["members"]]
                    winners = g.get("winners") or [g.get("winner")]
                    mixed = any(vals) and not all(vals)
                    right = mixed and all(attempt_passed(atts.get(w)) for w in winners)
                    for key in keys:
                        self.groups_all[key] += 1
                        if mixed:
                            self.acc[key].append(right)

    def frame(self) -> pd.DataFrame:
        out = []
        for key in sorted(self.groups_all, key=lambda k: (k[0] == "all", k[0], k[1] == "all", k[1])):
            v = self.acc.get(key, [])
            out.append({"rtv": key[0], "round": key[1], "groups": self.groups_all[key], "mixed_groups": len(v),
                        "accuracy": float(mean(v)) if v else math.nan})
        return pd.DataFrame(out)


class StratifiedTable:
    """pdr-rtv Tables 2 and 5: pass@1 of refined attempts (iteration >= 1), bucketed by how many
    of the attempts in their context passed."""

    def __init__(self) -> None:
        self.by: dict[tuple[str, int, int], list[bool]] = defaultdict(list)
        self.trials: dict[tuple[str, int, int], set] = defaultdict(set)

    def add(self, r: StrategyRow, atts: dict[int, AttemptBriefJSON] | None = None) -> None:
        atts = attempts_of(r) if atts is None else atts
        for a in atts.values():
            ctx = a.get("context") or []
            if not ctx:
                continue
            c = sum(attempt_passed(atts.get(int(i))) for i in ctx)
            key = (a["stage"], c, len(ctx))
            self.by[key].append(attempt_passed(a))
            self.trials[key].add((r["task_id"], r["trial"]))

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame([{"iteration": stage_label(s), "context_passing": f"{c}/{k}", "attempts": len(v),
                              "trials": len(self.trials[(s, c, k)]), "pass@1": float(mean(v))}
                             for (s, c, k), v in sorted(self.by.items())])


class TransitionMatrix:
    """pdr-rtv Figure 8: trials counted by (passes among the N attempts of `src`, passes among
    those of `dst`). Mass above the diagonal: refinement helped."""

    def __init__(self, src: str = "iter0", dst: str = "iter1") -> None:
        self.src, self.dst = src, dst
        self.pairs: list[tuple[int, int]] = []
        self.n_max = 0

    def add(self, r: StrategyRow, atts: dict[int, AttemptBriefJSON] | None = None) -> None:
        atts = attempts_of(r) if atts is None else atts
        its = {st["stage"]: st["attempts"] for st in (_record(r) or {}).get("stages", []) if st["kind"] == "iteration"}
        if self.src in its and self.dst in its:
            c0 = sum(attempt_passed(atts.get(i)) for i in its[self.src])
            c1 = sum(attempt_passed(atts.get(i)) for i in its[self.dst])
            self.pairs.append((c0, c1))
            self.n_max = max(self.n_max, len(its[self.src]), len(its[self.dst]))

    def frame(self) -> pd.DataFrame:
        if not self.pairs:
            return pd.DataFrame()
        m = np.zeros((self.n_max + 1, self.n_max + 1), int)
        for c0, c1 in self.pairs:
            m[c0, c1] += 1
        frame = pd.DataFrame(m, columns=[f"{stage_label(self.dst)}={j}" for j in range(self.n_max + 1)])
        frame.insert(0, f"{stage_label(self.src)} passes", list(range(self.n_max + 1)))
        return frame


def _fed(acc, rows: Iterable[StrategyRow]):
    for r in rows:
        acc.add(r)
    return acc.frame()


def stage_table(rows: list[StrategyRow]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """StageTable over one setting's trials."""
    return _fed(StageTable(), rows)


def steps_table(rows: list[StrategyRow]) -> pd.DataFrame:
    return _fed(StepsTable(), rows)


def rounds_table(rows: list[StrategyRow]) -> pd.DataFrame:
    return _fed(RoundsTable(), rows)


def group_accuracy_table(rows: list[StrategyRow]) -> pd.DataFrame:
    return _fed(GroupAccuracyTable(), rows)


def stratified_table(rows: list[StrategyRow]) -> pd.DataFrame:
    return _fed(StratifiedTable(), rows)


def transition_matrix(rows: list[StrategyRow], src: str = "iter0", dst: str = "iter1") -> pd.DataFrame:
    return _fed(TransitionMatrix(src, dst), rows)


def role_tokens_table(df: pd.DataFrame) -> pd.DataFrame:
    """Tokens per trial by role (input and output), every setting."""
    out = []
    cols = ["label", "policy", "trajectory", *(f"{r}_{k}" for r in ROLES for k in ("input", "output"))]
    for lab, sub in by_label(df, cols).items():
        row: dict[str, str | float] = {"setting": lab, "policy": sub.iloc[0]["policy"], "trajectory": sub.iloc[0]["trajectory"]}
        for role in ROLES:
            row[f"{role}_in"] = sub[f"{role}_input"].mean()
            row[f"{role}_out"] = sub[f"{role}_output"].mean()
        row["total_tokens"] = sum(row[f"{r}_in"] + row[f"{r}_out"] for r in ROLES)
        out.append(row)
    return pd.DataFrame(out)


def cost_success_table(df: pd.DataFrame) -> pd.DataFrame:
    """mid-harness: Pass@1 and Pass@3 (unbiased, over trials) against total tokens per trial."""
    out = []
    cols = ["label", "policy", "trajectory", "task_id", "passed", "n_attempts",
            *(f"{r}_{k}" for r in ROLES for k in ("input", "output"))]
    for lab, sub in by_label(df, cols).items():
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
    for lab, rows in iter_strategy_rows(df, staged_kinds(), tokens=False):  # one trial's records at a time
        tabs = (StageTable(), StepsTable(), RoundsTable(), GroupAccuracyTable(), StratifiedTable(), TransitionMatrix())
        for r in rows:
            for st in (_record(r) or {}).get("stages", []):
                stage_keys.setdefault(stage_label(st["stage"]), stage_order(st["stage"]))
            atts = attempts_of(r)
            for t in tabs:
                t.add(r, atts)
        w, lg = tabs[0].frame()
        wide.append(_with_setting(w, lab))
        long.append(_with_setting(lg, lab))
        steps.append(_with_setting(tabs[1].frame(), lab))
        rounds.append(_with_setting(tabs[2].frame(), lab))
        groups.append(_with_setting(tabs[3].frame(), lab))
        strat.append(_with_setting(tabs[4].frame(), lab))
        tm = tabs[5].frame()
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
