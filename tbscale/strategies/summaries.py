"""Rollout summaries (pdr-rtv.txt Section 2.2): each finished attempt becomes a compact structured
record (hypotheses, key decisions, progress, failure modes, final state) that tournaments compare
and later attempts read, instead of the raw trajectory.

An LLM writes the summary from the task and the attempt's transcript (commands and observations,
no reasoning); when it is not asked to (`mode: deterministic`) or its reply cannot be used, a
deterministic summary is built from the transcript: the commands that ran, the ones that failed,
how the attempt stopped and the tail of the last output. Neither ever sees the verifier's result:
a summary only describes what the agent could see, so a judge reading it cannot peek at the
reward.

Summaries are stored with the trajectory: a `summary` event in the trial's event stream, the
attempt's `summary` field, and the strategy record.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field
from typing_extensions import TypedDict

from tbscale.logs import AttemptRecorder
from tbscale.models.replies import ask_json, parse_json_reply
from tbscale.seeds import derive_seed
from tbscale.strategies.base import AttemptResult, Params
from tbscale.strategies.calls import log_call, read_prompt
from tbscale.strategies.render import render_transcript
from tbscale.types import Usage
from tbscale.types.completion import UsageJSON
from tbscale.types.messages import ChatMessage

FIELDS = ("hypotheses", "key_decisions", "progress", "failure_modes", "final_state")
LIST_FIELDS = ("hypotheses", "key_decisions", "failure_modes")
TRUNC = "\n# ...[truncated]"
_RC = re.compile(r"<returncode>(-?\d+)</returncode>")
_FENCE = re.compile(r"```(?:bash|sh|shell)?[ \t]*\n(.*?)\n?```", re.DOTALL)
_OUT = re.compile(r"<output(?:_tail)?>\n?(.*?)\n?</output(?:_tail)?>", re.DOTALL)


class SummaryParams(Params):
    """How attempts are summarized (shared by best_of_n and pdr)."""

    summarizer: str | None = Field(None, description="key of `models`; default: the generator")
    summary_mode: Literal["llm", "deterministic"] = "llm"
    summary_tries: int = Field(2, ge=1, le=20)
    summarizer_system_prompt: str | None = Field(None, description="path to a file replacing ours")
    max_transcript_chars: int = Field(60_000, ge=2_000, description="transcript shown to the summarizer (head and tail)")
    max_summary_chars: int = Field(4_000, ge=500, description="bound on a rendered summary")
    max_command_chars: int = Field(600, ge=40, description="commands quoted in a fallback summary")

    def model_refs(self):
        return {"summarizer": self.summarizer}


class SummaryFields(TypedDict):
    """A structured summary of one attempt (the `summary` event's `fields`; FIELDS in order)."""

    hypotheses: list[str]
    key_decisions: list[str]
    progress: str
    failure_modes: list[str]
    final_state: str


class TurnDigest(TypedDict):
    """One executed turn of a transcript, as the fallback summary reads it."""

    thought: str
    command: str | None
    rc: int | None
    output: str
    answered: bool


@dataclass
class Summary:
    attempt: int
    fields: SummaryFields
    source: str  # "llm" or "fallback"
    text: str
    error: str | None = None


# ---- metering ------------------------------------------------------------------------------------------
class StageMeter:
    """Token usage of the strategy's own calls (summaries, votes), split by stage, while every call
    is still reported to the trial's recorder (so the row's per-role totals stay complete)."""

    def __init__(self, rec: AttemptRecorder | None):
        self.rec = rec
        self.usage: dict[str, dict[str, Usage]] = defaultdict(lambda: defaultdict(Usage))

    def sink(self, stage: str) -> "_StageSink":
        return _StageSink(self, stage)

    def by_stage(self) -> dict[str, dict[str, Usage]]:
        """Usage per stage and role, as records hold it (Usage.recorded), roles in order."""
        return {stage: {role: u.recorded() for role, u in sorted(roles.items())} for stage, roles in self.usage.items()}

    def as_dict(self) -> dict[str, dict[str, UsageJSON]]:
        return stage_usage_json(self.by_stage())


def stage_usage_json(usage: dict[str, dict[str, Usage]]) -> dict[str, dict[str, UsageJSON]]:
    """Usage per stage and role as a strategy record holds it (`stage_usage`, `judge_usage`)."""
    return {stage: {role: u.as_dict() for role, u in roles.items()} for stage, roles in usage.items()}


class _StageSink:
    def __init__(self, meter: StageMeter, stage: str):
        self.meter, self.stage = meter, stage

    def record_call(self, role, model, usage, latency_sec, *, n, retries, error=None, retry_causes=None):
        self.meter.usage[self.stage][role].add(usage)
        if self.meter.rec is not None:
            self.meter.rec.record_call(role, model, usage, latency_sec, n=n, retries=retries, error=error,
                                       retry_causes=retry_causes)

    def event(self, type: str, **fields: Any) -> None:
        if self.meter.rec is not None:
            self.meter.rec.event(type, stage=self.stage, **fields)


# ---- rendering ---------------------------------------------------------------------------------------
def _clip(text: str, limit: int) -> str:
    text = str(text)
    return text if len(text) <= limit else text[:limit].rstrip() + " ..."


def clip_command(cmd: str, limit: int) -> str:
    return cmd if len(cmd) <= limit else cmd[:limit] + TRUNC


def _clip_item(text: str, limit: int) -> str:
    """Clip a list item; a quoted command cut in the middle keeps its fence closed."""
    if len(text) <= limit:
        return text
    cut = text[:limit].rstrip()
    return cut + TRUNC + "\n```" if cut.count("```") % 2 == 1 else cut + " ..."


def render_summary(fields: SummaryFields, limit: int = 4_000) -> str:
    """A summary as the compact text judges and later attempts read."""
    per_item = max(200, limit // 4)
    lines = []
    for f in FIELDS:
        v = fields.get(f)
        if f in LIST_FIELDS:
            items = [str(x) for x in (v or [])]
            lines.append(f"{f}:" + ("" if items else " none"))
            lines += [f"- {_clip_item(x, per_item)}" for x in items]
        else:
            lines.append(f"{f}: {_clip(v or 'unknown', per_item)}")
    text = "\n".join(lines)
    if len(text) > limit:  # keep the head and the end (final state) of an overlong summary
        text = text[: limit * 2 // 3] + "\n[...]\n" + text[-limit // 3:]
    return text


def normalize(obj: Any) -> SummaryFields | None:
    """A usable summary object: every field present, lists of strings where lists are due."""
    if not isinstance(obj, dict):
        return None
    out: dict[str, str | list[str]] = {}
    present = 0
    for f in FIELDS:
        v = obj.get(f)
        if v is not None:
            present += 1
        if f in LIST_FIELDS:
            items = [] if v is None else [v] if not isinstance(v, (list, tuple)) else list(v)
            out[f] = [x if isinstance(x, str) else str(x) for x in items]
        else:
            out[f] = v if isinstance(v, str) else ("" if v is None else str(v))
    return SummaryFields(**out) if present >= 3 else None  # type: ignore[typeddict-item]


def transcript_for_summary(attempt: AttemptResult, instruction: str, limit: int) -> str:
    """The attempt's turns (commands and observations, no reasoning), under the bare task
    instruction: a context block the attempt itself was given is left out."""
    msgs = attempt.transcript or []
    base = [{"role": "system", "content": ""}, {"role": "user", "content": instruction}]
    text = render_transcript(base + list(msgs[2:]))
    if len(text) > limit:
        text = text[: limit // 3] + f"\n\n[... {len(text) - limit} characters of the middle left out ...]\n\n" + text[-2 * limit // 3:]
    return text


def summarizer_messages(attempt: AttemptResult, instruction: str, system_prompt: str, limit: int) -> list[dict]:
    user = (f"<summarize_attempt>\n{transcript_for_summary(attempt, instruction, limit)}\n\n"
            f"<how_it_stopped>{_stop_words(attempt.stop_reason)}</how_it_stopped>\n\n"
            'Respond with JSON: {"hypotheses": [string], "key_decisions": [string], "progress": string, '
            '"failure_modes": [string], "final_state": string}\n</summarize_attempt>')
    return [{"role": "system", "content": system_prompt}, {"role": "user", "content": user}]


def _stop_words(stop_reason: str) -> str:
    """How the attempt stopped, in words the agent itself could know (never the verdict)."""
    return {"submitted": "the agent submitted its work", "step_limit": "ran out of steps before submitting",
            "time_limit": "ran out of time before submitting", "context_window": "ran out of context window",
            "output_length": "a response was cut off at the output limit",
            "format_errors": "too many responses could not be run",
            "model_error": "the model could not be reached", "sandbox_error": "the environment failed",
            }.get(stop_reason, "the attempt stopped early (an error in the harness)")


# ---- the deterministic fallback ---------------------------------------------------------------------
def _turns(messages: list[ChatMessage]) -> list[TurnDigest]:
    """(thought, command, return code, output) per executed turn of a transcript."""
    out: list[TurnDigest] = []
    for m, nxt in zip(messages, messages[1:] + [None]):
        if m.get("role") != "assistant":
            continue
        content = str(m.get("content") or "")
        blocks = _FENCE.findall(content)
        obs = str((nxt or {}).get("content") or "") if nxt and nxt.get("role") == "user" else ""
        rc = _RC.search(obs)
        output = _OUT.findall(obs)
        thought = content.split("```", 1)[0].replace("THOUGHT:", "").strip()
        out.append({"thought": thought, "command": blocks[0].strip() if len(blocks) == 1 else None,
                    "rc": int(rc.group(1)) if rc else None, "output": output[-1] if output else "",
                    "answered": bool(rc)})
    return out


def fallback_summary(attempt: AttemptResult, max_command_chars: int = 600, max_items: int = 30) -> SummaryFields:
    """A summary from the transcript alone: no model call, deterministic."""
    turns = _turns(list(attempt.transcript or [])[2:])
    ran = [t for t in turns if t["command"] and t["answered"]]
    failed = [t for t in ran if t["rc"] not in (0, None)]
    unrunnable = [t for t in turns if t["command"] is None]
    submitted = attempt.stop_reason == "submitted"
    decisions = [f"ran:\n```bash\n{clip_command(t['command'], max_command_chars)}\n```" for t in ran]
    if len(decisions) > max_items:
        decisions = decisions[: max_items // 2] + [f"[{len(decisions) - max_items} commands left out]"] + decisions[-max_items // 2:]
    thoughts = [t["thought"].splitlines()[0] for t in turns if t["thought"]]
    hypotheses = list(dict.fromkeys(thoughts[:2] + thoughts[-1:]))
    failure_modes = [f"exit code {t['rc']}: `{_clip(t['command'], 120)}` -> {_clip(t['output'].strip()[-200:], 200)}"
                     for t in failed[:8]]
    repeated = len(ran) - len({t["command"] for t in ran})
    if repeated:
        failure_modes.append(f"{repeated} commands were repeated unchanged")
    if unrunnable:
        failure_modes.append(f"{len(unrunnable)} responses could not be run")
    if not submitted:
        failure_modes.append(_stop_words(attempt.stop_reason))
    last = ran[-1]["output"].strip()[-300:] if ran else ""
    return {
        "hypotheses": hypotheses,
        "key_decisions": decisions,
        "progress": f"{len(ran)} commands ran over {attempt.turns} turns; {len(failed)} returned a non-zero exit code.",
        "failure_modes": failure_modes,
        "final_state": ("submitted" if submitted else f"not submitted ({_stop_words(attempt.stop_reason)})")
                       + (f"; last output: {last}" if last else ""),
    }


# ---- the summarizer ------------------------------------------------------------------------------
class Summarizer:
    def __init__(self, params: SummaryParams, models, *, seed: int, log_calls: str = "full"):
        self.p, self.seed, self.log_calls = params, seed, log_calls
        self.llm = models(params.summarizer, "summarizer") if (models is not None and params.summary_mode == "llm") else None
        self.system_prompt = read_prompt(params.summarizer_system_prompt, "summarizer_system.txt")

    async def summarize(self, attempt: AttemptResult, instruction: str, sink, rec) -> Summary:
        fields, source, error = None, "fallback", None
        if self.llm is not None:
            prompt = summarizer_messages(attempt, instruction, self.system_prompt, self.p.max_transcript_chars)
            parsed, reply, error, calls = await ask_json(
                self.llm, prompt, lambda t: normalize(parse_json_reply(t)),
                seed=derive_seed(self.seed, "summary", attempt.index), sink=sink, tries=self.p.summary_tries)
            log_call(rec, role="summarizer", method="summary", model=self.llm.name, messages=prompt, response=reply,
                     parsed=parsed, mode=self.log_calls, of_attempt=attempt.index, error=error, calls=calls)
            if parsed is not None:
                fields, source = parsed, "llm"
        if fields is None:
            fields = fallback_summary(attempt, self.p.max_command_chars)
        text = render_summary(fields, self.p.max_summary_chars)
        summary = Summary(attempt.index, fields, source, text, error)
        attempt.summary = text
        if rec is not None:
            rec.event("summary", of_attempt=attempt.index, source=source, fields=fields, text=text, error=error)
        return summary
