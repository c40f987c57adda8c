"""What a model call gives back: sampled responses, token usage and cost, and where calls report."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Protocol

USAGE_COUNTS = ("input_tokens", "output_tokens", "reasoning_tokens", "cached_tokens", "calls")


@dataclass
class Usage:
    """Tokens and cost of one or more calls. `cost_usd` is NaN when the price of a call is unknown:
    an unknown price is never counted as $0, and any sum that includes it stays unknown."""

    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float = 0.0
    calls: int = 0

    def add(self, other: "Usage") -> None:
        for k in USAGE_COUNTS:
            setattr(self, k, getattr(self, k) + getattr(other, k))
        self.cost_usd += other.cost_usd

    def as_dict(self) -> dict[str, Any]:
        return {"input": self.input_tokens, "output": self.output_tokens,
                "reasoning": self.reasoning_tokens, "cached": self.cached_tokens,
                "cost_usd": None if math.isnan(self.cost_usd) else round(self.cost_usd, 6), "calls": self.calls}


@dataclass
class Completion:
    """One sampled response. `output_tokens` is the provider's count for this choice when it
    gives one; with n>1 in one request providers report a total, which is split over the choices
    (the call-level total stays exact in the `model_call` event)."""

    text: str
    reasoning: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
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
