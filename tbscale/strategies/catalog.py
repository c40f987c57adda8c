"""Every strategy, loaded, and the lookups the runner, the report and the checks use.

Where strategies come from, with no list of names or modules to keep:
- tbscale's own: every module of this package, imported when this one is; each registers what it
  defines (registry.py) as it is imported, so a new strategy is one new module and nothing else.
  These imports are by name, but none can cross a layer (they are all in tbscale.strategies, and
  each module's own imports are plain ones the layer contract checks); the cycle check
  (tests/test_layers.py) adds them to the module graph as edges from this module;
- another package's: the `tbscale.strategies` entry-point group. An entry point names a module
  (`my-strategy = "my_package.my_module"`); importing it registers what it defines. Plugins are
  loaded on the first lookup; one that fails to import is a one-line error naming it, at every
  lookup, never a strategy that silently goes missing.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from importlib import metadata
from typing import Any

from pydantic import ValidationError

from tbscale.errors import TbscaleError
from tbscale.strategies.base import Params
from tbscale.strategies.registry import Entry, lock, matching, registered, with_record

PLUGIN_GROUP = "tbscale.strategies"
_plugins_loaded = False


def builtin_modules() -> list[str]:
    """The modules of this package (tbscale's own strategies and the pieces they share). The
    package is imported before any of its modules, so it is read from sys.modules, not imported
    (an import of it here would close a cycle: its __init__ imports this module)."""
    package = sys.modules[__package__]
    return sorted(info.name for info in pkgutil.iter_modules(package.__path__, __package__ + "."))


def _load_builtins() -> None:
    for module in builtin_modules():
        importlib.import_module(module)


_load_builtins()


def _load_plugins() -> None:
    """Import every module of the `tbscale.strategies` entry-point group, once."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    with lock:
        if _plugins_loaded:
            return
        for ep in sorted(metadata.entry_points(group=PLUGIN_GROUP), key=lambda e: (e.name, e.value)):
            try:
                ep.load()
            except Exception as e:  # any failure of a plugin's import is reported the same way
                dist = f" from {ep.dist.name}" if getattr(ep, "dist", None) is not None else ""
                raise TbscaleError(f"strategy plugin {ep.name!r} ({PLUGIN_GROUP}: {ep.value}{dist}) cannot be "
                                   f"loaded: {type(e).__name__}: {e}") from e
        _plugins_loaded = True  # only once every plugin imported: a broken one fails again, loudly


def names(kind: str, **declared: Any) -> list[str]:
    """The registered names of a kind; with keyword arguments, those whose declarations match
    (e.g. `names("trajectory", record=RECORD_STAGED)`)."""
    _load_plugins()
    return list(matching(kind, **declared))


def record_kinds(record: str) -> frozenset[str]:
    """The `kind`s of the records of this shape (the names of the trajectory strategies declaring
    it): what the report checks each trial row against."""
    _load_plugins()
    return with_record(record)


def entry(kind: str, name: str) -> Entry:
    _load_plugins()
    found = registered(kind, name)
    if found is None:
        raise ValueError(f"name: unknown {kind} {name!r} (known: {', '.join(names(kind))})")
    return found


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


def oracle_selects(trajectory: str, params: dict[str, Any]) -> bool:
    """Whether a trajectory strategy with these parameters lets the verifier's verdict pick
    attempts: an upper bound for analysis, never a strategy's result (the trial line's
    `oracle_selection`)."""
    return entry("trajectory", trajectory).params.model_validate(params).oracle_selects()


def candidates_per_turn(policy: str, params: dict[str, Any]) -> int:
    """The candidate actions a turn samples under this policy, with its parameters' defaults (a
    config that leaves `n` out gets the policy's default, not 1)."""
    return entry("policy", policy).params.model_validate(params).candidates_per_turn()


def adaptive_settings(policy: str, params: dict[str, Any]) -> dict[str, Any] | None:
    """A setting's adaptive parameters (its policy declares `adaptive` and where they are:
    `adaptive_field`), or None for a setting that is not adaptive, or whose policy is not
    registered here (a run made elsewhere)."""
    _load_plugins()
    found = registered("policy", policy)
    field = found.params.adaptive_field if found is not None and found.adaptive else None
    value = params.get(field) if field and isinstance(params, dict) else None
    return value if isinstance(value, dict) else None


def selector_key(policy: str, params: dict[str, Any], generator: str | None) -> str | None:
    """The key of `models` whose model picks among a turn's candidates under this policy (its
    Params' `selector_field`, by default the generator); None for a policy that does not pick."""
    field = entry("policy", policy).params.selector_field
    return (params.get(field) or generator) if field else None
