"""Backends by name: tbscale's own, those registered in code, and those other packages add through
the `tbscale.environments` entry-point group, so a backend needs no change to tbscale.

    # in a plugin's pyproject.toml
    [project.entry-points."tbscale.environments"]
    my-sandbox = "my_package.backend:MySandboxBackend"

    # or in code
    @register_backend("my-sandbox")
    class MySandboxBackend(BaseBackend): ...

A backend is a factory (usually its class) called with its options as keyword arguments. Its
`Options` attribute, a pydantic model, says which options it takes (`environment.options` in a
config, validated when the config is loaded, each problem one line naming the field); its
`flat_keys` maps older top-level keys of `environment:` (`docker_host`) onto those options.
Factories are imported only when a config names them.
"""

from __future__ import annotations

import importlib
import threading
from importlib import metadata
from typing import Any, Callable

from pydantic import BaseModel, ValidationError

from tbscale.environments.base import Backend, NoOptions

GROUP = "tbscale.environments"
DEFAULT_BACKEND = "docker"

def _docker() -> Callable[..., Backend]:
    from tbscale.environments.docker_backend import DockerBackend

    return DockerBackend


def _compose() -> Callable[..., Backend]:
    from tbscale.environments.docker_backend import ComposeBackend

    return ComposeBackend


# tbscale's own, imported when first asked for (plain imports, which the layer contract sees).
_BUILTIN: dict[str, Callable[[], Callable[..., Backend]]] = {"docker": _docker, "compose": _compose}
_registered: dict[str, Callable[..., Backend] | str] = {}
_entry_points: dict[str, metadata.EntryPoint] | None = None
_lock = threading.Lock()


class BackendOptionsError(ValueError):
    """A backend's options that do not validate: `<key path>: <problem>` (the caller adds the file)."""


class UnknownFlatKey(BackendOptionsError):
    """A key beside `environment:`'s own that the backend does not take; `takes` says what it does."""

    def __init__(self, key: str, backend: str, takes: str):
        super().__init__(f"{key}: not a key of `environment:`, nor one the {backend} backend takes there ({takes})")
        self.key, self.backend, self.takes = key, backend, takes


def register_backend(name: str, factory: Callable[..., Backend] | str | None = None):
    """Register a backend factory under `name`: `register_backend("x", Factory)`, a "module:attr"
    string, or as a class decorator `@register_backend("x")`. A later registration wins."""
    def deco(f):
        _registered[name] = f
        return f
    if factory is None:
        return deco
    return deco(factory)


def _plugins() -> dict[str, metadata.EntryPoint]:
    global _entry_points
    with _lock:
        if _entry_points is None:
            _entry_points = {ep.name: ep for ep in metadata.entry_points(group=GROUP)}
        return _entry_points


def backend_names() -> list[str]:
    return sorted(set(_BUILTIN) | set(_plugins()) | set(_registered))


def backend_factory(name: str) -> Callable[..., Backend]:
    """The factory registered under `name` (code first, then entry points, then tbscale's own)."""
    if name in _registered:
        found: Any = _registered[name]
    elif name in _plugins():
        found = _plugins()[name].load()
    elif name in _BUILTIN:
        found = _BUILTIN[name]()
    else:
        raise ValueError(f"unknown environment backend {name!r} (known: {', '.join(backend_names())})")
    if isinstance(found, str):  # a "module:factory" import path given to register_backend
        module, attr = found.split(":")
        found = getattr(importlib.import_module(module), attr)
        _registered[name] = found
    return found


def options_model(name: str) -> type[BaseModel]:
    return getattr(backend_factory(name), "Options", None) or NoOptions


def _loc(err: ValidationError) -> tuple[str, str]:
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first["loc"])
    msg = "unknown option" if first["type"] == "extra_forbidden" else first["msg"].removeprefix("Value error, ")
    more = f" (and {len(err.errors()) - 1} more)" if len(err.errors()) > 1 else ""
    return loc, msg + more


def backend_options(name: str, options: dict[str, Any] | None = None, flat: dict[str, Any] | None = None) -> BaseModel:
    """`options` (and the flat keys given, mapped by the factory's `flat_keys`) validated by the
    backend's options model; a problem raises BackendOptionsError naming the key as the config
    spells it (`options.host`, `docker_host`)."""
    factory = backend_factory(name)
    mapping: dict[str, str] = dict(getattr(factory, "flat_keys", {}) or {})
    given = dict(options or {})
    origin = {key: f"options.{key}" for key in given}
    for key, value in (flat or {}).items():
        if value is None:
            continue
        if key not in mapping:
            takes = f"it takes {', '.join(sorted(mapping))} there; " if mapping else ""
            fields = ", ".join(sorted(options_model(name).model_fields)) or "none"
            raise UnknownFlatKey(key, name, f"{takes}its options, under `options:`: {fields}")
        target = mapping[key]
        if target in given and given[target] != value:
            raise BackendOptionsError(f"{key}: disagrees with options.{target} (give one of them)")
        given[target] = value
        origin[target] = key
    model = options_model(name)
    try:
        return model.model_validate(given)
    except ValidationError as e:
        loc, msg = _loc(e)
        head = loc.split(".", 1)[0]
        where = origin.get(head, f"options.{head}") + (loc[len(head):] if head else "")
        raise BackendOptionsError(f"{where or 'options'}: {msg}") from None


def get_backend(name: str, **options: Any) -> Backend:
    """A backend by name, its options validated by its model (keyword arguments)."""
    try:
        validated = backend_options(name, options)
    except BackendOptionsError as e:
        raise ValueError(f"environment backend {name!r}: {e}") from None
    return backend_factory(name)(**validated.model_dump())


def backend_name(environment: Any) -> str:
    """The backend an experiment's `environment:` section names, or the default one when it names
    none (the config layer knows no backend, so its default is unset)."""
    return environment.backend or DEFAULT_BACKEND


def environment_options(environment: Any) -> BaseModel:
    """The options of the backend an experiment's `environment:` section names (flat keys mapped),
    validated; BackendOptionsError names the key."""
    return backend_options(backend_name(environment), environment.options, environment.flat_options())


def open_backend(environment: Any) -> Backend:
    """The backend an experiment's `environment:` section names, made with its options."""
    return backend_factory(backend_name(environment))(**environment_options(environment).model_dump())
