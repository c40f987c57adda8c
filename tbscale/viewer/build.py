"""Build the static viewer of a run: read trials.jsonl and the trajectory event streams, write
`index.js` (every trial, columnar), `trials/<trial_key>.js` (one trial, turn by turn) and the
assets (index.html, viewer.js, viewer.css).

Data files are JavaScript, not JSON: under file:// a browser refuses fetch() of local files but
runs <script> tags, so `index.js` assigns `window.TBV_INDEX` and each trial file calls
`tbvTrial(key, data)`. Everything written comes from the run folder; the only things left out
or shortened are bulky copies (a verifier call's full prompt, the middle of very long outputs),
and what was shortened says so.

A rebuild rewrites a trial's file only when its trajectory is newer than the file, its
trials.jsonl line changed, or the data format changed (`build.json` keeps what the last build
saw); files of trials that left trials.jsonl are removed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from typing_extensions import TypedDict

from tbscale.errors import TbscaleError
from tbscale.jsonl import ReadProblems
from tbscale.runfiles import manifest_of, read_events, trial_chunks
from tbscale.strategies.stage_records import tournaments
from tbscale.types.manifest import RunManifest
from tbscale.viewer import trial_file_stem

FORMAT_VERSION = 1
ASSETS = Path(__file__).parent / "assets"
ASSET_FILES = ("index.html", "viewer.js", "viewer.css")

# Shortening of bulky fields (characters). Outputs keep their head and tail; the viewer shows
# where the middle was cut.
OUTPUT_HEAD, OUTPUT_TAIL = 24_000, 24_000
RESPONSE_LIMIT = 12_000
PROMPT_TAIL = 4_000

# Builds writing this many trial files or more use a process per CPU, CHUNK trials at a time.
PARALLEL_FROM, CHUNK = 400, 200

SIMULATED_BANNER = ("SIMULATED MODELS: these runs used tbscale's embedded simulated model (sim/...), not a "
                    "language model. The numbers exercise the harness and the strategies' mechanics only.")

# The trials.jsonl fields a trial page shows (the rest are bulky or repeated elsewhere).
ROW_FIELDS = ("run", "setting", "setting_key", "trial_key", "task_id", "task_format", "trial", "seed", "agent",
              "policy", "policy_params", "n", "trajectory", "trajectory_params", "generator_model", "selector_model",
              "simulated", "reward", "passed", "ending", "stop_reason", "turns", "tokens", "cost_usd", "timing",
              "n_attempts", "final_attempt", "attempts", "strategy_record", "trajectory_path", "error", "tampering",
              "repositories", "history_reads", "started_at", "finished_at", "source")
SETTING_FIELDS = ("policy", "policy_params", "n", "trajectory", "trajectory_params", "generator_model",
                  "selector_model", "agent", "setting_key")


class NotARun(TbscaleError, ValueError):
    """The folder holds no trials.jsonl (or the viewer cannot be written where asked)."""


@dataclass
class BuildResult:
    out_dir: Path
    index_html: Path
    trials: int
    written: int
    unchanged: int
    removed: int
    index_bytes: int
    warnings: list[str] = field(default_factory=list)


# ---- reading ---------------------------------------------------------------------------------------
# Trial lines, events and the manifest are read through their models (tbscale.runfiles), so the
# viewer skips exactly the lines the report skips; what it shows of each is what the line holds
# (the fields its writer gave).
def _warn_problems(problems: ReadProblems, warn: Callable[[str], None]) -> None:
    for no, why in problems.corrupt:
        warn(f"{problems.path}:{no}: skipped a line ({why})")
    if problems.torn_last_line:
        warn(f"{problems.path}:{problems.torn_line}: skipped a torn last line (not JSON: cut short by a crash)")


def read_lines(path: Path, warn: Callable[[str], None]) -> Iterator[dict[str, Any]]:
    """A trajectory's events as their lines hold them; a line that is not an event (a torn last
    line left by a crash, a corrupt one) is skipped with a warning."""
    problems = ReadProblems(Path(path))
    for event in read_events(Path(path), problems):
        yield event.model_dump(exclude_unset=True)
    _warn_problems(problems, warn)


def load_rows(run_dir: Path, warn: Callable[[str], None]) -> list[tuple[dict[str, Any], str]]:
    """trials.jsonl as (row, digest of its line): the latest line of each trial_key (a rerun's
    line supersedes the old one), in the order the trials first appear. A line the trial model
    rejects (a missing field, a verdict that cannot be true, ...) is skipped with a warning, as the
    report skips it."""
    path = run_dir / "trials.jsonl"
    problems = ReadProblems(path)
    latest: dict[str, tuple[dict[str, Any], str]] = {}
    for chunk in trial_chunks(path, problems):
        for line in chunk:
            text = line.text.decode("utf-8", errors="replace").strip()
            latest[line.trial.trial_key] = (line.trial.model_dump(exclude_unset=True),
                                            hashlib.blake2b(text.encode("utf-8"), digest_size=8).hexdigest())
    _warn_problems(problems, warn)
    return list(latest.values())


def load_manifest(run_dir: Path) -> RunManifest | None:
    return manifest_of(run_dir)


# ---- shortening --------------------------------------------------------------------------------------
def clip_middle(text: Any, head: int = OUTPUT_HEAD, tail: int = OUTPUT_TAIL) -> tuple[Any, int]:
    """(text with its middle cut if longer than head + tail, characters cut)."""
    if not isinstance(text, str) or len(text) <= head + tail:
        return text, 0
    cut = len(text) - head - tail
    return text[:head] + text[len(text) - tail:], cut


def _clip_end(text: Any, limit: int) -> tuple[Any, int]:
    if not isinstance(text, str) or len(text) <= limit:
        return text, 0
    return text[:limit], len(text) - limit


class PromptInfo(TypedDict):
    """What a trial page keeps of a verifier call's prompt."""

    messages: int
    chars: int
    last_tail: str  # the last PROMPT_TAIL characters of its last message
    last_cut: int  # the characters of the last message before that tail


def _prompt_info(messages: Any) -> PromptInfo | None:
    """What the viewer keeps of a verifier call's prompt: its size and the tail of its last
    message (where the candidates under judgement are)."""
    if not isinstance(messages, list) or not messages:
        return None
    contents = [m.get("content") if isinstance(m, dict) else m for m in messages]
    texts = [c if isinstance(c, str) else json.dumps(c, ensure_ascii=False) for c in contents]
    last = texts[-1]
    return {"messages": len(messages), "chars": sum(len(t) for t in texts), "last_tail": last[-PROMPT_TAIL:],
            "last_cut": max(0, len(last) - PROMPT_TAIL)}


def _slim_verifier_call(e: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in e.items() if k not in ("type", "ts", "attempt", "turn", "messages", "response")}
    out["ts"] = e.get("ts")
    prompt = _prompt_info(e.get("messages"))
    if prompt:
        out["prompt"] = prompt
    if "response" in e:
        out["response"], cut = _clip_end(e.get("response"), RESPONSE_LIMIT)
        if cut:
            out["response_cut"] = cut
    return out


def _strip(e: dict[str, Any], *drop: str) -> dict[str, Any]:
    return {k: v for k, v in e.items() if k not in ("type", "attempt", "turn", *drop)}


# ---- one trial ---------------------------------------------------------------------------------------
def _new_attempt(index: int) -> dict[str, Any]:
    return {"index": index, "stage": None, "start": None, "turns": [], "verifier": None, "end": None,
            "replay": [], "other": []}


def _turn(attempt: dict[str, Any], t: Any) -> dict[str, Any]:
    turns = attempt["turns"]
    if turns and turns[-1]["turn"] == t:
        return turns[-1]
    for existing in turns:
        if existing["turn"] == t:
            return existing
    new = {"turn": t, "calls": [], "candidates": None, "selection": None, "verifier_calls": [], "format_error": None,
           "action": None, "observation": None, "other": []}
    turns.append(new)
    return new


def lookahead_outcomes(e: dict[str, Any]) -> dict[str, Any]:
    """A lookahead turn (strategies/lookahead.py) as the viewer shows it: per candidate, the outcome
    of the command it proposed (its own fork's run, or the run it shared with identical ones)."""
    la = _strip(e)
    by_candidate: dict[str, Any] = {}
    for i, run in enumerate(la.get("ran") or []):
        out, cut = clip_middle(run.get("output"))
        shown = {**run, "output": out, "output_cut": cut, "run": i}
        for c in run.get("candidates") or []:
            by_candidate[str(c)] = {**shown, "shared": len(run.get("candidates") or []) > 1, "first": c == run["candidates"][0]}
    la.pop("ran", None)
    la["by_candidate"] = by_candidate
    return la


def extract_trial(row: dict[str, Any], events: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """A trial's viewer data: its trials.jsonl fields, each attempt turn by turn, what the
    trajectory strategy did itself (summaries, judge votes, its own model calls), and the RTV
    tournaments with each vote's reply attached."""
    attempts: dict[int, dict[str, Any]] = {}
    strategy: dict[str, Any] = {"calls": [], "verifier_calls": [], "summaries": [], "other": []}
    data: dict[str, Any] = {"v": FORMAT_VERSION, "key": row.get("trial_key"),
                            "row": {k: row[k] for k in ROW_FIELDS if k in row}, "start": None, "end": None}
    counts: dict[str, int] = {}
    for e in events:
        typ = e.get("type")
        counts[typ] = counts.get(typ, 0) + 1
        a = e.get("attempt")
        if typ == "start":
            data["start"] = _strip(e)
            continue
        if typ == "end":
            data["end"] = _strip(e, "record")
            continue
        if not isinstance(a, int) or isinstance(a, bool) or a < 0:
            # calls the trajectory strategy makes itself (attempt -1), or trial-level events
            if typ == "model_call":
                strategy["calls"].append(_strip(e))
            elif typ == "verifier_call":
                strategy["verifier_calls"].append(_slim_verifier_call(e))
            elif typ == "summary":
                strategy["summaries"].append(_strip(e))
            else:
                strategy["other"].append({**_strip(e), "type": typ})
            continue
        att = attempts.setdefault(a, _new_attempt(a))
        t = e.get("turn")
        if typ == "attempt_start":
            att["start"] = _strip(e)
            att["stage"] = e.get("stage")
        elif typ == "attempt_end":
            att["end"] = _strip(e)
            att["stage"] = att["stage"] or e.get("stage")
        elif typ == "verifier":
            v = _strip(e)
            v["output"], v["output_cut"] = clip_middle(v.get("output"))
            att["verifier"] = v
        elif typ == "replay":
            att["replay"].append(_strip(e))
        elif typ == "summary":
            strategy["summaries"].append(_strip(e))
        elif t is None:
            att["other"].append({**_strip(e), "type": typ})
        else:
            turn = _turn(att, t)
            if typ == "model_call":
                turn["calls"].append(_strip(e))
            elif typ == "verifier_call":
                turn["verifier_calls"].append(_slim_verifier_call(e))
            elif typ == "lookahead" and "lookahead" not in turn:  # only lookahead turns carry one
                turn["lookahead"] = lookahead_outcomes(e)
            elif typ in ("candidates", "selection", "format_error", "action", "observation") and turn[typ] is None:
                if typ == "candidates":
                    turn[typ] = e.get("candidates") or []
                elif typ == "observation":
                    obs = _strip(e)
                    obs["output"], obs["output_cut"] = clip_middle(obs.get("output"))
                    turn[typ] = obs
                else:
                    turn[typ] = _strip(e)
            else:
                turn["other"].append({**_strip(e), "type": typ})
    # stage labels from trials.jsonl where the events had none
    for info in row.get("attempts") or []:
        if isinstance(info, dict) and isinstance(info.get("index"), int):
            att = attempts.setdefault(info["index"], _new_attempt(info["index"]))
            att["stage"] = att["stage"] or info.get("stage") or info.get("label")
            att["info"] = {k: info.get(k) for k in ("label", "reward", "passed", "ending", "stop_reason", "turns",
                                                     "context") if k in info}
    data["attempts"] = [attempts[i] for i in sorted(attempts)]
    data["strategy"] = strategy
    data["tournaments"] = tournaments(row.get("strategy_record"), strategy["verifier_calls"])
    data["event_counts"] = counts
    data["clip_head"] = OUTPUT_HEAD  # where a shortened output's middle was cut
    return data


# ---- the index ----------------------------------------------------------------------------------------
def _num(v: Any) -> float | None:
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _compact(v: float | None, digits: int) -> float | int | None:
    """Rounded, and written without a fraction when it has none (1 rather than 1.0)."""
    if v is None or v != v or v in (float("inf"), float("-inf")):
        return None
    v = round(v, digits)
    return int(v) if v == int(v) else v


def total_tokens(row: dict[str, Any]) -> int:
    """Input plus output tokens of every role (as the report's total_tokens)."""
    total = 0
    for u in (row.get("tokens") or {}).values():
        if isinstance(u, dict):
            total += int(_num(u.get("input")) or 0) + int(_num(u.get("output")) or 0)
    return total


class _Codes:
    """Strings stored once; columns hold their positions."""

    def __init__(self) -> None:
        self.values: list[Any] = []
        self._pos: dict[Any, int] = {}

    def __call__(self, v: Any) -> int | None:
        if v is None:
            return None
        key = json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v
        if key not in self._pos:
            self._pos[key] = len(self.values)
            self.values.append(v)
        return self._pos[key]


def build_index(rows: list[dict[str, Any]], manifest: RunManifest | None, run_dir: Path) -> dict[str, Any]:
    settings, tasks, endings, stops, errors = _Codes(), _Codes(), _Codes(), _Codes(), _Codes()
    setting_info: dict[str, dict[str, Any]] = {}
    cols: dict[str, list[Any]] = {k: [] for k in ("key", "s", "t", "i", "r", "p", "e", "sr", "tu", "tok", "c",
                                                  "w", "na", "err", "tm")}
    for row in rows:
        name = str(row.get("setting"))
        if name not in setting_info:
            setting_info[name] = {k: row.get(k) for k in SETTING_FIELDS if k in row}
        wall = (row.get("timing") or {}).get("trial_wall") if isinstance(row.get("timing"), dict) else None
        err = row.get("error")
        cols["key"].append(row["trial_key"])
        cols["s"].append(settings(name))
        cols["t"].append(tasks(str(row.get("task_id"))))
        cols["i"].append(row.get("trial"))
        cols["r"].append(_compact(_num(row.get("reward")), 4))
        cols["p"].append(1 if row.get("passed") else 0)
        cols["e"].append(endings(row.get("ending")))
        cols["sr"].append(stops(row.get("stop_reason")))
        cols["tu"].append(row.get("turns"))
        cols["tok"].append(total_tokens(row))
        cols["c"].append(_compact(_num(row.get("cost_usd")), 6))
        cols["w"].append(_compact(_num(wall), 1))
        cols["na"].append(row.get("n_attempts") or 1)
        cols["err"].append(errors(err.get("type") or "error") if isinstance(err, dict) else None)
        cols["tm"].append(len(row.get("tampering") or []))
    simulated = bool(manifest and manifest.simulated_models) or any(bool(r.get("simulated")) for r in rows)
    imported = manifest.imported_from if manifest is not None else None
    return {"v": FORMAT_VERSION, "run": (manifest.run_name if manifest else None) or run_dir.name, "trials": len(rows),
            "simulated": simulated, "simulated_banner": SIMULATED_BANNER if simulated else None,
            "imported_from": imported.model_dump(exclude_unset=True) if imported is not None else None,
            "settings": settings.values, "setting_info": setting_info, "tasks": tasks.values,
            "endings": endings.values, "stop_reasons": stops.values, "errors": errors.values, "cols": cols}


# ---- writing -------------------------------------------------------------------------------------------
def js_literal(obj: Any) -> str:
    """JSON as a JavaScript literal: compact; NaN and Infinity (which Python's json writes) are
    JavaScript too; the two line separators JSON allows raw and older JavaScript did not are
    escaped."""
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=str)
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _write_if_changed(path: Path, text: str) -> bool:
    data = text.encode("utf-8")
    try:
        if path.read_bytes() == data:
            return False
    except OSError:
        pass
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return True


def write_trial(row: dict[str, Any], target: Path, traj: Path | None, warn: Callable[[str], None]) -> None:
    events: Iterable[dict[str, Any]] = ()
    if traj is not None and traj.is_file():
        events = read_lines(traj, warn)
    elif traj is not None:
        warn(f"{traj}: trajectory file missing; the trial page shows its trials.jsonl line only")
    data = extract_trial(row, events)
    text = f"tbvTrial({json.dumps(row['trial_key'])},{js_literal(data)});\n"
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, target)


def _write_chunk(items: list[tuple[dict[str, Any], str, str | None]]) -> list[str]:
    """A worker process's share: write these trials, return the warnings."""
    warnings: list[str] = []
    for row, target, traj in items:
        write_trial(row, Path(target), Path(traj) if traj else None, warnings.append)
    return warnings


def _workers(todo: int, workers: int | None) -> int:
    if workers is not None:
        return max(1, workers)
    if todo < PARALLEL_FROM:
        return 1
    cpus = os.cpu_count() or 1
    try:  # one process per CPU that is not already busy: on a loaded machine more would only queue
        idle = cpus - int(os.getloadavg()[0] + 0.5)
    except OSError:
        idle = cpus
    return max(1, min(8, idle))


def build_viewer(run_dir: Path, out_dir: Path | None = None, *, force: bool = False,
                 warn: Callable[[str], None] | None = None,
                 progress: Callable[[int], Any] | None = None, workers: int | None = None) -> BuildResult:
    """Write the viewer of `run_dir` into `out_dir` (default RUN/view). `progress(total)`, when
    given, is called once with the number of trial files to write and returns a callable (or
    None) that is called with the number written since its last call. Trial files are written by
    `workers` processes (default, from PARALLEL_FROM files on: one per idle CPU, up to 8)."""
    run_dir = Path(run_dir)
    if not (run_dir / "trials.jsonl").is_file():
        raise NotARun(f"{run_dir}: not a run folder (no trials.jsonl)")
    out = Path(out_dir) if out_dir is not None else run_dir / "view"
    warnings: list[str] = []

    def _warn(msg: str) -> None:
        warnings.append(msg)
        if warn is not None:
            warn(msg)

    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / "build.json").is_file())):
        # Building removes trial files it did not write: only into a folder that is empty or a viewer.
        raise NotARun(f"{out}: exists and is not a viewer folder (no build.json); give a new or empty folder")
    rows = load_rows(run_dir, _warn)
    manifest = load_manifest(run_dir)
    trials_dir = out / "trials"
    trials_dir.mkdir(parents=True, exist_ok=True)

    state_path = out / "build.json"
    try:
        state = json.loads(state_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        state = {}
    seen = state.get("trials", {}) if state.get("format") == FORMAT_VERSION and not force else {}

    todo: list[tuple[dict[str, Any], Path, Path | None]] = []
    digests: dict[str, str] = {}
    for row, digest in rows:
        key = row["trial_key"]
        target = trials_dir / f"{trial_file_stem(key)}.js"
        rel = row.get("trajectory_path")
        traj = run_dir / rel if isinstance(rel, str) and rel else None
        digests[key] = digest
        fresh = seen.get(key) == digest
        if fresh:
            try:
                built_at = target.stat().st_mtime
            except OSError:
                fresh = False
        if fresh and traj is not None:
            try:
                fresh = traj.stat().st_mtime <= built_at
            except OSError:
                pass  # the trajectory is gone; what was built from it stays
        if not fresh:
            todo.append((row, target, traj))

    step = progress(len(todo)) if progress is not None else None
    n_workers = _workers(len(todo), workers)
    if n_workers == 1:
        for row, target, traj in todo:
            write_trial(row, target, traj, _warn)
            if step is not None:
                step(1)
    else:
        from concurrent.futures import ProcessPoolExecutor, as_completed

        size = max(1, min(CHUNK, len(todo) // (4 * n_workers) or 1))
        chunks = [[(row, str(target), str(traj) if traj else None) for row, target, traj in todo[i:i + size]]
                  for i in range(0, len(todo), size)]
        with ProcessPoolExecutor(max_workers=n_workers) as pool:
            futures = {pool.submit(_write_chunk, chunk): len(chunk) for chunk in chunks}
            for fut in as_completed(futures):
                for msg in fut.result():
                    _warn(msg)
                if step is not None:
                    step(futures[fut])

    keep = {f"{trial_file_stem(r['trial_key'])}.js" for r, _ in rows}
    removed = 0
    for p in trials_dir.glob("*.js"):
        if p.name not in keep:
            p.unlink()
            removed += 1

    index = build_index([r for r, _ in rows], manifest, run_dir)
    index_text = f"window.TBV_INDEX={js_literal(index)};\n"
    _write_if_changed(out / "index.js", index_text)
    for name in ASSET_FILES:
        src = ASSETS / name
        dst = out / name
        if not dst.is_file() or dst.read_bytes() != src.read_bytes():
            shutil.copyfile(src, dst)
    _write_if_changed(state_path, json.dumps({"format": FORMAT_VERSION, "trials": digests}, sort_keys=True) + "\n")
    return BuildResult(out_dir=out, index_html=out / "index.html", trials=len(rows), written=len(todo),
                       unchanged=len(rows) - len(todo), removed=removed, index_bytes=len(index_text.encode("utf-8")),
                       warnings=warnings)
