"""The files of a run folder read back through the models they are written with: trial lines
(TrialResult), trajectory events (types/events.py), the manifest (RunManifest), the spend ledger
(SpendLine), an attempt's artifacts manifest (CollectedArtifact), and the post-hoc pipelines'
manifests and judgement lines (types/posthoc.py). Every reader in tbscale (report, viewer, history,
sweeps, judge, rewards, resume, exports) reads through these, so they agree on what a file holds
and on which lines are corrupt.

There is one validation path per format: the model. A trial line is parsed and validated in one
step by pydantic's JSON parser (`TrialResult.model_validate_json`), which also applies the rule of a
believable verdict and of paths inside the run folder (tbscale/verdict.py); a line it rejects is
corrupt, reported with its line number and the model's reason. A report reads 100k lines, so the
trial reader works a chunk at a time with Python's cyclic garbage collector paused while a chunk is
parsed (validated lines make no cycles, and thousands of fresh objects would otherwise set off
collections that each walk every object alive).
"""

from __future__ import annotations

import gc
import json
import logging
import os
from pathlib import Path
from typing import Iterator, NamedTuple, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

from tbscale import SCHEMA_VERSION
from tbscale.errors import TbscaleError
from tbscale.jsonl import ReadProblems, numbered_jsonl
from tbscale.types.artifacts import CollectedArtifact, artifact_manifest_adapter
from tbscale.types.events import Event, event_adapter
from tbscale.types.manifest import RunManifest
from tbscale.types.posthoc import BsrManifest, JudgeManifest, JudgementLine
from tbscale.types.results import TrialResult
from tbscale.types.spend import SpendLine

log = logging.getLogger("tbscale")
T = TypeVar("T")
LineT = TypeVar("LineT", bound=BaseModel)
PosthocManifestT = TypeVar("PosthocManifestT", JudgeManifest, BsrManifest)
JudgementLineT = TypeVar("JudgementLineT", bound=JudgementLine)
READABLE_SCHEMA_VERSIONS = (1, 2)
CHUNK_LINES = 4096  # trial lines validated at a time, and at most this many bytes of them: their models
CHUNK_BYTES = 2 << 20  # are the reader's transient memory (a staged trial's line holds ~10x its size)


def check_schema_version(version: object, where: str) -> None:
    if version not in READABLE_SCHEMA_VERSIONS:
        newer = isinstance(version, int) and version > SCHEMA_VERSION
        raise TbscaleError(f"{where}: schema version {version!r} " + (
            f"is newer than this tbscale reads ({SCHEMA_VERSION}); upgrade tbscale" if newer
            else f"is not one this tbscale reads ({', '.join(map(str, READABLE_SCHEMA_VERSIONS))})"))


def _reason(e: ValidationError) -> str:
    """The model's first complaint, as one short phrase (`field.path: message`)."""
    first = e.errors()[0]
    where = ".".join(map(str, first["loc"]))
    return f"{where + ': ' if where else ''}{first['msg'].removeprefix('Value error, ')}"


def _json_file(path: Path, adapter: TypeAdapter[T], what: str) -> T | None:
    """A JSON file validated through its model, or None when there is none; one that is not JSON or
    not `what` is a TbscaleError naming the file and the field."""
    if not path.is_file():
        return None
    try:
        return adapter.validate_json(path.read_bytes())
    except ValidationError as e:
        raise TbscaleError(f"{path}: not {what} ({_reason(e)})") from None
    except OSError as e:
        raise TbscaleError(f"{path}: cannot be read ({e.strerror})") from None


def _model_lines(path: Path, model: type[LineT], problems: ReadProblems | None) -> Iterator[LineT]:
    """The readable lines of a JSONL file as `model`; the others noted in `problems` (or warned
    about when none is given) with their line numbers and the model's reason."""
    own = problems is None
    problems = problems or ReadProblems(Path(path))
    for n, obj in numbered_jsonl(path, problems):
        try:
            yield model.model_validate(obj)
        except ValidationError as e:
            problems.corrupt.append((n, _reason(e)))
    if own:
        problems.warn()


# ---- trial lines ---------------------------------------------------------------------------------------
class TrialLine(NamedTuple):
    """A readable trial line: its number in the file, its text and its model."""

    number: int
    text: bytes
    trial: TrialResult


def validate_trial_line(n: int, line: bytes, problems: ReadProblems) -> TrialResult | None:
    """Line `n` as a TrialResult, or None with the reason noted in `problems` (a torn last line,
    not JSON, not an object, or the first field the model rejects)."""
    try:
        return TrialResult.model_validate_json(line)
    except ValidationError as e:
        kind = e.errors()[0]["type"]
        if kind == "json_invalid" and not line.endswith(b"\n"):
            problems.torn(n)  # only the last line can lack its newline: a write cut short by a crash
        elif kind in ("json_invalid", "model_type"):
            problems.corrupt.append((n, "not a JSON object" if kind == "model_type" else "not JSON"))
        else:
            problems.corrupt.append((n, _reason(e)))
        return None


def _validated(lines: list[tuple[int, bytes]], where: str, problems: ReadProblems) -> list[TrialLine]:
    out = []
    for n, text in lines:
        trial = validate_trial_line(n, text, problems)
        if trial is not None:
            check_schema_version(trial.schema_version, where)
            out.append(TrialLine(n, text, trial))
    return out


def trial_chunks(path: Path, problems: ReadProblems) -> Iterator[list[TrialLine]]:
    """The readable trial lines of a trials.jsonl, a chunk at a time, in file order; the others are
    noted in `problems`. A line of a schema version this tbscale cannot read stops the reading (a
    TbscaleError naming the file)."""
    where = str(path)
    with open(path, "rb") as f:
        lines: list[tuple[int, bytes]] = []
        size = 0
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            lines.append((n, line))
            size += len(line)
            if len(lines) >= CHUNK_LINES or size >= CHUNK_BYTES:
                yield _paused(_validated, lines, where, problems)
                lines, size = [], 0
        if lines:
            yield _paused(_validated, lines, where, problems)


def _paused(fn, *args):
    enabled = gc.isenabled()
    gc.disable()
    try:
        return fn(*args)
    finally:
        if enabled:
            gc.enable()


def read_trials(path: Path, problems: ReadProblems | None = None) -> Iterator[TrialResult]:
    """Every readable trial line of a trials.jsonl, as its model, in file order (a trial that ran
    again has several lines: the last one counts). Unreadable lines are noted in `problems`, or
    warned about with their line numbers when none is given."""
    own = problems is None
    problems = problems or ReadProblems(Path(path))
    for chunk in trial_chunks(Path(path), problems):
        for line in chunk:
            yield line.trial
    if own:
        problems.warn()


def latest_trials(path: Path, problems: ReadProblems | None = None) -> dict[str, TrialResult]:
    """The latest readable line of every trial key (a rerun's line supersedes the old one), in the
    order the trials first appear."""
    return {t.trial_key: t for t in read_trials(path, problems)}


# ---- trajectory events -----------------------------------------------------------------------------------
def read_events(path: Path, problems: ReadProblems | None = None) -> Iterator[Event]:
    """A trajectory's events as their models (tbscale.types.events), the schema version of its
    `start` event checked. A line that is not an event is noted in `problems` with its line number
    and the model's reason (or warned about when no `problems` is given), and skipped."""
    own = problems is None
    problems = problems or ReadProblems(Path(path))
    for n, obj in numbered_jsonl(path, problems):
        if obj.get("type") == "start" and obj.get("schema_version") is not None:  # hand-made files may leave it out
            check_schema_version(obj["schema_version"], f"{path} line {n}")
        try:
            yield event_adapter.validate_python(obj)
        except ValidationError as e:
            problems.corrupt.append((n, f"not a {obj.get('type')!r} event ({_reason(e)})"))
    if own:
        problems.warn()


# ---- the manifest ------------------------------------------------------------------------------------------
def read_manifest(path: Path) -> RunManifest | None:
    """A run's manifest.json (`path`: the file or its run folder), or None when there is none; one
    that is not JSON or not a manifest is a TbscaleError naming the file and the field."""
    path = Path(path)
    if path.is_dir():
        path = path / "manifest.json"
    return _json_file(path, TypeAdapter(RunManifest), "a run manifest")


def manifest_of(run_dir: Path) -> RunManifest | None:
    """What a reader of finished runs uses: the run's manifest, or None when it has none or it
    cannot be read (said once as a warning: the trials are still read, without its plan)."""
    try:
        return read_manifest(Path(run_dir))
    except TbscaleError as e:
        log.warning(f"{e}; its trials are read without it")
        return None


def manifest_json(manifest: RunManifest | JudgeManifest | BsrManifest) -> str:
    """A manifest (the run's, or a post-hoc pipeline's) as its file holds it: the fields it was
    given, indented."""
    return json.dumps(manifest.model_dump(mode="json", exclude_unset=True), indent=2)


# ---- the spend ledger ---------------------------------------------------------------------------------------
def read_spend(path: Path, problems: ReadProblems | None = None) -> Iterator[SpendLine]:
    """The readable lines of a spend.jsonl as their model; the others noted in `problems` (or warned
    about when none is given) with their line numbers."""
    return _model_lines(path, SpendLine, problems)


# ---- an attempt's artifacts ------------------------------------------------------------------------------
def read_artifact_manifest(path: Path) -> list[CollectedArtifact] | None:
    """An attempt's artifacts/manifest.json (`path`: the file or the attempt's artifacts folder), or
    None when there is none; one that is not such a manifest is a TbscaleError naming the file and
    the entry's field."""
    path = Path(path)
    if path.is_dir():
        path = path / "manifest.json"
    return _json_file(path, artifact_manifest_adapter, "an artifacts manifest")


def artifact_manifest_json(entries: list[CollectedArtifact]) -> str:
    """An artifacts manifest as its file holds it: a list of the entries, each with the fields that
    apply to it, indented."""
    return json.dumps([e.model_dump(mode="json", exclude_unset=True) for e in entries], indent=2)


# ---- the post-hoc pipelines (judge/, rewards/) ------------------------------------------------------------
def read_posthoc_manifest(path: Path, manifest_type: type[PosthocManifestT]) -> PosthocManifestT | None:
    """The manifest.json of `tbscale judge` (JudgeManifest) or `tbscale rewards` (BsrManifest), or
    None when there is none; one that is not such a manifest is a TbscaleError naming the file and
    the field."""
    return _json_file(Path(path), TypeAdapter(manifest_type), f"a {manifest_type.kind}")


def read_judgements(path: Path, line_type: type[JudgementLineT],
                    problems: ReadProblems | None = None) -> Iterator[JudgementLineT]:
    """The readable lines of a post-hoc pipeline's judgement file (judge/rubrics.jsonl: RubricLine,
    judge/reward_hacking.jsonl: RewardHackingLine, rewards/judgements.jsonl: PairJudgement) as
    their model; the others noted in `problems` (or warned about when none is given) with their line
    numbers and the field the model rejects."""
    return _model_lines(path, line_type, problems)


def find_run_dirs(paths: list[Path]) -> list[Path]:
    """Run folders (holding trials.jsonl) named directly, or found one level below."""
    runs: list[Path] = []
    for p in map(Path, paths):
        if (p / "trials.jsonl").is_file():
            runs.append(p)
        elif p.is_dir():
            runs.extend(sorted(d for d in p.iterdir() if (d / "trials.jsonl").is_file()))
        elif p.exists():
            raise TbscaleError(f"{p}: a file, not a run folder (give the folder holding trials.jsonl)")
        else:
            raise TbscaleError(f"{p}: no such run folder")
    if not runs:
        raise TbscaleError(f"{', '.join(map(str, paths))}: no runs found (no trials.jsonl); runs made by other "
                           "harnesses are read with `tbscale import` or `tbscale report --import`")
    return runs


RUN_LOCK = ".tbscale-run.lock"  # held by the process running trials into a run folder (runner/rundir.py)


def holders_visible() -> bool:
    """Whether `run_holder` can tell a live run from a killed one here (the kernel's table of locks)."""
    return os.path.isfile("/proc/locks")


def run_holder(run_dir: Path) -> str | None:
    """Who is running trials into `run_dir` now: its lock file's line (pid, host, since) while a
    process holds the lock, else None. Read from the kernel's table of locks (/proc/locks, Linux), so
    that looking takes no lock: a run starting at that moment is never refused because of a reader."""
    path = Path(run_dir) / RUN_LOCK
    try:
        st = path.stat()
        table = Path("/proc/locks").read_text()
    except OSError:
        return None
    ident = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    # "1: FLOCK  ADVISORY  WRITE 8783 fe:00:2409086 0 EOF"; a waiter's line has "->" after the number
    held = any(parts[1:3] == ["FLOCK", "ADVISORY"] and parts[3] == "WRITE" and parts[5] == ident
               for parts in (line.split() for line in table.splitlines()) if len(parts) >= 6)
    if not held:
        return None
    try:
        return path.read_text(errors="replace").strip() or "a process"
    except OSError:
        return "a process"
