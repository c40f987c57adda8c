"""What Turn-BoN changes at the level of single turns: turn-bon Figure 4 and Figure 5 from the logs.

For every trial in the report this module reads the trajectory (one JSONL event stream per trial,
see docs/formats.md), rebuilds each attempt turn by turn -- the N candidates of the turn (the
`candidates` event), which one ran (`selection` / `action`), what had executed before -- and
labels every candidate with the eight Table 4 behaviours (`tbscale.analysis.behaviours`), using
the attempt's executed-command history for *tests its last edit* and *loops on a command*.

Report sections
---------------
* ``behaviour_preference`` (Figure 4): per setting with a choice among N > 1 candidates, the share
  of turns whose pick shows each behaviour against the share expected if one of that turn's
  candidates were picked uniformly at random, with a paired bootstrap over tasks (10,000
  resamples, seeded) for the gap. Turns where every selector call failed are excluded (as in the
  paper, Appendix D.1) and counted in ``excluded_turns``; so are turns whose pick is not in the log
  (an attempt that stopped between sampling and selection), and adaptive Turn-BoN's agreed turns
  (identical candidates: nothing was chosen). Turns that offered a single candidate (outside a
  ``first_turn``/``last_turn`` window) carry no choice and are left out.
* ``behaviour_shares``: the share of executed turns showing each behaviour, for every setting
  (baselines and imported runs included), so behaviours can be compared across settings.
* ``turn_size`` (Figure 5): reasoning tokens and command characters per turn of the executed
  pick, the mean over all candidates (what uniform choice would give), and the baseline setting's
  value, with the difference to the baseline tested by a paired bootstrap over tasks. Each
  statistic is the mean over tasks of the task's mean per turn, so every task weighs the same.

Reasoning tokens of a candidate: the provider's count when it reported one (``reasoning_tokens``
> 0); else the reasoning text (``reasoning``) counted with a tokenizer; else, for models that think
in the visible reply (mini-swe-agent's ``THOUGHT:`` format), the reply text outside the command
block, counted the same way. The tokenizer is tiktoken with the encodings litellm bundles (the
generator's own where tiktoken knows it, else cl100k_base; never a download), else ~4 characters a
token. The ``source`` column says which of these the numbers come from. Command characters: the length of the command
the response asks to run; a response that cannot run has none (0).
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd

from tbscale.analysis import metrics
from tbscale.analysis.behaviours import preference_significance
from tbscale.analysis.context import ReportContext, Section
from tbscale.analysis.tables import settings_order
from tbscale.rundata.trajectories import AttemptTrace, TurnTrace, read_trial, runnable
from tbscale.shell import BEHAVIOURS, HistoryState, label_candidate
from tbscale.types.actions import UNREAD_ACTIONS
from tbscale.types.events import CandidateRecord

N_RESAMPLES = 10_000
SEED = 0

BEHAVIOUR_TITLES = {
    "edits_file": "Edits a file",
    "tests_last_edit": "Tests its last edit",
    "runs_test_or_check": "Runs a test or check",
    "file_operations": "File operations",
    "installs_package": "Installs a package",
    "only_reads": "Only reads or inspects",
    "cannot_run": "Response cannot run",
    "loops_on_command": "Loops on a command",
}


# ---------------------------------------------------------------------------------------------
# Labelling
# ---------------------------------------------------------------------------------------------


def candidate_labels(candidate: CandidateRecord, history: HistoryState) -> set[str]:
    if candidate.parse_error in UNREAD_ACTIONS:  # imported: it acted, in a way tbscale cannot read
        return set()
    return label_candidate(candidate.command, is_submission=candidate.submission, cannot_run=not runnable(candidate),
                           history=history)


@dataclass
class LabelledTurn:
    attempt: int
    turn: int
    labels: list[set[str]]  # per candidate
    executed_index: int | None  # which candidate ran (a fallback pick included)
    selector_failed: bool
    trace: TurnTrace

    @property
    def known_pick(self) -> int | None:
        """The pick the preference analysis may use: None where every selector call failed."""
        return None if self.selector_failed else self.executed_index


def label_attempt(attempt: AttemptTrace) -> list[LabelledTurn]:
    """Label every candidate of every turn with the history of what ran before it."""
    history = HistoryState()
    out = []
    for t in attempt.turns:
        if t.candidates:
            labels = [candidate_labels(c, history) for c in t.candidates]
            out.append(LabelledTurn(attempt.attempt, t.turn, labels, t.executed_index, t.selector_failed, t))
        history = history.after(t.executed_command)
    return out


def label_trial(path: Path) -> list[LabelledTurn]:
    trace = read_trial(path)
    return [lt for a in sorted(trace.attempts) for lt in label_attempt(trace.attempts[a])]


# ---------------------------------------------------------------------------------------------
# Turn-level size: reasoning tokens and command characters (Figure 5)
# ---------------------------------------------------------------------------------------------

_FENCE = re.compile(r"```[^\n]*\n.*?(?:```|$)", re.DOTALL)


def visible_thought(candidate: CandidateRecord) -> str:
    """The reply text outside fenced command blocks (a text-format agent's visible reasoning)."""
    return _FENCE.sub("", candidate.text or "").strip()


class TokenCounter:
    """Counts tokens with tiktoken, using the encodings litellm ships (no download): the model's own
    encoding where tiktoken knows the model and it is one of those (o200k_base, cl100k_base), else
    cl100k_base -- which is what litellm's token_counter does for models without a bundled
    tokenizer. Without tiktoken: ~4 characters a token. Results are cached per (model, text)."""

    BUNDLED = ("cl100k_base", "o200k_base")

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self._tiktoken = None
        self._failed = not enabled
        self._enc: dict[str, Any] = {}
        self._cache: dict[tuple[str, str], int] = {}
        self.method: Counter[str] = Counter()

    def _lib(self):
        if self._tiktoken is None and not self._failed:
            try:
                import importlib.util

                spec = importlib.util.find_spec("litellm")
                bundled = Path(spec.origin).parent / "litellm_core_utils" / "tokenizers" if spec and spec.origin else None
                if bundled is not None and bundled.is_dir():
                    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(bundled))
                import tiktoken

                self._tiktoken = tiktoken
            except Exception:
                self._failed = True
        return self._tiktoken

    def encoding(self, model: str | None):
        lib = self._lib()
        if lib is None:
            return None
        name = "cl100k_base"
        if model:
            try:
                guess = lib.encoding_for_model(model.rsplit("/", 1)[-1]).name
                name = guess if guess in self.BUNDLED else name
            except Exception:
                pass
        if name not in self._enc:
            try:
                self._enc[name] = lib.get_encoding(name)
            except Exception:
                self._enc[name] = None
        return self._enc[name]

    def count(self, text: str, model: str | None) -> int:
        if not text:
            return 0
        key = (model or "", text)
        if key in self._cache:
            return self._cache[key]
        enc = self.encoding(model)
        if enc is not None:
            n = len(enc.encode(text, disallowed_special=()))
            self.method[f"tiktoken {enc.name}"] += 1
        else:
            n = max(1, len(text) // 4)
            self.method["chars/4"] += 1
        self._cache[key] = n
        return n


def reasoning_tokens(candidate: CandidateRecord, model: str | None, counter: TokenCounter) -> tuple[int, str]:
    """(tokens, source) for one candidate; see the module docstring for the order of sources."""
    reported = candidate.reasoning_tokens or 0
    if reported > 0:
        return int(reported), "provider"
    text = candidate.reasoning or ""
    if text.strip():
        return counter.count(text, model), "reasoning text"
    return counter.count(visible_thought(candidate), model), "visible thought"


def command_chars(candidate: CandidateRecord) -> int:
    if not runnable(candidate):
        return 0
    return len(candidate.command or "")


# ---------------------------------------------------------------------------------------------
# Per-report collection
# ---------------------------------------------------------------------------------------------


@dataclass
class Collected:
    """Everything the sections need, one row per (trial, attempt, turn)."""

    turns: pd.DataFrame
    excluded: dict[str, Counter]  # label -> Counter(reason -> turns)
    sources: dict[str, Counter]  # label -> Counter(reasoning source -> candidates)
    missing: dict[str, int]  # label -> trials whose trajectory file is missing
    tokenizer: dict[str, int] = field(default_factory=dict)  # counting method -> texts counted


def collect(df: pd.DataFrame, counter: TokenCounter | None = None) -> Collected:
    counter = counter or TokenCounter()
    rows: list[dict[str, Any]] = []
    labels = settings_order(df)
    excluded: dict[str, Counter] = {lab: Counter() for lab in labels}
    sources: dict[str, Counter] = {lab: Counter() for lab in labels}
    found = trajectory_files(df)
    lost = df.loc[~found, "label"]
    counts = lost.value_counts()
    missing: dict[str, int] = {lab: int(counts[lab]) for lab in pd.unique(lost)}  # in order of the first missing
    # Only the trials with a file, only the columns this needs: iterating whole rows of 100k trials
    # costs more than reading small trajectories.
    cols = ("label", "run_dir", "trajectory_path", "generator_model", "task_id", "trial", "trial_key")
    have = df.loc[found, list(cols)]
    for label, run_dir, rel, model, task_id, trial, trial_key in zip(*(have[c].tolist() for c in cols)):
        path = Path(run_dir) / str(rel)
        model = model if isinstance(model, str) else None
        for lt in label_trial(path):
            n = len(lt.labels)
            pick = lt.executed_index
            agreed = str(lt.trace.path or "").startswith("agreed")
            if n > 1 and agreed:  # adaptive Turn-BoN: identical candidates, nothing was chosen
                excluded[label]["agreed"] += 1
            elif n > 1 and lt.selector_failed:
                excluded[label]["selector_failed"] += 1
            elif n > 1 and pick is None:
                excluded[label]["pick_unknown"] += 1
            cands = lt.trace.candidates
            tok, src = zip(*(reasoning_tokens(c, model, counter) for c in cands))
            sources[label].update(src)
            chars = [command_chars(c) for c in cands]
            known = lt.known_pick if n > 1 else pick
            rows.append({
                "label": label, "task_id": task_id, "trial": trial, "trial_key": trial_key,
                "attempt": lt.attempt, "turn": lt.turn, "n": n, "pick": known,
                "selector_failed": lt.selector_failed, "agreed": agreed,
                "labels": lt.labels,
                "picked_labels": sorted(lt.labels[known]) if known is not None else None,
                "reasoning_pick": float(tok[known]) if known is not None else np.nan,
                "reasoning_mean": float(np.mean(tok)),
                "chars_pick": float(chars[known]) if known is not None else np.nan,
                "chars_mean": float(np.mean(chars)),
            })
    turns = pd.DataFrame(rows, columns=[
        "label", "task_id", "trial", "trial_key", "attempt", "turn", "n", "pick", "selector_failed", "agreed", "labels",
        "picked_labels", "reasoning_pick", "reasoning_mean", "chars_pick", "chars_mean"])
    return Collected(turns, excluded, sources, missing, dict(counter.method))


def trajectory_files(df: pd.DataFrame) -> np.ndarray:
    """Which trials' trajectory files exist (`run_dir / trajectory_path` is a file). Each folder
    holding trajectories is listed once instead of testing 100k paths one by one; a name found in
    a listing is then checked to be a file (or a link to one)."""
    found = np.zeros(len(df), dtype=bool)
    rel = df["trajectory_path"]
    has = (rel.notna() & (rel.astype(str) != "")).to_numpy(dtype=bool)
    if not has.any():
        return found
    # The folders first (vectorized string operations, a few distinct values): per trial names are
    # made only when some folder holds files (runs that kept no trajectories make none).
    rel = rel[has].astype(str)
    folders = rel.str.replace(r"/[^/]*$", "", regex=True).where(rel.str.contains("/", regex=False), "")
    where = pd.DataFrame({"run": df["run_dir"][has].astype(str), "dir": folders})
    listings: dict[tuple[str, str], set[str]] = {}
    for run, folder in where.drop_duplicates().itertuples(index=False):
        try:
            listings[(run, folder)] = set(os.listdir(os.path.join(run, folder)))
        except OSError:  # no such folder (trajectories not kept), or not a folder
            listings[(run, folder)] = set()
    if not any(listings.values()):
        return found
    for pos, run, folder, path in zip(np.flatnonzero(has), where["run"].tolist(), where["dir"].tolist(),
                                      rel.tolist()):
        name = path.rpartition("/")[2]
        if name in listings[(run, folder)] and os.path.isfile(os.path.join(run, folder, name)):
            found[pos] = True
    return found


def _order(df: pd.DataFrame) -> list[str]:
    return settings_order(df)


def preference(collected: Collected, labels: list[str], baseline: str | None,
               n_resamples: int = N_RESAMPLES, seed: int = SEED) -> pd.DataFrame:
    """Figure 4 as a long table: one row per (setting with a choice, behaviour)."""
    t = collected.turns
    base_share = _shares(t[t["label"] == baseline]) if baseline is not None else {}
    frames = []
    for lab in labels:
        sub = t[(t["label"] == lab) & (t["n"] > 1) & t["pick"].notna() & ~t["agreed"].astype(bool)]
        if sub.empty:
            continue
        turns = [{"candidate_labels": row.labels, "selected_index": int(row.pick), "task": row.task_id}
                 for row in sub.itertuples(index=False)]
        sig = preference_significance(turns, n_resamples=n_resamples, seed=seed).reset_index()
        ex = collected.excluded.get(lab, Counter())
        sig.insert(0, "setting", lab)
        sig["behaviour"] = [BEHAVIOUR_TITLES[b] for b in sig["behaviour"]]
        sig = sig.rename(columns={"selected_share": "selected", "uniform_share": "uniform", "lo": "ci_lo",
                                  "hi": "ci_hi", "n_tasks": "tasks", "n_turns": "turns"})
        sig["excluded_turns"] = int(ex["selector_failed"] + ex["pick_unknown"] + ex["agreed"])
        if base_share:
            sig["baseline_share"] = [base_share.get(b, np.nan) for b in BEHAVIOURS]
        frames.append(sig)
    if not frames:
        return pd.DataFrame()
    return pd.concat(frames, ignore_index=True)


def _shares(sub: pd.DataFrame) -> dict[str, float]:
    picked = sub["picked_labels"].dropna()
    if picked.empty:
        return {}
    return {b: float(np.mean([b in p for p in picked])) for b in BEHAVIOURS}


def behaviour_shares(collected: Collected, labels: list[str]) -> tuple[pd.DataFrame, dict[str, int]]:
    """Share of executed turns with each behaviour, one column per setting; and turns counted."""
    t = collected.turns
    out = pd.DataFrame({"behaviour": [BEHAVIOUR_TITLES[b] for b in BEHAVIOURS]})
    counts = {}
    for lab in labels:
        shares = _shares(t[t["label"] == lab])
        if shares:
            out[lab] = [shares[b] for b in BEHAVIOURS]
            counts[lab] = int(t[(t["label"] == lab)]["picked_labels"].notna().sum())
    if len(out.columns) == 1:
        return pd.DataFrame(), {}
    return out, counts


def turn_size(collected: Collected, labels: list[str], baseline: str | None,
              n_resamples: int = N_RESAMPLES, seed: int = SEED) -> pd.DataFrame:
    """Figure 5: reasoning tokens and command characters per turn, pick vs candidates vs baseline."""
    t = collected.turns[collected.turns["pick"].notna()]
    if t.empty:
        return pd.DataFrame()
    rows = []
    metrics_ = (("reasoning tokens / turn", "reasoning_pick", "reasoning_mean"),
                ("command chars / turn", "chars_pick", "chars_mean"))
    per_task = {lab: t[t["label"] == lab].groupby("task_id")[["reasoning_pick", "reasoning_mean", "chars_pick",
                                                                 "chars_mean"]].mean() for lab in labels}
    for name, pick_col, mean_col in metrics_:
        for lab in labels:
            pt = per_task[lab]
            if pt.empty:
                continue
            src = collected.sources.get(lab, Counter())
            row = {"metric": name, "setting": lab, "selected": float(pt[pick_col].mean()),
                   "candidates": float(pt[mean_col].mean()), "baseline": np.nan, "diff_vs_baseline": np.nan,
                   "ci_lo": np.nan, "ci_hi": np.nan, "p_value": np.nan, "tasks": len(pt),
                   "turns": int((t["label"] == lab).sum()),
                   "source": ", ".join(f"{k} {v}" for k, v in src.most_common()) if pick_col.startswith("reason")
                   else "command text"}
            if baseline is not None and baseline in per_task and not per_task[baseline].empty:
                base = per_task[baseline]
                shared = sorted(set(pt.index) & set(base.index))
                if shared:
                    row["baseline"] = float(base.loc[shared, pick_col].mean())
                if lab != baseline and len(shared) >= 1:
                    res = metrics.paired_bootstrap(base.loc[shared, pick_col].to_numpy(float),
                                                   pt.loc[shared, pick_col].to_numpy(float),
                                                   n_resamples=n_resamples, seed=seed)
                    row.update(diff_vs_baseline=res.diff, ci_lo=res.lo, ci_hi=res.hi, p_value=res.p_value)
            rows.append(row)
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------
# Report section
# ---------------------------------------------------------------------------------------------


def behaviour_sections(ctx: ReportContext) -> None:
    collected = collect(ctx.df)
    labels = _order(ctx.df)
    ctx.behaviours = collected  # type: ignore[attr-defined]  # for plots.py and html.py
    if collected.turns.empty:
        return
    pref = preference(collected, labels, ctx.baseline)
    excluded_note = "; ".join(
        f"{lab}: {c['selector_failed']} turns where every selector call failed"
        + (f", {c['pick_unknown']} with no recorded pick" if c["pick_unknown"] else "")
        for lab, c in collected.excluded.items() if c["selector_failed"] or c["pick_unknown"]) or "none"
    if not pref.empty:
        ctx.sections.append(Section(
            "behaviour_preference", "Selector preference per behaviour (turn-bon Figure 4)", pref,
            "selected: share of turns whose executed pick shows the behaviour; uniform: expected share if "
            "one of the turn's N candidates were picked uniformly at random; difference = selected - uniform, "
            f"with a percentile interval and two-sided p from a paired bootstrap over tasks ({N_RESAMPLES:,} "
            f"resamples, seed {SEED}); baseline_share: share of the baseline's turns with the behaviour. "
            f"Labels follow Table 4 / Appendix D.1. Excluded turns: {excluded_note}.",
            ("selected", "uniform", "difference", "ci_lo", "ci_hi", "baseline_share")))
    shares, counts = behaviour_shares(collected, labels)
    if not shares.empty:
        ctx.sections.append(Section(
            "behaviour_shares", "Behaviours of executed turns per setting", shares,
            "Share of executed turns (the pick that ran; selector-failed turns excluded) showing each "
            "Table 4 behaviour. Turns counted: " + ", ".join(f"{k} {v}" for k, v in counts.items()) + ".",
            tuple(c for c in shares.columns if c != "behaviour")))
    size = turn_size(collected, labels, ctx.baseline)
    if not size.empty:
        missing = sum(collected.missing.values())
        ctx.sections.append(Section(
            "turn_size", "Reasoning tokens and command characters per turn (turn-bon Figure 5)", size,
            "selected: the executed pick; candidates: mean over all candidates of the turn (uniform choice); "
            "baseline: the baseline setting on the same tasks; means over tasks of each task's mean per turn; "
            f"diff_vs_baseline with a paired bootstrap over tasks ({N_RESAMPLES:,} resamples). Reasoning "
            "tokens: provider-reported, else the reasoning text or (text-format agents) the visible thought "
            "counted with a tokenizer -- source counts candidates by origin. Command chars: length of the "
            "command (0 for a response that cannot run)."
            + (f" Tokenizer: {', '.join(f'{k} ({v} texts)' for k, v in collected.tokenizer.items())}."
               if collected.tokenizer else "")
            + (f" {missing} trials had no trajectory file and are left out." if missing else "")))
    if ctx.out_dir is not None:
        ctx.out_dir.mkdir(parents=True, exist_ok=True)
        dump = collected.turns.drop(columns=["labels"]).copy()
        dump["candidate_labels"] = [";".join("|".join(sorted(s)) or "-" for s in ls)
                                    for ls in collected.turns["labels"]]
        dump["picked_labels"] = ["|".join(p) if isinstance(p, list) else "" for p in dump["picked_labels"]]
        dump.to_csv(ctx.out_dir / "behaviour_turns.csv", index=False)


def iter_labelled(df: pd.DataFrame) -> Iterable[tuple[Any, LabelledTurn]]:
    """(trial row, labelled turn) for every turn of every trial in the frame."""
    for r in df.itertuples(index=False):
        path = Path(r.run_dir) / str(r.trajectory_path or "")
        if path.is_file():
            for lt in label_trial(path):
                yield r, lt
