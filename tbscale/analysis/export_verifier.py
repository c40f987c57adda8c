"""`tbscale export verifier-data`: every logged verifier, judge and summarizer call of finished runs
as a JSONL training set for verifier distillation (mid-harness.txt: "collect pairwise responses
from a strong frontier model ... fine-tune the verifier to generate the teacher model's
reasoning, scores, and preference labels").

Each `verifier_call` event in trajectories/**/*.jsonl becomes one line:

    {"messages": [...], "response": "...", "parsed": {...}, "role": "verifier", "method": "pairwise",
     "model": "...", "self_verification": false, "run": ..., "task_id": ..., "setting": ..., "trial": ...,
     "attempt": 0, "turn": 5, "simulated": false, "outcome": {"reward": 1.0, "ending": "pass"}, ...}

`messages` + `response` is the supervised pair; `parsed` holds the scores (pointwise `score`,
pairwise `score_a`/`score_b`/`preference` and the `margin` used), the listwise pick, or a judge's
vote. `outcome` is the verifier result of the attempt the call was made in (for action
verification; judge and summarizer calls belong to the trial and carry `labels` instead: the
shown attempts and whether each passed). Outcomes are known only after the fact; they are there
for filtering and analysis, never shown to the model that made the call. Runs made with simulated
models are marked `simulated: true` (and left out unless asked for).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

from typing_extensions import NotRequired, TypedDict

from tbscale.errors import TbscaleError
from tbscale.logs import dumps
from tbscale.runfiles import read_events
from tbscale.types.events import AttemptEnd, Start, VerifierCall
from tbscale.types.messages import ChatMessage

_KEEP = ("candidate", "sample", "pair", "margin", "shown", "round", "group", "vote", "of_attempt", "stage",
         "self_verification", "calls", "error")


class Outcome(TypedDict):
    reward: float | None
    ending: str


class Labels(TypedDict):
    order: NotRequired[list[int]]  # a judge's vote: the attempts in the order shown ...
    passed: list[bool] | bool  # ... and whether each passed; a summary: whether its attempt passed


class ExportLine(TypedDict):
    """One line of the export: the call (its `verifier_call` event's fields), its trial, the outcome
    of its attempt, the labels of a judge's or summarizer's call, and of _KEEP what the event has."""

    messages: list[ChatMessage] | None
    response: str | None
    parsed: Any  # the reply as the calling strategy parsed it
    role: str
    method: str
    model: str | None
    run: str
    task_id: str | None
    setting: str | None
    trial: int | None
    trial_key: str | None
    attempt: int | None
    turn: int | None
    simulated: bool
    outcome: Outcome | None
    labels: NotRequired[Labels]
    candidate: NotRequired[int | None]
    sample: NotRequired[int | None]
    pair: NotRequired[list[int] | None]
    margin: NotRequired[float | None]
    shown: NotRequired[list[int] | None]
    round: NotRequired[int | None]
    group: NotRequired[int | None]
    vote: NotRequired[int | None]
    of_attempt: NotRequired[int | None]
    stage: NotRequired[str | None]
    self_verification: NotRequired[bool | None]
    calls: NotRequired[int | None]
    error: NotRequired[str | None]


def trajectory_files(run_dir: Path) -> list[Path]:
    return sorted((run_dir / "trajectories").glob("**/*.jsonl"))


def calls_in_trajectory(path: Path, run: str) -> Iterator[ExportLine]:
    """Every verifier, judge and summarizer call of one trajectory, as an export line: the call, its
    trial, and the outcome of the attempt it was about (its label for training)."""
    events = list(read_events(path))
    if not events:
        return
    start = next((e for e in events if isinstance(e, Start)), None)
    outcomes: dict[int | None, Outcome] = {e.attempt: {"reward": e.reward, "ending": e.ending} for e in events if isinstance(e, AttemptEnd)}
    for e in events:
        if not isinstance(e, VerifierCall):
            continue
        attempt = e.attempt
        row: ExportLine = {"messages": e.messages, "response": e.response, "parsed": e.parsed,
               "role": e.role, "method": e.method, "model": e.model,
               "run": run, "task_id": start.task_id if start else None, "setting": start.setting if start else None,
               "trial": start.trial if start else None, "trial_key": start.trial_key if start else None,
               "attempt": attempt, "turn": e.turn, "simulated": bool(start and start.simulated),
               "outcome": outcomes.get(attempt) if attempt is not None and attempt >= 0 else None}
        row.update({k: getattr(e, k) for k in _KEEP if k in e.model_fields_set})
        parsed = e.parsed or {}
        if e.role == "judge" and isinstance(parsed, dict) and parsed.get("order"):
            row["labels"] = {"order": parsed["order"],
                             "passed": [(outcomes.get(i) or {}).get("ending") == "pass" for i in parsed["order"]]}
        if e.role == "summarizer" and e.of_attempt is not None:
            row["labels"] = {"passed": (outcomes.get(e.of_attempt) or {}).get("ending") == "pass"}
        yield row


def export_verifier_data(runs: list[Path], out: Path, *, roles: list[str] | None = None,
                         methods: list[str] | None = None, settings: list[str] | None = None,
                         include_failed: bool = False, include_simulated: bool = False) -> Counter:
    """Write the calls to `out` (JSONL); returns counts of what was written and skipped."""
    from tbscale.analysis.tables import find_run_dirs

    run_dirs = find_run_dirs(runs)
    counts: Counter = Counter()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".tmp")
    try:
        _write(tmp, run_dirs, counts, roles, methods, settings, include_failed, include_simulated)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    tmp.replace(out)
    return counts


def _write(tmp: Path, run_dirs: list[Path], counts: Counter, roles, methods, settings, include_failed: bool,
           include_simulated: bool) -> None:
    with open(tmp, "w", encoding="utf-8") as f:
        for run in run_dirs:
            files = trajectory_files(run)
            if not files:
                raise TbscaleError(f"{run}: no trajectories/ to read")
            for path in files:
                for row in calls_in_trajectory(path, run.name):
                    counts["calls"] += 1
                    if roles and row["role"] not in roles or methods and row["method"] not in methods \
                            or settings and row["setting"] not in settings:
                        counts["filtered"] += 1
                        continue
                    if row["simulated"] and not include_simulated:
                        counts["skipped_simulated"] += 1
                        continue
                    if not row["messages"] or row["response"] is None:
                        counts["skipped_no_messages"] += 1
                        continue
                    if row["parsed"] is None and not include_failed:
                        counts["skipped_unparsed"] += 1
                        continue
                    f.write(dumps(row) + "\n")
                    counts["written"] += 1
                    counts[f"role:{row['role']}"] += 1


def load(path: Path) -> list[ExportLine]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
