"""Before a run fans out: can every model it uses be called at all?

For each model: the environment variable its config names (`api_key_env`) is set, or, when it
names none and has no `api_base`, litellm finds the provider's usual key variable; its `api_base`
answers HTTP; and with `probe`, a one-token call succeeds. A run that would fail every call finds
out in seconds, not after every trial has burnt its retries.
"""

from __future__ import annotations

import asyncio
import os
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

from tbscale.config import ModelConfig
from tbscale.models import providers
from tbscale.secrets import redact

ENDPOINT_TIMEOUT_SEC = 5.0


@dataclass
class ModelCheck:
    key: str
    model: str
    ok: bool
    problem: str | None = None
    checked: tuple[str, ...] = ()
    latency_sec: float | None = None


def key_problem(cfg: ModelConfig) -> str | None:
    if cfg.api_key_env:
        if not os.environ.get(cfg.api_key_env):
            return f"the environment variable {cfg.api_key_env} (api_key_env) is not set"
        return None
    if cfg.api_base or providers.plugin(providers.provider_of(cfg.model)) is not None:
        return None  # a local server takes any key; a plugin provider needs none
    from tbscale.models.llm import litellm_module

    try:
        found = litellm_module().validate_environment(model=cfg.model)
    except Exception:  # a model litellm cannot map: leave it to the call itself
        return None
    if not found.get("keys_in_environment", True):
        missing = " or ".join(found.get("missing_keys") or ["its key variable"])
        return f"no API key: set {missing}, or name the variable with api_key_env"
    return None


def endpoint_problem(api_base: str) -> str | None:
    """Whether anything answers HTTP at api_base (any status counts: 401 means it is there)."""
    url = api_base.rstrip("/") + "/models"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="GET"), timeout=ENDPOINT_TIMEOUT_SEC):
            return None
    except urllib.error.HTTPError:
        return None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        return f"api_base {api_base} does not answer ({reason})"


async def probe_problem(key: str, cfg: ModelConfig) -> tuple[str | None, float]:
    from tbscale.errors import ContextWindowExceeded, ModelCallError, ModelUnavailable
    from tbscale.models.llm import LLM

    probe_cfg = cfg.model_copy(update={"max_tokens": 1, "max_retries": 0})
    t0 = time.monotonic()
    try:
        await LLM(probe_cfg, "probe", key=key).complete([{"role": "user", "content": "Say OK."}], n=1)
    except (ModelCallError, ContextWindowExceeded, ModelUnavailable) as e:
        return f"a one-token call failed: {redact(str(e))[:300]}", time.monotonic() - t0
    return None, time.monotonic() - t0


async def check_model(key: str, cfg: ModelConfig, probe: bool = False) -> ModelCheck:
    checked = ["key"]
    problem = key_problem(cfg)
    if problem is None and cfg.api_base:
        checked.append("endpoint")
        problem = await asyncio.to_thread(endpoint_problem, cfg.api_base)
    latency = None
    if problem is None and probe:
        checked.append("probe")
        problem, latency = await probe_problem(key, cfg)
    return ModelCheck(key, cfg.model, problem is None, problem, tuple(checked), latency)


async def check_models(models: dict[str, ModelConfig], probe: bool = False) -> list[ModelCheck]:
    return list(await asyncio.gather(*(check_model(k, m, probe) for k, m in sorted(models.items()))))
