"""Rendering transcripts and candidates for selectors, verifiers and judges.

Candidates are shown without the generator's reasoning (turn-bon Appendix B): the selector judges
the action, not the argument for it. Past turns are rendered as the commands that ran and what
came back. The XML-ish tags are stable, so simulated selectors and tests can parse them.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tbscale.agent.actions import Action


def render_transcript(messages: list[dict[str, Any]]) -> str:
    """The task and every turn so far: assistant commands (no reasoning) and observations."""
    parts, turn = [], 0
    for m in messages[1:]:  # the system prompt is the agent's, not the selector's business
        content = str(m.get("content") or "")
        if m["role"] == "user" and turn == 0:
            parts.append(f"<task_prompt>\n{content}\n</task_prompt>")
        elif m["role"] == "assistant":
            turn += 1
            command = command_of_message(m)
            shown = f"```bash\n{command}\n```" if command else "[response with no runnable command]"
            parts.append(f'<action turn="{turn}">\n{shown}\n</action>')
        elif m["role"] in ("user", "tool"):
            parts.append(f'<observation turn="{turn}">\n{content}\n</observation>')
    return "\n\n".join(parts)


def command_of_message(message: dict[str, Any]) -> str | None:
    """The bash command an assistant message in the history asked for, or None."""
    from tbscale.agent.actions import parse_action
    from tbscale.models.llm import Completion

    calls = [{"id": c.get("id"), "name": c["function"]["name"], "arguments": c["function"]["arguments"]}
             for c in message.get("tool_calls") or []]
    action = parse_action(Completion(text=str(message.get("content") or ""), tool_calls=calls))
    return action.command if action.runnable else None


def render_candidate(index: int, action: Action) -> str:
    if action.runnable:
        body = f"```bash\n{action.command}\n```"
    else:
        body = f"[this response cannot be run: {action.error}]"
    return f'<candidate index="{index}">\n{body}\n</candidate>'


def render_candidates(actions: list[Action]) -> str:
    return "\n\n".join(render_candidate(i, a) for i, a in enumerate(actions))


_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


def parse_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in a reply (models wrap JSON in prose or fences)."""
    text = re.sub(r"```(?:json)?", "", text or "")
    for m in re.finditer(r"\{", text):
        depth = 0
        for j in range(m.start(), len(text)):
            if text[j] == "{":
                depth += 1
            elif text[j] == "}":
                depth -= 1
                if depth == 0:
                    try:
                        obj = json.loads(text[m.start():j + 1])
                    except json.JSONDecodeError:
                        break
                    if isinstance(obj, dict):
                        return obj
                    break
    return None
