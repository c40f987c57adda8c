"""Sweeps: run a grid of configurations (e.g. nightly in CI) and keep a history of the results.

A sweep file names experiment configs and a grid of overrides (dotted paths into the config,
list indices as numbers: `settings.1.policy.n`). Every config x grid point is one run under
`<output_dir>/<date>/<run name>`; runs resume like any other, so an interrupted nightly sweep
picks up where it stopped. After each run, one line per setting is appended to the history
file (date, commit, grid point, pass@1 with its interval, tokens, endings), which
`tbscale history` shows as a table across nights. Each line also keeps the setting's pass rate per
task, so two nights of one setting can be compared task by task: `tbscale history --check` (the
nightly gate) flags a setting whose newest pass@1 fell below its previous one by more than the
paired bootstrap interval (see `regressions`).
"""

from __future__ import annotations

import copy
import itertools
import logging
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from tbscale.config import Experiment, beside_config, read_yaml_mapping, validate_file
from tbscale.config.yamlfile import read_yaml_file
from tbscale.errors import TbscaleError
from tbscale.jsonl import ReadProblems, numbered_jsonl
from tbscale.logs import AppendedLines, model_line
from tbscale.names import name_problem
from tbscale.runfiles import manifest_of

log = logging.getLogger("tbscale")


class Sweep(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    configs: list[str] = Field(min_length=1)
    grid: dict[str, list[Any]] = Field(default_factory=dict)
    output_dir: str = "results/sweeps"
    history: str = "results/history.jsonl"
    date: str | None = Field(None, description="folder date; default today (UTC)")

    @field_validator("date", mode="before")
    @classmethod
    def _date_as_text(cls, v: Any) -> Any:
        return v.isoformat() if hasattr(v, "isoformat") else v  # YAML reads 2026-11-30 as a date

    @field_validator("date")
    @classmethod
    def _date_is_a_folder_name(cls, v: str | None) -> str | None:
        problem = None if v is None else name_problem(v)  # it names the runs' folder
        if problem:
            raise ValueError(f"{v!r} {problem}")
        return v


def load_sweep(path: Path) -> Sweep:
    sweep: Sweep = validate_file(Sweep, read_yaml_mapping(path), path)
    for key, values in sweep.grid.items():
        if not values:
            raise TbscaleError(f"{path}: grid.{key}: needs at least one value")
    base = Path(path).parent
    sweep.configs = [c if Path(c).exists() else str(base / c) for c in sweep.configs]
    return sweep


def set_path(doc: dict[str, Any], dotted: str, value: Any) -> None:
    """Set `a.b.0.c` in a nested dict/list document, creating mappings on the way."""
    parts = dotted.split(".")
    node: Any = doc
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                raise TbscaleError(f"grid key {dotted!r}: {part!r} is not an index of a {len(node)}-item list")
            if last:
                node[int(part)] = value
            else:
                node = node[int(part)]
        elif isinstance(node, dict):
            if last:
                node[part] = value
            else:
                node = node.setdefault(part, {})
        else:
            raise TbscaleError(f"grid key {dotted!r}: cannot descend into {type(node).__name__} at {part!r}")


def grid_points(grid: dict[str, list[Any]]) -> list[dict[str, Any]]:
    keys = list(grid)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(grid[k] for k in keys))] or [{}]


def point_suffix(point: dict[str, Any]) -> str:
    parts = [f"{k.split('.')[-1]}-{v}" for k, v in point.items()]
    return re.sub(r"[^A-Za-z0-9_.-]", "_", "_".join(parts))


def expand(sweep: Sweep) -> list[tuple[str, dict[str, Any], dict[str, Any], Path]]:
    """(run name, config document, grid point, config path) for every config x grid point."""
    out = []
    for cfg in sweep.configs:
        path = Path(cfg)
        if not path.is_file():
            raise TbscaleError(f"{path}: no such file (named in the sweep's configs)")
        doc = read_yaml_file(path)
        if not isinstance(doc, dict):
            raise TbscaleError(f"{path}: the top level must be a mapping of keys")
        for point in grid_points(sweep.grid):
            d = copy.deepcopy(doc)
            for k, v in point.items():
                set_path(d, k, v)
            suffix = point_suffix(point)
            name = f"{d.get('name', path.stem)}{'__' + suffix if suffix else ''}"
            d["name"] = name
            out.append((name, d, point, path))
    return out


def experiment_of(doc: dict[str, Any], cfg_path: Path, point: dict[str, Any]) -> Experiment:
    """A grid point's config document as an Experiment; its task path is read relative to the
    config's folder, as `tbscale run` reads it."""
    if isinstance(doc.get("tasks"), dict) and doc["tasks"].get("path"):
        doc["tasks"]["path"] = beside_config(Path(cfg_path), doc["tasks"]["path"])
    return validate_file(Experiment, doc, f"{cfg_path} (grid point {point})")


Rate = Field(ge=0.0, le=1.0, allow_inf_nan=False)


class HistoryLine(BaseModel):
    """One line of a sweep's history file: one setting of one run of one night, written by
    `tbscale sweep` and read by `tbscale history` and its gate. Lines written by older versions may
    lack the optional fields; keys this version does not know are kept (history files outlive
    versions). docs/formats.md lists the fields; a test checks the list against this model."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)
    sweep: str
    date: str  # the sweep's folder date
    recorded_at: str | None = None
    git_commit: str | None = None
    run: str  # the run's name: config name and grid point, without the date
    run_dir: str | None = None
    grid_point: dict[str, Any] = Field(default_factory=dict)  # dotted config path -> the value it was given
    setting: str
    tasks: int | None = None
    trials: int | None = None
    infra_errors: int | None = None
    pass_at_1: float = Rate
    ci_lo: float = Rate
    ci_hi: float = Rate
    turns_mean: float = Field(0.0, ge=0)
    total_out_tokens: float = Field(0.0, ge=0)
    cost_usd: float | None = Field(None, allow_inf_nan=True)  # NaN: some call's price was unknown
    endings: dict[str, float] = Field(default_factory=dict)  # ending -> share of the setting's trials
    simulated: bool = False
    # task -> pass rate over the same trials as pass_at_1: what the paired regression check compares
    task_pass_rates: dict[str, float] | None = None

    @field_validator("task_pass_rates")
    @classmethod
    def _rates(cls, v: dict[str, float] | None) -> dict[str, float] | None:
        for task, rate in (v or {}).items():
            if not 0.0 <= rate <= 1.0:
                raise ValueError(f"{task}: {rate} is not a pass rate")
        return v


def history_lines(run_dir: Path, sweep: Sweep, point: dict[str, Any], date: str,
                  warn: Callable[[str], None] | None = None) -> list[HistoryLine]:
    """One history line per setting of a finished run. A setting with no scored trial (every one an
    infrastructure error) has no pass@1, so no line: `warn` is told which."""
    from tbscale.analysis import tables

    every = tables.load_trials([run_dir])
    # Scored as the report scores them: a trial the harness failed is not an agent failure, so
    # pass rates (and the regression gate built on them) leave infrastructure errors out.
    df = tables.scored(every)
    summary = tables.summary(df, all_trials=every).set_index("setting")
    costs = tables.costs(df, tables.baseline_label(df)).set_index("setting")
    endings = tables.endings(every).set_index("setting")
    manifest = manifest_of(run_dir)
    lines = []
    for setting, row in summary.iterrows():
        try:
            lines.append(HistoryLine(
                sweep=sweep.name, date=date, recorded_at=datetime.now(timezone.utc).isoformat(),
                git_commit=manifest.git_commit if manifest else None, run=run_dir.name, run_dir=str(run_dir),
                grid_point=point, setting=setting, tasks=int(row["tasks"]), trials=int(row["trials"]),
                infra_errors=int(row["infra_errors"]),
                pass_at_1=row["pass@1"], ci_lo=row["ci_lo"], ci_hi=row["ci_hi"],
                turns_mean=row["turns_mean"], total_out_tokens=costs.loc[setting, "total_out"],
                cost_usd=costs.loc[setting, "cost_usd"],
                endings={k: endings.loc[setting, k] for k in tables.ENDINGS},
                simulated=bool(manifest and manifest.simulated_models),
                task_pass_rates={str(t): round(float(r), 6) for t, r in
                                 tables.per_task(df, setting).set_index("task_id")["pass_rate"].items()}))
        except ValidationError as e:
            (warn or log.warning)(f"{run_dir}: setting {setting}: no history line ({_reason(e)}; every trial an "
                                  "infrastructure error?)")
    return lines


class HistoryFile(AppendedLines):
    """A sweep's history file: lines appended one at a time, synced, after a torn last line is cut."""

    def append(self, line: HistoryLine) -> None:
        self.append_line(model_line(line))


def read_history(path: Path, problems: ReadProblems | None = None) -> list[HistoryLine]:
    """The readable lines of a history file; unreadable ones are noted in `problems` with their
    line numbers (and warned about when no `problems` is given)."""
    own = problems is None
    problems = problems or ReadProblems(Path(path))
    lines = []
    for n, obj in numbered_jsonl(path, problems):
        try:
            lines.append(HistoryLine.model_validate(obj))
        except ValidationError as e:
            problems.corrupt.append((n, _reason(e)))
    if own:
        problems.warn()
    return lines


def _reason(e: ValidationError) -> str:
    first = e.errors()[0]
    return f"{'.'.join(map(str, first['loc']))}: {first['msg']}"


# ---- the nightly regression gate ---------------------------------------------------------------

def series_key(line: HistoryLine) -> tuple[str, str, str]:
    """What makes two history lines the same tracked setting on different dates: the sweep, the
    run name (config name and grid point, without the date) and the setting."""
    return (line.sweep, line.run, line.setting)


@dataclass
class Comparison:
    """The newest line of one tracked setting against the one before it."""

    sweep: str
    run: str
    setting: str
    previous_date: str
    date: str
    previous: float  # pass@1 over the shared tasks
    current: float
    diff: float  # current - previous, paired over the shared tasks
    lo: float
    hi: float
    tasks: int  # shared tasks
    regression: bool
    note: str = ""


def compare_lines(prev: HistoryLine, new: HistoryLine, alpha: float = 0.05, n_resamples: int = 10_000,
                  seed: int = 0, min_tasks: int = 2) -> Comparison:
    """Paired bootstrap over the tasks both lines scored of (new - previous) per-task pass rate.
    A regression is a drop whose whole (1 - alpha) interval lies below zero: `hi < 0`. A drop
    within the interval is noise and passes; so does a comparison that cannot be made (lines
    without per-task rates, fewer than `min_tasks` shared tasks), with a note saying why."""
    from tbscale.analysis.metrics import paired_bootstrap

    sweep, run, setting = series_key(new)
    base = dict(sweep=sweep, run=run, setting=setting, previous_date=prev.date, date=new.date)
    a, b = prev.task_pass_rates, new.task_pass_rates
    if not a or not b:
        nan = float("nan")
        return Comparison(**base, previous=prev.pass_at_1, current=new.pass_at_1, diff=nan,
                          lo=nan, hi=nan, tasks=0, regression=False, note="no per-task pass rates: not compared")
    shared = sorted(set(a) & set(b))
    pa, pb = [float(a[t]) for t in shared], [float(b[t]) for t in shared]
    if len(shared) < min_tasks:
        mean = lambda xs: sum(xs) / len(xs) if xs else float("nan")  # noqa: E731
        return Comparison(**base, previous=mean(pa), current=mean(pb), diff=mean(pb) - mean(pa), lo=float("nan"),
                          hi=float("nan"), tasks=len(shared), regression=False,
                          note=f"{len(shared)} shared task(s), fewer than {min_tasks}: not compared")
    res = paired_bootstrap(pa, pb, n_resamples=n_resamples, seed=seed, alpha=alpha)
    return Comparison(**base, previous=sum(pa) / len(pa), current=sum(pb) / len(pb), diff=res.diff, lo=res.lo,
                      hi=res.hi, tasks=len(shared), regression=bool(res.hi < 0))


def regressions(lines: list[HistoryLine], sweep: str | None = None, alpha: float = 0.05,
                n_resamples: int = 10_000, seed: int = 0, min_tasks: int = 2) -> list[Comparison]:
    """For every tracked setting with lines on two or more dates, its newest line against the line
    of the latest earlier date (a rerun on one date supersedes that date's earlier line)."""
    by_series: dict[tuple, dict[str, HistoryLine]] = {}
    for line in lines:
        if sweep is not None and line.sweep != sweep:
            continue
        by_series.setdefault(series_key(line), {})[line.date] = line  # later lines win
    out = []
    for _, dated in sorted(by_series.items()):
        if len(dated) < 2:
            continue
        prev_date, new_date = sorted(dated)[-2:]
        out.append(compare_lines(dated[prev_date], dated[new_date], alpha, n_resamples, seed, min_tasks))
    return out
