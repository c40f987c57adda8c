"""Writing imported trials as a tbscale run folder (docs/formats.md), and the import entry
points: `tbscale import`, and `tbscale report --import` with its cache."""

from __future__ import annotations

import re
import shutil
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

from tbscale import SCHEMA_VERSION
from tbscale.errors import TbscaleError
from tbscale.ingest.harbor import harbor_trial_dirs, is_atif_file, read_harbor
from tbscale.ingest.mini_swe_agent import is_mini_trajectory_file, mini_trajectory_files, read_mini_swe_agent
from tbscale.ingest.model import ImportedTrial, ImportedTurn, ImportResult, _safe
from tbscale.ingest.terminal_bench import looks_like_tb, read_terminal_bench
from tbscale.logs import event_line
from tbscale.runfiles import manifest_json
from tbscale.secrets import redact
from tbscale.names import check_name, run_folder_problem, writable_folder
from tbscale.seeds import stable_hash
from tbscale.shell.git_history import trial_history_reads
from tbscale.types.actions import UNREAD_ACTIONS
from tbscale.types.completion import Usage
from tbscale.types.events import CandidateRecord
from tbscale.types.manifest import ImportedFrom, PublishedRun, RunManifest
from tbscale.types.results import TrialResult


FORMATS = ("mini-swe-agent", "harbor", "terminal-bench")


def detect_format(path: Path) -> str | None:
    """The format of PATH by its content (not its file names): a Harbor trial's result.json, a
    terminal-bench run's results.json, or a mini-swe-agent trajectory (any JSON file or folder of
    them)."""
    path = Path(path)
    if path.is_file():
        if is_atif_file(path):
            return "harbor"
        if looks_like_tb(path):
            return "terminal-bench"
        return "mini-swe-agent" if is_mini_trajectory_file(path) else None
    if path.is_dir():
        if harbor_trial_dirs(path):
            return "harbor"
        if looks_like_tb(path):
            return "terminal-bench"
        if mini_trajectory_files(path, limit=1):
            return "mini-swe-agent"
    return None


def _candidate(t: ImportedTurn) -> CandidateRecord:
    return CandidateRecord(text=t.text, reasoning=t.reasoning, tool_calls=t.tool_calls, finish_reason=t.finish_reason,
                           output_tokens=t.usage.output if t.usage else 0,
                           reasoning_tokens=t.usage.reasoning if t.usage else 0,
                           command=t.command if t.runnable else None, runnable=t.runnable, submission=t.submission,
                           parse_error=t.parse_error)


def _cost(tokens: dict[str, Usage]) -> float | None:
    """The trial's cost: unknown (None) when any role's cost is unknown, never $0 for it."""
    costs = [u.cost_usd for u in tokens.values()]
    if any(c is None for c in costs):
        return None
    return round(sum(costs), 6)


class _Lines:
    """One trajectory's events, validated like every writer's (event_line), written in one go."""

    def __init__(self, **base: Any):
        self.lines = [event_line("start", {"attempt": None, "turn": None, "schema_version": SCHEMA_VERSION, **base})]

    def write(self, type: str, **fields: Any) -> None:
        self.lines.append(event_line(type, fields))


def _events(t: ImportedTrial, key: str, skey: str, fmt: str) -> list[str]:
    log = _Lines(trial_key=key, task_id=t.task_id, setting=t.setting, setting_key=skey, trial=t.trial, seed=None,
                 simulated=False, imported_from=fmt, source=t.source, instruction=t.instruction)
    log.write("attempt_start", attempt=0, turn=None, stage="final", imported=True, context_attempts=[])
    for n, turn in enumerate(t.turns, start=1):
        if turn.usage:
            log.write("model_call", attempt=0, turn=n, role="generator", model=t.model or "unknown", n=1,
                      usage={**turn.usage.model_dump(exclude_unset=True), "calls": 1}, latency_sec=None, retries=0,
                      error=None)
        log.write("candidates", attempt=0, turn=n, candidates=[_candidate(turn)])
        if turn.runnable:
            log.write("action", attempt=0, turn=n, command=turn.command, selected_index=0, n_candidates=1)
            if turn.output is not None:
                log.write("observation", attempt=0, turn=n, exit_code=turn.exit_code, output=turn.output,
                          timed_out=False, duration_sec=None)
        elif turn.parse_error in UNREAD_ACTIONS:  # it acted; what it ran is not readable as a command
            if turn.output is not None:
                log.write("observation", attempt=0, turn=n, exit_code=turn.exit_code, output=turn.output,
                          timed_out=False, duration_sec=None)
        else:
            log.write("format_error", attempt=0, turn=n, error=turn.parse_error, count=None)
    for step in t.steps or []:
        log.write("verifier", attempt=0, turn=None, reward=step.reward, rewards=step.rewards, passed=step.passed,
                  error=None, output="", details={"imported": True}, step=step.name)
    log.write("verifier", attempt=0, turn=len(t.turns) or None, reward=t.reward, passed=t.passed, error=None,
              output=t.verifier_output or "", details={"imported": True, **t.verifier_details})
    log.write("attempt_end", attempt=0, turn=len(t.turns) or None, stage="final", ending=t.ending,
              stop_reason=t.stop_reason, reward=t.reward, turns=len(t.turns), error=t.error, timing=t.timing,
              usage={role: u.model_dump(exclude_unset=True) for role, u in t.tokens.items()})
    log.write("end", attempt=None, turn=None, reward=t.reward, passed=t.passed, ending=t.ending,
              final_attempt=0, record={})
    return log.lines


def write_run(trials: list[ImportedTrial], run_dir: Path, fmt: str, sources: Iterable[Path],
              published: list[PublishedRun] | None = None, run_name: str | None = None) -> None:
    """The trials as a run folder at `run_dir` (a fresh folder: `replace_folder` writes it beside the
    target and then swaps it in, so a failed import leaves no half-written run), for a run named
    `run_name` (default: the folder's name)."""
    run_dir = Path(run_dir)
    name = run_name or run_dir.name
    run_dir.mkdir(parents=True, exist_ok=True)
    setting_keys: dict[str, str] = {}
    settings: dict[str, dict[str, Any]] = {}
    rows = []
    made: set[Path] = set()
    for t in trials:
        skey = setting_keys.setdefault(t.setting, stable_hash(fmt, t.setting, t.agent, t.model, length=12))
        settings.setdefault(t.setting, {"name": t.setting, "agent": t.agent, "generator": t.model,
                                        "policy": {"name": "baseline"}, "trajectory": {"name": "single"}})
        key = stable_hash(fmt, t.source, t.task_id, t.setting, t.trial)
        rel = f"trajectories/{_safe(t.task_id)}/{t.setting}__t{t.trial}__{key}.jsonl"
        folder = (run_dir / rel).parent
        if folder not in made:
            folder.mkdir(parents=True, exist_ok=True)
            made.add(folder)
        (run_dir / rel).write_text("\n".join(_events(t, key, skey, fmt)) + "\n", encoding="utf-8")
        row = TrialResult(
            schema_version=SCHEMA_VERSION, run=name, setting=t.setting, setting_key=skey, trial_key=key,
            task_id=t.task_id, task_format=fmt, trial=t.trial, seed=None, agent=t.agent, generator_model=t.model,
            reward=t.reward, rewards=t.rewards, passed=bool(t.passed), ending=t.ending, stop_reason=t.stop_reason,
            infra_error=t.infra_error, turns=len(t.turns), steps=t.steps, tokens=t.tokens, cost_usd=_cost(t.tokens),
            timing=t.timing, trajectory_path=rel,
            error={"type": t.error.split(":", 1)[0], "message": t.error} if t.error else None,
            started_at=t.started_at, finished_at=t.finished_at, imported_from=fmt, source=t.source,
            # what the repository held is not in the source; the commands that read past HEAD are
            history_reads=trial_history_reads(turn.command for turn in t.turns if turn.runnable and turn.command))
        rows.append(redact(row.model_dump_json()))
    (run_dir / "trials.jsonl").write_text("".join(r + "\n" for r in rows), encoding="utf-8")
    manifest = RunManifest(
        schema_version=SCHEMA_VERSION, run_name=name,
        imported_from=ImportedFrom(format=fmt, paths=[str(p) for p in sources],
                                   at=datetime.now(timezone.utc).isoformat(),
                                   **({"published": published} if published is not None else {})),
        experiment={"name": name, "models": {}, "tasks": {"path": None}, "settings": list(settings.values())},
        setting_keys=setting_keys, created_at=datetime.now(timezone.utc).isoformat(), simulated_models=False,
        invocations=[])
    (run_dir / "manifest.json").write_text(manifest_json(manifest))


def import_runs(paths: list[Path], run_dir: Path, *, fmt: str = "auto", setting: str | None = None,
                resolved: Path | None = None, missing_as_failed: bool = False, force: bool = False) -> ImportResult:
    paths = [Path(p) for p in paths]
    for p in paths:
        if not p.exists():
            raise TbscaleError(f"{p}: no such file or directory")
    if fmt == "auto":
        kinds = {detect_format(p) for p in paths}
        if None in kinds or len(kinds) != 1:
            raise TbscaleError(f"{', '.join(map(str, paths))}: cannot tell the format (found {sorted(map(str, kinds))}); "
                               "give --format mini-swe-agent, harbor or terminal-bench")
        fmt = kinds.pop()
    if fmt not in FORMATS:
        raise TbscaleError(f"--format: unknown format {fmt!r} ({', '.join(FORMATS)})")
    if setting is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", setting):
        raise TbscaleError(f"--setting: {setting!r} must be letters, digits, '_', '.', '-'")
    run_dir = Path(run_dir)
    check_name(run_dir.name, "--name")
    if run_dir.exists() and any(run_dir.iterdir()) and not force:
        raise TbscaleError(f"{run_dir}: already exists; pick another --name or pass --force to replace it")
    warnings: list[str] = []
    published: list[PublishedRun] | None = None
    if fmt == "mini-swe-agent":
        trials = read_mini_swe_agent(paths, setting, resolved, missing_as_failed, warnings)
    elif fmt == "terminal-bench":
        published = []
        trials = read_terminal_bench(paths, setting, warnings, published)
    else:
        trials = read_harbor(paths, setting, warnings)
    run_dir = Path(run_dir)
    replace_folder(run_dir, force, lambda tmp: write_run(trials, tmp, fmt, paths, published, run_name=run_dir.name))
    return ImportResult(run_dir, fmt, len(trials), len({t.task_id for t in trials}), warnings, published)


def replace_folder(run_dir: Path, force: bool, write) -> None:
    """Write a run folder through `write(folder)` into a fresh folder beside `run_dir`, then put it
    in place. An existing non-empty `run_dir` is replaced only with `force`, and only when it is a
    tbscale run folder inside its results folder (names.run_folder_problem); anything else is
    refused, never removed. A write that fails leaves `run_dir` as it was."""
    check_name(run_dir.name, "--name")
    root = writable_folder(run_dir.parent, "output_dir")
    occupied = run_dir.is_symlink() or (run_dir.exists() and (not run_dir.is_dir() or any(run_dir.iterdir())))
    if occupied:
        if not force:
            raise TbscaleError(f"{run_dir}: already exists; pick another --name or pass --force to replace it")
        problem = run_folder_problem(run_dir, root)
        if problem:
            raise TbscaleError(f"{run_dir}: {problem}; --force replaces only a tbscale run folder, so nothing was "
                               "removed (remove it yourself, or pick another --name)")
    tag = uuid.uuid4().hex[:8]
    fresh = root / f".{run_dir.name}.importing-{tag}"
    try:
        write(fresh)
    except BaseException:
        shutil.rmtree(fresh, ignore_errors=True)
        raise
    if occupied:
        old = root / f".{run_dir.name}.replaced-{tag}"
        run_dir.rename(old)
        fresh.rename(run_dir)
        shutil.rmtree(old)
    else:
        if run_dir.is_dir():
            run_dir.rmdir()  # empty
        fresh.rename(run_dir)


def source_signature(path: Path) -> str:
    """What identifies an imported source: its full resolved path and, for every file under it,
    the relative name, size and modification time (a stat walk, no reading)."""
    root = Path(path).resolve()
    files = [root] if root.is_file() else sorted(f for f in root.rglob("*") if f.is_file())
    entries = []
    for f in files:
        st = f.stat()
        entries.append(f"{f.relative_to(root) if f != root else f.name}:{st.st_size}:{st.st_mtime_ns}")
    return stable_hash(str(root), *entries)


def auto_import(path: Path, cache_root: Path = Path("results") / "imported") -> Path | None:
    """For `tbscale report --import PATH` on a folder that is not a run: import it into
    cache_root/<name>-<signature> (once per path and content: another folder of the same name, or
    the same folder after it changed, gets its own import) and return that run folder; None if
    PATH is in neither format."""
    fmt = detect_format(path)
    if fmt is None:
        return None
    target = Path(cache_root) / f"{_safe(Path(path).resolve().name)}-{source_signature(Path(path))[:12]}"
    if (target / "trials.jsonl").is_file():
        return target
    import_runs([Path(path)], target, fmt=fmt, missing_as_failed=True, force=True)
    return target
