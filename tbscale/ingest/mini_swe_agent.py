"""mini-swe-agent runs: turns, tokens, the submitted patch, and the verdicts from a SWE-bench
evaluation report or the trajectory's own record.

Every format it has written is read, told apart by content (not by file name):
- the bare list of messages of its first releases (what its own tests/test_data hold): no `info`,
  so the exit status is `Submitted` when the last command is the submission, and the submission
  is the text the harness sent back after it;
- ``mini-swe-agent-1`` (``{"info", "messages"}``; commands in the reply's fenced block) and
  ``mini-swe-agent-1.1`` (package 2.x: ``extra.actions`` from tool calls or from the text, an
  ``exit`` message, format errors kept in their own message).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tbscale.errors import TbscaleError
from tbscale.ingest.model import PASS_THRESHOLD, ImportedTrial, ImportedTurn, _safe, _short_model, _text
from tbscale.types.completion import Usage

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


def _usage_from_response(extra: dict[str, Any]) -> Usage | None:
    resp = extra.get("response")
    u = resp.get("usage") if isinstance(resp, dict) else None
    if not isinstance(u, dict) and "cost" not in extra:
        return None
    u = u if isinstance(u, dict) else {}
    details = u.get("completion_tokens_details") or {}
    pdetails = u.get("prompt_tokens_details") or {}
    return Usage(input=int(u.get("prompt_tokens") or 0), output=int(u.get("completion_tokens") or 0),
                 reasoning=int((details or {}).get("reasoning_tokens") or 0),
                 cached=int((pdetails or {}).get("cached_tokens") or 0),
                 cost_usd=float(extra["cost"]) if isinstance(extra.get("cost"), (int, float)) else None)


def _observation(msg: dict[str, Any]) -> tuple[str, int | None]:
    extra = msg.get("extra") or {}
    content = _text(msg.get("content"))
    if "returncode" in extra or "raw_output" in extra:
        code = extra.get("returncode")
        return str(extra.get("raw_output", content) or ""), int(code) if isinstance(code, int) else None
    m = _RETURNCODE.search(content)
    out = _OUTPUT.search(content)
    return (out.group(1) if out else content), (int(m.group(1)) if m else None)


_ROLES = frozenset({"system", "user", "assistant", "tool", "exit"})


def is_mini_trajectory(data: Any) -> bool:
    """Whether parsed JSON is a mini-swe-agent trajectory, in any of its formats."""
    if isinstance(data, list):
        return bool(data) and all(isinstance(m, dict) and m.get("role") in _ROLES and "content" in m
                                  for m in data) and any(m["role"] == "assistant" for m in data)
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        return False
    return str(data.get("trajectory_format", "")).startswith("mini-swe-agent") or isinstance(data.get("info"), dict)


def is_mini_trajectory_file(path: Path) -> bool:
    if not path.name.endswith(".json") or not path.is_file():
        return False
    try:
        with open(path, "rb") as f:
            head = f.read(1).strip() or f.read(64).lstrip()[:1]
            if head not in (b"{", b"["):
                return False
        return is_mini_trajectory(json.loads(path.read_text()))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return False


def mini_trajectory_files(folder: Path, limit: int | None = None) -> list[Path]:
    """The mini-swe-agent trajectories under a folder, by content, `*.traj.json` looked at first."""
    found: list[Path] = []
    named = sorted(folder.rglob("*.traj.json"))
    rest = sorted(p for p in folder.rglob("*.json") if not p.name.endswith(".traj.json"))
    for f in (*named, *rest):
        if is_mini_trajectory_file(f):
            found.append(f)
            if limit is not None and len(found) >= limit:
                break
    return found


def mini_submission(data: dict[str, Any] | list[Any], turns: list[ImportedTurn]) -> str | None:
    """What the run submitted (the patch, for SWE-bench): `info.submission`, or in the bare-list
    format the harness's reply to the submitting command."""
    if isinstance(data, dict):
        sub = (data.get("info") or {}).get("submission")
        return sub if isinstance(sub, str) else None
    if not turns or not turns[-1].submission:
        return None
    last = data[-1] if data else {}
    return _text(last.get("content")) if last.get("role") == "user" else None


def parse_mini_trajectory(data: dict[str, Any] | list[Any]) -> tuple[list[ImportedTurn], str, str | None]:
    """(turns, exit status, instruction) from a mini-swe-agent trajectory (any format)."""
    bare = isinstance(data, list)
    messages = data if bare else (data.get("messages") or [])
    turns: list[ImportedTurn] = []
    instruction = None
    exit_status = "" if bare else str((data.get("info") or {}).get("exit_status") or "")
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
    if bare and turns:
        exit_status = "Submitted" if turns[-1].submission else "unknown"
    return turns, exit_status, instruction


def _trial_cost(stats: dict[str, Any], usages: list[Usage]) -> float | None:
    """`info.model_stats.instance_cost`, else the sum of the replies' costs; unknown (None) when the
    file records none (the bare-list format records no cost at all)."""
    if isinstance(stats.get("instance_cost"), (int, float)):
        return float(stats["instance_cost"])
    costs = [u.cost_usd for u in usages]
    if not costs or any(c is None for c in costs):
        return None
    return float(sum(costs))


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
        found = [p] if p.is_file() else mini_trajectory_files(p)
        if not found:
            raise TbscaleError(f"{p}: no mini-swe-agent trajectories found (JSON files holding a list of messages, "
                               "or `info` and `messages`)")
        files.extend(found)
    trials: list[ImportedTrial] = []
    counts: dict[tuple[str, str], int] = {}
    missing: list[str] = []
    for f in files:
        try:
            data = json.loads(f.read_text())
        except json.JSONDecodeError as e:
            raise TbscaleError(f"{f}: not JSON ({e})") from None
        if not is_mini_trajectory(data):
            raise TbscaleError(f"{f}: not a mini-swe-agent trajectory (a list of messages, or `info` and `messages`)")
        info = (data.get("info") if isinstance(data, dict) else None) or {}
        instance = info.get("instance_id") or (data.get("instance_id") if isinstance(data, dict) else None)
        task_id = str(instance or f.name.removesuffix(".json").removesuffix(".traj"))
        turns, exit_status, instruction = parse_mini_trajectory(data)
        patch = mini_submission(data, turns)
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
        tokens = {"generator": Usage(
            input=sum(u.input for u in usages), output=sum(u.output for u in usages),
            reasoning=sum(u.reasoning for u in usages), cached=sum(u.cached for u in usages),
            cost_usd=_trial_cost(stats, usages), calls=int(stats.get("api_calls") or len(turns)))}
        name = setting or f"mini-swe-agent_{_safe(_short_model(model))}"
        key = (name, task_id)
        trial = counts.get(key, 0)
        counts[key] = trial + 1
        reward = None if verdict is None else float(verdict)
        trials.append(ImportedTrial(
            source=str(f), task_id=task_id, setting=name, agent="mini-swe-agent", model=model, turns=turns,
            stop_reason=exit_status or "unknown", ending=ending, reward=reward,
            passed=bool(verdict) and ending == "pass", tokens=tokens, instruction=instruction,
            error=None if exit_status in ("Submitted", "") else exit_status, trial=trial,
            verifier_details={"model_patch": patch} if patch is not None else {}))
    if missing and not missing_as_failed:
        shown = ", ".join(sorted(set(missing))[:8]) + (" ..." if len(set(missing)) > 8 else "")
        raise TbscaleError(f"no verdict for {len(set(missing))} submitted tasks ({shown}): give --resolved "
                           "(a SWE-bench evaluation report or a JSON of verdicts), or --missing-as-failed")
    if missing:
        warnings.append(f"{len(missing)} submitted trajectories had no verdict: imported as failures with "
                        "ending 'unverified'")
    return trials

