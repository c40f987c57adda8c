"""mini-swe-agent runs (`*.traj.json`, formats mini-swe-agent-1 and -1.1): turns, tokens, and the
verdicts from a SWE-bench evaluation report or the trajectory's own record."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tbscale.errors import TbscaleError
from tbscale.ingest.model import PASS_THRESHOLD, ImportedTrial, ImportedTurn, _safe, _short_model, _text

_MINI_FENCE = re.compile(r"```(?:bash|sh|shell|mswea_bash_command)?[ \t]*\n(.*?)\n?```", re.DOTALL)
_RETURNCODE = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")
_OUTPUT = re.compile(r"<output>\n?(.*?)</output>", re.DOTALL)


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
