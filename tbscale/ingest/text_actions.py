"""Commands that an agent wrote in its message text rather than in a tool call.

Several harnesses record the action only inside the reply: terminus-2 (text-based, its ATIF
written with `raw_content`) replies with a JSON object whose `commands` hold `keystrokes`, or with
`<keystrokes>` elements in its XML variant; OpenHands without native function calling writes
`<function=execute_bash><parameter=command>...</parameter></function>`, and its command actions
read "Running command: ..."; mini-swe-agent-style agents put one fenced bash block in the reply.
`command_from_text` reads the command from where the agent put it. When a step ran something
(it has an observation) but its text matches none of these, the importer marks it ACTION_IN_TEXT:
the action ran, tbscale could not read it, and the turn is not counted as one that cannot run.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tbscale.ingest.tool_commands import tool_command

SUBMIT_TOOLS = frozenset({"mark_task_complete", "submit", "finish", "task_complete"})

_KEYSTROKES = re.compile(r"<keystrokes[^>]*>(.*?)</keystrokes>", re.DOTALL)
_XML_DONE = re.compile(r"<task_complete>\s*true\s*</task_complete>", re.IGNORECASE)
_FUNCTION = re.compile(r"<function=([\w.-]+)>(.*?)(?:</function>|\Z)", re.DOTALL)
_PARAMETER = re.compile(r"<parameter=([\w.-]+)>(.*?)</parameter>", re.DOTALL)
_FENCE = re.compile(r"```(?:bash|sh|shell|console|mswea_bash_command)[ \t]*\n(.*?)\n?```", re.DOTALL)
_RUNNING = re.compile(r"\ARunning command:\s*(.+)", re.DOTALL)


def _json_object(text: str) -> dict[str, Any] | None:
    body = text.strip()
    if body.startswith("```"):
        body = re.sub(r"\A```\w*\s*|\s*```\Z", "", body)
    for candidate in (body, body[body.find("{"):body.rfind("}") + 1] if "{" in body else ""):
        if not candidate:
            continue
        try:
            data = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(data, dict):
            return data
    return None


def _keystrokes(parts: list[str]) -> str | None:
    cmds = [p.rstrip("\n") for p in parts if isinstance(p, str) and p.strip()]
    return "\n".join(cmds) or None


def command_from_text(text: str | None) -> tuple[str | None, bool]:
    """(the command the text holds, whether it submits), or (None, False) when it holds none."""
    if not text or not text.strip():
        return None, False
    data = _json_object(text)
    if data is not None and isinstance(data.get("commands"), list):  # terminus-2, JSON
        command = _keystrokes([c.get("keystrokes") for c in data["commands"] if isinstance(c, dict)])
        return command, data.get("task_complete") is True or str(data.get("task_complete")).lower() == "true"
    keys = _KEYSTROKES.findall(text)
    if keys or _XML_DONE.search(text):  # terminus-2, XML
        return _keystrokes(keys), bool(_XML_DONE.search(text))
    calls = _FUNCTION.findall(text)
    if calls:  # OpenHands without function calling
        cmds, submitted = [], False
        for name, body in calls:
            params = {k: v.strip("\n") for k, v in _PARAMETER.findall(body)}
            if name in SUBMIT_TOOLS:
                submitted = True
                continue
            cmd = tool_command("bash" if name == "execute_bash" else name, params)
            if cmd:
                cmds.append(cmd)
        return "\n".join(cmds) or None, submitted
    running = _RUNNING.match(text.strip())
    if running:
        return running.group(1).strip() or None, False
    blocks = _FENCE.findall(text)
    if len(blocks) == 1 and blocks[0].strip():
        return blocks[0].strip(), False
    return None, False
