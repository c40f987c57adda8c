"""The report's figures as PNG files under report/ (matplotlib, Agg backend: no display needed).

* ``pass_at_k.png`` -- pass@k against k per setting (turn-bon Figure 2b/d).
* ``consistency_at_k.png`` -- consistency@k against k (Figure 3b/d).
* ``turns_solved.png`` -- the distribution of turns of solved attempts per setting (Figure 3a/c).
* ``behaviour_preference.png`` -- one panel per Table 4 behaviour: share of picks with it (solid)
  against uniform choice among the turn's N candidates (dashed), per setting (Figure 4).
* ``turn_size.png`` -- reasoning tokens and command characters per turn, pick vs candidates vs
  baseline (Figure 5).
* ``pareto.png`` -- pass@1 (with its bootstrap interval) against total tokens per trial, with the
  Pareto frontier across settings (no setting on the frontier is beaten on both axes). When some
  setting's forks added environment seconds, a second panel gives pass@1 against them, and the
  settings on the frontier over both costs are ringed in both panels.
* ``judge_rubrics.png`` -- share of trajectories the LLM judge flags per rubric and setting, when
  the run has judge results (``tbscale judge``).

A plot is skipped, not faked, when its data is absent (e.g. no turn with a choice of candidates).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from tbscale.analysis import tables
from tbscale.analysis.context import ReportContext, Section

COLORS = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C",
          "#CCB974", "#64B5CD"]


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _color(i: int) -> str:
    return COLORS[i % len(COLORS)]


def _save(fig, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    _plt().close(fig)
    return path


def _simulated_mark(ax, simulated: bool) -> None:
    if simulated:
        ax.text(0.99, 0.01, "simulated models", transform=ax.transAxes, ha="right", va="bottom",
                fontsize=8, color="#B00020", alpha=0.8)


def plot_k_curve(pk: pd.DataFrame, column: str, ylabel: str, path: Path, simulated: bool = False) -> Path | None:
    if pk.empty:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for i, (lab, sub) in enumerate(pk.groupby("setting", sort=False)):
        ax.plot(sub["k"], 100 * sub[column], marker="o", color=_color(i), label=lab)
    ax.set_xlabel("k (trials)")
    ax.set_ylabel(ylabel + " (%)")
    ax.set_xticks(sorted(pk["k"].unique()))
    ax.set_ylim(0, 100)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    _simulated_mark(ax, simulated)
    return _save(fig, path)


def plot_turns_solved(df: pd.DataFrame, path: Path, simulated: bool = False) -> Path | None:
    labels = tables.settings_order(df)
    data = [df.loc[(df["label"] == lab) & df["passed"], "turns"].to_numpy(float) for lab in labels]
    if not any(len(d) for d in data):
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, 0.6 * len(labels) + 1.6))
    rng = np.random.default_rng(0)
    for i, d in enumerate(data):
        if not len(d):
            ax.text(0.5, i, "no solved attempt", va="center", fontsize=8, color="#666")
            continue
        box = dict(positions=[i], widths=0.5, showfliers=False, medianprops={"color": _color(i)})
        try:
            ax.boxplot([d], orientation="horizontal", **box)  # matplotlib >= 3.10
        except TypeError:
            ax.boxplot([d], vert=False, **box)
        ax.scatter(d, i + rng.uniform(-0.18, 0.18, len(d)), s=10, alpha=0.6, color=_color(i))
        ax.scatter([d.mean()], [i], marker="D", color="black", s=18, zorder=3)
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels([f"{lab} (n={len(d)})" for lab, d in zip(labels, data)], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("turns of solved attempts (diamond: mean)")
    ax.grid(axis="x", alpha=0.3)
    _simulated_mark(ax, simulated)
    return _save(fig, path)


def plot_preference(pref: pd.DataFrame, path: Path, simulated: bool = False) -> Path | None:
    """Figure 4: per behaviour, selected share (solid) vs uniform expectation (dashed) per setting."""
    if pref is None or pref.empty:
        return None
    plt = _plt()
    behaviours = list(dict.fromkeys(pref["behaviour"]))
    settings = list(dict.fromkeys(pref["setting"]))
    ncols = 4
    nrows = int(np.ceil(len(behaviours) / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.1 * ncols, 2.7 * nrows + 0.4), squeeze=False)
    x = np.arange(len(settings))
    for k, beh in enumerate(behaviours):
        ax = axes[k // ncols][k % ncols]
        sub = pref[pref["behaviour"] == beh].set_index("setting").loc[settings]
        ax.plot(x, 100 * sub["selected"], marker="o", color="#4C72B0", lw=2, label="selector's pick")
        ax.plot(x, 100 * sub["uniform"], marker="s", color="#4C72B0", lw=1.5, ls="--", label="uniform choice")
        for xi, (s, p) in enumerate(zip(sub["selected"], sub["p_value"])):
            if p < 0.01:
                ax.annotate("**", (xi, 100 * s), textcoords="offset points", xytext=(0, 4), ha="center", fontsize=9)
            elif p < 0.05:
                ax.annotate("*", (xi, 100 * s), textcoords="offset points", xytext=(0, 4), ha="center", fontsize=9)
        ax.set_title(beh, fontsize=9)
        ax.set_xticks(x)
        ax.set_xticklabels(settings, rotation=30, ha="right", fontsize=7)
        ax.set_ylabel("% of turns", fontsize=8)
        ax.margins(x=0.25, y=0.25)
        ax.grid(alpha=0.3)
    for k in range(len(behaviours), nrows * ncols):
        axes[k // ncols][k % ncols].axis("off")
    handles, leg = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, leg + [], loc="upper center", ncol=2, fontsize=8, frameon=False)
    fig.text(0.99, 0.995, "* p<0.05, ** p<0.01 (paired bootstrap over tasks)" + ("; simulated models" if simulated else ""),
             ha="right", va="top", fontsize=7, color="#B00020" if simulated else "#333")
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_turn_size(size: pd.DataFrame, path: Path, simulated: bool = False) -> Path | None:
    """Figure 5: per metric, grouped bars of pick / all candidates / baseline per setting."""
    if size is None or size.empty:
        return None
    plt = _plt()
    metrics_ = list(dict.fromkeys(size["metric"]))
    fig, axes = plt.subplots(1, len(metrics_), figsize=(5.2 * len(metrics_), 3.9), squeeze=False)
    for ax, m in zip(axes[0], metrics_):
        sub = size[size["metric"] == m]
        x = np.arange(len(sub))
        w = 0.27
        ax.bar(x - w, sub["selected"], w, label="executed pick", color="#4C72B0")
        ax.bar(x, sub["candidates"], w, label="all candidates (uniform)", color="#A1C9F4")
        ax.bar(x + w, sub["baseline"], w, label="baseline", color="#8C8C8C")
        for xi, (s, p) in enumerate(zip(sub["selected"], sub["p_value"])):
            if pd.notna(p) and p < 0.05:
                ax.annotate("**" if p < 0.01 else "*", (xi - w, s), textcoords="offset points", xytext=(0, 3),
                            ha="center", fontsize=9)
        ax.set_xticks(x)
        ax.set_xticklabels(sub["setting"], rotation=20, ha="right", fontsize=8)
        ax.set_title(m, fontsize=10)
        ax.grid(axis="y", alpha=0.3)
        _simulated_mark(ax, simulated)
    axes[0][0].legend(fontsize=8)
    return _save(fig, path)


def pareto_frontier(points: list[tuple[float, ...]]) -> list[int]:
    """Indices of points no other point beats: each point is (cost, ..., value), lower costs and
    a higher value better. A point is off the frontier when another is at least as good on every
    axis and better on one; of points equal on every axis only the first listed is kept. With one
    cost, the 2-D frontier (fewer tokens x, higher pass y). In order of the first cost."""
    def beats(j: int, i: int) -> bool:
        a, b = points[j], points[i]
        no_worse = all(x <= y for x, y in zip(a[:-1], b[:-1])) and a[-1] >= b[-1]
        return no_worse and (a != b or j < i)

    front = [i for i in range(len(points)) if not any(beats(j, i) for j in range(len(points)) if j != i)]
    return sorted(front, key=lambda i: (points[i][0], -points[i][-1]))


def pareto_table(df: pd.DataFrame) -> pd.DataFrame:
    """pass@1 against cost per trial, with the frontier over two costs: tokens (input + output,
    every role) and the environment seconds forks added: the exec seconds of the candidate commands
    a lookahead policy ran in forks, plus the seconds spent taking snapshots and starting forks
    (lookahead, CER on forks). Settings without forks add none; when no setting has any, the
    frontier is the token one."""
    s = tables.summary(df)
    tokens, execs, exec_sec, forks, fork_sec = [], [], [], [], []
    cols = ["label", "candidate_execs", "candidate_exec_sec", "forks", "fork_sec", "snapshot_sec",
            *(f"{r}_{k}" for r in tables.ROLES for k in ("input", "output"))]
    by = tables.by_label(df, cols)
    for lab in s["setting"]:
        sub = by[lab]
        tokens.append(float(sum(sub[f"{r}_input"].mean() + sub[f"{r}_output"].mean() for r in tables.ROLES)))
        execs.append(float(sub["candidate_execs"].mean()) if "candidate_execs" in sub else 0.0)
        exec_sec.append(float(sub["candidate_exec_sec"].mean()) if "candidate_exec_sec" in sub else 0.0)
        forks.append(float(sub["forks"].mean()) if "forks" in sub else 0.0)
        fork_sec.append(tables.snapshot_fork_sec(sub))
    s = s.assign(total_tokens=tokens, candidate_execs=execs, candidate_exec_sec=exec_sec, forks=forks,
                 snapshot_fork_sec=fork_sec)
    env_sec = environment_sec(s)
    if env_sec.any() or any(execs) or any(forks):
        points = list(zip(s["total_tokens"], env_sec, s["pass@1"]))
    else:  # no setting made forks: the token frontier alone
        points = list(zip(s["total_tokens"], s["pass@1"]))
    front = set(pareto_frontier(points))
    s["on_frontier"] = [i in front for i in range(len(s))]
    return tables.without_unused_environment_columns(
        s[["setting", "total_tokens", "candidate_execs", "candidate_exec_sec", "forks", "snapshot_fork_sec",
           "pass@1", "ci_lo", "ci_hi", "on_frontier"]])


def environment_sec(pt: pd.DataFrame) -> pd.Series | None:
    """The Pareto table's second cost per setting (the environment seconds forks added: the
    columns of tables.ENVIRONMENT_SEC it has, summed); None when it has none (the token frontier)."""
    have = [c for c in tables.ENVIRONMENT_SEC if c in pt.columns]
    if not have:
        return None
    return pt[have].fillna(0).sum(axis=1)


def plot_pareto(pt: pd.DataFrame, path: Path, simulated: bool = False) -> Path | None:
    if pt.empty:
        return None
    return _save(pareto_figure(pt, simulated), path)


def pareto_figure(pt: pd.DataFrame, simulated: bool = False):
    """The Pareto plot of a pareto_table: pass@1 against tokens, the frontier a dotted step; with a
    second cost (environment seconds), a panel for each cost and the frontier's settings ringed."""
    env = environment_sec(pt)
    if env is not None:
        return _pareto_two_costs(pt, env, simulated)
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for i, (_, r) in enumerate(pt.iterrows()):
        y = 100 * r["pass@1"]
        ax.errorbar([r["total_tokens"]], [y], yerr=[[y - 100 * r["ci_lo"]], [100 * r["ci_hi"] - y]],
                    fmt="o", color=_color(i), capsize=3, label=r["setting"])
        ax.annotate(r["setting"], (r["total_tokens"], y), textcoords="offset points", xytext=(5, 5), fontsize=8)
    fr = pt[pt["on_frontier"]].sort_values("total_tokens")
    if len(fr) >= 1:
        xs, ys = list(fr["total_tokens"]), list(100 * fr["pass@1"])
        ax.step(xs + [ax.get_xlim()[1]], ys + [ys[-1]], where="post", color="black", lw=1, ls=":",
                label="Pareto frontier")
    if pt["total_tokens"].min() > 0 and pt["total_tokens"].max() / pt["total_tokens"].min() > 20:
        ax.set_xscale("log")
    ax.set_xlabel("total tokens per trial (input + output, all roles)")
    ax.set_ylabel("pass@1 (%) with 95% bootstrap CI")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    _simulated_mark(ax, simulated)
    return fig


def _pareto_two_costs(pt: pd.DataFrame, env: pd.Series, simulated: bool):
    """Two panels sharing pass@1: against tokens and against environment seconds. The frontier is
    over both costs at once, so a setting on it may be beaten on one panel's cost alone; it is
    marked by a ring in both panels rather than by a line in either."""
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(11.0, 4.4), sharey=True)
    summed = " + ".join(c for c in tables.ENVIRONMENT_SEC if c in pt.columns)
    costs = ((pt["total_tokens"], "total tokens per trial (input + output, all roles)", True),
             (env, f"environment seconds per trial ({summed})", False))
    front = pt["on_frontier"].to_numpy(bool)
    y = 100 * pt["pass@1"].to_numpy(float)
    lo, hi = y - 100 * pt["ci_lo"].to_numpy(float), 100 * pt["ci_hi"].to_numpy(float) - y
    for ax, (cost, label, may_log) in zip(axes, costs):
        xs = cost.to_numpy(float)
        for i, lab in enumerate(pt["setting"]):
            ax.errorbar([xs[i]], [y[i]], yerr=[[lo[i]], [hi[i]]], fmt="o", color=_color(i), capsize=3, label=lab)
            ax.annotate(lab, (xs[i], y[i]), textcoords="offset points", xytext=(5, 5), fontsize=8)
        ax.scatter(xs[front], y[front], s=140, facecolors="none", edgecolors="black", lw=1.2, zorder=3,
                   label="on the Pareto frontier (tokens and environment seconds)")
        if may_log and xs.min() > 0 and xs.max() / xs.min() > 20:
            ax.set_xscale("log")
        ax.set_xlabel(label, fontsize=8)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("pass@1 (%) with 95% bootstrap CI")
    axes[0].legend(fontsize=7, loc="upper left")
    _simulated_mark(axes[1], simulated)
    return fig


def plot_judge(rubrics: pd.DataFrame, path: Path, simulated: bool = False) -> Path | None:
    """Horizontal bars: share of trajectories flagged per rubric (rows) for each setting."""
    if rubrics is None or rubrics.empty:
        return None
    share_cols = [c for c in rubrics.columns if c not in ("rubric", "source") and not c.startswith(("Δ ", "p "))]
    body = rubrics[~rubrics["rubric"].str.startswith("(")]
    if not share_cols or body.empty:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.5, 0.28 * len(body) * max(1, len(share_cols) / 2) + 1.5))
    y = np.arange(len(body))
    h = 0.8 / len(share_cols)
    for i, c in enumerate(share_cols):
        ax.barh(y + i * h - 0.4 + h / 2, 100 * body[c].astype(float), h, color=_color(i), label=c)
    ax.set_yticks(y)
    ax.set_yticklabels(body["rubric"], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("% of trajectories flagged (lower is better)")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=7)
    _simulated_mark(ax, simulated)
    return _save(fig, path)


def _frame(ctx: ReportContext, key: str) -> pd.DataFrame | None:
    for s in ctx.sections:
        if s.key == key:
            return s.frame
    return None


def plot_sections(ctx: ReportContext) -> None:
    pareto = pareto_table(ctx.df)
    ctx.sections.append(Section("pareto", "pass@1 against tokens: the Pareto frontier across settings", pareto,
                                _pareto_note(pareto), ("pass@1", "ci_lo", "ci_hi")))
    if not ctx.plots:
        return
    out, sim = ctx.out_dir, ctx.simulated
    pk = tables.pass_k(ctx.df)
    todo = [
        ("pass@k per setting", lambda: plot_k_curve(pk, "pass_at_k", "pass@k", out / "pass_at_k.png", sim)),
        ("consistency@k per setting", lambda: plot_k_curve(pk, "consistency_at_k", "consistency@k",
                                                          out / "consistency_at_k.png", sim)),
        ("Turns of solved attempts", lambda: plot_turns_solved(ctx.df, out / "turns_solved.png", sim)),
        ("Selector preference vs uniform choice per behaviour",
         lambda: plot_preference(_frame(ctx, "behaviour_preference"), out / "behaviour_preference.png", sim)),
        ("Reasoning tokens and command characters per turn",
         lambda: plot_turn_size(_frame(ctx, "turn_size"), out / "turn_size.png", sim)),
        ("pass@1 against total tokens" + (" and environment seconds" if environment_sec(pareto) is not None else "")
         + ", with the Pareto frontier", lambda: plot_pareto(pareto, out / "pareto.png", sim)),
        ("LLM judge: share of trajectories flagged per rubric",
         lambda: plot_judge(_frame(ctx, "judge_rubrics"), out / "judge_rubrics.png", sim)),
    ]
    for title, make in todo:
        path = make()
        if path is not None:
            ctx.images.append((title, path))


def _pareto_note(pareto: pd.DataFrame) -> str:
    tokens = "total_tokens: input + output tokens of every role per trial (mean over trials); "
    described = tables.environment_notes(pareto)
    if not described:
        return tokens + "on_frontier: no other setting has both fewer tokens and a higher pass@1."
    summed = [c for c in tables.ENVIRONMENT_SEC if c in pareto.columns]
    second = "added exec seconds" if summed == ["candidate_exec_sec"] else f"environment seconds ({' + '.join(summed)})"
    return (tokens + "; ".join(described) + f"; on_frontier: no other setting is at least as good on tokens, "
            f"{second} and pass@1 and better on one.")
