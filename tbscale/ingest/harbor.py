"""Harbor job folders (`<job>/<trial>/result.json`, `agent/trajectory.json` in ATIF,
`verifier/`): trials, their turns and verdicts."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tbscale.errors import TbscaleError
from tbscale.ingest.mini_swe_agent import parse_mini_trajectory
from tbscale.ingest.model import PASS_THRESHOLD, ImportedTrial, ImportedTurn, _safe, _short_model, _text
from tbscale.ingest.tool_commands import tool_command
from tbscale.types.actions import FINISH_MARKER, decode_tool_arguments


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
            cmd = tool_command(name, decode_tool_arguments(args))
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
