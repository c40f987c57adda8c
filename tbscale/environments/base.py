"""The Environment protocol: where an attempt's commands run.

In the style of mini-swe-agent, an environment is a few methods: run a command, copy files in and
out, stop. The agent loop, the runner and the verifiers depend on this protocol only. A backend
(registered by name, chosen by config) prepares a task's image and starts environments from it.
"""

from __future__ import annotations

import importlib
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol


@dataclass
class ExecResult:
    """A command's outcome. `output` holds at most the limit the caller gave: the head and the tail,
    with `elided_bytes` cut from the middle (the marker line says so); `output_bytes` is the size
    of the whole output."""

    exit_code: int
    output: str
    timed_out: bool
    duration_sec: float
    output_bytes: int = 0
    elided_bytes: int = 0


class BoundedOutput:
    """Collects a stream of output bytes, keeping at most `limit`: the first half and a rolling last
    half. Memory stays bounded whatever a command prints; `tee` also gets every byte."""

    def __init__(self, limit: int | None, tee=None):
        self.limit, self.tee = limit, tee
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        if self.tee is not None:
            self.tee.write(chunk)
        if self.limit is None:
            self.head += chunk
            return
        half = self.limit // 2
        room = half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > half:
                del self.tail[:len(self.tail) - half]

    @property
    def elided(self) -> int:
        return self.total - len(self.head) - len(self.tail)

    def text(self) -> str:
        if not self.elided:
            return (bytes(self.head) + bytes(self.tail)).decode("utf-8", errors="replace")
        return (self.head.decode("utf-8", errors="replace")
                + f"\n[... {self.elided} bytes of output elided ...]\n"
                + self.tail.decode("utf-8", errors="replace"))


class LiveSet:
    """The environments this process started that are still up, so that an interrupted run can
    stop them all on its way out (one per backend)."""

    def __init__(self) -> None:
        self._boxes: dict[str, Any] = {}
        self._lock = threading.Lock()

    def add(self, key: str, box: Any) -> None:
        with self._lock:
            self._boxes[key] = box

    def discard(self, key: str) -> None:
        with self._lock:
            self._boxes.pop(key, None)

    def stop_all(self) -> int:
        with self._lock:
            boxes = list(self._boxes.values())
        for box in boxes:
            box.stop()
        return len(boxes)


@dataclass
class ComposeSpec:
    """A compose environment (environments/compose.py): the task's compose file, the folder its
    relative paths start from, the service the agent acts in, the image of each service tbscale
    built (service -> tag) and the variables the compose process interpolates."""

    file: Path
    project_dir: Path
    main_service: str = "main"
    services: list[str] = field(default_factory=list)
    images: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class StartSpec:
    """What to start: an image and its limits. `network` is `none`, `bridge` (public), or the
    name of a network the backend made; `env` is set for every command."""

    image: str
    cpus: float | None = 1.0  # None: no limit
    memory_mb: int | None = 2048  # None: no limit
    pids_limit: int | None = 1024
    storage_mb: int | None = None
    gpus: int | None = None
    network: str = "none"
    workdir: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    extra_hosts: dict[str, str] = field(default_factory=dict)
    compose: ComposeSpec | None = None  # set: start the compose project, act in its main service
    tty: bool = False  # the container's own tty / stdin (a legacy compose file's `tty`, `stdin_open`)
    stdin_open: bool = False


class Environment(Protocol):
    id: str
    workdir: str | None

    def exec(self, command: str, timeout_sec: float, *, workdir: str | None = None,
             env: dict[str, str] | None = None, user: str = "", output_limit: int | None = None,
             tee: Path | None = None) -> ExecResult:
        """Run `command` with bash; stdout and stderr interleaved. The timeout kills the command.
        At most `output_limit` bytes of output are kept (head and tail); `tee` gets all of it."""
        ...

    def put_archive(self, files: dict[str, bytes | Path], dest: str = "/") -> None:
        """Copy files in: keys are paths relative to dest; a Path value is a local file or folder."""
        ...

    def put_dir(self, local: Path, dest: str) -> None:
        """Copy a local folder's contents to `dest`."""
        ...

    def read_file(self, path: str) -> bytes | None:
        """A file's bytes, or None when there is no such file."""
        ...

    def get_dir(self, path: str, local: Path) -> bool:
        """Copy a file or folder out to `local`; False when `path` does not exist."""
        ...

    def stop(self) -> None:
        """Stop and remove; safe to call twice."""
        ...


class PhaseView:
    """An environment as one phase sees it: every exec runs as `user` with `env` added (the
    caller's own env and user win), so an agent, the oracle or a hook needs no knowledge of the
    task's users and env tables. Everything else is the wrapped environment's."""

    def __init__(self, inner: Any, *, user: str | int | None = None, env: dict[str, str] | None = None):
        self.inner = inner
        self.user = "" if user is None else str(user)
        self.env = dict(env or {})

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def exec(self, command: str, timeout_sec: float, *, workdir: str | None = None,
             env: dict[str, str] | None = None, user: str = "", output_limit: int | None = None,
             tee: Path | None = None) -> ExecResult:
        merged = {**self.env, **(env or {})}
        return self.inner.exec(command, timeout_sec, workdir=workdir, env=merged or None, user=user or self.user,
                               output_limit=output_limit, tee=tee)


class Backend(Protocol):
    name: str

    def prepare(self, task: Any, build_timeout_sec: float | None = None) -> tuple[str, bool]:
        """The image a task's attempts start from, built or pulled when missing: (image, built)."""
        ...

    def start(self, spec: StartSpec) -> Environment:
        ...

    def cleanup_orphans(self) -> int:
        """Remove what killed tbscale processes left behind; the number removed."""
        ...

    # Optional: `plan(tasks)` tells a backend which tasks pending trials still need (a backend with
    # a disk budget keeps their images); callers use it when present.


# Backends by name: "module:factory", imported when first asked for. Another backend is one more
# line here (or `register_backend` from a plugin).
_BACKENDS: dict[str, str | Callable[..., Backend]] = {
    "docker": "tbscale.environments.docker:DockerBackend",
    "compose": "tbscale.environments.compose:ComposeBackend",
}


def register_backend(name: str, factory: Callable[..., Backend]) -> None:
    _BACKENDS[name] = factory


def backend_names() -> list[str]:
    return sorted(_BACKENDS)


def get_backend(name: str, **options: Any) -> Backend:
    if name not in _BACKENDS:
        raise ValueError(f"unknown environment backend {name!r} (known: {', '.join(sorted(_BACKENDS))})")
    factory = _BACKENDS[name]
    if isinstance(factory, str):
        module, attr = factory.split(":")
        factory = getattr(importlib.import_module(module), attr)
    return factory(**options)
