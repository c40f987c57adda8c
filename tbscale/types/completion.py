"""What a model call gives back: sampled responses, token usage and cost, and where calls report."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Protocol

from pydantic import BaseModel, ConfigDict

from tbscale.types.messages import ToolCall

USAGE_COUNTS = ("input", "output", "reasoning", "cached", "calls")
UsageJSON = dict[str, int | float | None]  # a Usage as its records hold it (Usage.as_dict)


class Usage(BaseModel):
    """Tokens and cost of one model call or a sum of calls: what the model wrapper meters, a
    `model_call` event's `usage`, a trial line's `tokens` per role, an attempt's `usage` and a spend
    line's `usage`. `cost_usd` is None when the price of a call is unknown: an unknown price is never
    counted as $0, and any sum that includes it stays unknown."""

    model_config = ConfigDict(extra="forbid")

    input: int = 0
    output: int = 0
    reasoning: int = 0
    cached: int = 0
    cost_usd: float | None = 0.0
    calls: int = 0

    def add(self, other: "Usage") -> None:
        for k in USAGE_COUNTS:
            setattr(self, k, getattr(self, k) + getattr(other, k))
        self.cost_usd = None if self.cost_usd is None or other.cost_usd is None else self.cost_usd + other.cost_usd

    def recorded(self) -> "Usage":
        """A copy as records hold it: every field set, the cost rounded to a millionth of a dollar
        (what an event, a spend line or an attempt carries; `as_dict` is its JSON)."""
        return Usage(input=self.input, output=self.output, reasoning=self.reasoning, cached=self.cached,
                     cost_usd=None if self.cost_usd is None else round(self.cost_usd, 6), calls=self.calls)

    def as_dict(self) -> UsageJSON:
        """Every field, the cost rounded to a millionth of a dollar (what events and records hold)."""
        return self.recorded().model_dump()


def sum_usage(*parts: Mapping[str, Usage]) -> dict[str, Usage]:
    """Usage per role summed over `parts` (an attempt's usage, a stage's, a recorder's), roles in
    the order they first appear. Each part is added as records hold it (`Usage.recorded`) and the
    running cost is rounded to a millionth of a dollar after every part, so a total (a trial line's
    `tokens`, a strategy record's `stage_usage`) is the sum of the rounded numbers its parts show
    and stays what these records have always held: a full-precision sum rounded once can differ in
    the last digit. An unknown cost (None) keeps the sum unknown."""
    out: dict[str, Usage] = {}
    for part in parts:
        for role, u in part.items():
            acc = out.setdefault(role, Usage())
            acc.add(u.recorded())
            if acc.cost_usd is not None:
                acc.cost_usd = round(acc.cost_usd, 6)
    return out


@dataclass
class Completion:
    """One sampled response. `output_tokens` is the provider's count for this choice when it
    gives one; with n>1 in one request providers report a total, which is split over the choices
    (the call-level total stays exact in the `model_call` event)."""

    text: str
    reasoning: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    output_tokens: int = 0
    reasoning_tokens: int = 0


@dataclass
class CallResult:
    completions: list[Completion]
    usage: Usage
    latency_sec: float
    retries: int = 0


class CallSink(Protocol):
    """Where a model call reports itself: the attempt's event log and usage meter."""

    def record_call(self, role: str, model: str, usage: Usage, latency_sec: float, *,
                    n: int, retries: int, error: str | None = None,
                    retry_causes: list[str] | None = None) -> None: ...
