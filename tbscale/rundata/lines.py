"""Trial lines read in chunks, checked against the typed model (TrialResult) field by field.

A report reads 100k lines; validating each one into a pydantic model and then taking it apart
again costs most of the report's time. Here a chunk of lines is parsed with pydantic's JSON parser
(pydantic_core.from_json) into plain dicts, and every field the model declares is checked a column
at a time:

- the keys: no key the model does not declare (extra="forbid"), every required key present;
- scalar fields (int, str, bool, float, their optionals, dict[str, Any]): exactly the JSON types the
  model takes unchanged (a float field also takes an int, which the model turns into the same float);
- mappings of scalars or of a model of scalars (timing, tokens): the same, entry by entry (keys of
  the inner model checked as the model checks them);
- other nested fields (attempts, steps, error, ...): the same, recursively, and their values taken
  as model_dump would give them (defaults filled, ints in float fields as floats);
- the verdict and the places (`tbscale.verdict`): finite rewards, a pass that is one, and a setting
  name and file paths that stay inside the run folder.

A line that fails any of these, or whose value the model would coerce (a number as a string, say),
goes through `TrialResult.model_validate_json` exactly as before: either it is corrupt, and
reported with its line number and pydantic's reason, or the model's values are used. So the fast
path accepts only lines the model accepts, and gives the values the model would give.
"""

from __future__ import annotations

import gc
import operator
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import from_json

from tbscale.logs import check_schema_version, validate_trial_line
from tbscale.jsonl import ReadProblems
from tbscale.types.results import TrialResult, place_problem, verdict_problem

CHUNK_LINES = 4096  # lines parsed at a time, and at most this many bytes of them: their dicts are the
CHUNK_BYTES = 2 << 20  # reader's transient memory (a staged trial's line decodes to ~10x its size)

_FIELDS = TrialResult.model_fields
ORDER = tuple(_FIELDS)
NAMES = frozenset(_FIELDS)
REQUIRED = frozenset(n for n, f in _FIELDS.items() if f.is_required())
DEFAULTS = {n: f.get_default(call_default_factory=True) for n, f in _FIELDS.items() if not f.is_required()}
_SCALAR_TYPES: dict[Any, tuple[type, ...]] = {int: (int,), str: (str,), bool: (bool,), float: (float, int)}


def _scalar_types(annotation: Any) -> tuple[type, ...] | None:
    """The JSON value types a field takes unchanged, or None when it is not a plain scalar."""
    args = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else (annotation,)
    out: list[type] = []
    for a in args:
        if a is type(None):
            out.append(type(None))
        elif a in _SCALAR_TYPES:
            out.extend(_SCALAR_TYPES[a])
        elif typing.get_origin(a) is dict and typing.get_args(a) == (str, Any):
            out.append(dict)  # a JSON object's keys are strings; its values are anything
        else:
            return None
    return tuple(out)


@dataclass
class Entries:
    """A mapping field's entries over a chunk, flattened: the line each comes from, its key, and
    (for a mapping of models) each model field's values, defaults filled."""

    owner: list[int]
    keys: list[str]
    fields: dict[str, tuple[Any, ...]] | None = None


def _mapping_check(annotation: Any) -> Callable[[list[Any]], tuple[set[int], Entries]] | None:
    """For dict[str, scalar] and dict[str, a model of scalar fields] (timing, tokens): a strict
    check of a chunk's column in plain Python, a field at a time over every entry (cheaper than a
    model per entry), giving the positions that fail and the entries; None for other annotations."""
    if typing.get_origin(annotation) is not dict or typing.get_args(annotation)[0] is not str:
        return None
    value = typing.get_args(annotation)[1]
    ok = _scalar_types(value)
    if ok is not None:
        return lambda col: _bad_entries(col, lambda entries: (_bad_rows(entries, ok), None))
    if not (isinstance(value, type) and issubclass(value, BaseModel)):
        return None
    fields = {n: _scalar_types(f.annotation) for n, f in value.model_fields.items()}
    if value.model_config.get("extra") != "forbid" or any(t is None for t in fields.values()):
        return None
    keys = frozenset(fields)
    required = frozenset(n for n, f in value.model_fields.items() if f.is_required())
    base = {n: f.get_default(call_default_factory=True) for n, f in value.model_fields.items() if not f.is_required()}
    get = operator.itemgetter(*fields)

    def bad_models(entries: list[Any]) -> tuple[set[int], dict[str, tuple[Any, ...]]]:
        bad = {j for j, u in enumerate(entries) if type(u) is not dict or not (u.keys() <= keys and required <= u.keys())}
        rows = [get({**base, **u}) if j not in bad else get(base) for j, u in enumerate(entries)]
        columns = dict(zip(fields, zip(*rows))) if rows else {n: () for n in fields}
        for name, ok in fields.items():
            bad |= _bad_rows(columns[name], ok)
        return bad, columns
    return lambda col: _bad_entries(col, bad_models)


def _bad_entries(col: list[Any], check: Callable[[list[Any]], tuple[set[int], Any]]) -> tuple[set[int], Entries]:
    """Positions in `col` (one mapping per line) that are not dicts or hold an entry that `check`
    (over every line's entries at once) rejects; and the entries."""
    bad, owner, keys, entries = set(), [], [], []
    for i, d in enumerate(col):
        if type(d) is not dict:
            bad.add(i)
            continue
        owner.extend([i] * len(d))
        keys.extend(d)
        entries.extend(d.values())
    bad_entries, fields = check(entries)
    return bad | {owner[j] for j in bad_entries}, Entries(owner, keys, fields)


class _Reject(Exception):
    """A value the strict check does not take as is (the model may still coerce it, or reject it)."""


def _compile(annotation: Any) -> Callable[[Any], Any] | None:
    """A strict check of one value of `annotation` (scalars, lists, str-keyed dicts, models of
    those, optionals) that returns it as the model would dump it (model_dump: defaults filled, in
    field order, ints in float fields as floats) or raises _Reject; None for other annotations."""
    ok = _scalar_types(annotation)
    if ok is not None:
        if float not in ok:
            def scalar(v: Any) -> Any:
                if type(v) not in ok:
                    raise _Reject
                return v
            return scalar

        def number(v: Any) -> Any:
            if type(v) not in ok:
                raise _Reject
            return float(v) if type(v) is int else v
        return number
    if isinstance(annotation, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        inner = _compile(args[0]) if len(args) == 1 else None
        if inner is None:
            return None
        return lambda v: None if v is None else inner(v)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is list:
        item = _compile(args[0])
        if item is None:
            return None

        def items(v: Any) -> list[Any]:
            if type(v) is not list:
                raise _Reject
            return [item(x) for x in v]
        return items
    if origin is dict and args[0] is str:
        value = _compile(args[1])
        if value is None:
            return None

        def mapping(v: Any) -> dict[str, Any]:
            if type(v) is not dict:
                raise _Reject
            return {k: value(x) for k, x in v.items()}
        return mapping
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _compile_model(annotation)
    return None


def _compile_model(model: type[BaseModel]) -> Callable[[Any], dict[str, Any]] | None:
    if model.model_config.get("extra") != "forbid":
        return None
    info = model.model_fields
    compiled = {n: _compile(f.annotation) for n, f in info.items()}
    if any(c is None for c in compiled.values()):
        return None
    keys = frozenset(info)
    required = frozenset(n for n, f in info.items() if f.is_required())
    # Scalar fields are checked inline (most of a model); the others through their own checks.
    scalars = [(n, t, float in t) for n, f in info.items() if (t := _scalar_types(f.annotation)) is not None]
    others = [(n, compiled[n], info[n]) for n in info if _scalar_types(info[n].annotation) is None]
    base = {n: None if f.is_required() or f.default_factory else f.default for n, f in info.items()}

    def check(v: Any) -> dict[str, Any]:
        if type(v) is not dict or not (v.keys() <= keys and required <= v.keys()):
            raise _Reject
        out = {**base, **v}  # every field, in the model's order
        for n, ok, number in scalars:
            x = out[n]
            if type(x) not in ok:
                raise _Reject
            if number and type(x) is int:
                out[n] = float(x)
        for n, c, f in others:
            out[n] = c(v[n]) if n in v else f.get_default(call_default_factory=True)
        return out
    return check


SCALARS: dict[str, tuple[type, ...]] = {}
MAPPINGS: dict[str, Callable[[list[Any]], tuple[set[int], Entries]]] = {}  # plain dicts as read; missing keys: the model's defaults
NESTED: dict[str, Callable[[Any], Any]] = {}  # as the model would dump them
for _name, _f in _FIELDS.items():
    if (_types := _scalar_types(_f.annotation)) is not None:
        SCALARS[_name] = _types
    elif (_check := _mapping_check(_f.annotation)) is not None:
        MAPPINGS[_name] = _check
    elif (_compiled := _compile(_f.annotation)) is not None:
        NESTED[_name] = _compiled
    else:  # not expressible here: pydantic validates it and dumps it
        _adapter = TypeAdapter(_f.annotation)
        NESTED[_name] = lambda v, a=_adapter: a.dump_python(a.validate_python(v))
_DUMPED = set(MAPPINGS) | set(NESTED)  # fields held as plain (dumped) values
_GET = operator.itemgetter(*ORDER)
_BASE = {n: DEFAULTS.get(n) for n in ORDER}  # a line's dict over this: every field, defaults filled
_PLACEHOLDER = _GET(_BASE)


@dataclass
class Chunk:
    """Validated lines: `values[field]` lists one value per line, as the model holds it (nested
    fields as model_dump gives them, MAPPINGS fields as plain dicts); `models` holds the lines
    that needed the full model (None for a corrupt line, whose values are placeholders)."""

    numbers: list[int] = field(default_factory=list)
    values: dict[str, list[Any]] = field(default_factory=dict)
    models: dict[int, TrialResult | None] = field(default_factory=dict)  # position in chunk -> model
    # MAPPINGS fields' entries flattened, when no line needed the model (else their values differ)
    entries: dict[str, Entries] = field(default_factory=dict)


def _slow(n: int, line: bytes, problems: ReadProblems) -> TrialResult | None:
    """The line read through the model, as the typed reader does (logs.read_trials)."""
    return validate_trial_line(n, line, problems)


def _parsed(line: bytes) -> Any:
    try:
        return from_json(line)
    except ValueError:
        return None


def _bad_rows(column: list[Any], ok: tuple[type, ...]) -> set[int]:
    if set(map(type, column)) <= set(ok):
        return set()
    return {i for i, v in enumerate(column) if type(v) not in ok}


def _validate_chunk(lines: list[tuple[int, bytes]], path: str, problems: ReadProblems) -> Chunk:
    try:
        objs = [from_json(line) for _, line in lines]
    except ValueError:  # some line is not JSON: parse them one by one
        objs = [_parsed(line) for _, line in lines]
    bad = {i for i, obj in enumerate(objs)
           if not (type(obj) is dict and obj.keys() <= NAMES and REQUIRED <= obj.keys())}  # redone below
    rows = [_GET({**_BASE, **obj}) for obj in objs] if not bad else \
        [_GET({**_BASE, **obj}) if i not in bad else _PLACEHOLDER for i, obj in enumerate(objs)]
    del objs
    values = dict(zip(ORDER, map(list, zip(*rows))))
    del rows
    for name, ok in SCALARS.items():
        bad |= _bad_rows(values[name], ok)
    entries = {}
    for name, check in MAPPINGS.items():
        wrong, entries[name] = check(values[name])
        bad |= wrong
    for name, dump in NESTED.items():
        col = values[name]
        dumped = []
        for i, v in enumerate(col):
            if v is None:  # the common case (no attempts, no error): nothing to check
                dumped.append(None)
                continue
            try:
                dumped.append(dump(v))
            except (_Reject, ValidationError):
                bad.add(i)
                dumped.append(None)
        values[name] = dumped
    # A verdict that cannot be true (a NaN reward, a pass without a passing reward): the model
    # rejects it, so the line goes the slow way and is reported corrupt with the reason.
    for i, verdict in enumerate(zip(values["reward"], values["rewards"], values["passed"], values["ending"],
                                    values["steps"], values["attempts"])):
        if i not in bad and verdict_problem(*verdict) is not None:
            bad.add(i)
    for i, place in enumerate(zip(values["setting"], values["trajectory_path"], values["artifacts_path"])):
        if i not in bad and place_problem(*place) is not None:
            bad.add(i)
    chunk = Chunk([n for n, _ in lines], values, entries={} if bad else entries)
    for i in sorted(bad):
        n, line = lines[i]
        model = chunk.models[i] = _slow(n, line, problems)  # None: corrupt, skipped by the caller
        if model is not None:  # the model's values stand in for the line's
            plain = model.model_dump(include=_DUMPED)
            for name in ORDER:
                values[name][i] = plain[name] if name in _DUMPED else getattr(model, name)
    for i, v in enumerate(values["schema_version"]):  # in line order, as the typed reader checks
        if chunk.models.get(i, True) is not None:
            check_schema_version(v, path)
    return chunk


def read_chunks(path, problems: ReadProblems) -> Iterator[Chunk]:
    """The trial lines of a trials.jsonl, a chunk at a time, validated (see the module docstring).
    A position whose `models` entry is None was corrupt (recorded in `problems`) and is skipped."""
    # The cyclic garbage collector is paused while lines are parsed: JSON makes no cycles, and a
    # chunk's thousands of fresh dicts would otherwise set off collections that each walk every
    # object alive (so the reader's time would grow faster than the file).
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield from _chunks(path, str(path), problems)
    finally:
        if enabled:
            gc.enable()


def _chunks(path, where: str, problems: ReadProblems) -> Iterator[Chunk]:
    with open(path, "rb") as f:
        lines: list[tuple[int, bytes]] = []
        size = 0
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            lines.append((n, line))
            size += len(line)
            if len(lines) >= CHUNK_LINES or size >= CHUNK_BYTES:
                yield _validate_chunk(lines, where, problems)
                lines, size = [], 0
        if lines:
            yield _validate_chunk(lines, where, problems)
