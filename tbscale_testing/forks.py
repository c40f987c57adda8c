"""A forkable environment with no container engine, for tests of what runs on forks (the lookahead
policy, runner/forks.py): an environment is a folder on this host, a command runs with bash in it,
a snapshot is a copy of the folder, and a fork starts from a copy of the snapshot.

It keeps count of what it started and released, so a test can check that every fork is stopped
and every snapshot released on every path. Only commands that stay in their folder behave as in a
container (relative paths); that is all the tests ask of it.
"""

from __future__ import annotations

import itertools
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from tbscale.environments import BaseBackend, BoundedOutput, Capabilities, ExecResult, StartSpec
from tbscale.environments.base import Snapshot


class FolderEnvironment:
    """A folder as an environment (see the module doc)."""

    backend = "folder"
    services: list[str] = []
    default_user = ""
    idle_processes = None

    def __init__(self, owner: "FolderBackend", root: Path, env_id: str, labels: dict[str, str] | None = None):
        self.owner, self.root, self.id = owner, root, env_id
        self.labels = dict(labels or {})
        self.workdir = str(root)
        self.origin: str | None = None  # the snapshot it was forked from
        self.stopped = False
        self.commands: list[str] = []

    def exec(self, command: str, timeout_sec: float, *, workdir: str | None = None, env: dict[str, str] | None = None,
             user: str = "", output_limit: int | None = None, tee: Path | None = None,
             hostile_peers: bool = False) -> ExecResult:
        # A local process: no in-band end signal, nothing for `hostile_peers` to change.
        if self.stopped:
            from tbscale.errors import SandboxError

            raise SandboxError(f"environment {self.id} was stopped")
        self.commands.append(command)
        t = time.monotonic()
        try:
            # stderr on stdout: one pipe, the output in the order it was written (as Container.exec)
            done = subprocess.run(["bash", "-c", command], cwd=workdir or self.root, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, timeout=timeout_sec, env={"PATH": "/usr/bin:/bin", **(env or {})})
            code, raw, timed_out = done.returncode, done.stdout, False
        except subprocess.TimeoutExpired as e:
            code, raw, timed_out = 124, e.stdout or b"", True
        out = BoundedOutput(output_limit)
        out.add(raw)
        return ExecResult(code, out.text(), timed_out, time.monotonic() - t, output_bytes=out.total,
                          elided_bytes=out.elided)

    def snapshot(self) -> Snapshot:
        return self.owner.take(self)

    def read_file(self, path: str, limit: int | None = None) -> bytes | None:
        p = self.root / path
        if p.is_file() and limit is not None and p.stat().st_size > limit:
            from tbscale.errors import SandboxError

            raise SandboxError(f"{path} is over {limit:,} bytes")
        return p.read_bytes() if p.is_file() else None

    def service(self, name: str | None) -> "FolderEnvironment":
        return self

    def set_network(self, policy: Any) -> None:
        return None

    def running(self) -> bool:
        return not self.stopped

    def restart(self) -> None:
        return None

    def stop(self) -> None:
        if not self.stopped:
            self.stopped = True
            self.owner.stopped(self)
            shutil.rmtree(self.root, ignore_errors=True)


class FolderBackend(BaseBackend):
    """Folders as environments, forkable (see the module doc). `fork_delay_sec` makes a fork take
    that long to start (a stand-in for a container's start)."""

    name = "folder"

    def __init__(self, base: Path | None = None, *, fork_delay_sec: float = 0.0, snapshots: bool = True):
        self.base = Path(base or tempfile.mkdtemp(prefix="tbscale-folders-"))
        self.fork_delay_sec = fork_delay_sec
        self.can_snapshot = snapshots
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self.live: dict[str, FolderEnvironment] = {}
        self.snapshots: dict[str, Snapshot] = {}
        self.forks_started = 0
        self.snapshots_taken = 0

    def capabilities(self) -> Capabilities:
        return Capabilities(restart=True, snapshots=self.can_snapshot)

    def _new_id(self, kind: str) -> str:
        with self._lock:
            return f"{kind}-{next(self._ids)}"

    def prepare(self, task: Any, build_timeout_sec: float | None = None) -> tuple[str, bool]:
        return "folder", False

    def start(self, spec: StartSpec | None = None) -> FolderEnvironment:
        env_id = self._new_id("env")
        root = self.base / env_id
        root.mkdir(parents=True)
        box = FolderEnvironment(self, root, env_id, spec.labels if spec else None)
        with self._lock:
            self.live[env_id] = box
        return box

    def take(self, box: FolderEnvironment) -> Snapshot:
        snap_id = self._new_id("snap")
        path = self.base / snap_id
        t = time.monotonic()
        shutil.copytree(box.root, path, symlinks=True)
        snap = Snapshot(snap_id, self.name, box.id, {"main": str(path)}, taken_sec=time.monotonic() - t,
                        extra={"path": path, "parent_snapshot": box.origin})
        with self._lock:
            self.snapshots[snap_id] = snap
            self.snapshots_taken += 1
        return snap

    def fork(self, snapshot: Snapshot, *, labels: dict[str, str] | None = None) -> FolderEnvironment:
        if snapshot.id not in self.snapshots:
            raise RuntimeError(f"snapshot {snapshot.id} was released")
        if self.fork_delay_sec:
            time.sleep(self.fork_delay_sec)
        env_id = self._new_id("fork")
        root = self.base / env_id
        shutil.copytree(snapshot.extra["path"], root, symlinks=True)
        box = FolderEnvironment(self, root, env_id, labels)
        box.origin = snapshot.id
        with self._lock:
            self.live[env_id] = box
            self.forks_started += 1
        return box

    def release(self, snapshot: Snapshot) -> None:
        """Like an engine's image removal: refused while a snapshot taken in a fork of this one is
        there (its child)."""
        with self._lock:
            children = [s.id for s in self.snapshots.values() if s.extra.get("parent_snapshot") == snapshot.id]
            if children:
                raise RuntimeError(f"snapshot {snapshot.id} has dependent child snapshots {children}")
            self.snapshots.pop(snapshot.id, None)
        shutil.rmtree(snapshot.extra["path"], ignore_errors=True)

    def stopped(self, box: FolderEnvironment) -> None:
        with self._lock:
            self.live.pop(box.id, None)

    def stop_all(self) -> int:
        boxes = list(self.live.values())
        for b in boxes:
            b.stop()
        return len(boxes)
