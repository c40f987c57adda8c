"""Turning a model response into the one bash action it asks for.

A response names its command either as a tool call (`bash` with a `command` argument) or as the
single fenced ```bash block of a text reply (mini-swe-agent's format, for models without tools).
Anything else is a format error: the harness answers it with a message and counts it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from tbscale.types.completion import Completion

FINISH_MARKER = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
# Why an imported turn has no command although the agent acted (its `parse_error`): the action ran
# but tbscale could not read it from the text, the tool has no shell meaning, or the agent ended
# with a plain message. Such turns carry no behaviour label; they are not turns that cannot run.
ACTION_IN_TEXT = "action in text"
NOT_A_SHELL_TOOL = "tool call with no shell command"
FINAL_MESSAGE = "final message (no action)"
UNREAD_ACTIONS = frozenset({ACTION_IN_TEXT, NOT_A_SHELL_TOOL, FINAL_MESSAGE})
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
        args = decode_tool_arguments(call.get("arguments"))
        if args is None:
            return Action("invalid", error="tool arguments are not a JSON object")
        command = command_from_tool_arguments(args)
        if command is None or not command.strip():
            return Action("invalid", error="the bash tool needs a non-empty string `command`")
        return Action("command", command.strip())
    blocks = _FENCE.findall(completion.text or "")
    if len(blocks) != 1:
        return Action("invalid", error=f"found {len(blocks)} ```bash blocks; give exactly one")
    command = blocks[0].strip()
    if not command:
        return Action("invalid", error="the ```bash block is empty")
    return Action("command", command)


def decode_tool_arguments(arguments: str | Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """Tool-call arguments as a mapping: providers send a JSON string (sometimes truncated or not
    JSON at all), some SDKs an already-decoded dict. None when they are not a JSON object."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return None
    return arguments if isinstance(arguments, Mapping) else None


def command_from_tool_arguments(arguments: str | Mapping[str, Any] | None) -> str | None:
    """The `command` of a bash tool call, or None when the harness could not run it (arguments
    that are not a JSON object, or no string `command`). Execution and behaviour labelling both
    use this, so they agree on what counts as runnable (turn-bon Table 4, *cannot run*)."""
    args = decode_tool_arguments(arguments)
    command = args.get("command") if args is not None else None
    return command if isinstance(command, str) else None


def ends_attempt(output: str) -> bool:
    """mini-swe-agent's rule: the attempt ends when the command's first output line is the marker."""
    first = output.lstrip().splitlines()[0].strip() if output.strip() else ""
    return first == FINISH_MARKER
