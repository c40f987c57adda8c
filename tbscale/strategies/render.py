"""Rendering transcripts and candidates for selectors, verifiers and judges.

Candidates are shown without the generator's reasoning (turn-bon Appendix B): the selector judges
the action, not the argument for it. Past turns are rendered as the commands that ran and what
came back. The XML-ish tags are stable, so simulated selectors and tests can parse them.

A long trajectory can outgrow the judging model's context window: `fit_transcript` keeps the task
and the most recent turns and replaces the middle with an `<elided>` marker, so a selector keeps
selecting instead of failing every try and falling back to chance.
"""

from __future__ import annotations


from tbscale.types import Completion
from tbscale.types.actions import Action, parse_action
from tbscale.types.messages import ChatMessage

# Characters per token when budgeting a prompt: lower than the usual ~4, to leave a margin for
# tokenizers that split code and logs finely.
CHARS_PER_TOKEN = 3
REPLY_RESERVE_TOKENS = 4096
MIN_TRANSCRIPT_CHARS = 2000


def _transcript_parts(messages: list[ChatMessage]) -> list[tuple[int, str]]:
    """(turn, rendered part) for the task and every turn so far."""
    parts, turn = [], 0
    for m in messages[1:]:  # the system prompt is the agent's, not the selector's business
        content = str(m.get("content") or "")
        if m["role"] == "user" and turn == 0:
            parts.append((0, f"<task_prompt>\n{content}\n</task_prompt>"))
        elif m["role"] == "assistant":
            turn += 1
            command = command_of_message(m)
            shown = f"```bash\n{command}\n```" if command else "[response with no runnable command]"
            parts.append((turn, f'<action turn="{turn}">\n{shown}\n</action>'))
        elif m["role"] in ("user", "tool"):
            parts.append((turn, f'<observation turn="{turn}">\n{content}\n</observation>'))
    return parts


def render_transcript(messages: list[ChatMessage], budget_chars: int | None = None) -> str:
    """The task and every turn so far: assistant commands (no reasoning) and observations; within
    `budget_chars` when given (see fit_transcript)."""
    return fit_transcript(messages, budget_chars)[0]


def fit_transcript(messages: list[ChatMessage], budget_chars: int | None) -> tuple[str, int]:
    """(transcript, characters elided): the whole transcript when it fits the budget, else the task
    and as many of the latest parts as fit, with a marker naming the turns left out."""
    parts = _transcript_parts(messages)
    sep = "\n\n"
    whole = sep.join(p for _, p in parts)
    if budget_chars is None or len(whole) <= budget_chars or not parts:
        return whole, 0
    head = [p for t, p in parts if t == 0]
    head_text = sep.join(head)
    if len(head_text) > budget_chars // 2:  # a huge task prompt: keep its start and end
        half = budget_chars // 4
        head_text = f"{head_text[:half]}\n<elided chars=\"{len(head_text) - 2 * half}\"/>\n{head_text[-half:]}"
    room = budget_chars - len(head_text) - 200
    kept: list[tuple[int, str]] = []
    for t, p in reversed([(t, p) for t, p in parts if t > 0]):
        if len(p) + len(sep) > room:
            break
        kept.append((t, p))
        room -= len(p) + len(sep)
    kept.reverse()
    shown = len(head_text) + sum(len(p) + len(sep) for _, p in kept)
    elided = max(0, len(whole) - shown)
    first_kept = kept[0][0] if kept else parts[-1][0] + 1
    marker = (f'<elided turns="1-{first_kept - 1}" chars="{elided}">earlier turns left out to fit the '
              f"context window</elided>") if first_kept > 1 else f'<elided chars="{elided}"/>'
    return sep.join([head_text, marker, *(p for _, p in kept)]), elided


def transcript_budget(llm, other_chars: int) -> int | None:
    """Characters a transcript may take in a prompt to `llm` beside `other_chars` of other text:
    None when the model's context window is unknown."""
    window = llm.context_window() if hasattr(llm, "context_window") else None
    if not window:
        return None
    reserve = getattr(getattr(llm, "cfg", None), "max_tokens", None) or REPLY_RESERVE_TOKENS
    return max(MIN_TRANSCRIPT_CHARS, (window - reserve) * CHARS_PER_TOKEN - other_chars)


def command_of_message(message: ChatMessage) -> str | None:
    """The bash command an assistant message in the history asked for, or None."""
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
