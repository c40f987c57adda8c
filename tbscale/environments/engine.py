"""The Docker engine a backend talks to: one shared SDK client per engine, and what tbscale keeps
on this machine about it (build locks, when each image was last used). Below both the backend
(docker.py) and the clean-up (cleanup.py), which share it."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import threading
from pathlib import Path

from tbscale.environments.base import cache_dir
from tbscale.errors import TbscaleError

# The docker SDK's socket timeout must outlive the longest command; commands carry their own
# `timeout` inside the container, so this is only a backstop for a dead engine.
CLIENT_TIMEOUT_SEC = 3600

_clients: dict[str | None, object] = {}
_client_lock = threading.Lock()
_build_locks: dict[str, threading.Lock] = {}


@contextlib.contextmanager
def build_lock(host: str | None, tag: str):
    """Held while one image is checked for and built: across the threads of this process and, by
    an fcntl lock on a file under cache_dir(), across every process on this machine (Ray runs
    trials in several worker processes per node), so one tag is never built twice at once."""
    key = f"{host}|{tag}"
    folder = cache_dir() / "locks"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (hashlib.sha256(key.encode()).hexdigest()[:24] + ".lock")
    with _build_locks.setdefault(key, threading.Lock()), open(path, "a") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def _use_record(tag: str) -> Path:
    return cache_dir() / "images" / re.sub(r"[^A-Za-z0-9_.-]", "_", tag)


def note_image_use(tag: str) -> None:
    """Remember when an image was last used on this machine (the image disk budget evicts the
    least recently used first)."""
    path = _use_record(tag)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()


def client(host: str | None = None):
    """One shared SDK client per engine (connection pool sized for concurrent execs): `host` is a
    docker base URL (tcp://, ssh://, unix://); None means DOCKER_HOST or the local socket."""
    with _client_lock:
        if host not in _clients:
            import docker

            try:
                if host:
                    c = docker.DockerClient(base_url=host, timeout=CLIENT_TIMEOUT_SEC, max_pool_size=64,
                                            use_ssh_client=host.startswith("ssh://"))
                else:
                    c = docker.from_env(timeout=CLIENT_TIMEOUT_SEC, max_pool_size=64)
                c.ping()
            except Exception as e:  # docker.errors.DockerException, connection errors
                where = host or os.environ.get("DOCKER_HOST") or "the local engine"
                raise TbscaleError(f"Docker engine not reachable at {where} ({type(e).__name__}); "
                                   "start one (scripts/ensure_docker.sh does so on Debian)") from None
            _clients[host] = c
        return _clients[host]
