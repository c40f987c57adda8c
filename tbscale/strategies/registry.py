"""Where strategies register: action policies and trajectory strategies by name, with what the
rest of tbscale needs to know about each. Lookups are in catalog.py, which loads every strategy
first; this module imports no strategy (and nothing heavy), so a strategy module can import it.

A strategy module defines a Params model and a class and registers them with
`@register_policy(name, Params, ...)` or `@register_trajectory(name, Params, ...)`.

What a strategy declares, so that the report and the trial line never name one:
- `record` (trajectory strategies): the documented shape of the `strategy_record` it writes, whose
  `kind` is the strategy's name. RECORD_STAGED (stages of attempts and of selections, each
  selection with its tournament: the report's stage tables; the viewer draws the brackets),
  RECORD_CER (CER's search rounds: the report's CER tables), or None (kept and shown as it is);
- `baseline`: the policy and the trajectory strategy of the setting other settings' costs are
  compared with (one sample per turn, one attempt);
- `adaptive` (policies): its settings with adaptive parameters (in the Params' `adaptive_field`)
  are compared with its plain settings of the same N (the adaptive report);
- `forks` (policies): it runs candidates in forks of the environment, so a run whose backend
  cannot take snapshots is refused before any environment starts;
- on the Params model (base.py): `oracle_selects()` (the verifier's verdict picks attempts: the
  trial line's `oracle_selection`), `selector_field` (the model that picks among a turn's
  candidates: the trial line's `selector_model`), `model_refs()` and `file_refs()`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from tbscale.strategies.base import Params

KINDS = ("policy", "trajectory")

# The strategy_record shapes the report and the viewer read (docs/formats.md, `strategy_record`).
RECORD_STAGED = "staged"
RECORD_CER = "cer"
RECORDS = (RECORD_STAGED, RECORD_CER)


@dataclass(frozen=True)
class Entry:
    kind: str
    name: str
    params: type[Params]
    factory: Callable[..., Any]
    record: str | None = None
    baseline: bool = False
    adaptive: bool = False
    forks: bool = False

    @property
    def origin(self) -> str:
        return f"{getattr(self.factory, '__module__', '?')}.{getattr(self.factory, '__qualname__', '?')}"


_REGISTRY: dict[str, dict[str, Entry]] = {kind: {} for kind in KINDS}
lock = threading.RLock()
# Answers kept until the next registration: the report asks for every trial row.
_matching: dict[tuple[str, tuple[tuple[str, Any], ...]], tuple[str, ...]] = {}
_by_record: dict[str, frozenset[str]] = {}


def _register(kind: str, name: str, params: type[Params], **declared: Any):
    if declared.get("record") not in (None, *RECORDS):
        raise ValueError(f"{kind} {name!r}: record must be one of {', '.join(RECORDS)} or None, "
                         f"not {declared['record']!r}")

    def deco(factory):
        new = Entry(kind, name, params, factory, **declared)
        with lock:
            old = _REGISTRY[kind].get(name)
            if old is not None and old.origin != new.origin:
                raise ValueError(f"{kind} {name!r} is registered twice: by {old.origin} and by {new.origin}")
            _REGISTRY[kind][name] = new
            _matching.clear()
            _by_record.clear()
        return factory
    return deco


def register_policy(name: str, params: type[Params], *, baseline: bool = False, adaptive: bool = False,
                    forks: bool = False):
    """Register an action policy (a class taking `(params, *, generator, models, seed, tools)`)."""
    return _register("policy", name, params, baseline=baseline, adaptive=adaptive, forks=forks)


def register_trajectory(name: str, params: type[Params], *, record: str | None = None, baseline: bool = False):
    """Register a trajectory strategy (a class taking `(params, *, models, seed, prompts)`)."""
    return _register("trajectory", name, params, record=record, baseline=baseline)


def registered(kind: str, name: Any) -> Entry | None:
    return _REGISTRY[kind].get(name) if isinstance(name, str) else None


def matching(kind: str, **declared: Any) -> tuple[str, ...]:
    """The names registered so far whose declarations match, sorted."""
    key = (kind, tuple(sorted(declared.items())))
    found = _matching.get(key)
    if found is None:
        with lock:
            found = _matching[key] = tuple(sorted(n for n, e in _REGISTRY[kind].items()
                                                  if all(getattr(e, k) == v for k, v in declared.items())))
    return found


def with_record(record: str) -> frozenset[str]:
    """The trajectory strategies registered so far whose records have this shape."""
    found = _by_record.get(record)
    if found is None:
        with lock:
            found = _by_record[record] = frozenset(matching("trajectory", record=record))
    return found
