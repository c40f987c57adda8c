"""Strategies, registered by name: action policies (how one turn's action is chosen: baseline,
Turn-BoN, action verifiers) and trajectory strategies (how attempts are started, combined and
selected: single, best_of_n, pdr, cer). One module each; a new strategy touches neither the
config schema nor the agent loop."""

from tbscale.strategies.registry import (
    entry,
    names,
    register_policy,
    register_trajectory,
    validate_component,
)

__all__ = ["entry", "names", "register_policy", "register_trajectory", "validate_component"]
