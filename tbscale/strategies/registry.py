"""The strategy registry: action policies and trajectory strategies by name.

A strategy module defines a Params model and a class, and registers both here with
`register_policy` / `register_trajectory`. Config validation looks the name up and validates the
parameters with the strategy's own Params, so adding a strategy touches neither the config nor
the agent loop.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable

from pydantic import ValidationError

from tbscale.strategies.base import Params

# Modules imported on first registry use; each registers what it defines.
_MODULES = ["baseline", "turn_bon", "single"]
_EXTRA_MODULES = ["action_verifiers", "best_of_n", "pdr", "cer"]


@dataclass
class Entry:
    params: type[Params]
    factory: Callable[..., Any]


_REGISTRY: dict[str, dict[str, Entry]] = {"policy": {}, "trajectory": {}}
_loaded = False


def register_policy(name: str, params: type[Params]):
    def deco(factory):
        _REGISTRY["policy"][name] = Entry(params, factory)
        return factory
    return deco


def register_trajectory(name: str, params: type[Params]):
    def deco(factory):
        _REGISTRY["trajectory"][name] = Entry(params, factory)
        return factory
    return deco


def _load() -> None:
    global _loaded
    if _loaded:
        return
    for mod in _MODULES:
        importlib.import_module(f"tbscale.strategies.{mod}")
    for mod in _EXTRA_MODULES:
        try:
            importlib.import_module(f"tbscale.strategies.{mod}")
        except ModuleNotFoundError as e:
            if e.name != f"tbscale.strategies.{mod}":
                raise
    _loaded = True  # only once every module imported: a failed import must fail again, loudly


def names(kind: str) -> list[str]:
    _load()
    return sorted(_REGISTRY[kind])


def entry(kind: str, name: str) -> Entry:
    _load()
    if name not in _REGISTRY[kind]:
        raise ValueError(f"name: unknown {kind} {name!r} (known: {', '.join(names(kind))})")
    return _REGISTRY[kind][name]


def validate_component(kind: str, name: str, params: dict[str, Any], models: dict[str, Any]) -> Params:
    """Validate a component's parameters; errors read `<param>: <problem>`."""
    e = entry(kind, name)
    try:
        parsed = e.params.model_validate(params)
    except ValidationError as err:
        first = err.errors()[0]
        loc = ".".join(str(x) for x in first["loc"]) or "name"
        msg = "unknown key" if first["type"] == "extra_forbidden" else first["msg"].removeprefix("Value error, ")
        raise ValueError(f"{loc}: {msg}") from None
    for field, ref in parsed.model_refs().items():
        if ref is not None and ref not in models:
            raise ValueError(f"{field}: '{ref}' is not a key of `models`")
    return parsed
