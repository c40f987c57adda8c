"""Runs made elsewhere, read into tbscale run folders: mini-swe-agent trajectories and Harbor jobs.

`tbscale import PATH... --name NAME` writes ``results/NAME/`` in tbscale's own format
(manifest.json, trials.jsonl, trajectories/<task>/<setting>__t<i>__<key>.jsonl; docs/formats.md),
so ``tbscale report`` (pass@k, consistency, costs, endings, behaviours, Figure 5) and
``tbscale judge`` work on them unchanged, and they can be reported next to tbscale's own runs.
Nothing is rerun. Every imported trial is one attempt of a single-sample agent (policy
``baseline``, N = 1), each response one candidate that was executed.

mini-swe-agent (``*.traj.json``, formats ``mini-swe-agent-1`` and ``-1.1``)
    Each PATH is a run (e.g. the output folder of ``mini-extra swebench``); a task's trials are
    numbered in the order the PATHs are given. The task id is ``info.instance_id`` or the file name
    (``<id>.traj.json``). Commands come from ``extra.actions`` (v2) or the single fenced block of the
    reply (v1); outputs and exit codes from the observation messages; tokens from each reply's
    ``extra.response.usage``, cost from ``info.model_stats``. A trajectory holds no verdict, so the
    pass/fail of each task comes from ``--resolved`` (a SWE-bench evaluation report with
    ``resolved_ids``, a JSON list of resolved ids, or a JSON object id -> bool/reward) or from
    ``info.resolved`` / ``info.reward`` when a wrapper stored one. Endings follow turn-bon Table 5:
    only ``Submitted`` can pass; ``LimitsExceeded``/``TimeExceeded`` are ``time_limit``, context
    errors ``out_of_context``, the rest ``agent_error``.

Harbor (job folders: ``<job>/<trial>/result.json``, ``agent/trajectory.json``, ``verifier/``)
    A PATH may be a job folder, a folder of jobs or one trial folder. Settings are (agent, model)
    pairs unless ``--setting`` names one; a task's trials are numbered by start time. Verdicts
    come from ``verifier_result.rewards`` (``reward``, else the mean), endings from
    ``exception_info.exception_type`` by Table 5 (an attempt with an exception never passes).
    Turns come from the ATIF trajectory (agent steps, their tool calls and observations; the
    command is the tool call's ``command``/``cmd``/``keystrokes``), or from
    ``agent/mini-swe-agent.trajectory.json`` when that is all there is; tokens and cost from
    ``agent_result``.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

from tbscale import SCHEMA_VERSION
from tbscale.agent.actions import FINISH_MARKER
from tbscale.errors import TbscaleError

PASS_THRESHOLD = 1.0 - 1e-9
_MINI_FENCE = re.compile(r"```(?:bash|sh|shell|mswea_bash_command)?[ \t]*\n(.*?)\n?```", re.DOTALL)
_RETURNCODE = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")
_OUTPUT = re.compile(r"<output>\n?(.*?)</output>", re.DOTALL)


@dataclass
class ImportedTurn:
    text: str
    command: str | None
    runnable: bool
    parse_error: str | None = None
    reasoning: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    output: str | None = None
    exit_code: int | None = None
    usage: dict[str, Any] | None = None  # input, output, reasoning, cached, cost_usd
    finish_reason: str | None = None

    @property
    def submission(self) -> bool:
        return self.runnable and FINISH_MARKER in (self.command or "")


@dataclass
class ImportedTrial:
    source: str
    task_id: str
    setting: str
    agent: str
    model: str | None
    turns: list[ImportedTurn]
    stop_reason: str
    ending: str
    reward: float | None
    passed: bool
    tokens: dict[str, Any]
    instruction: str | None = None
    verifier_output: str | None = None
    error: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    trial: int = 0


@dataclass
class ImportResult:
    run_dir: Path
    format: str
    trials: int
    tasks: int
    warnings: list[str] = field(default_factory=list)


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text(c.get("text") if isinstance(c, dict) else c) for c in content)
    return str(content)


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "x"


def _short_model(model: str | None) -> str:
    return (model or "unknown-model").rsplit("/", 1)[-1]


# ---------------------------------------------------------------------------------------------
# Endings (turn-bon Table 5)
# ---------------------------------------------------------------------------------------------


def mini_ending(exit_status: str, verdict: bool | None) -> str:
    s = exit_status or ""
    if s == "Submitted":
        if verdict is None:
            return "unverified"
        return "pass" if verdict else "wrong_submission"
    if re.search(r"ContextWindow|ContextLength|context_length", s):
        return "out_of_context"
    if s in ("LimitsExceeded", "TimeExceeded") or "Timeout" in s:
        return "time_limit"
    return "agent_error"


def harbor_ending(exception_type: str | None, reward: float | None) -> str:
    if exception_type:
        if re.search(r"ContextLength|ContextWindow|OutputLength|OutputToken", exception_type):
            return "out_of_context"
        if exception_type == "AgentTimeoutError":
            return "time_limit"
        return "agent_error"
    if reward is None:
        return "agent_error"
    return "pass" if reward >= PASS_THRESHOLD else "wrong_submission"


# ---------------------------------------------------------------------------------------------
# mini-swe-agent
# ---------------------------------------------------------------------------------------------


def _usage_from_response(extra: dict[str, Any]) -> dict[str, Any] | None:
    resp = extra.get("response")
    u = resp.get("usage") if isinstance(resp, dict) else None
    if not isinstance(u, dict) and "cost" not in extra:
        return None
    u = u if isinstance(u, dict) else {}
    details = u.get("completion_tokens_details") or {}
    pdetails = u.get("prompt_tokens_details") or {}
    return {"input": int(u.get("prompt_tokens") or 0), "output": int(u.get("completion_tokens") or 0),
            "reasoning": int((details or {}).get("reasoning_tokens") or 0),
            "cached": int((pdetails or {}).get("cached_tokens") or 0), "cost_usd": float(extra.get("cost") or 0.0)}


def _observation(msg: dict[str, Any]) -> tuple[str, int | None]:
    extra = msg.get("extra") or {}
    content = _text(msg.get("content"))
    if "returncode" in extra or "raw_output" in extra:
        code = extra.get("returncode")
        return str(extra.get("raw_output", content) or ""), int(code) if isinstance(code, int) else None
    m = _RETURNCODE.search(content)
    out = _OUTPUT.search(content)
    return (out.group(1) if out else content), (int(m.group(1)) if m else None)


def parse_mini_trajectory(data: dict[str, Any]) -> tuple[list[ImportedTurn], str, str | None]:
    """(turns, exit status, instruction) from a mini-swe-agent trajectory (v1 or v2 format)."""
    messages = data.get("messages") or []
    turns: list[ImportedTurn] = []
    instruction = None
    exit_status = str((data.get("info") or {}).get("exit_status") or "")
    current: ImportedTurn | None = None
    for msg in messages:
        role = msg.get("role")
        extra = msg.get("extra") or {}
        if role == "system":
            continue
        if role == "assistant":
            text = _text(msg.get("content"))
            tool_calls = []
            for tc in msg.get("tool_calls") or []:
                fn = tc.get("function") or {}
                tool_calls.append({"id": tc.get("id"), "name": fn.get("name"), "arguments": fn.get("arguments")})
            actions = extra.get("actions")
            if isinstance(actions, list) and actions:
                cmds = [str(a.get("command", "")) for a in actions if isinstance(a, dict)]
                command, runnable, err = "\n".join(cmds).strip() or None, True, None
            elif isinstance(actions, list) and "actions" in extra and not actions:
                command, runnable, err = None, False, "no action in the response"
            else:  # v1: the single fenced block of the reply
                blocks = _MINI_FENCE.findall(text)
                if len(blocks) == 1 and blocks[0].strip():
                    command, runnable, err = blocks[0].strip(), True, None
                else:
                    command, runnable, err = None, False, f"found {len(blocks)} command blocks; expected exactly one"
            reasoning = msg.get("reasoning_content") or None
            current = ImportedTurn(text, command, runnable and bool(command), err, reasoning, tool_calls,
                                   usage=_usage_from_response(extra))
            turns.append(current)
            continue
        if role == "exit":
            exit_status = str(extra.get("exit_status") or exit_status or msg.get("content") or "")
            continue
        if role in ("user", "tool"):
            if current is None:
                if instruction is None and role == "user":
                    instruction = _text(msg.get("content"))
                continue
            if extra.get("interrupt_type") == "FormatError":
                # v2 keeps a response it could not parse only inside this message (model_response)
                current = ImportedTurn(_text(extra.get("model_response")), None, False,
                                       "the response could not be parsed into an action",
                                       usage=_usage_from_response(extra))
                turns.append(current)
                continue
            content = _text(msg.get("content"))
            is_obs = "returncode" in extra or "raw_output" in extra or bool(_RETURNCODE.search(content))
            if not is_obs:
                continue  # v1's reply to a format error, or other harness text
            out, code = _observation(msg)
            current.output = out if current.output is None else current.output + "\n" + out
            if code is not None:
                current.exit_code = code if current.exit_code in (None, 0) else current.exit_code
    return turns, exit_status, instruction


def _load_verdicts(path: Path | None) -> dict[str, bool] | None:
    if path is None:
        return None
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise TbscaleError(f"{path}: cannot read verdicts ({e})") from None
    if isinstance(data, dict) and "resolved_ids" in data:
        resolved = set(data.get("resolved_ids") or [])
        known = resolved | set(data.get("unresolved_ids") or []) | set(data.get("completed_ids") or []) \
            | set(data.get("submitted_ids") or []) | set(data.get("error_ids") or []) | set(data.get("empty_patch_ids") or [])
        return {i: i in resolved for i in known}
    if isinstance(data, list):
        return {str(i): True for i in data}
    if isinstance(data, dict):
        out = {}
        for k, v in data.items():
            if isinstance(v, dict):
                v = v.get("resolved", v.get("passed", v.get("reward")))
            if isinstance(v, bool):
                out[k] = v
            elif isinstance(v, (int, float)):
                out[k] = float(v) >= PASS_THRESHOLD
        return out
    raise TbscaleError(f"{path}: verdicts must be a SWE-bench report, a list of resolved ids or an object")


def _resolved_list_means_missing_is_false(path: Path | None) -> bool:
    if path is None:
        return False
    try:
        return isinstance(json.loads(Path(path).read_text()), list)
    except (OSError, json.JSONDecodeError):
        return False


def read_mini_swe_agent(paths: list[Path], setting: str | None, resolved: Path | None,
                        missing_as_failed: bool, warnings: list[str]) -> list[ImportedTrial]:
    verdicts = _load_verdicts(resolved)
    list_file = _resolved_list_means_missing_is_false(resolved)
    files: list[Path] = []
    for p in paths:
        p = Path(p)
        found = [p] if p.is_file() else sorted(p.rglob("*.traj.json"))
        if not found:
            raise TbscaleError(f"{p}: no mini-swe-agent trajectories (*.traj.json) found")
        files.extend(found)
    trials: list[ImportedTrial] = []
    counts: dict[tuple[str, str], int] = {}
    missing: list[str] = []
    for f in files:
        try:
            data = json.loads(f.read_text())
        except json.JSONDecodeError as e:
            raise TbscaleError(f"{f}: not JSON ({e})") from None
        info = data.get("info") or {}
        task_id = str(info.get("instance_id") or data.get("instance_id") or f.name.removesuffix(".traj.json"))
        turns, exit_status, instruction = parse_mini_trajectory(data)
        model = ((info.get("config") or {}).get("model") or {}).get("model_name")
        verdict: bool | None = None
        if verdicts is not None and task_id in verdicts:
            verdict = verdicts[task_id]
        elif verdicts is not None and list_file:
            verdict = False
        elif any(k in info for k in ("resolved", "passed", "reward")):
            v = info.get("resolved", info.get("passed", info.get("reward")))
            verdict = bool(v) if isinstance(v, bool) else (v is not None and float(v) >= PASS_THRESHOLD)
        if verdict is None and exit_status == "Submitted":
            missing.append(task_id)
        ending = mini_ending(exit_status, verdict)
        stats = info.get("model_stats") or {}
        usages = [t.usage for t in turns if t.usage]
        tokens = {"generator": {
            "input": sum(u["input"] for u in usages), "output": sum(u["output"] for u in usages),
            "reasoning": sum(u["reasoning"] for u in usages), "cached": sum(u["cached"] for u in usages),
            "cost_usd": float(stats.get("instance_cost") or sum(u["cost_usd"] for u in usages)),
            "calls": int(stats.get("api_calls") or len(turns))}}
        name = setting or f"mini-swe-agent_{_safe(_short_model(model))}"
        key = (name, task_id)
        trial = counts.get(key, 0)
        counts[key] = trial + 1
        reward = None if verdict is None else float(verdict)
        trials.append(ImportedTrial(
            source=str(f), task_id=task_id, setting=name, agent="mini-swe-agent", model=model, turns=turns,
            stop_reason=exit_status or "unknown", ending=ending, reward=reward,
            passed=bool(verdict) and ending == "pass", tokens=tokens, instruction=instruction,
            error=None if exit_status in ("Submitted", "") else exit_status, trial=trial))
    if missing and not missing_as_failed:
        shown = ", ".join(sorted(set(missing))[:8]) + (" ..." if len(set(missing)) > 8 else "")
        raise TbscaleError(f"no verdict for {len(set(missing))} submitted tasks ({shown}): give --resolved "
                           "(a SWE-bench evaluation report or a JSON of verdicts), or --missing-as-failed")
    if missing:
        warnings.append(f"{len(missing)} submitted trajectories had no verdict: imported as failures with "
                        "ending 'unverified'")
    return trials


# ---------------------------------------------------------------------------------------------
# Harbor
# ---------------------------------------------------------------------------------------------


def _is_harbor_trial(d: Path) -> bool:
    f = d / "result.json"
    if not f.is_file():
        return False
    try:
        data = json.loads(f.read_text())
    except (OSError, json.JSONDecodeError):
        return False
    return isinstance(data, dict) and "trial_name" in data and "task_name" in data


def harbor_trial_dirs(path: Path, depth: int = 3) -> list[Path]:
    path = Path(path)
    if _is_harbor_trial(path):
        return [path]
    found: list[Path] = []
    if depth > 0 and path.is_dir():
        for d in sorted(p for p in path.iterdir() if p.is_dir()):
            found.extend(harbor_trial_dirs(d, depth - 1))
    return found


_COMMAND_KEYS = ("command", "cmd", "keystrokes", "script", "code")


def _atif_command(arguments: Any) -> str | None:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return None
    if not isinstance(arguments, dict):
        return None
    for k in _COMMAND_KEYS:
        v = arguments.get(k)
        if isinstance(v, str) and v.strip():
            return v.strip()
        if isinstance(v, list) and v and all(isinstance(x, str) for x in v):
            return " ".join(v)
    return None


def parse_atif(data: dict[str, Any]) -> tuple[list[ImportedTurn], str | None]:
    """(turns, instruction) from an ATIF trajectory: one turn per agent step."""
    turns: list[ImportedTurn] = []
    instruction = None
    for step in data.get("steps") or []:
        src = step.get("source")
        if src == "user" and instruction is None and not turns:
            instruction = _text(step.get("message"))
            continue
        if src != "agent" or step.get("is_copied_context"):
            continue
        calls = step.get("tool_calls") or []
        cmds, tool_calls, submitted = [], [], False
        for c in calls:
            name = c.get("function_name")
            args = c.get("arguments")
            tool_calls.append({"id": c.get("tool_call_id"), "name": name,
                               "arguments": json.dumps(args) if not isinstance(args, str) else args})
            if name in ("mark_task_complete", "submit", "finish", "task_complete"):
                submitted = True
                continue
            cmd = _atif_command(args)
            if cmd:
                cmds.append(cmd)
        command = "\n".join(cmds) or None
        if submitted and not command:
            command = f"echo {FINISH_MARKER}"
        obs = step.get("observation") or {}
        outputs, code = [], None
        for r in obs.get("results") or []:
            outputs.append(_text(r.get("content")))
            ex = r.get("extra") or {}
            for k in ("exit_code", "returncode"):
                if isinstance(ex.get(k), int):
                    code = ex[k] if code in (None, 0) else code
        m = step.get("metrics") or {}
        mx = m.get("extra") or {}
        usage = None
        if m:
            usage = {"input": int(m.get("prompt_tokens") or 0), "output": int(m.get("completion_tokens") or 0),
                     "reasoning": int(mx.get("reasoning_tokens") or 0), "cached": int(m.get("cached_tokens") or 0),
                     "cost_usd": float(m.get("cost_usd") or 0.0)}
        turns.append(ImportedTurn(
            text=_text(step.get("message")), command=command, runnable=command is not None,
            parse_error=None if command else "no tool call with a command", reasoning=step.get("reasoning_content"),
            tool_calls=tool_calls, output="\n".join(outputs) if outputs else None, exit_code=code, usage=usage))
    return turns, instruction


def read_harbor(paths: list[Path], setting: str | None, warnings: list[str]) -> list[ImportedTrial]:
    dirs = [d for p in paths for d in harbor_trial_dirs(Path(p))]
    if not dirs:
        raise TbscaleError(f"{', '.join(map(str, paths))}: no Harbor trials found (folders with a result.json "
                           "holding trial_name and task_name)")
    trials: list[ImportedTrial] = []
    for d in dirs:
        r = json.loads((d / "result.json").read_text())
        ai = r.get("agent_info") or {}
        agent = str(ai.get("name") or "agent")
        model = (ai.get("model_info") or {}).get("name")
        provider = (ai.get("model_info") or {}).get("provider")
        model = f"{provider}/{model}" if provider and model and "/" not in model else model
        rewards = (r.get("verifier_result") or {}).get("rewards") or None
        reward = None
        if isinstance(rewards, dict) and rewards:
            reward = float(rewards["reward"]) if "reward" in rewards else \
                sum(float(v) for v in rewards.values()) / len(rewards)
        exc = (r.get("exception_info") or {}).get("exception_type")
        ending = harbor_ending(exc, reward)
        turns: list[ImportedTurn] = []
        instruction = None
        atif, mini = d / "agent" / "trajectory.json", d / "agent" / "mini-swe-agent.trajectory.json"
        if atif.is_file():
            turns, instruction = parse_atif(json.loads(atif.read_text()))
        elif mini.is_file():
            turns, _, instruction = parse_mini_trajectory(json.loads(mini.read_text()))
        else:
            warnings.append(f"{d}: no agent trajectory (agent/trajectory.json); imported without turns")
        ar = r.get("agent_result") or {}
        tokens = {"generator": {"input": int(ar.get("n_input_tokens") or 0), "output": int(ar.get("n_output_tokens") or 0),
                                "reasoning": sum((t.usage or {}).get("reasoning", 0) for t in turns),
                                "cached": int(ar.get("n_cache_tokens") or 0), "cost_usd": float(ar.get("cost_usd") or 0.0),
                                "calls": sum(1 for t in turns if t.usage) or len(turns)}}
        stdout = d / "verifier" / "test-stdout.txt"
        name = setting or f"{_safe(agent)}_{_safe(_short_model(model))}"
        task_id = _safe(str(r.get("task_name")).replace("/", "__"))
        trials.append(ImportedTrial(
            source=str(d), task_id=task_id, setting=name, agent=agent, model=model, turns=turns,
            stop_reason=exc or "completed", ending=ending, reward=reward, passed=ending == "pass", tokens=tokens,
            instruction=instruction, verifier_output=stdout.read_text(errors="replace")[-20_000:] if stdout.is_file() else None,
            error=f"{exc}: {(r.get('exception_info') or {}).get('exception_message', '')}"[:500] if exc else None,
            started_at=r.get("started_at"), finished_at=r.get("finished_at")))
    by_key: dict[tuple[str, str], list[ImportedTrial]] = {}
    for t in trials:
        by_key.setdefault((t.setting, t.task_id), []).append(t)
    for group in by_key.values():
        for i, t in enumerate(sorted(group, key=lambda t: (t.started_at or "", t.source))):
            t.trial = i
    return trials


# ---------------------------------------------------------------------------------------------
# Writing a run folder
# ---------------------------------------------------------------------------------------------


def _hash(*parts: Any, length: int = 16) -> str:
    return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:length]


def detect_format(path: Path) -> str | None:
    path = Path(path)
    if path.is_file() and path.name.endswith(".traj.json"):
        return "mini-swe-agent"
    if path.is_dir():
        if harbor_trial_dirs(path):
            return "harbor"
        if next(path.rglob("*.traj.json"), None) is not None:
            return "mini-swe-agent"
    return None


def _candidate(t: ImportedTurn) -> dict[str, Any]:
    return {"text": t.text, "reasoning": t.reasoning, "tool_calls": t.tool_calls, "finish_reason": t.finish_reason,
            "output_tokens": (t.usage or {}).get("output", 0), "reasoning_tokens": (t.usage or {}).get("reasoning", 0),
            "command": t.command if t.runnable else None, "runnable": t.runnable, "submission": t.submission,
            "parse_error": t.parse_error}


def write_run(trials: list[ImportedTrial], run_dir: Path, fmt: str, sources: Iterable[Path]) -> None:
    from tbscale.logs import EventLog, TrialIndex

    run_dir.mkdir(parents=True, exist_ok=True)
    index = TrialIndex(run_dir / "trials.jsonl")
    setting_keys: dict[str, str] = {}
    settings: dict[str, dict[str, Any]] = {}
    for t in trials:
        skey = setting_keys.setdefault(t.setting, _hash(fmt, t.setting, t.agent, t.model, length=12))
        settings.setdefault(t.setting, {"name": t.setting, "agent": t.agent, "generator": t.model,
                                        "policy": {"name": "baseline"}, "trajectory": {"name": "single"}})
        key = _hash(fmt, t.source, t.task_id, t.setting, t.trial)
        rel = f"trajectories/{_safe(t.task_id)}/{t.setting}__t{t.trial}__{key}.jsonl"
        log = EventLog(run_dir / rel, trial_key=key, task_id=t.task_id, setting=t.setting, setting_key=skey,
                       trial=t.trial, seed=None, simulated=False, imported_from=fmt, source=t.source,
                       instruction=t.instruction)
        log.write("attempt_start", attempt=0, turn=None, stage="final", imported=True, context_attempts=[])
        for n, turn in enumerate(t.turns, start=1):
            if turn.usage:
                log.write("model_call", attempt=0, turn=n, role="generator", model=t.model, n=1,
                          usage={**turn.usage, "calls": 1}, latency_sec=None, retries=0, error=None)
            log.write("candidates", attempt=0, turn=n, candidates=[_candidate(turn)])
            if turn.runnable:
                log.write("action", attempt=0, turn=n, command=turn.command, selected_index=0, n_candidates=1)
                if turn.output is not None:
                    log.write("observation", attempt=0, turn=n, exit_code=turn.exit_code, output=turn.output,
                              timed_out=False, duration_sec=None)
            else:
                log.write("format_error", attempt=0, turn=n, error=turn.parse_error, count=None)
        log.write("verifier", attempt=0, turn=len(t.turns) or None, reward=t.reward, passed=t.passed, error=None,
                  output=t.verifier_output or "", details={"imported": True})
        log.write("attempt_end", attempt=0, turn=len(t.turns) or None, stage="final", ending=t.ending,
                  stop_reason=t.stop_reason, reward=t.reward, turns=len(t.turns), error=t.error, timing={},
                  usage=t.tokens)
        log.write("end", attempt=None, turn=None, reward=t.reward, passed=t.passed, ending=t.ending,
                  final_attempt=0, record={})
        log.close()
        index.append({
            "schema_version": SCHEMA_VERSION, "run": run_dir.name, "setting": t.setting, "setting_key": skey,
            "trial_key": key, "task_id": t.task_id, "task_format": fmt, "trial": t.trial, "seed": None,
            "agent": t.agent, "policy": "baseline", "policy_params": {}, "trajectory": "single",
            "trajectory_params": {}, "n": 1, "generator_model": t.model, "selector_model": None, "simulated": False,
            "reward": t.reward, "passed": bool(t.passed), "ending": t.ending, "stop_reason": t.stop_reason,
            "turns": len(t.turns), "tokens": t.tokens,
            "cost_usd": round(sum(u.get("cost_usd", 0) for u in t.tokens.values()), 6), "timing": {},
            "n_attempts": 1, "final_attempt": 0, "attempts": None, "strategy_record": None,
            "trajectory_path": rel, "error": {"type": t.error.split(":", 1)[0], "message": t.error} if t.error else None,
            "started_at": t.started_at, "finished_at": t.finished_at, "imported_from": fmt, "source": t.source})
    manifest = {"schema_version": SCHEMA_VERSION, "run_name": run_dir.name,
                "imported_from": {"format": fmt, "paths": [str(p) for p in sources],
                                  "at": datetime.now(timezone.utc).isoformat()},
                "experiment": {"name": run_dir.name, "models": {}, "tasks": {"path": None},
                               "settings": list(settings.values())},
                "setting_keys": setting_keys, "created_at": datetime.now(timezone.utc).isoformat(),
                "simulated_models": False, "invocations": []}
    (run_dir / "manifest.json").write_text(json.dumps(manifest, indent=2))


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
                               "give --format mini-swe-agent or --format harbor")
        fmt = kinds.pop()
    if fmt not in ("mini-swe-agent", "harbor"):
        raise TbscaleError(f"--format: unknown format {fmt!r} (mini-swe-agent or harbor)")
    if setting is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", setting):
        raise TbscaleError(f"--setting: {setting!r} must be letters, digits, '_', '.', '-'")
    warnings: list[str] = []
    if fmt == "mini-swe-agent":
        trials = read_mini_swe_agent(paths, setting, resolved, missing_as_failed, warnings)
    else:
        trials = read_harbor(paths, setting, warnings)
    run_dir = Path(run_dir)
    if run_dir.exists() and any(run_dir.iterdir()):
        if not force:
            raise TbscaleError(f"{run_dir}: already exists; pick another --name or pass --force to replace it")
        shutil.rmtree(run_dir)
    write_run(trials, run_dir, fmt, paths)
    return ImportResult(run_dir, fmt, len(trials), len({t.task_id for t in trials}), warnings)


def auto_import(path: Path, cache_root: Path = Path("results") / "imported") -> Path | None:
    """For `tbscale report PATH` on a folder that is not a run: import it (once, again if newer)
    into cache_root/<name> and return that run folder; None if PATH is in neither format."""
    fmt = detect_format(path)
    if fmt is None:
        return None
    target = Path(cache_root) / _safe(Path(path).resolve().name)
    src_mtime = max((f.stat().st_mtime for f in Path(path).rglob("*") if f.is_file()), default=0)
    if (target / "trials.jsonl").is_file() and (target / "trials.jsonl").stat().st_mtime >= src_mtime:
        return target
    import_runs([Path(path)], target, fmt=fmt, missing_as_failed=True, force=True)
    return target
