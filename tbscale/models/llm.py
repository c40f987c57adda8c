"""Models through litellm: any provider, an OpenAI-compatible `api_base`, N samples per call, usage
and cost per call, retries with backoff on rate limits, server errors and timeouts.

litellm is imported on first use (5-6 CPU-seconds here), in a thread of its own that a local run
starts with its first containers (`prefetch_litellm`), so the event loop never waits on it; with
its bundled cost map (never a download). API keys are read from the environment at call time,
passed to litellm and nowhere else; anything that might echo one (an error message) goes through
`redact` first. Every failure is classified (models/failures.py): causes no retry can fix are not
retried, and feed a per-model circuit breaker that stops the run when a model is plainly
unavailable.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import gc
import os
import random
import threading
import time
from typing import Any

from tbscale.config import ModelConfig
from tbscale.errors import ContextWindowExceeded, ModelCallError
from tbscale.models import cost, failures, providers
from tbscale.secrets import redact, register_secret
from tbscale.types import CallResult, CallSink, Completion, Usage
from tbscale.types.messages import ChatMessage

# Providers known to accept `n` > 1 in one request (the shared prompt is then processed once).
N_CAPABLE_PROVIDERS = {"openai", "hosted_vllm", "azure", "together_ai", "fireworks_ai", "deepinfra",
                       "openrouter", "text-completion-openai", "lm_studio"}
MAX_BACKOFF_SEC = 60.0


_litellm: Any = None  # the module, once litellm_module has set it up


def litellm_module():
    """Import litellm once, offline-safe: bundled cost map, no telemetry, our own retries."""
    global _litellm
    if _litellm is not None:
        return _litellm
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_LOG", "ERROR")
    import litellm

    litellm.telemetry = False
    litellm.suppress_debug_info = True
    litellm.drop_params = True  # a provider that lacks top_p etc. gets the call without it
    # At exit the interpreter runs the cycle collector over every object litellm made (its types,
    # its cost map): 1-2 CPU-seconds per process here, as much as a third of the import. What
    # exists when the process ends is frozen out of that collection. Nothing is lost: tbscale
    # closes what it writes where it writes it, and frozen objects are still freed by count.
    atexit.register(gc.freeze)
    _litellm = litellm
    return litellm


_prefetch: concurrent.futures.Future | None = None
_prefetch_lock = threading.Lock()


def prefetch_litellm() -> concurrent.futures.Future:
    """Start importing litellm in a thread of its own (once): the import takes 5-6 CPU-seconds
    here, and a run that starts it with its first containers has it by the first model call.
    The future's result is the module."""
    global _prefetch
    with _prefetch_lock:
        if _prefetch is None:
            future: concurrent.futures.Future = concurrent.futures.Future()

            def work() -> None:
                try:
                    future.set_result(litellm_module())
                except BaseException as e:  # noqa: BLE001 - handed to whoever awaits it
                    future.set_exception(e)

            _prefetch = future
            # Not a daemon: the interpreter's exit waits for the import to end (a few seconds at most).
            # A daemon thread stopped by the exit while it held the import lock left the process
            # hung for good in its next import: `tbscale run` interrupted by Ctrl-C while litellm was
            # still being imported never exited (a lookahead run whose forks started first, in CI).
            threading.Thread(target=work, name="litellm-import").start()
        return _prefetch


async def litellm_async():
    """litellm_module for a coroutine: the import runs in its own thread, so the event loop
    (every other trial, the progress display) goes on meanwhile."""
    return _litellm if _litellm is not None else await asyncio.wrap_future(prefetch_litellm())


def provider_of(model: str) -> str:
    return providers.provider_of(model)


class LLM:
    """A model in a role (generator, selector, verifier, summarizer, judge)."""

    def __init__(self, cfg: ModelConfig, role: str, *, key: str | None = None):
        self.cfg, self.role, self.key = cfg, role, key
        register_secret(cfg.api_key())
        self.breaker = failures.breaker_for(cfg.model, cfg.api_base, cfg.circuit_breaker_tries)

    @property
    def name(self) -> str:
        return self.cfg.model

    def context_window(self) -> int | None:
        if self.cfg.context_window:
            return self.cfg.context_window
        if providers.plugin(provider_of(self.cfg.model)) is not None:
            return None  # litellm's model map has no plugin's model (nor the simulated one): no import
        try:
            info = litellm_module().get_model_info(self.cfg.model)
            return info.get("max_input_tokens") or info.get("max_tokens")
        except Exception:  # a model litellm does not list (a local server, a plugin provider)
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
        if self.cfg.sim:  # parameters of a plugin provider (the simulated model's skill, accuracy)
            p["sim_params"] = dict(self.cfg.sim)
        p.update(self.cfg.extra_params)
        return p

    def _sampling_mode(self) -> str:
        if self.cfg.sampling != "auto":
            return self.cfg.sampling
        provider = provider_of(self.cfg.model)
        p = providers.plugin(provider) if provider not in N_CAPABLE_PROVIDERS else None
        return "n" if provider in N_CAPABLE_PROVIDERS or getattr(p, "accepts_n", False) else "parallel"

    async def complete(self, messages: list[ChatMessage], *, n: int = 1, seed: int | None = None,
                       tools: list[dict] | None = None, sink: CallSink | None = None) -> CallResult:
        """Sample n responses to the same messages: one request with `n` where the provider takes
        it, else n concurrent requests. Returns when all are in."""
        if n == 1 or self._sampling_mode() == "n":
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
        litellm = await litellm_async()
        providers.ensure_registered(self.cfg.model, litellm)
        params = self._params(n, seed, tools)
        tries, start, causes = 0, time.monotonic(), []
        while True:
            self.breaker.check()
            try:
                t0 = time.monotonic()
                response = await litellm.acompletion(messages=messages, **params)
                result = self._parse(litellm, response, time.monotonic() - t0)
            except Exception as e:  # classified below; anything unexpected is not retried
                failure = failures.classify(e, litellm)
                message = f"{type(e).__name__}: {redact(str(e))[:300]}"
                causes.append(failure.cause)
                self.breaker.record(failure, message)  # raises ModelUnavailable once tripped
                tries += 1
                if failure.cause == "context_window":
                    self._report(sink, Usage(), 0.0, n, tries - 1, causes, message)
                    raise ContextWindowExceeded(redact(str(e))[:500]) from None
                if not failure.retryable or tries > self.cfg.max_retries:
                    self._report(sink, Usage(), 0.0, n, tries - 1, causes, message)
                    gave_up = f"gave up after {tries} tries ({time.monotonic() - start:.0f} s): " if failure.retryable else ""
                    raise ModelCallError(f"{self.role} {self.cfg.model}: {gave_up}{message[:500]}",
                                         cause=failure.cause) from None
                await asyncio.sleep(self._backoff(tries, e))
                continue
            self.breaker.record(None)
            result.retries = tries
            self._report(sink, result.usage, result.latency_sec, n, tries, causes, None)
            return result

    def _backoff(self, tries: int, exc: BaseException) -> float:
        """Exponential backoff with full jitter; a server's Retry-After wins when given."""
        delay = self.cfg.retry_backoff_sec * (2 ** (tries - 1)) * (0.5 + random.random())
        headers = getattr(getattr(exc, "response", None), "headers", {}) or {}
        try:
            delay = max(delay, float(headers.get("retry-after", 0)))
        except (TypeError, ValueError):
            pass
        return min(delay, MAX_BACKOFF_SEC)

    def _report(self, sink, usage: Usage, latency: float, n: int, retries: int, causes: list[str],
                error: str | None) -> None:
        if sink:
            sink.record_call(self.role, self.cfg.model, usage, latency, n=n, retries=retries, error=error,
                             retry_causes=causes)

    def _parse(self, litellm, response, latency: float) -> CallResult:
        u = getattr(response, "usage", None)
        usage = Usage(calls=1)
        if u is not None:
            usage.input = int(getattr(u, "prompt_tokens", 0) or 0)
            usage.output = int(getattr(u, "completion_tokens", 0) or 0)
            details = getattr(u, "completion_tokens_details", None)
            usage.reasoning = int(getattr(details, "reasoning_tokens", 0) or 0) if details else 0
            pdetails = getattr(u, "prompt_tokens_details", None)
            usage.cached = int(getattr(pdetails, "cached_tokens", 0) or 0) if pdetails else 0
        usage.cost_usd = cost.call_cost(self.cfg, usage, response, litellm)
        comps = [self._completion(choice) for choice in response.choices]
        split_usage(comps, usage)
        return CallResult(comps, usage, latency)

    @staticmethod
    def _completion(choice) -> Completion:
        msg = choice.message
        calls = []
        for tc in getattr(msg, "tool_calls", None) or []:
            fn = tc.function if hasattr(tc, "function") else tc["function"]
            calls.append({"id": getattr(tc, "id", None), "name": getattr(fn, "name", None) or fn.get("name"),
                          "arguments": getattr(fn, "arguments", None) if hasattr(fn, "arguments") else fn.get("arguments")})
        return Completion(text=msg.content or "", reasoning=getattr(msg, "reasoning_content", None),
                          tool_calls=calls, finish_reason=choice.finish_reason)


def split_usage(comps: list[Completion], usage: Usage) -> None:
    """Share a call's output and reasoning tokens out over its choices: output in proportion to
    each choice's length (exact with one choice); reasoning in proportion to the reasoning text,
    or evenly when the provider hides that text (o-series models report only a count)."""
    if not comps:
        return
    weights = [max(len(c.text) + len(c.reasoning or "") + sum(len(str(t["arguments"])) for t in c.tool_calls), 1)
               for c in comps]
    reasoning_chars = [len(c.reasoning or "") for c in comps]
    total_chars = sum(reasoning_chars)
    for c, w, rc in zip(comps, weights, reasoning_chars):
        c.output_tokens = round(usage.output * w / sum(weights))
        share = rc / total_chars if total_chars else 1 / len(comps)
        c.reasoning_tokens = round(usage.reasoning * share)
