"""Before a run fans out: can every model it uses be called at all?

For each model: the environment variable its config names (`api_key_env`) is set and not empty,
or, when it names none and has no `api_base`, litellm finds the provider's usual key variable; its
`api_base` answers HTTP and, asked for its model list with the key, does not refuse the key (401 or
403: the provider's message is shown, never the key); and with `probe`, a one-token call succeeds.
A run that would fail every call finds out in seconds, not after every trial has burnt its retries.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

from tbscale.config import ModelConfig
from tbscale.models import providers
from tbscale.secrets import redact, register_secret

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
        value = os.environ.get(cfg.api_key_env)
        if value is None:
            return f"the environment variable {cfg.api_key_env} (api_key_env) is not set"
        if not value.strip():
            return f"the environment variable {cfg.api_key_env} (api_key_env) is set but empty"
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


def scrub_key(text: str, key: str | None) -> str:
    """`text` with the key removed, whole or in part: a provider may echo a key it refused, or a
    masked piece of it (`sk-abc...wxyz`); any word sharing 6 characters in a row with it goes."""
    text = redact(text)
    if not key:
        return text
    text = text.replace(key, "***")
    pieces = {key[i:i + 6] for i in range(len(key) - 5)} if len(key) >= 6 else {key}

    def scrub(m: re.Match) -> str:
        word = m.group(0)
        return "***" if any(p in word for p in pieces) else word
    return re.sub(r"[^\s'\"(),;]{6,}", scrub, text)


def provider_message(body: bytes) -> str:
    """The error message of a provider's error reply: OpenAI's and Anthropic's `error.message`,
    a `message` or `detail` field, or the body's first line."""
    text = body.decode("utf-8", errors="replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        return text.splitlines()[0][:300] if text else ""
    if isinstance(data, dict):
        err = data.get("error")
        for found in ((err or {}).get("message") if isinstance(err, dict) else err, data.get("message"),
                      data.get("detail")):
            if isinstance(found, str) and found.strip():
                return found.strip()[:300]
    return text[:300]


def endpoint_problem(cfg: ModelConfig) -> str | None:
    """Whether the api_base answers HTTP and accepts the key: its model list is asked for with the
    key, as the provider expects it. A 401 or 403 is a failed check with the provider's own message;
    any other status means something answers there (servers without a model list say 404)."""
    api_base = cfg.api_base or ""
    url = api_base.rstrip("/") + "/models"
    key = cfg.api_key()
    register_secret(key)
    headers = {"Accept": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
        if providers.provider_of(cfg.model) == "anthropic":
            headers.update({"x-api-key": key, "anthropic-version": "2023-06-01"})
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="GET", headers=headers),
                                    timeout=ENDPOINT_TIMEOUT_SEC):
            return None
    except urllib.error.HTTPError as e:
        if e.code not in (401, 403):
            return None
        try:
            message = provider_message(e.read(64_000))
        except OSError:
            message = ""
        what = "refused the key" if key else "wants a key and none was sent (name its variable with api_key_env)"
        return scrub_key(f"api_base {api_base} {what}: {e.code} {e.reason}" + (f": {message}" if message else ""), key)
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        return scrub_key(f"api_base {api_base} does not answer ({reason})", key)


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
        problem = await asyncio.to_thread(endpoint_problem, cfg)
    latency = None
    if problem is None and probe:
        checked.append("probe")
        problem, latency = await probe_problem(key, cfg)
    return ModelCheck(key, cfg.model, problem is None, problem, tuple(checked), latency)


async def check_models(models: dict[str, ModelConfig], probe: bool = False) -> list[ModelCheck]:
    return list(await asyncio.gather(*(check_model(k, m, probe) for k, m in sorted(models.items()))))
