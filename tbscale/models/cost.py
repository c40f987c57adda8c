"""The price of a call: the config's `prices:` when given, else litellm's bundled cost map.

A model with no known price (a local vLLM model, a new model litellm does not list yet) costs
unknown (None), not $0: the report shows such a cost as unknown, and a warning names the model and the
`prices:` key that would fix it.
"""

from __future__ import annotations

import logging
import threading

from tbscale.config import ModelConfig, Prices
from tbscale.models import providers
from tbscale.types import Usage

log = logging.getLogger("tbscale")
_warned: set[str] = set()
_warned_lock = threading.Lock()
UNKNOWN = None


def unknown_price_warning(model: str, key: str | None = None) -> str:
    where = f"models.{key}.prices" if key else "the model's `prices:`"
    return (f"no price is known for {model}: its cost is shown as unknown; give {where} "
            "(input_per_mtok, output_per_mtok) in the config to count it")


def call_cost(cfg: ModelConfig, usage: Usage, response=None, litellm=None) -> float | None:
    prices = cfg.prices
    if prices is None:  # a plugin provider may state its own price (the simulated model: $0)
        plugin = providers.plugin(providers.provider_of(cfg.model))
        if plugin is not None and getattr(plugin, "prices", None) is not None:
            prices = Prices(**plugin.prices)
    if prices is not None:
        cached = usage.cached if prices.cached_input_per_mtok is not None else 0
        return ((usage.input - cached) * prices.input_per_mtok
                + cached * (prices.cached_input_per_mtok or 0)
                + usage.output * prices.output_per_mtok) / 1e6
    if litellm is None or response is None:
        return UNKNOWN
    try:
        cost = litellm.completion_cost(completion_response=response)
    except Exception:  # litellm raises when it has no price for the model
        cost = None
    if cost is None or (cost == 0 and not _listed_free(litellm, cfg.model)):
        _warn_once(cfg.model)
        return UNKNOWN
    return float(cost)


def _listed_free(litellm, model: str) -> bool:
    """litellm returns 0.0 both for free models and for some it cannot price: trust a zero only
    when the cost map lists the model."""
    try:
        info = litellm.get_model_info(model)
    except Exception:
        return False
    return info.get("input_cost_per_token") is not None


def _warn_once(model: str) -> None:
    with _warned_lock:
        if model in _warned:
            return
        _warned.add(model)
    log.warning(unknown_price_warning(model))
