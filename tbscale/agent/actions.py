"""Turning a model response into the one bash action it asks for.

A response names its command either as a tool call (`bash` with a `command` argument) or as the
single fenced ```bash block of a text reply (mini-swe-agent's format, for models without tools).
Anything else is a format error: the harness answers it with a message and counts it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Literal

from tbscale.models.llm import Completion

FINISH_MARKER = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
_FENCE = re.compile(r"```(?:bash|sh|shell)?[ \t]*\n(.*?)\n?```", re.DOTALL)

BASH_TOOL = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Run one bash command in the task's container and return its exit code and output.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
    },
}


@dataclass
class Action:
    kind: Literal["command", "invalid"]
    command: str | None = None
    error: str | None = None

    @property
    def runnable(self) -> bool:
        return self.kind == "command"

    @property
    def is_submission(self) -> bool:
        """Whether the command submits: it contains the finish marker. Whether the attempt
        really ends is decided by the command's output (its first line must be the marker)."""
        return self.kind == "command" and FINISH_MARKER in (self.command or "")


def parse_action(completion: Completion) -> Action:
    if completion.finish_reason == "length":
        return Action("invalid", error="the response was cut off at the output-length limit")
    if completion.tool_calls:
        if len(completion.tool_calls) > 1:
            return Action("invalid", error=f"{len(completion.tool_calls)} tool calls; give exactly one")
        call = completion.tool_calls[0]
        if call.get("name") != "bash":
            return Action("invalid", error=f"unknown tool {call.get('name')!r}; the only tool is bash")
        args = call.get("arguments")
        try:
            parsed = json.loads(args) if isinstance(args, str) else args
        except json.JSONDecodeError:
            return Action("invalid", error="tool arguments are not valid JSON")
        if not isinstance(parsed, dict) or not isinstance(parsed.get("command"), str) or not parsed["command"].strip():
            return Action("invalid", error="the bash tool needs a non-empty string `command`")
        return Action("command", parsed["command"].strip())
    blocks = _FENCE.findall(completion.text or "")
    if len(blocks) != 1:
        return Action("invalid", error=f"found {len(blocks)} ```bash blocks; give exactly one")
    command = blocks[0].strip()
    if not command:
        return Action("invalid", error="the ```bash block is empty")
    return Action("command", command)


def ends_attempt(output: str) -> bool:
    """mini-swe-agent's rule: the attempt ends when the command's first output line is the marker."""
    first = output.lstrip().splitlines()[0].strip() if output.strip() else ""
    return first == FINISH_MARKER
