"""Chat messages as tbscale keeps and sends them (the OpenAI chat format litellm takes), and a
sampled response's tool calls.

These are the agent's history, a strategy's transcripts and every prompt a selector, verifier,
summarizer or judge is sent. They stay plain dicts at run time (litellm takes and returns them as
such, and events log them as they were sent); these types say which keys they have.
"""

from __future__ import annotations

from typing import Any

from typing_extensions import Required, TypedDict

class ToolCall(TypedDict):
    """One tool call of a sampled response: the provider's id, the function's name and its
    arguments as the JSON text the provider sent (None where the provider gave none)."""

    id: str | None
    name: str | None
    arguments: Any  # the JSON text a provider sends; an imported run's may hold it decoded


class ChatFunction(TypedDict):
    name: str | None
    arguments: str | None


class ChatToolCall(TypedDict):
    """A tool call as an assistant message carries it back to the provider."""

    id: str
    type: str  # "function"
    function: ChatFunction


class ChatMessage(TypedDict, total=False):
    """One message: `role` (system, user, assistant, tool) and `content`; an assistant message
    that called tools carries them, and a tool message names the call it answers."""

    role: Required[str]
    content: str | None
    tool_calls: list[ChatToolCall]
    tool_call_id: str
