"""Snapshots and forks on a Docker engine (docs/forks-and-lookahead.md).

A snapshot commits a running environment's filesystem to an image (`docker commit`, with the
container paused for the commit): one image for a single container, one per service for a compose
project. A fork is a new environment started from those images the way its parent was started
(the parent's StartSpec: limits, network, workdir, env, tty; the image keeps the user, the
entrypoint and the Docker healthcheck), so the image's entrypoint and every compose service start
again. Running processes are not carried over: a server the agent started in the parent is not
running in the fork. Volumes are not part of a commit (a named or anonymous volume starts as the
image has it); bind mounts are the same host folders, shared with the parent, not copied.

Clean-up on every path:
- `release` removes a snapshot's images; when a live fork still runs on them, they go when the
  last such fork stops (`STORE`);
- the process's exit (normal end, an exception, Ctrl-C) stops its forks and removes every snapshot
  it took that is still there (atexit, and `DockerBackend.stop_all` for a cancelled Ray worker);
- a killed process's snapshot images carry its owner labels (environments/owner.py): the orphan
  sweep each run starts with and `tbscale clean` remove them (cleanup.py, `remove_snapshots`).

A snapshot lives on the engine that took it: `node` names the Ray node (or this host) and a fork
anywhere else is refused; the Ray executor runs a whole trial in one worker, so a trial's forks
stay beside their parents.
"""

from __future__ import annotations

import atexit
import json
import sys
import threading
import time
import uuid
from dataclasses import replace
from typing import Any, Callable

from tbscale.environments.base import Environment, Snapshot, StartSpec
from tbscale.environments.cleanup import LABEL_SNAPSHOT
from tbscale.environments.docker import Container
from tbscale.environments.owner import HOST, LABEL_RUN, LABEL_SESSION, SESSION_ID, owner_labels
from tbscale.errors import SandboxError
from tbscale.tasks.model import NetworkPolicy

SNAPSHOT_REPO = "tbscale-snapshot"
LABEL_FORK_OF = "org.tbscale.fork-of"


def current_node() -> str:
    """Where this process runs: its Ray node when it is a Ray worker (or driver), else this host."""
    ray = sys.modules.get("ray")
    if ray is not None:
        try:
            if ray.is_initialized():
                return str(ray.get_runtime_context().get_node_id())
        except Exception:  # noqa: BLE001 - not a Ray process after all
            pass
    return HOST


class SnapshotStore:
    """This process's snapshots that are not yet removed, and the live forks of each: a released
    snapshot's images go when its last fork stops; `release_all` stops the forks and removes
    everything (the process's exit, a cancelled worker)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.snapshots: dict[str, tuple[Snapshot, Any]] = {}  # id -> (snapshot, docker client)
        self.forks: dict[str, dict[str, Environment]] = {}  # snapshot id -> {fork id: environment}
        self.pending: dict[str, tuple[list[str], Any]] = {}  # image refs the engine would not remove yet

    def add(self, snap: Snapshot, engine) -> None:
        with self._lock:
            self.snapshots[snap.id] = (snap, engine)
            self.forks.setdefault(snap.id, {})

    def tags(self) -> set[str]:
        """Image tags of the snapshots still held (never evicted by the image budget)."""
        with self._lock:
            return {tag for snap, _ in self.snapshots.values() for tag in snap.images.values()}

    def bytes_held(self) -> int:
        with self._lock:
            return sum(snap.size_bytes for snap, _ in self.snapshots.values())

    def fork_started(self, snap: Snapshot, box: Any) -> None:
        with self._lock:
            self.forks.setdefault(snap.id, {})[box.id] = box

    def fork_stopped(self, snap: Snapshot, box: Any) -> None:
        with self._lock:
            self.forks.get(snap.id, {}).pop(box.id, None)
        if snap.released:
            self._remove_if_unused(snap.id)
        if self.pending:  # a container that held an image back is gone now
            self._retry_pending()

    def release(self, snap: Snapshot) -> None:
        snap.released = True
        self._remove_if_unused(snap.id)

    def _remove_if_unused(self, snap_id: str) -> None:
        with self._lock:
            if self.forks.get(snap_id) or snap_id not in self.snapshots:
                return
            snap, engine = self.snapshots.pop(snap_id)
            self.forks.pop(snap_id, None)
            self.pending[snap_id] = (list(snap.extra.get("ids", {}).values()) or list(snap.images.values()), engine)
        self._retry_pending()

    def _retry_pending(self) -> None:
        """Remove what is pending; an image another snapshot was committed on top of (a fork's
        snapshot) stays until that one is gone. Passes repeat while one removes something, so a
        parent pending before its child goes with it: a lookahead attempt's chain is released at
        the attempt's end, before the CER prefix snapshot taken in its last fork."""
        removed = True
        while removed:
            with self._lock:
                todo = list(self.pending.items())
            removed = False
            for snap_id, (refs, engine) in todo:
                left = [ref for ref in refs if not remove_image(engine, ref)]
                removed = removed or len(left) < len(refs)
                with self._lock:
                    if left:
                        self.pending[snap_id] = (left, engine)
                    else:
                        self.pending.pop(snap_id, None)

    def release_all(self) -> int:
        """On the way out (the process's exit, a cancelled worker): stop every environment this
        process still runs (a fork may be starting, not yet known here, and the engine refuses to
        remove an image a running container uses), then remove every snapshot it still holds."""
        from tbscale.environments.compose import ComposeEnvironment

        with self._lock:
            forks = [box for boxes in self.forks.values() for box in boxes.values()]
            held = list(self.snapshots.values())
            engines = {id(engine): engine for _, engine in [*held, *self.pending.values()]}.values()
        if not engines:
            return 0
        for stop in [box.stop for box in forks] + [Container.live.stop_all, ComposeEnvironment.live.stop_all]:
            try:
                stop()
            except Exception:  # noqa: BLE001 - teardown goes on
                pass
        for snap, _ in held:
            snap.released = True
            with self._lock:
                self.forks.pop(snap.id, None)
            self._remove_if_unused(snap.id)
        for _ in range(3):  # newest first, so a chain of snapshots of forks goes whole
            if not self.pending:
                break
            self._retry_pending()
        for engine in engines:  # whatever the engine left untagged: this process's, by label
            remove_session_snapshots(engine)
        return len(held)


STORE = SnapshotStore()


def remove_image(engine, ref: str) -> bool:
    """Remove one image (by id); True when it is gone."""
    import docker

    try:
        engine.api.remove_image(ref, force=True)
    except docker.errors.ImageNotFound:
        return True
    except Exception:  # noqa: BLE001 - a child image or a running container still holds it
        return False
    return True


def remove_session_snapshots(engine) -> int:
    """Every snapshot image this process committed, newest first (a snapshot of a fork before the
    snapshot it grew from), tagged or left untagged by the engine."""
    images = engine.api.images(all=True, filters={"label": [LABEL_SNAPSHOT, f"{LABEL_SESSION}={SESSION_ID}"]})
    removed = 0
    for img in sorted(images, key=lambda i: -int(i.get("Created") or 0)):
        removed += remove_image(engine, img["Id"])
    return removed


def _commit(container, snap_id: str, service: str) -> tuple[str, str]:
    """Commit one container's filesystem to `tbscale-snapshot:<id>-<service>`, labelled with this
    process as its owner (and the container's run) so that every clean-up path finds it; returns
    its tag and id. (The engine call itself: the SDK's `Container.commit` inspects the new image
    once more, which nothing here needs.)"""
    labels = {**owner_labels(), LABEL_SNAPSHOT: snap_id}
    run = (container.labels or {}).get(LABEL_RUN)
    if run:
        labels[LABEL_RUN] = run
    tag = f"{snap_id}-{service}"
    changes = [f"LABEL {key}={json.dumps(value)}" for key, value in labels.items()]
    try:
        image = container.client.api.commit(container.id, repository=SNAPSHOT_REPO, tag=tag, changes=changes,
                                            pause=True)
    except Exception as e:  # noqa: BLE001 - docker.errors.APIError, a container that died
        raise SandboxError(f"could not snapshot container {container.id[:12]}: {type(e).__name__}: {e}") from None
    return f"{SNAPSHOT_REPO}:{tag}", image["Id"]


_SIZES: dict[str, int] = {}  # image id -> its Size: an image never changes, and a snapshot's parent
# is often the previous snapshot (a lookahead chain) or the task's image (CER), inspected before


def _own_size(engine, image_id: str) -> int:
    """Bytes a committed image adds to its parent image (its own layer)."""
    try:
        attrs = engine.api.inspect_image(image_id)
        size = _SIZES[attrs["Id"]] = int(attrs.get("Size") or 0)
        parent = attrs.get("Parent")
        if parent and parent not in _SIZES:
            _SIZES[parent] = int(engine.api.inspect_image(parent).get("Size") or 0)
        return max(0, size - (_SIZES.get(parent, 0) if parent else 0))
    except Exception:  # noqa: BLE001
        return 0


def _spec_from(container) -> StartSpec:
    """A StartSpec read back from a running container (one not started through the backend)."""
    attrs = container.attrs or {}
    host, config = attrs.get("HostConfig") or {}, attrs.get("Config") or {}
    mode = host.get("NetworkMode") or "bridge"
    env = dict(item.split("=", 1) for item in config.get("Env") or [] if "=" in item)
    return StartSpec(image=config.get("Image") or "", cpus=(host.get("NanoCpus") or 0) / 1e9 or None,
                     memory_mb=(host.get("Memory") or 0) // (1024 * 1024) or None, pids_limit=host.get("PidsLimit"),
                     network="public" if mode in ("bridge", "default") else mode, workdir=config.get("WorkingDir") or None,
                     env=env, labels={}, tty=bool(config.get("Tty")), stdin_open=bool(config.get("OpenStdin")))


def _policy_of(box) -> str:
    switch = getattr(box, "network", None)
    return getattr(switch, "current", "public") or "public"


def policy_from(text: str) -> NetworkPolicy:
    """The NetworkPolicy a NetworkSwitch's `current` names ("public", "no-network", "allowlist:a,b")."""
    if text.startswith("allowlist:"):
        return NetworkPolicy("allowlist", tuple(h for h in text.split(":", 1)[1].split(",") if h))
    return NetworkPolicy(text)  # type: ignore[arg-type]


def take(box, containers: dict[str, Any], backend: str, after: Callable[[Snapshot], None] | None = None) -> Snapshot:
    """Commit every container of `box` (service name -> docker SDK container) into a snapshot."""
    snap_id = uuid.uuid4().hex[:12]
    engine = next(iter(containers.values())).client
    started = time.monotonic()
    images: dict[str, str] = {}
    snap = Snapshot(id=snap_id, backend=backend, parent=box.id, images=images, node=current_node(),
                    spec=getattr(box, "start_spec", None) or _spec_from(box.main.container if hasattr(box, "main")
                                                                        else box.container),
                    network=_policy_of(box))
    STORE.add(snap, engine)  # from here on every exit path removes what was committed
    try:
        for service, container in containers.items():
            images[service], snap.extra.setdefault("ids", {})[service] = _commit(container, snap_id, service)
        snap.size_bytes = sum(_own_size(engine, image_id) for image_id in snap.extra["ids"].values())
        snap.taken_sec = time.monotonic() - started
        if after is not None:
            after(snap)
    except BaseException:
        STORE.release(snap)
        raise
    return snap


def snapshot_container(box: Container) -> Snapshot:
    """A single container's snapshot ("main"): the docker backend's environments get it as their
    `snapshot()` (DockerBackend.start)."""
    return take(box, {"main": box.container}, "docker", getattr(box, "on_snapshot", None))


def snapshot_compose(env) -> Snapshot:
    """A compose project's snapshot: the main service and every sidecar."""
    containers = {env.main_service: env.main.container, **{name: c.container for name, c in env.sidecars.items()}}
    snap = take(env, containers, "compose", getattr(env, "on_snapshot", None))
    snap.extra["main_service"] = env.main_service
    return snap


def _hook_stop(snap: Snapshot, box) -> None:
    """Make `box.stop()` tell the store, so a released snapshot goes with its last fork."""
    stop = box.stop

    def stop_fork() -> None:
        try:
            stop()
        finally:
            STORE.fork_stopped(snap, box)

    box.stop = stop_fork


def fork(snap: Snapshot, start: Callable[[StartSpec], Any], labels: dict[str, str] | None = None) -> Any:
    """Start an environment from `snap` with `start` (the backend's start), with the parent's spec,
    the snapshot's images, and the parent's network policy."""
    if snap.released:
        raise SandboxError(f"snapshot {snap.id} was released")
    here = current_node()
    if snap.node and snap.node != here:
        raise SandboxError(f"snapshot {snap.id} lives on node {snap.node}; a fork starts only there (this is {here})")
    if snap.spec is None:
        raise SandboxError(f"snapshot {snap.id} does not say how its parent was started")
    base = snap.spec
    spec_labels = {**base.labels, **(labels or {}), LABEL_FORK_OF: snap.id}
    if snap.backend == "compose":
        from tbscale.environments.compose import compose_spec

        cs = base.compose or compose_spec(base.task, base.image)
        main = snap.extra.get("main_service", cs.main_service)
        cs = replace(cs, images={**cs.images, **snap.images}, services=list(dict.fromkeys([*cs.services, *snap.images])))
        spec = replace(base, image=snap.images[main], compose=cs, labels=spec_labels)
    else:
        spec = replace(base, image=snap.images["main"], compose=None, labels=spec_labels)
    box = start(spec)
    STORE.fork_started(snap, box)
    _hook_stop(snap, box)
    try:
        box.start_spec = base  # a fork of a fork starts the way the first one did
        if snap.network != "public":
            box.set_network(policy_from(snap.network))
    except BaseException:
        box.stop()
        raise
    return box


def release(snap: Snapshot) -> None:
    STORE.release(snap)


atexit.register(STORE.release_all)
