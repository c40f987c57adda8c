"""Harbor job folders (`<job>/<trial>/result.json`, `agent/trajectory.json` in ATIF and its
`trajectory.cont-N.json` continuations, `verifier/`; multi-step trials with `step_results` and
`steps/<name>/agent/`): trials, their turns, per-step verdicts and the trial's verdict."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tbscale.errors import TbscaleError
from tbscale.ingest.mini_swe_agent import parse_mini_trajectory
from tbscale.ingest.model import PASS_THRESHOLD, ImportedTrial, ImportedTurn, _safe, _short_model, _text
from tbscale.ingest.text_actions import SUBMIT_TOOLS, command_from_text
from tbscale.ingest.tool_commands import tool_command
from tbscale.types.completion import Usage
from tbscale.types.results import StepResult
from tbscale.types.actions import (
    ACTION_IN_TEXT,
    FINAL_MESSAGE,
    FINISH_MARKER,
    NOT_A_SHELL_TOOL,
    decode_tool_arguments,
)


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


def _usage(metrics: dict[str, Any]) -> Usage | None:
    if not metrics:
        return None
    mx = metrics.get("extra") or {}
    cost = metrics.get("cost_usd")
    return Usage(input=int(metrics.get("prompt_tokens") or 0), output=int(metrics.get("completion_tokens") or 0),
                 reasoning=int(mx.get("reasoning_tokens") or 0), cached=int(metrics.get("cached_tokens") or 0),
                 cost_usd=float(cost) if isinstance(cost, (int, float)) else None)


def _agent_turn(step: dict[str, Any], last: bool) -> ImportedTurn:
    """One agent step as a turn: its command from the tool calls, else from the message text
    (agents without native tool calls), else marked for what it is (text_actions.py)."""
    calls = step.get("tool_calls") or []
    cmds, tool_calls, submitted = [], [], False
    for c in calls:
        name = c.get("function_name")
        args = c.get("arguments")
        tool_calls.append({"id": c.get("tool_call_id"), "name": name,
                           "arguments": json.dumps(args) if not isinstance(args, str) else args})
        if name in SUBMIT_TOOLS:
            submitted = True
            continue
        cmd = tool_command(name, decode_tool_arguments(args))
        if cmd:
            cmds.append(cmd)
    text = _text(step.get("message"))
    obs = step.get("observation") or {}
    results = obs.get("results") or []
    error = None
    if not cmds and not calls:
        command, text_submits = command_from_text(text)
        if command:
            cmds.append(command)
        submitted = submitted or text_submits
        if not command and not text_submits:
            error = ACTION_IN_TEXT if results else (FINAL_MESSAGE if last else "no action in the step")
    elif not cmds and not submitted:
        error = NOT_A_SHELL_TOOL
    command = "\n".join(cmds) or None
    if submitted and not command:
        command = f"echo {FINISH_MARKER}"
    outputs, code = [], None
    for r in results:
        outputs.append(_text(r.get("content")))
        ex = r.get("extra") or {}
        for k in ("exit_code", "returncode"):
            if isinstance(ex.get(k), int):
                code = ex[k] if code in (None, 0) else code
    return ImportedTurn(text=text, command=command, runnable=command is not None,
                        parse_error=None if command else error, reasoning=step.get("reasoning_content"),
                        tool_calls=tool_calls, output="\n".join(outputs) if outputs else None, exit_code=code,
                        usage=_usage(step.get("metrics") or {}))


def parse_atif(data: dict[str, Any]) -> tuple[list[ImportedTurn], str | None]:
    """(turns, instruction) from an ATIF trajectory: one turn per agent step; steps copied from an
    earlier segment for context (`is_copied_context`) are not turns again."""
    turns: list[ImportedTurn] = []
    instruction = None
    steps = [s for s in data.get("steps") or [] if isinstance(s, dict)]
    agent_steps = [i for i, s in enumerate(steps) if s.get("source") == "agent" and not s.get("is_copied_context")]
    for i, step in enumerate(steps):
        src = step.get("source")
        if src == "user" and instruction is None and not turns:
            instruction = _text(step.get("message"))
            continue
        if src != "agent" or step.get("is_copied_context"):
            continue
        turns.append(_agent_turn(step, last=bool(agent_steps) and i == agent_steps[-1]))
    return turns, instruction


def _continuations(agent_dir: Path, first: dict[str, Any]) -> list[Path]:
    """The continuation segments of agent_dir/trajectory.json, in order: by
    `continued_trajectory_ref`, else the trajectory.cont-N.json files by N."""
    chain, seen, data = [], set(), first
    while isinstance(data, dict) and isinstance(data.get("continued_trajectory_ref"), str):
        nxt = agent_dir / data["continued_trajectory_ref"]
        if nxt in seen or not nxt.is_file():
            break
        seen.add(nxt)
        chain.append(nxt)
        data = json.loads(nxt.read_text())
    if chain:
        return chain
    found = [(int(m.group(1)), f) for f in agent_dir.glob("trajectory.cont-*.json")
             if (m := re.fullmatch(r"trajectory\.cont-(\d+)\.json", f.name))]
    return [f for _, f in sorted(found)]


def read_agent_dir(agent_dir: Path) -> tuple[list[ImportedTurn], str | None, int] | None:
    """(turns, instruction, segments) from an agent folder: the ATIF trajectory and its
    continuations, or a mini-swe-agent trajectory; None when it holds neither."""
    atif, mini = agent_dir / "trajectory.json", agent_dir / "mini-swe-agent.trajectory.json"
    if atif.is_file():
        first = json.loads(atif.read_text())
        turns, instruction = parse_atif(first)
        conts = _continuations(agent_dir, first)
        for f in conts:
            more, _ = parse_atif(json.loads(f.read_text()))
            turns.extend(more)
        return turns, instruction, 1 + len(conts)
    if mini.is_file():
        turns, _, instruction = parse_mini_trajectory(json.loads(mini.read_text()))
        return turns, instruction, 1
    return None


def _reward(verifier_result: dict[str, Any] | None) -> tuple[float | None, dict[str, float] | None]:
    rewards = (verifier_result or {}).get("rewards") or None
    if not isinstance(rewards, dict) or not rewards:
        return None, None
    numeric = {k: float(v) for k, v in rewards.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    if "reward" in numeric:
        return numeric["reward"], numeric
    return (sum(numeric.values()) / len(numeric) if numeric else None), numeric or None


def _tokens(contexts: list[dict[str, Any]], turns: list[ImportedTurn]) -> dict[str, Usage]:
    """Tokens and cost of the agent over its contexts (one per step in multi-step trials); the cost
    is unknown (None) when any context leaves it unknown, never $0."""
    costs = [c.get("cost_usd") for c in contexts]
    known = bool(costs) and all(isinstance(c, (int, float)) for c in costs)
    return {"generator": Usage(
        input=sum(int(c.get("n_input_tokens") or 0) for c in contexts),
        output=sum(int(c.get("n_output_tokens") or 0) for c in contexts),
        reasoning=sum(t.usage.reasoning for t in turns if t.usage),
        cached=sum(int(c.get("n_cache_tokens") or 0) for c in contexts),
        cost_usd=float(sum(costs)) if known else None,
        calls=sum(1 for t in turns if t.usage) or len(turns))}


def _steps(d: Path, r: dict[str, Any], warnings: list[str]) -> tuple[list[StepResult], list[ImportedTurn],
                                                                       str | None]:
    """Multi-step trials: per step its verdict and turns (steps/<name>/agent/), and the last
    step's test output."""
    steps, turns, output = [], [], None
    for sr in r.get("step_results") or []:
        name = str(sr.get("step_name"))
        reward, rewards = _reward(sr.get("verifier_result"))
        exc = (sr.get("exception_info") or {}).get("exception_type")
        ending = harbor_ending(exc, reward)
        read = read_agent_dir(d / "steps" / name / "agent")
        step_turns = read[0] if read else []
        if read is None and sr.get("agent_result") is not None:
            warnings.append(f"{d / 'steps' / name}: no agent trajectory for step {name!r}")
        turns.extend(step_turns)
        steps.append(StepResult(name=name, reward=reward, rewards=rewards, passed=ending == "pass", ending=ending,
                                stop_reason=exc or "completed", turns=len(step_turns),
                                skipped=sr.get("agent_result") is None and sr.get("verifier_result") is None and not exc))
        stdout = d / "steps" / name / "verifier" / "test-stdout.txt"
        if stdout.is_file():
            output = stdout.read_text(errors="replace")[-20_000:]
    return steps, turns, output


def is_atif_file(path: Path) -> bool:
    """A standalone ATIF trajectory file (by content: `schema_version` ATIF-v..., `steps`)."""
    if not path.is_file() or not path.name.endswith(".json"):
        return False
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return False
    return isinstance(data, dict) and str(data.get("schema_version", "")).startswith("ATIF") and \
        isinstance(data.get("steps"), list)


def _atif_trial(path: Path, setting: str | None) -> ImportedTrial:
    """A trajectory file on its own (no trial result around it): its turns, tokens and cost, and
    no verdict (ending `unverified`)."""
    data = json.loads(path.read_text())
    turns, instruction = parse_atif(data)
    if path.name == "trajectory.json":
        for f in _continuations(path.parent, data):
            turns.extend(parse_atif(json.loads(f.read_text()))[0])
    agent = str((data.get("agent") or {}).get("name") or "agent")
    model = (data.get("agent") or {}).get("model_name")
    fm = data.get("final_metrics") or {}
    usages = [t.usage for t in turns if t.usage]
    cost = fm.get("total_cost_usd")
    if not isinstance(cost, (int, float)):
        costs = [u.cost_usd for u in usages]
        cost = sum(costs) if costs and None not in costs else None
    tokens = {"generator": Usage(
        input=int(fm.get("total_prompt_tokens") or sum(u.input for u in usages)),
        output=int(fm.get("total_completion_tokens") or sum(u.output for u in usages)),
        reasoning=sum(u.reasoning for u in usages),
        cached=int(fm.get("total_cached_tokens") or sum(u.cached for u in usages)),
        cost_usd=float(cost) if cost is not None else None, calls=len(usages) or len(turns))}
    task = path.parent.name if path.name == "trajectory.json" else path.name.removesuffix(".json")
    return ImportedTrial(
        source=str(path), task_id=_safe(task), setting=setting or f"{_safe(agent)}_{_safe(_short_model(model))}",
        agent=agent, model=model, turns=turns, stop_reason="completed", ending="unverified", reward=None,
        passed=False, tokens=tokens, instruction=instruction, started_at=(data.get("steps") or [{}])[0].get("timestamp"))


def read_harbor(paths: list[Path], setting: str | None, warnings: list[str]) -> list[ImportedTrial]:
    files = [Path(p) for p in paths if is_atif_file(Path(p))]
    dirs = [d for p in paths if Path(p) not in files for d in harbor_trial_dirs(Path(p))]
    if not dirs and not files:
        raise TbscaleError(f"{', '.join(map(str, paths))}: no Harbor trials found (folders with a result.json "
                           "holding trial_name and task_name)")
    trials: list[ImportedTrial] = [_atif_trial(f, setting) for f in files]
    if files:
        warnings.append(f"{len(files)} trajectory files hold no verdict: imported as unverified (not passed)")
    for d in dirs:
        r = json.loads((d / "result.json").read_text())
        ai = r.get("agent_info") or {}
        agent = str(ai.get("name") or "agent")
        model = (ai.get("model_info") or {}).get("name")
        provider = (ai.get("model_info") or {}).get("provider")
        model = f"{provider}/{model}" if provider and model and "/" not in model else model
        reward, rewards = _reward(r.get("verifier_result"))
        exc = (r.get("exception_info") or {}).get("exception_type")
        ending = harbor_ending(exc, reward)
        steps, step_turns, step_output = _steps(d, r, warnings) if r.get("step_results") else ([], [], None)
        read = read_agent_dir(d / "agent")
        turns, instruction = (read[0], read[1]) if read else (step_turns, None)
        if read is None and not steps:
            warnings.append(f"{d}: no agent trajectory (agent/trajectory.json); imported without turns")
        contexts = [r["agent_result"]] if r.get("agent_result") else \
            [sr["agent_result"] for sr in r.get("step_results") or [] if sr.get("agent_result")]
        stdout = d / "verifier" / "test-stdout.txt"
        output = stdout.read_text(errors="replace")[-20_000:] if stdout.is_file() else step_output
        name = setting or f"{_safe(agent)}_{_safe(_short_model(model))}"
        task_id = _safe(str(r.get("task_name")).replace("/", "__"))
        trials.append(ImportedTrial(
            source=str(d), task_id=task_id, setting=name, agent=agent, model=model, turns=turns,
            stop_reason=exc or "completed", ending=ending, reward=reward, passed=ending == "pass",
            tokens=_tokens(contexts, turns), instruction=instruction, verifier_output=output,
            error=f"{exc}: {(r.get('exception_info') or {}).get('exception_message', '')}"[:500] if exc else None,
            started_at=r.get("started_at"), finished_at=r.get("finished_at"), steps=steps or None, rewards=rewards))
    by_key: dict[tuple[str, str], list[ImportedTrial]] = {}
    for t in trials:
        by_key.setdefault((t.setting, t.task_id), []).append(t)
    for group in by_key.values():
        for i, t in enumerate(sorted(group, key=lambda t: (t.started_at or "", t.source))):
            t.trial = i
    return trials
