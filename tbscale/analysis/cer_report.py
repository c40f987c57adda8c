"""Report sections for the CER strategy (cer-early-reward.txt Section 4, Table 1).

Read from each CER trial row's `strategy_record` (rounds, scored groups, candidates with scores,
the selection, which attempt completed which candidate) and `attempts` (stage, passed, usage):

- RM@k: the resolved rate of the candidate CER ranks first among the k candidates of a round
  (per round, and for the last round). A candidate's outcome is its own verification when it
  submitted during the search, else that of the attempt that completed it (the final completion,
  or with `analysis_complete_all` every candidate's). Rounds whose pick was never completed are
  left out;
- Random (expected resolved rate of a uniformly chosen candidate of the round) and Best-of-N
  (oracle: some candidate of the round resolves), measured only when every candidate of the
  round has an outcome, i.e. with `analysis_complete_all`;
- top-tie rate: the share of scored sibling groups where several candidates share the top score
  (before tie-breaking), and the share of rounds that needed the tie-break rubrics;
- Acc_pair: over pairs of candidates in the same scored group whose verifier outcomes differ, the
  share the CER scores order the same way (a score tie counts as wrong, as in the paper's formula);
  pooled over all groups of a setting;
- tokens per trial: search rollouts, the final completion, the judge (rubrics + scores), their sum
  (what CER costs), and the analysis-only completions apart.

Values are averaged over a task's trials, then over tasks (Acc_pair: pooled pairs). Pure functions
take plain rows, so they are testable without a run.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Iterable

import pandas as pd
from typing_extensions import TypedDict

from tbscale.analysis.context import ReportContext, Section
from tbscale.analysis.records import StrategyRow, attempt_passed, attempts_of, mean, strategy_rows, task_mean
from tbscale.strategies import RECORD_CER, record_kinds
from tbscale.strategies.cer_records import CerRecord
from tbscale.types.completion import UsageJSON


class RoundMetrics(TypedDict):
    """One round of a CER trial: k candidates, the pick's outcome (rm), Random and Best-of-N
    (oracle) when every candidate has one (else NaN), groups and top ties, the share regressed."""

    round: int
    k: int
    rm: float
    random: float
    oracle: float
    groups: int
    group_ties: int
    round_tie: bool
    regressed: float
    all_regressed: bool


def cer_kinds() -> frozenset[str]:
    """The trajectory strategies whose records are CER's (they declare RECORD_CER)."""
    return record_kinds(RECORD_CER)


def _record(row: StrategyRow) -> CerRecord | None:
    rec = row.get("strategy_record")
    return rec if isinstance(rec, dict) and rec.get("kind") in cer_kinds() else None


def outcomes(row: StrategyRow) -> dict[int, bool]:
    """Verifier outcome of every candidate that has one: its own (it submitted during the
    search) or that of the attempt that completed it."""
    rec, atts = _record(row) or {}, attempts_of(row)
    comp = {int(k): int(v) for k, v in (rec.get("completions") or {}).items()}
    out = {}
    for k, c in (rec.get("candidates") or {}).items():
        i = int(k)
        if c.get("finished") and i in atts:
            out[i] = attempt_passed(atts[i])
        elif i in comp and comp[i] in atts:
            out[i] = attempt_passed(atts[comp[i]])
    sel, final = rec.get("selected"), rec.get("final")
    if sel is not None and final is not None and sel not in out and final != sel and final in atts:
        out[int(sel)] = attempt_passed(atts[final])
    return out


def round_metrics(row: StrategyRow) -> list[RoundMetrics]:
    """Per round: k, the pick's outcome (RM@k), Random, Best-of-N, top ties, regressions."""
    rec = _record(row)
    if rec is None:
        return []
    y = outcomes(row)
    out: list[RoundMetrics] = []
    for rd in rec.get("rounds", []):
        cands = [int(i) for i in rd.get("candidates", [])]
        known = [y[i] for i in cands if i in y]
        full = len(known) == len(cands) and cands
        sel = rd.get("selected")
        out.append({
            "round": rd["round"], "k": len(cands),
            "rm": float(y[sel]) if sel is not None and sel in y else math.nan,
            "random": float(mean(known)) if full else math.nan,
            "oracle": float(any(known)) if full else math.nan,
            "groups": len(rd.get("groups", [])),
            "group_ties": sum(bool(g.get("top_tie")) for g in rd.get("groups", [])),
            "round_tie": bool(rd.get("top_tied")),
            "regressed": len(rd.get("regressed", [])) / len(cands) if cands else math.nan,
            "all_regressed": bool(rd.get("all_regressed")),
        })
    return out


def pair_counts(row: StrategyRow) -> tuple[int, int]:
    """(pairs ordered correctly by CER score, pairs with different outcomes) over the trial's
    scored groups: Acc_pair = sum 1[s_i != s_j] 1[(s^_i - s^_j)(s_i - s_j) > 0] / sum 1[s_i != s_j]."""
    rec = _record(row)
    if rec is None:
        return 0, 0
    y = outcomes(row)
    good = total = 0
    for rd in rec.get("rounds", []):
        for g in rd.get("groups", []):
            scores = {int(k): v for k, v in (g.get("scores") or {}).items()}
            members = [i for i in g.get("members", []) if i in y]
            for a in range(len(members)):
                for b in range(a + 1, len(members)):
                    i, j = members[a], members[b]
                    if y[i] == y[j]:
                        continue
                    total += 1
                    si, sj = scores.get(i), scores.get(j)
                    if si is not None and sj is not None and (si - sj) * (float(y[i]) - float(y[j])) > 0:
                        good += 1
    return good, total


def token_split(row: StrategyRow) -> dict[str, float]:
    """Tokens (input + output) of one trial: search rollouts, final completion, judge, CER total,
    and analysis-only completions."""
    def tok(usage: dict[str, UsageJSON] | dict[str, dict[str, float]] | None, roles: Iterable[str] | None = None) -> float:
        usage = usage or {}
        return float(sum(u.get("input", 0) + u.get("output", 0) for r, u in usage.items()
                         if roles is None or r in roles))

    out = {"search": 0.0, "completion": 0.0, "analysis": 0.0}
    for a in attempts_of(row).values():
        st = str(a.get("stage", ""))
        key = "search" if st.startswith("round") else "analysis" if st == "analysis" else "completion"
        out[key] += tok(a.get("usage"), roles=[r for r in (a.get("usage") or {}) if r != "judge"])
    out["judge"] = tok(row.get("tokens"), ["judge"])
    out["cer_total"] = out["search"] + out["completion"] + out["judge"]
    return out


def setting_table(rows: list[StrategyRow]) -> dict[str, float]:
    """One CER setting's headline row."""
    rows = [r for r in rows if _record(r)]
    last = [(r["task_id"], round_metrics(r)[-1] if round_metrics(r) else None) for r in rows]
    groups = sum(m["groups"] for r in rows for m in round_metrics(r))
    ties = sum(m["group_ties"] for r in rows for m in round_metrics(r))
    rounds = [m for r in rows for m in round_metrics(r)]
    good = sum(pair_counts(r)[0] for r in rows)
    pairs = sum(pair_counts(r)[1] for r in rows)
    toks = [(r["task_id"], token_split(r)) for r in rows]
    return {
        "trials": len(rows),
        "resolved": task_mean((r["task_id"], float(bool(r.get("passed")))) for r in rows),
        "k": task_mean((t, m["k"]) for t, m in last if m),
        "RM@k": task_mean((t, m["rm"]) for t, m in last if m),
        "Random": task_mean((t, m["random"]) for t, m in last if m),
        "Best-of-N": task_mean((t, m["oracle"]) for t, m in last if m),
        "top_tie_rate": ties / groups if groups else math.nan,
        "tie_rounds": float(mean([m["round_tie"] for m in rounds])) if rounds else math.nan,
        "Acc_pair": good / pairs if pairs else math.nan,
        "pairs": pairs,
        **{f"tok_{name}": task_mean((t, d[k]) for t, d in toks)
           for k, name in (("search", "search"), ("completion", "final"), ("judge", "judge"), ("cer_total", "cer"),
                           ("analysis", "analysis"))},
    }


def rounds_table(rows: list[StrategyRow]) -> pd.DataFrame:
    by: dict[int, list[tuple[str, RoundMetrics]]] = defaultdict(list)
    for r in rows:
        for m in round_metrics(r):
            by[m["round"]].append((r["task_id"], m))
    out = []
    for rnd in sorted(by):
        ms = by[rnd]
        groups = sum(m["groups"] for _, m in ms)
        out.append({"round": rnd, "trials": len(ms), "k": task_mean((t, m["k"]) for t, m in ms),
                    "RM@k": task_mean((t, m["rm"]) for t, m in ms),
                    "Random": task_mean((t, m["random"]) for t, m in ms),
                    "Best-of-N": task_mean((t, m["oracle"]) for t, m in ms),
                    "top_tie_rate": sum(m["group_ties"] for _, m in ms) / groups if groups else math.nan,
                    "regressed": task_mean((t, m["regressed"]) for t, m in ms),
                    "all_regressed": float(mean([m["all_regressed"] for _, m in ms]))})
    return pd.DataFrame(out)


def cer_sections(ctx: ReportContext) -> None:
    main, per_round = [], []
    for lab, rows in strategy_rows(ctx.df, cer_kinds()):
        main.append({"setting": lab, **setting_table(rows)})
        rt = rounds_table(rows)
        if not rt.empty:
            rt.insert(0, "setting", lab)
            per_round.append(rt)
    if not main:
        return
    pct = ("resolved", "RM@k", "Random", "Best-of-N", "top_tie_rate", "tie_rounds", "Acc_pair")
    ctx.sections.append(Section(
        "cer", "CER: early reward over unfinished prefixes (cer-early-reward Table 1)", pd.DataFrame(main),
        "resolved: the returned (completed, verified) attempt. RM@k: the candidate ranked first among the k of the "
        "last round, completed and verified; Random / Best-of-N (oracle) over the same k, only when every candidate "
        "was completed (analysis_complete_all). top_tie_rate: scored sibling groups with several candidates at the "
        "top score; tie_rounds: rounds that needed extra rubrics. Acc_pair: pooled over within-group pairs with "
        "different outcomes. tok_*: tokens per trial (input+output): search "
        "rollouts, final completion, judge; tok_cer = search + final + judge (what CER costs); tok_analysis: the "
        "analysis-only completions, not part of CER's cost.", pct))
    if per_round:
        ctx.sections.append(Section(
            "cer_rounds", "CER per search round", pd.concat(per_round, ignore_index=True),
            "RM@k of each round's pick (a later round's k candidates extend the earlier beam); regressed: share of the "
            "round's continuations scoring below their parent; all_regressed: rounds that kept the previous selection.",
            ("RM@k", "Random", "Best-of-N", "top_tie_rate", "regressed", "all_regressed")))
