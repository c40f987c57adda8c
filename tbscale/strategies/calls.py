"""What the strategies' own model calls share: prompt files, the `verifier_call` event that
records what a verifier, judge or summarizer was asked and said (the data `tbscale export
verifier-data` reads), and fitting a transcript into the judging model's context window."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tbscale.types.messages import ChatMessage

PROMPTS = Path(__file__).parent / "prompts"


def read_prompt(path: str | None, default: str) -> str:
    return Path(path).read_text() if path else (PROMPTS / default).read_text()


def log_call(rec, *, role: str, method: str, model: str | None, messages: list[ChatMessage] | None,
             response: str | None, parsed: Any, mode: str = "full", **extra: Any) -> None:
    """One `verifier_call` event: what the verifier (or judge, or summarizer) was asked and said."""
    if mode == "off" or rec is None:
        return
    fields: dict[str, Any] = {"role": role, "method": method, "model": model, "parsed": parsed, **extra}
    if mode == "full":
        fields["messages"], fields["response"] = messages, response
    rec.event("verifier_call", **fields)
