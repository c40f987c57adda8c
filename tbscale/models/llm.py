"""Models through litellm: any provider, an OpenAI-compatible `api_base`, N samples per call, usage
and cost per call, retries with backoff on rate limits, server errors and timeouts.

litellm is imported on first use (it takes seconds to import), with its bundled cost map (never a
download). API keys are read from the environment at call time, passed to litellm and nowhere
else; anything that might echo one (an error message) goes through `redact` first.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from tbscale.config import ModelConfig
from tbscale.errors import ContextWindowExceeded, ModelCallError

_SECRETS: set[str] = set()
# Providers known to accept `n` > 1 in one request (the shared prompt is then processed once).
N_CAPABLE_PROVIDERS = {"openai", "hosted_vllm", "azure", "together_ai", "fireworks_ai", "deepinfra",
                       "openrouter", "sim", "text-completion-openai", "lm_studio"}


def redact(text: str) -> str:
    for secret in _SECRETS:
        if secret and len(secret) >= 6:
            text = text.replace(secret, "***")
    return text


def litellm_module():
    """Import litellm once, offline-safe: bundled cost map, no telemetry, our own retries."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_LOG", "ERROR")
    import litellm

    litellm.telemetry = False
    litellm.suppress_debug_info = True
    litellm.drop_params = True  # a provider that lacks top_p etc. gets the call without it
    from tbscale.models import sim

    sim.register(litellm)
    return litellm


@dataclass
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float = 0.0
    calls: int = 0

    def add(self, other: "Usage") -> None:
        for k in ("input_tokens", "output_tokens", "reasoning_tokens", "cached_tokens", "calls"):
            setattr(self, k, getattr(self, k) + getattr(other, k))
        self.cost_usd += other.cost_usd

    def as_dict(self) -> dict[str, Any]:
        return {"input": self.input_tokens, "output": self.output_tokens,
                "reasoning": self.reasoning_tokens, "cached": self.cached_tokens,
                "cost_usd": round(self.cost_usd, 6), "calls": self.calls}


@dataclass
class Completion:
    """One sampled response. `output_tokens` is the provider's count for this choice when it
    gives one; with n>1 in one request providers report a total, which is split over the choices
    in proportion to their length (the call-level total stays exact in the `model_call` event)."""

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
                    n: int, retries: int, error: str | None = None) -> None: ...


def provider_of(model: str) -> str:
    return model.split("/", 1)[0] if "/" in model else "openai"


class LLM:
    """A model in a role (generator, selector, verifier, summarizer, judge)."""

    def __init__(self, cfg: ModelConfig, role: str):
        self.cfg, self.role = cfg, role
        key = cfg.api_key()
        if key:
            _SECRETS.add(key)

    @property
    def name(self) -> str:
        return self.cfg.model

    def context_window(self) -> int | None:
        if self.cfg.context_window:
            return self.cfg.context_window
        if self.cfg.is_simulated:
            return None
        try:
            info = litellm_module().get_model_info(self.cfg.model)
            return info.get("max_input_tokens") or info.get("max_tokens")
        except Exception:
            return None

    def _params(self, n: int, seed: int | None, tools: list[dict] | None) -> dict[str, Any]:
        p: dict[str, Any] = {"model": self.cfg.model, "timeout": self.cfg.timeout_sec, "num_retries": 0}
        for k in ("temperature", "top_p", "max_tokens", "api_base"):
            if getattr(self.cfg, k) is not None:
                p[k] = getattr(self.cfg, k)
        key = self.cfg.api_key()
        if key:
            p["api_key"] = key
        elif self.cfg.api_base and provider_of(self.cfg.model) in ("openai", "hosted_vllm"):
            p["api_key"] = "EMPTY"  # OpenAI-compatible servers often take any key
        if n > 1:
            p["n"] = n
        if seed is not None:
            p["seed"] = seed
        if tools:
            p["tools"] = tools
        if self.cfg.is_simulated:
            p["sim_params"] = dict(self.cfg.sim)
        p.update(self.cfg.extra_params)
        return p

    async def complete(self, messages: list[dict[str, Any]], *, n: int = 1, seed: int | None = None,
                       tools: list[dict] | None = None, sink: CallSink | None = None) -> CallResult:
        """Sample n responses to the same messages: one request with `n` where the provider takes
        it, else n concurrent requests. Returns when all are in."""
        mode = self.cfg.sampling
        if mode == "auto":
            mode = "n" if provider_of(self.cfg.model) in N_CAPABLE_PROVIDERS else "parallel"
        if n == 1 or mode == "n":
            result = await self._call(messages, n, seed, tools, sink)
            missing = n - len(result.completions)
            if missing > 0:  # a server that ignores `n` returns one choice: top up concurrently
                extra = await asyncio.gather(*[self._call(messages, 1, None if seed is None else seed + i + 1, tools, sink)
                                               for i in range(missing)])
                for r in extra:
                    result.completions.extend(r.completions)
                    result.usage.add(r.usage)
                    result.retries += r.retries
                result.latency_sec += max(r.latency_sec for r in extra)
            return result
        parts = await asyncio.gather(*[self._call(messages, 1, None if seed is None else seed + i, tools, sink)
                                       for i in range(n)])
        total, comps = Usage(), []
        for r in parts:
            total.add(r.usage)
            comps.extend(r.completions)
        return CallResult(comps, total, max(r.latency_sec for r in parts), sum(r.retries for r in parts))

    async def _call(self, messages, n, seed, tools, sink) -> CallResult:
        litellm = litellm_module()
        params = self._params(n, seed, tools)
        retryable = (litellm.RateLimitError, litellm.InternalServerError, litellm.ServiceUnavailableError,
                     litellm.APIConnectionError, litellm.Timeout, litellm.APIError)
        attempt, start = 0, time.monotonic()
        while True:
            try:
                t0 = time.monotonic()
                response = await litellm.acompletion(messages=messages, **params)
                result = self._parse(litellm, response, time.monotonic() - t0)
                result.retries = attempt
                if sink:
                    sink.record_call(self.role, self.cfg.model, result.usage, result.latency_sec, n=n, retries=attempt)
                return result
            except litellm.ContextWindowExceededError as e:
                self._report_failure(sink, n, attempt, e)
                raise ContextWindowExceeded(redact(str(e))[:500]) from None
            except (litellm.AuthenticationError, litellm.PermissionDeniedError, litellm.NotFoundError,
                    litellm.BadRequestError) as e:
                self._report_failure(sink, n, attempt, e)
                raise ModelCallError(f"{self.role} {self.cfg.model}: {type(e).__name__}: {redact(str(e))[:500]}") from None
            except retryable as e:
                attempt += 1
                if attempt > self.cfg.max_retries:
                    self._report_failure(sink, n, attempt - 1, e)
                    raise ModelCallError(f"{self.role} {self.cfg.model}: gave up after {attempt} tries "
                                         f"({time.monotonic() - start:.0f} s): {type(e).__name__}: "
                                         f"{redact(str(e))[:300]}") from None
                # Exponential backoff with full jitter; a server's Retry-After wins when given.
                delay = self.cfg.retry_backoff_sec * (2 ** (attempt - 1)) * (0.5 + random.random())
                retry_after = getattr(getattr(e, "response", None), "headers", {}) or {}
                try:
                    delay = max(delay, float(retry_after.get("retry-after", 0)))
                except (TypeError, ValueError):
                    pass
                await asyncio.sleep(min(delay, 60.0))

    def _report_failure(self, sink, n, retries, exc) -> None:
        if sink:
            sink.record_call(self.role, self.cfg.model, Usage(), 0.0, n=n, retries=retries,
                             error=f"{type(exc).__name__}: {redact(str(exc))[:300]}")

    def _parse(self, litellm, response, latency: float) -> CallResult:
        u = getattr(response, "usage", None)
        usage = Usage(calls=1)
        if u is not None:
            usage.input_tokens = int(getattr(u, "prompt_tokens", 0) or 0)
            usage.output_tokens = int(getattr(u, "completion_tokens", 0) or 0)
            details = getattr(u, "completion_tokens_details", None)
            usage.reasoning_tokens = int(getattr(details, "reasoning_tokens", 0) or 0) if details else 0
            pdetails = getattr(u, "prompt_tokens_details", None)
            usage.cached_tokens = int(getattr(pdetails, "cached_tokens", 0) or 0) if pdetails else 0
        usage.cost_usd = self._cost(litellm, response, usage)
        comps = []
        for choice in response.choices:
            msg = choice.message
            calls = []
            for tc in getattr(msg, "tool_calls", None) or []:
                fn = tc.function if hasattr(tc, "function") else tc["function"]
                calls.append({"id": getattr(tc, "id", None), "name": getattr(fn, "name", None) or fn.get("name"),
                              "arguments": getattr(fn, "arguments", None) if hasattr(fn, "arguments") else fn.get("arguments")})
            comps.append(Completion(text=msg.content or "", reasoning=getattr(msg, "reasoning_content", None),
                                    tool_calls=calls, finish_reason=choice.finish_reason))
        # Split call totals over choices by length (exact when there is one choice).
        weights = [max(len(c.text) + len(c.reasoning or "") + sum(len(str(t["arguments"])) for t in c.tool_calls), 1)
                   for c in comps]
        for c, w in zip(comps, weights):
            c.output_tokens = round(usage.output_tokens * w / sum(weights))
            rw = len(c.reasoning or "")
            c.reasoning_tokens = round(usage.reasoning_tokens * rw / max(sum(len(x.reasoning or "") for x in comps), 1))
        return CallResult(comps, usage, latency)

    def _cost(self, litellm, response, usage: Usage) -> float:
        prices = self.cfg.prices
        if prices is not None:
            cached = usage.cached_tokens if prices.cached_input_per_mtok is not None else 0
            return ((usage.input_tokens - cached) * prices.input_per_mtok
                    + cached * (prices.cached_input_per_mtok or 0)
                    + usage.output_tokens * prices.output_per_mtok) / 1e6
        if self.cfg.is_simulated:
            return 0.0
        try:
            return float(litellm.completion_cost(completion_response=response) or 0.0)
        except Exception:  # a model litellm has no price for (a local vLLM model): cost unknown
            return 0.0
