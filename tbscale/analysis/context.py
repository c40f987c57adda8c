"""What a report is built from and into: the trial table, the run folders, where files go, and
the sections (tables) and images the analyses add."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd


@dataclass
class Section:
    key: str
    title: str
    frame: pd.DataFrame
    note: str = ""
    percent_cols: tuple[str, ...] = ()


@dataclass
class ReportContext:
    df: pd.DataFrame
    run_dirs: list[Path]
    out_dir: Path
    baseline: str | None
    compare: list[str] | None = None
    plots: bool = True
    sections: list[Section] = field(default_factory=list)
    images: list[tuple[str, Path]] = field(default_factory=list)
    simulated: bool = False
    banners: list[str] = field(default_factory=list)  # warnings shown above every table
    # Every trial, infrastructure errors included; `df` holds the trials that measure the agent.
    all_trials: pd.DataFrame | None = None
    # (plain, adaptive) Turn-BoN settings to compare; default: found by N (adaptive_report.py).
    adaptive_pair: list[str] | None = None
    # Names --compare may use for a run folder (a path given to --import), mapped to that folder.
    run_aliases: dict[str, Path] = field(default_factory=dict)
    # What each run's manifest says its plan holds (rundata.trials.RunPlan): planned against finished.
    plans: list[Any] = field(default_factory=list)


def fmt(v: Any, pct: bool) -> str:
    """A table cell: percentages with one decimal, large numbers with separators, NaN as `-`."""
    if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float):
        return f"{100 * v:.1f}%" if pct else (f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}")
    return str(v)
