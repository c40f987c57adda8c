"""terminal-bench `tb run` output: the legacy harness's run folders (the format of the whole
Terminal-Bench-Core 0.1.1 leaderboard).

A run is a folder holding ``run_metadata.json`` and a run-level ``results.json`` (terminal-bench's
``BenchmarkResults``: ``results``, one ``TrialResults`` per trial, plus ``accuracy``,
``n_resolved``, ``pass_at_k``), with one folder per trial under ``<task_id>/<trial_name>/``
(``results.json``, ``panes/``, ``sessions/agent.cast``, ``commands.txt``). Some submissions ship
only the run-level file (possibly renamed, e.g. ``<run_id>_results.json``), some only the trial
folders; both are read. A submission is a folder of runs: runs of the same tasks become trials of
the same tasks, numbered by run (in order of start) and then by attempt (``.k-of-n.``), so pass@k,
pass^k and consistency@k come out over them. Task ids are kept as written (``crack-7z-hash.easy``).

How a trial ended comes from its ``failure_mode`` (terminal-bench's ``FailureMode`` enum, set in
``harness/harness.py``); FAILURE_MODES maps each to a tbscale ending and says whether it is the
agent's failure or the harness's (an infrastructure error, left out of tbscale's pass@1).
The verdict is the harness's own ``is_resolved``: terminal-bench runs the tests after an agent
timeout or agent error and counts what they say, and so does the import (the ending is then
``pass`` and ``stop_reason`` keeps the failure mode). The leaderboard's accuracy counts every
trial that is not resolved as a failure; the run's stated numbers are kept in the manifest
(``imported_from.published``) and the report shows them beside what the import reproduces.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from tbscale.errors import TbscaleError
from tbscale.ingest.model import ImportedTrial, _safe
from tbscale.types.completion import Usage
from tbscale.types.manifest import PublishedRun

# failure_mode -> (ending when the tests did not resolve the task, infrastructure error?, why).
# The reasons quote what terminal-bench 0.2.18 does when it sets each mode.
FAILURE_MODES: dict[str, tuple[str, bool, str]] = {
    "unset": ("wrong_submission", False, "the default: the agent returned and the tests ran and were parsed"),
    "none": ("wrong_submission", False, "the agent reported no failure (AgentResult default)"),
    "unknown": ("agent_error", False, "declared but never set by the 0.2.x harness; kept as the agent's failure"),
    "agent_timeout": ("time_limit", False, "the agent ran past max_agent_timeout_sec; the tests still ran"),
    "unknown_agent_error": ("agent_error", False, "the agent raised or returned nothing; the tests still ran"),
    "fatal_llm_parse_error": ("agent_error", False, "the model's replies could not be parsed after retries"),
    "context_length_exceeded": ("out_of_context", False, "the model's context window was exceeded"),
    "output_length_exceeded": ("out_of_context", False, "the model's reply was cut at its output limit"),
    "test_timeout": ("verifier_error", True, "the test script ran past max_test_timeout_sec: no verdict"),
    "parse_error": ("verifier_error", True, "the test output could not be parsed: no verdict"),
    "agent_installation_failed": ("agent_error", True, "the harness could not install the agent in the "
                                                        "container: the agent never ran"),
}
# unknown_agent_error with no verdict at all: the harness's own exception handler
# (`_execute_single_trial`) wrote it when the trial raised outside the agent (container start,
# image build, test run), so nothing ran; an infrastructure error.
HARNESS_FAILED = "harness_error"
LFS_POINTER = b"version https://git-lfs.github.com/spec/v1"
TRIAL_NAME = re.compile(r"\.(\d+)-of-(\d+)(?:\.|$)")


def tb_ending(failure_mode: str | None, is_resolved: bool | None) -> tuple[str, bool, bool, str]:
    """(ending, passed, infra_error, stop_reason) of one terminal-bench trial."""
    mode = failure_mode or "unset"
    if mode == "unknown_agent_error" and is_resolved is None:
        return "agent_error", False, True, HARNESS_FAILED
    ending, infra, _ = FAILURE_MODES.get(mode, ("agent_error", False, ""))
    if infra:
        return ending, False, True, mode
    if is_resolved:
        return "pass", True, False, mode
    return ending, False, False, mode


def _read_json(path: Path) -> Any:
    """The file's JSON; None for a Git LFS pointer or a file that is not JSON."""
    try:
        raw = path.read_bytes()
    except OSError:
        return None
    if raw.startswith(LFS_POINTER):
        return None
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None


def _is_trial_result(d: Any) -> bool:
    return isinstance(d, dict) and "task_id" in d and ("failure_mode" in d or "is_resolved" in d)


def _is_run_results(d: Any) -> bool:
    return (isinstance(d, dict) and isinstance(d.get("results"), list) and bool(d["results"])
            and all(_is_trial_result(r) for r in d["results"][:3]))


@dataclass
class TbRun:
    name: str
    path: Path  # the run folder, or the run-level results file when it stands alone
    results_file: Path | None
    results: list[dict[str, Any]]
    published: dict[str, Any] | None
    metadata: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def folder(self) -> Path:
        return self.path if self.path.is_dir() else self.path.parent

    @property
    def start(self) -> str:
        return str(self.metadata.get("start_time") or "")


def _trial_files(folder: Path) -> list[Path]:
    """<task>/<trial_name>/results.json under a run folder (terminal-bench's layout)."""
    found = []
    for task in sorted(p for p in folder.iterdir() if p.is_dir()):
        for trial in sorted(p for p in task.iterdir() if p.is_dir() and TRIAL_NAME.search(p.name)):
            if (trial / "results.json").is_file():
                found.append(trial / "results.json")
    return found


def _run_from_folder(folder: Path) -> TbRun | None:
    meta = _read_json(folder / "run_metadata.json")
    meta = meta if isinstance(meta, dict) else {}
    run_file = folder / "results.json"
    data = _read_json(run_file) if run_file.is_file() else None
    if _is_run_results(data):
        return TbRun(folder.name, folder, run_file, data["results"], _published(data, run_file), meta)
    trials = _trial_files(folder)
    if not trials:
        return None
    results, notes = [], []
    for f in trials:
        d = _read_json(f)
        if _is_trial_result(d):
            results.append(d)
        else:
            notes.append(f"{f}: not a terminal-bench trial result (missing, a Git LFS pointer, or not JSON); skipped")
    why = "is a Git LFS pointer or unreadable" if run_file.is_file() else "is missing"
    notes.insert(0, f"{run_file} {why}: trials read from the {len(results)} trial folders; the run's published "
                    "accuracy is unknown")
    return TbRun(folder.name, folder, None, results, None, meta, notes)


def _published(data: dict[str, Any], path: Path) -> dict[str, Any]:
    return {"results_file": str(path), "accuracy": data.get("accuracy"), "n_resolved": data.get("n_resolved"),
            "n_unresolved": data.get("n_unresolved"), "pass_at_k": data.get("pass_at_k") or {},
            "trials": len(data.get("results") or [])}


def find_tb_runs(path: Path, depth: int = 4) -> list[TbRun]:
    """The terminal-bench runs at PATH: a run folder, a run-level results file, or a folder
    (a submission, or a folder of submissions) holding them, up to `depth` levels down."""
    path = Path(path)
    if path.is_file():
        if path.name.endswith("results.json"):
            data = _read_json(path)
            if _is_run_results(data):
                name = re.sub(r"_+results$", "", path.name.removesuffix(".json")) or path.stem
                return [TbRun(name, path, path, data["results"], _published(data, path))]
        return []
    if not path.is_dir():
        return []
    if (path / "results.json").is_file() or (path / "run_metadata.json").is_file():
        run = _run_from_folder(path)
        if run is not None:
            return [run]
    runs: list[TbRun] = []
    if depth > 0:
        for child in sorted(path.iterdir()):
            if child.is_dir() or child.name.endswith("results.json"):
                runs.extend(find_tb_runs(child, depth - 1))
    return runs


def looks_like_tb(path: Path) -> bool:
    """Cheap detection: a run-level or trial results.json of terminal-bench's shape near PATH."""
    path = Path(path)
    candidates = [path] if path.is_file() else [path / "results.json", *sorted(path.glob("*results.json")),
                                                *sorted(path.glob("*/results.json")),
                                                *sorted(path.glob("*/*results.json"))[:20]]
    for c in candidates[:40]:
        if c.is_file() and c.name.endswith("results.json"):
            d = _read_json(c)
            if _is_run_results(d):
                return True
    return bool(path.is_dir() and find_tb_runs(path))


def _seconds(start: str | None, end: str | None) -> float | None:
    if not start or not end:
        return None
    try:
        return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()
    except ValueError:
        return None


def _attempt(trial_name: str) -> int:
    m = TRIAL_NAME.search(trial_name or "")
    return int(m.group(1)) if m else 1


def _recording(run: TbRun, trial_dir: Path, recorded: str | None) -> tuple[str | None, str | None]:
    """(path of the agent's recording if it is on disk, why not otherwise)."""
    candidates = []
    if recorded:
        rel = Path(recorded)
        candidates += [run.folder / Path(*rel.parts[1:]) if len(rel.parts) > 1 else run.folder / rel,
                       run.folder.parent / rel]
    candidates.append(trial_dir / "sessions" / "agent.cast")
    for c in candidates:
        if c.is_file():
            with open(c, "rb") as f:
                head = f.read(len(LFS_POINTER))
            if head == LFS_POINTER:
                return None, "a Git LFS pointer (its content is not in this copy)"
            return str(c), None
    return None, "not on disk" if recorded else None


def _parser_text(parser_results: dict[str, Any] | None) -> str:
    if not parser_results:
        return ""
    return "\n".join(f"{status.upper()} {name}" for name, status in parser_results.items())


def _trial(run: TbRun, r: dict[str, Any], setting: str, agent: str, model: str | None,
           counters: dict[str, int]) -> ImportedTrial:
    task_id = str(r["task_id"])
    trial_name = str(r.get("trial_name") or f"{task_id}.{counters['index']}")
    trial_dir = run.folder / task_id / trial_name
    has_dir = trial_dir.is_dir()
    resolved = r.get("is_resolved")
    ending, passed, infra, stop = tb_ending(r.get("failure_mode"), resolved)
    mode = r.get("failure_mode") or "unset"
    if mode not in FAILURE_MODES:
        counters["unknown_mode"] += 1
    recording, why = _recording(run, trial_dir, r.get("recording_path"))
    counters["no_folder"] += not has_dir
    if r.get("recording_path") and has_dir:
        counters["recordings"] += 1
        counters["recordings_found"] += recording is not None
    pane = trial_dir / "panes" / "post-test.txt"
    output = pane.read_text(errors="replace")[-20_000:] if has_dir and pane.is_file() else _parser_text(
        r.get("parser_results"))
    timing = {k: v for k, v in {
        "agent": _seconds(r.get("agent_started_at"), r.get("agent_ended_at")),
        "verify": _seconds(r.get("test_started_at"), r.get("test_ended_at")),
        "trial_wall": _seconds(r.get("trial_started_at"), r.get("trial_ended_at"))}.items() if v is not None}
    tokens_in, tokens_out = r.get("total_input_tokens"), r.get("total_output_tokens")
    tokens = {"generator": Usage(input=int(tokens_in or 0), output=int(tokens_out or 0), reasoning=0, cached=0,
                                 cost_usd=None, calls=0)}
    details: dict[str, Any] = {"imported": True, "failure_mode": mode, "is_resolved": resolved,
                               "parser_results": r.get("parser_results"), "tb_run": run.name,
                               "trial_name": trial_name}
    if recording:
        details["recording"] = recording
    elif why:
        details["recording_missing"] = f"{r.get('recording_path')}: {why}"
    reason = FAILURE_MODES.get(mode, ("", False, f"failure mode {mode!r} is not in terminal-bench's enum"))[2]
    error = None if mode in ("unset", "none") else f"{stop}: {reason}"
    source = str(trial_dir) if has_dir else f"{run.results_file or run.path}#{trial_name}"
    return ImportedTrial(
        source=source, task_id=task_id, setting=setting, agent=agent, model=model, turns=[], stop_reason=stop,
        ending=ending, reward=None if resolved is None else float(bool(resolved)), passed=passed, tokens=tokens,
        instruction=r.get("instruction"), verifier_output=output, error=error,
        started_at=r.get("trial_started_at"), finished_at=r.get("trial_ended_at"), infra_error=infra, timing=timing,
        verifier_details=details, order=(run.start, run.name, _attempt(trial_name), counters["index"]))


def _groups(paths: list[Path]) -> list[tuple[str, TbRun]]:
    """Every run under PATHs with the submission (setting) it belongs to. A run that is PATH, or
    lies directly in it, belongs to PATH (run folders given one by one: to their common parent).
    Deeper down PATH is a folder of submissions: a run belongs to the folder holding it, unless it
    is a submission by itself, that is it has several attempts per task (one `tb run -k n`) or
    sits beside folders of runs."""
    parents = {Path(p).resolve().parent for p in paths}
    shared = parents.pop().name if len(paths) > 1 and len(parents) == 1 else None
    out = []
    for p in map(Path, paths):
        runs = find_tb_runs(p)
        for run in runs:
            holder = run.path.parent
            beside_runs = any(r.path.parent != holder and holder in r.path.parents for r in runs)
            attempts = len(run.results) > len({r.get("task_id") for r in run.results})
            if run.path == p:
                name = shared or p.resolve().name
            elif holder == p:  # PATH is a submission, unless it also holds submissions that are folders
                alone = beside_runs or (attempts and len(runs) == 1)
                name = run.path.name if run.path.is_dir() and alone else p.resolve().name
            else:
                name = run.path.name if run.path.is_dir() and (beside_runs or attempts) else holder.name
            out.append((_safe(name), run))
    return out


def read_terminal_bench(paths: list[Path], setting: str | None, warnings: list[str],
                        published: list[PublishedRun]) -> list[ImportedTrial]:
    """The trials of the runs at `paths`; each run's own numbers (its results.json) are added to
    `published`, for the manifest."""
    grouped = _groups(paths)
    runs = [run for _, run in grouped]
    if not runs:
        raise TbscaleError(f"{', '.join(map(str, paths))}: no terminal-bench runs found (a run-level results.json "
                           "with `results` and `accuracy`, or <task>/<trial>/results.json folders)")
    grouped.sort(key=lambda g: (g[0], g[1].start, g[1].name))
    trials: list[ImportedTrial] = []
    counters = {"recordings": 0, "recordings_found": 0, "unknown_mode": 0, "no_folder": 0, "index": 0}
    for name, run in grouped:
        name = setting or name
        mine = [r for n, r in grouped if (setting or n) == name]
        agents = {str(r.metadata.get("agent_name")) for r in mine if r.metadata.get("agent_name")}
        models = {str(r.metadata.get("model_name")) for r in mine if r.metadata.get("model_name")}
        agent = agents.pop() if len(agents) == 1 else "terminal-bench-agent"
        model = sorted(models)[0] if len(models) == 1 else (", ".join(sorted(models)) or None)
        warnings.extend(run.notes)
        for i, r in enumerate(run.results):
            counters["index"] = i
            trials.append(_trial(run, r, name, agent, model, counters))
        # A trial's `source` starts with its run's path (then `/` or `#`), which is how the report
        # finds each run's trials again.
        published.append(PublishedRun(
            run=run.name, path=str(run.path), agent=run.metadata.get("agent_name"),
            model=run.metadata.get("model_name"), n_attempts=run.metadata.get("n_attempts"), setting=name,
            **(run.published or {"accuracy": None})))
    if counters["no_folder"]:
        warnings.append(f"{counters['no_folder']} of {len(trials)} trials have no trial folder (only the run-level "
                        "results.json holds them): no recording, panes or test output")
    if counters["recordings"] > counters["recordings_found"]:
        warnings.append(f"{counters['recordings'] - counters['recordings_found']} of {counters['recordings']} "
                        "recordings named in results.json are missing from their trial folders (not in this copy, "
                        "or Git LFS pointers); those trials link none")
    if counters["unknown_mode"]:
        warnings.append(f"{counters['unknown_mode']} trials have a failure_mode outside terminal-bench's enum; "
                        "imported as agent errors")
    groups: dict[tuple[str, str], list[ImportedTrial]] = {}
    for t in trials:
        groups.setdefault((t.setting, t.task_id), []).append(t)
    for group in groups.values():
        for i, t in enumerate(sorted(group, key=lambda t: t.order)):
            t.trial = i
    return trials
