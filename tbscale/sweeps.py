"""Sweeps: run a grid of configurations (e.g. nightly in CI) and keep a history of the results.

A sweep file names experiment configs and a grid of overrides (dotted paths into the config,
list indices as numbers: `settings.1.policy.n`). Every config x grid point is one run under
`<output_dir>/<date>/<run name>`; runs resume like any other, so an interrupted nightly sweep
picks up where it stopped. After each run, one line per setting is appended to the history
file (date, commit, grid point, pass@1 with its interval, tokens, endings), which
`tbscale history` shows as a table across nights.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator

from tbscale.config import Experiment, beside_config, read_yaml_mapping, validate_file
from tbscale.errors import TbscaleError


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
        try:
            doc = yaml.safe_load(path.read_text())
        except FileNotFoundError:
            raise TbscaleError(f"{path}: no such file (named in the sweep's configs)") from None
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


def history_lines(run_dir: Path, sweep: Sweep, point: dict[str, Any], date: str) -> list[dict[str, Any]]:
    from tbscale.analysis import tables

    df = tables.load_trials([run_dir])
    summary = tables.summary(df).set_index("setting")
    costs = tables.costs(df, tables.baseline_label(df)).set_index("setting")
    endings = tables.endings(df).set_index("setting")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    lines = []
    for setting, row in summary.iterrows():
        lines.append({
            "sweep": sweep.name, "date": date, "recorded_at": datetime.now(timezone.utc).isoformat(),
            "git_commit": manifest.get("git_commit"), "run": run_dir.name, "run_dir": str(run_dir),
            "grid_point": point, "setting": setting, "tasks": int(row["tasks"]), "trials": int(row["trials"]),
            "pass_at_1": row["pass@1"], "ci_lo": row["ci_lo"], "ci_hi": row["ci_hi"],
            "turns_mean": row["turns_mean"], "total_out_tokens": costs.loc[setting, "total_out"],
            "cost_usd": costs.loc[setting, "cost_usd"],
            "endings": {k: endings.loc[setting, k] for k in tables.ENDINGS},
            "simulated": bool(manifest.get("simulated_models")),
        })
    return lines
