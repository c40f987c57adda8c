"""Environment tables of a task ([environment].env, [verifier].env, [solution].env, step verifier env).

A value is either a literal string or a host template: exactly `${VAR}` or `${VAR:-default}` (the
whole value, nothing around it). Templates are resolved from the host environment when the value
is read, never when the task is loaded, so a Task never holds a host value: its repr shows the
template, and literal values under secret-looking names (KEY, SECRET, TOKEN, PASSWORD, CREDENTIAL,
AUTH) are shown as `***`.

`EnvTable` is a dict of the raw strings from the task file (so copying, comparing or serialising
a Task never touches the host environment). `resolve()` makes the values to pass to a container: a
`ResolvedEnv`, whose repr masks every value that came from the host or sits under a secret-looking
name. A template naming a variable that is unset on the host and has no default is an error naming
the task file, the table and the variable, raised by `resolve()` (i.e. at run time, when the values
are needed, as Harbor does).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from tbscale.errors import TbscaleError
from tbscale.secrets import register_secret

TEMPLATE = re.compile(r"\$\{([^}:]+)(?::-(.*))?\}")
EMBEDDED = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
SECRET_NAME = re.compile(r"(KEY|SECRET|TOKEN|PASSWORD|CREDENTIAL|AUTH)", re.IGNORECASE)
MASK = "***"


def is_template(value: str) -> bool:
    return TEMPLATE.fullmatch(value) is not None


def is_secret_name(name: str) -> bool:
    return SECRET_NAME.search(name) is not None


class ResolvedEnv(dict):
    """Resolved values, ready to pass to a container. Its repr hides every value that came from the
    host or sits under a secret-looking name."""

    def __init__(self, values: Mapping[str, str], hidden: set[str] | frozenset[str] = frozenset()):
        super().__init__(values)
        self.hidden = frozenset(hidden)

    def __repr__(self) -> str:
        shown = {k: (MASK if k in self.hidden else v) for k, v in dict.items(self)}
        return repr(shown)

    __str__ = __repr__


class EnvTable(dict):
    """One env table of a task file; values resolve from the host when read (see module doc)."""

    def __init__(self, raw: Mapping[str, str] | None = None, *, where: str = "env"):
        super().__init__(raw or {})
        self.where = where  # e.g. "/path/task.toml: [verifier.env]", for error messages

    # ---- the raw side -------------------------------------------------------------------------
    @property
    def raw(self) -> dict[str, str]:
        """The values as written in the task file (templates unresolved)."""
        return dict(dict.items(self))

    def host_vars(self) -> list[tuple[str, str | None]]:
        """(host variable, default or None) for every template value."""
        out = []
        for value in dict.values(self):
            m = TEMPLATE.fullmatch(value)
            if m:
                out.append((m.group(1), m.group(2)))
        return out

    def secret_keys(self) -> set[str]:
        """Keys whose value comes from the host or whose name looks like a secret."""
        return {k for k, v in dict.items(self) if is_template(v) or is_secret_name(k)}

    def missing(self, environ: Mapping[str, str] | None = None) -> list[str]:
        """Host variables a template needs that are unset and have no default."""
        environ = os.environ if environ is None else environ
        return [var for var, default in self.host_vars() if var not in environ and default is None]

    def unset(self, environ: Mapping[str, str] | None = None) -> str | None:
        """What resolve() would raise for the first template whose host variable is unset and has
        no default (file, table, key, variable), or None."""
        environ = os.environ if environ is None else environ
        for key, value in dict.items(self):
            m = TEMPLATE.fullmatch(value)
            if m and m.group(1) not in environ and m.group(2) is None:
                return self._unset_message(key, value, m.group(1))
        return None

    def register_host_values(self, environ: Mapping[str, str] | None = None) -> None:
        """Hide from what this process writes every value a template would take from the host
        (what resolve() registers as it reads them), before any is read."""
        register_host_refs(self.host_vars(), environ)

    def merged(self, other: Mapping[str, str], where: str | None = None) -> EnvTable:
        """A new table: this one with `other`'s raw values on top."""
        raw = self.raw
        raw.update(other.raw if isinstance(other, EnvTable) else dict(other))
        return EnvTable(raw, where=where or self.where)

    # ---- the resolved side --------------------------------------------------------------------
    def _resolve_one(self, key: str, value: str, environ: Mapping[str, str]) -> str:
        m = TEMPLATE.fullmatch(value)
        if not m:
            return value
        var, default = m.group(1), m.group(2)
        if var in environ:
            # A value from the host is the kind a task asks for by template (an API key): nothing
            # this process writes or shows may carry it (tbscale/secrets.py). A default is the
            # task's own text, and a literal under a secret-looking name is too: neither is hidden.
            register_secret(environ[var])
            return environ[var]
        if default is not None:
            return default
        raise TbscaleError(self._unset_message(key, value, var))

    def _unset_message(self, key: str, value: str, var: str) -> str:
        return (f"{self.where}: {key} = \"{value}\" needs the host environment variable {var}, which is not set "
                "(and the template has no :-default)")

    def resolve(self, environ: Mapping[str, str] | None = None) -> ResolvedEnv:
        environ = os.environ if environ is None else environ
        values = {k: self._resolve_one(k, v, environ) for k, v in dict.items(self)}
        return ResolvedEnv(values, self.secret_keys())

    def copy(self) -> EnvTable:
        return EnvTable(self.raw, where=self.where)

    def __repr__(self) -> str:
        shown = {k: (MASK if (not is_template(v) and is_secret_name(k)) else v) for k, v in dict.items(self)}
        return f"EnvTable({shown!r})"

    __str__ = __repr__


def expand_host_vars(text: str, where: str, environ: Mapping[str, str] | None = None) -> str:
    """`text` with every `${VAR}` / `${VAR:-default}` in it replaced from the host (an MCP header
    such as `Bearer ${TOKEN}`); an unset variable without a default is an error naming `where`."""
    environ = os.environ if environ is None else environ

    def one(m: re.Match) -> str:
        var, default = m.group(1), m.group(2)
        if var in environ:
            # hidden from what this process writes, as in EnvTable._resolve_one
            register_secret(environ[var])
            return environ[var]
        if default is not None:
            return default
        raise TbscaleError(_unset_embedded_message(where, var))

    return EMBEDDED.sub(one, text)


def embedded_host_vars(text: str) -> list[tuple[str, str | None]]:
    """(host variable, default or None) for every `${VAR}` inside `text`."""
    return [(m.group(1), m.group(2)) for m in EMBEDDED.finditer(text)]


def unset_embedded(text: str, where: str, environ: Mapping[str, str] | None = None) -> str | None:
    """What expand_host_vars would raise for `text` (its first `${VAR}` unset on the host with no
    default), or None."""
    environ = os.environ if environ is None else environ
    var = next((v for v, default in embedded_host_vars(text) if v not in environ and default is None), None)
    return None if var is None else _unset_embedded_message(where, var)


def register_host_refs(refs: list[tuple[str, str | None]], environ: Mapping[str, str] | None = None) -> None:
    """Hide from what this process writes the host's value of every variable in `refs` (pairs of
    host_vars() or embedded_host_vars()), before any template is resolved."""
    environ = os.environ if environ is None else environ
    for var, _default in refs:
        if var in environ:
            register_secret(environ[var])


def _unset_embedded_message(where: str, var: str) -> str:
    return f"{where}: needs the host environment variable {var}, which is not set"
