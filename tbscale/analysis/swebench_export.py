"""Predictions for swebench's own evaluation from a finished run, or from an imported one whose
source holds the patch (a mini-swe-agent run keeps it in `info.submission`).

`python -m swebench.harness.run_evaluation` keeps one patch per instance, so a run with several
trials (or settings) becomes one predictions file per (setting, trial index): each line
{"instance_id", "model_name_or_path", "model_patch"}. The patch of a trial is the one its final
attempt submitted (for strategies with several attempts, the one the strategy returned), read from
the `verifier` event of the trial's trajectory. A trial without one (its sandbox died before
grading) exports an empty patch, which swebench counts as unresolved, like tbscale did.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from tbscale.errors import TbscaleError
from tbscale.runfiles import read_events, read_trials
from tbscale.types.events import VerifierEvent
from tbscale.types.results import TrialResult

DEFAULT_MODEL_NAME = "{run}__{setting}__t{trial}"


class Prediction(TypedDict):
    """One line of a SWE-bench predictions file, as swebench's harness reads it."""

    instance_id: str
    model_name_or_path: str
    model_patch: str


@dataclass
class PredictionFile:
    setting: str
    trial: int
    path: Path
    predictions: list[Prediction] = field(default_factory=list)

    @property
    def empty(self) -> int:
        return sum(1 for p in self.predictions if not (p["model_patch"] or "").strip())


def _final_patch(run_dir: Path, row: TrialResult, cache: dict[str, list[VerifierEvent]]) -> str | None:
    rel = row.trajectory_path
    if not rel:
        return None
    if rel not in cache:
        path = run_dir / rel
        cache[rel] = [e for e in read_events(path) if isinstance(e, VerifierEvent)] if path.exists() else []
    # A line that does not name its final attempt: the last verifier's patch of any attempt.
    final = row.final_attempt if "final_attempt" in row.model_fields_set else None
    patch = None
    for e in cache[rel]:
        if final is None or e.attempt == final:
            patch = e.details.get("model_patch", patch)
    return patch


def collect(run_dir: Path, settings: list[str] | None = None,
            model_name: str = DEFAULT_MODEL_NAME) -> list[PredictionFile]:
    """Predictions of the run's SWE-bench trials, grouped by (setting, trial index)."""
    run_dir = Path(run_dir)
    index = run_dir / "trials.jsonl"
    if not index.exists():
        raise TbscaleError(f"{run_dir}: no trials.jsonl (not a run folder, or no trial has finished)")
    latest: dict[tuple[str, str, int], TrialResult] = {}
    for row in read_trials(index):
        # tbscale's own SWE-bench trials, and imported trials (mini-swe-agent, Harbor): an imported
        # trial's patch is what its source submitted, kept in its verifier event.
        if row.task_format != "swebench" and not row.imported_from:
            continue
        if settings and row.setting not in settings:
            continue
        latest[(row.setting, row.task_id, row.trial)] = row  # a later line wins
    if not latest:
        what = f" for settings {', '.join(settings)}" if settings else ""
        raise TbscaleError(f"{run_dir}: no SWE-bench trials{what} in trials.jsonl")
    cache: dict[str, list[VerifierEvent]] = {}
    files: dict[tuple[str, int], PredictionFile] = {}
    imported = {k for k, row in latest.items() if row.task_format != "swebench"}
    if imported and not any(_final_patch(run_dir, latest[k], cache) is not None for k in imported):
        formats = sorted({str(latest[k].imported_from) for k in imported})
        raise TbscaleError(f"{run_dir}: imported from {', '.join(formats)}, whose files hold no submitted patch "
                           "(mini-swe-agent keeps it in `info.submission`); nothing to export")
    for (setting, task_id, trial), row in sorted(latest.items()):
        try:
            name = model_name.format(run=run_dir.name, setting=setting, trial=trial)
        except (KeyError, IndexError, ValueError) as e:
            raise TbscaleError(f"--model-name: cannot fill {model_name!r} ({type(e).__name__}: {e}); "
                               "fields: run, setting, trial") from None
        f = files.setdefault((setting, trial), PredictionFile(setting, trial, Path()))
        f.predictions.append({"instance_id": task_id, "model_name_or_path": name,
                              "model_patch": _final_patch(run_dir, row, cache) or ""})
    return [files[k] for k in sorted(files)]


def write(files: list[PredictionFile], out_dir: Path) -> list[PredictionFile]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for f in files:
        f.path = out_dir / f"{f.setting}__t{f.trial}.jsonl"
        tmp = f.path.with_suffix(".jsonl.tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            for p in f.predictions:
                fh.write(json.dumps(p, ensure_ascii=False) + "\n")
        tmp.replace(f.path)
    return files


def export_predictions(run_dir: Path, out_dir: Path | None = None, settings: list[str] | None = None,
                       model_name: str = DEFAULT_MODEL_NAME) -> list[PredictionFile]:
    run_dir = Path(run_dir)
    return write(collect(run_dir, settings, model_name), out_dir or run_dir / "swebench_predictions")
