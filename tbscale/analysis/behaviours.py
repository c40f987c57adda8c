"""Selector preference over behaviours (turn-bon Figure 4): for every turn, the share of
selected candidates showing a behaviour against the share expected if one of the N candidates
were picked uniformly at random, with a paired bootstrap over tasks. The labels themselves come
from tbscale.shell (Table 4). Turns whose `selected_index` is None are skipped (the paper excludes
turns where every selector call failed: it is unknown which candidate ran)."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from tbscale.analysis.metrics import paired_bootstrap
from tbscale.shell import BEHAVIOURS


@dataclass(frozen=True)
class TurnLabels:
    """Labels of all N candidates at one turn, which one ran, and (optionally) the task."""

    candidate_labels: Sequence[AbstractSet[str]]
    selected_index: int | None
    task: Hashable | None = None


TurnLike = TurnLabels | Mapping[str, Any]


def _coerce(turn: TurnLike) -> TurnLabels:
    if isinstance(turn, TurnLabels):
        return turn
    return TurnLabels(turn["candidate_labels"], turn["selected_index"], turn.get("task"))


def _turn_matrix(turns: Iterable[TurnLike]) -> tuple[list[Hashable | None], np.ndarray, np.ndarray]:
    """Per usable turn: task, selected indicator per behaviour, uniform-choice share per behaviour."""
    tasks: list[Hashable | None] = []
    selected_rows: list[list[float]] = []
    uniform_rows: list[list[float]] = []
    for raw in turns:
        turn = _coerce(raw)
        if turn.selected_index is None:
            continue
        candidates = list(turn.candidate_labels)
        if not candidates:
            raise ValueError("a turn has no candidates")
        if not 0 <= turn.selected_index < len(candidates):
            raise ValueError(
                f"selected_index {turn.selected_index} out of range for {len(candidates)} candidates"
            )
        chosen = candidates[turn.selected_index]
        tasks.append(turn.task)
        selected_rows.append([float(b in chosen) for b in BEHAVIOURS])
        uniform_rows.append([sum(b in c for c in candidates) / len(candidates) for b in BEHAVIOURS])
    if not tasks:
        raise ValueError("no turn with a known selected candidate")
    return tasks, np.array(selected_rows), np.array(uniform_rows)


def preference_table(turns: Iterable[TurnLike]) -> pd.DataFrame:
    """Figure 4: per behaviour, share of turns whose pick shows it vs. the uniform-choice expectation.

    Shares are pooled over turns (each turn weighs the same), as in the paper. Index: behaviour, in
    Figure 4 order; columns: ``selected_share``, ``uniform_share``, ``difference``, ``n_turns``.
    """
    _, selected, uniform = _turn_matrix(turns)
    table = pd.DataFrame(
        {
            "selected_share": selected.mean(axis=0),
            "uniform_share": uniform.mean(axis=0),
        },
        index=pd.Index(BEHAVIOURS, name="behaviour"),
    )
    table["difference"] = table["selected_share"] - table["uniform_share"]
    table["n_turns"] = selected.shape[0]
    return table


def preference_by_task(turns_with_task_id: Iterable[TurnLike]) -> pd.DataFrame:
    """Per (task, behaviour): selected and uniform shares over that task's turns, and ``n_turns``.

    This is the input of a paired bootstrap over tasks (``a=uniform_share``, ``b=selected_share``).
    Weighting tasks by ``n_turns`` reproduces the pooled shares of :func:`preference_table`.
    """
    tasks, selected, uniform = _turn_matrix(turns_with_task_id)
    if any(task is None for task in tasks):
        raise ValueError("every turn needs a task id for the per-task table")
    frames = []
    for b_index, behaviour in enumerate(BEHAVIOURS):
        frames.append(
            pd.DataFrame(
                {
                    "task": tasks,
                    "behaviour": behaviour,
                    "selected": selected[:, b_index],
                    "uniform": uniform[:, b_index],
                }
            )
        )
    long = pd.concat(frames, ignore_index=True)
    grouped = long.groupby(["task", "behaviour"], sort=False)
    out = grouped.agg(
        selected_share=("selected", "mean"),
        uniform_share=("uniform", "mean"),
        n_turns=("selected", "size"),
    ).reset_index()
    out["behaviour"] = pd.Categorical(out["behaviour"], categories=list(BEHAVIOURS), ordered=True)
    return out.sort_values(["behaviour", "task"], kind="stable").reset_index(drop=True)


def preference_significance(
    turns_with_task_id: Iterable[TurnLike],
    *,
    n_resamples: int = 10_000,
    seed: int = 0,
    alpha: float = 0.05,
) -> pd.DataFrame:
    """Figure 4 with its significance test: pooled shares plus a paired bootstrap over tasks.

    Tasks are weighted by their number of turns so the tested difference is exactly the pooled
    ``difference`` of :func:`preference_table`, while resampling whole tasks keeps the correlation
    between turns of one task out of the p-value.
    """
    by_task = preference_by_task(turns_with_task_id)
    rows = []
    for behaviour in BEHAVIOURS:
        part = by_task[by_task["behaviour"] == behaviour]
        weights = part["n_turns"].to_numpy(dtype=float)
        result = paired_bootstrap(
            part["uniform_share"].to_numpy(),
            part["selected_share"].to_numpy(),
            n_resamples=n_resamples,
            seed=seed,
            alpha=alpha,
            weights=weights,
        )
        rows.append(
            {
                "behaviour": behaviour,
                "selected_share": float(np.average(part["selected_share"], weights=weights)),
                "uniform_share": float(np.average(part["uniform_share"], weights=weights)),
                "difference": result.diff,
                "lo": result.lo,
                "hi": result.hi,
                "p_value": result.p_value,
                "n_tasks": len(part),
                "n_turns": int(weights.sum()),
            }
        )
    return pd.DataFrame(rows).set_index("behaviour")
