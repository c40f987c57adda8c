"""Strategies, registered by name: action policies (how one turn's action is chosen: baseline,
Turn-BoN, action verifiers) and trajectory strategies (how attempts are started, combined and
selected: single, best_of_n, pdr, cer). One module each; a new strategy touches neither the
config schema nor the agent loop, nor the report: it declares what they need when it registers
(registry.py). catalog.py imports every module of this package, so a new strategy of tbscale's
own is one new module; another package adds its own through the `tbscale.strategies` entry-point
group, with no change to tbscale.

Importing this package is light (the viewer reads record formats from it without pydantic): the
lookups below load every strategy on first use.
"""

from typing import Any

from tbscale.strategies.registry import RECORD_CER, RECORD_STAGED, Entry, register_policy, register_trajectory

_LOOKUPS = ("adaptive_settings", "candidates_per_turn", "entry", "names", "oracle_selects", "record_kinds", "selector_key", "validate_component")


def __getattr__(name: str) -> Any:
    if name in _LOOKUPS:
        from tbscale.strategies import catalog

        return getattr(catalog, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["RECORD_CER", "adaptive_settings", "RECORD_STAGED", "Entry", "candidates_per_turn", "entry", "names", "oracle_selects", "record_kinds",
           "register_policy", "register_trajectory", "selector_key", "validate_component"]
