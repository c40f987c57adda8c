"""Replies that must be JSON: the one parser, and the one retry-until-it-parses helper used by
the selector, the action verifiers, the tournament judge, the summarizer, CER, the rubric judge
and behavioural self-rewarding."""

from __future__ import annotations

import json
import re
from typing import Any, Callable

from tbscale.errors import ContextWindowExceeded, ModelCallError
from tbscale.types.messages import ChatMessage

_FENCED = re.compile(r"^```(?:json)?[ \t]*\n(.*?)\n?```$", re.DOTALL)
SEED_STRIDE = 7919  # each retry samples with another seed, so a deterministic server can change its mind


def parse_json_reply(text: str | None) -> dict[str, Any] | None:
    """The JSON object in a model reply: the whole reply, a fenced ```json block, or the first
    object that decodes inside prose (scanning each `{` in turn, so a stray brace before the JSON
    does not hide it). Fenced commands inside the object's strings are kept."""
    text = (text or "").strip()
    candidates = [text]
    m = _FENCED.match(text)
    if m:
        candidates.insert(0, m.group(1))
    for cand in candidates:
        try:
            obj = json.loads(cand)
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            return obj
    decoder = json.JSONDecoder()
    for scan in (text, re.sub(r"```(?:json)?", "", text)):
        for m in re.finditer(r"\{", scan):
            try:
                obj, _ = decoder.raw_decode(scan, m.start())
            except json.JSONDecodeError:
                continue
            if isinstance(obj, dict):
                return obj
    return None


async def ask_json(llm, messages: list[ChatMessage], parse: Callable[[str], Any | None], *, seed: int,
                   sink, tries: int) -> tuple[Any | None, str | None, str | None, int]:
    """Call `llm` until `parse(reply)` gives something (at most `tries` calls).

    Returns (parsed or None, last reply text, last problem, calls made). A call that fails for good
    (ModelCallError, ContextWindowExceeded) counts as a try; a ModelUnavailable propagates, since
    the run is stopping."""
    problem, reply = None, None
    for attempt in range(max(1, tries)):
        try:
            res = await llm.complete(messages, n=1, seed=seed + SEED_STRIDE * attempt, sink=sink)
        except (ModelCallError, ContextWindowExceeded) as e:
            problem = f"{type(e).__name__}: {e}"
            continue
        reply = res.completions[0].text
        parsed = parse(reply)
        if parsed is not None:
            return parsed, reply, None, attempt + 1
        problem = f"unusable reply: {reply[:200]!r}"
    return None, reply, problem, max(1, tries)
