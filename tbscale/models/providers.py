"""Model providers that plugins add to litellm, loaded only when a config names one.

A model string is `<provider>/<name>`. When `<provider>` is not one of litellm's own, it is looked
up in the `tbscale.providers` entry-point group; the plugin's object there has
`register(litellm)` (install a litellm custom provider) and may have `prepare(tasks)` (see the
run's tasks before the first call; the simulated model reads reference solutions this way).
tbscale's own simulated model (`sim/...`) is such a plugin: a run that names no `sim/` model
never imports it.
"""

from __future__ import annotations

import threading
from importlib import metadata
from typing import Any, Iterable

GROUP = "tbscale.providers"
_loaded: dict[str, Any] = {}
_lock = threading.Lock()


def provider_of(model: str) -> str:
    return model.split("/", 1)[0] if "/" in model else "openai"


def plugin(provider: str) -> Any | None:
    """The plugin registered for a provider name, loaded once; None when no plugin has it."""
    with _lock:
        if provider in _loaded:
            return _loaded[provider]
        found = None
        for ep in metadata.entry_points(group=GROUP):
            if ep.name == provider:
                found = ep.load()
                break
        _loaded[provider] = found
        return found


def ensure_registered(model: str, litellm) -> None:
    """Install the plugin provider a model string needs (no-op for litellm's own providers)."""
    p = plugin(provider_of(model))
    if p is not None:
        p.register(litellm)


def prepare(models: Iterable[str], tasks: list) -> None:
    """Give every plugin provider the run uses a look at the tasks."""
    for provider in sorted({provider_of(m) for m in models}):
        p = plugin(provider)
        if p is not None and hasattr(p, "prepare"):
            p.prepare(tasks)
