"""Docker sandboxes through the docker SDK: cached image builds, one fresh container per attempt,
exec with a timeout, copy in and out, snapshot, and removal on every path.

The SDK is synchronous; the async runner calls these methods in worker threads. Containers carry
labels naming the tbscale process that made them, so whatever an interrupted process leaves
behind can be found and removed (`cleanup_session`, `tbscale clean`).
"""

from __future__ import annotations

import atexit
import hashlib
import io
import os
import shlex
import tarfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from tbscale.errors import SandboxError, TbscaleError

LABEL_APP = "org.tbscale"
LABEL_SESSION = "org.tbscale.session"
LABEL_HOST = "org.tbscale.host"
SESSION_ID = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
# The docker SDK's socket timeout must outlive the longest command; commands carry their own
# `timeout` inside the container, so this is only a backstop for a dead engine.
CLIENT_TIMEOUT_SEC = 3600

_HOST = os.uname().nodename
_client = None
_client_lock = threading.Lock()
_build_locks: dict[str, threading.Lock] = {}


def client():
    """One shared SDK client (connection pool sized for concurrent execs)."""
    global _client
    with _client_lock:
        if _client is None:
            import docker

            try:
                _client = docker.from_env(timeout=CLIENT_TIMEOUT_SEC, max_pool_size=64)
                _client.ping()
            except Exception as e:  # docker.errors.DockerException, connection errors
                _client = None
                raise TbscaleError(
                    f"Docker engine not reachable ({type(e).__name__}); run scripts/ensure_docker.sh"
                ) from None
        return _client


_hash_cache: dict[str, tuple[tuple, str]] = {}


def hash_directory(path: Path) -> str:
    """Content hash of a build context: relative paths, modes and bytes of every file.

    Every attempt asks for its image tag, so the hash is kept per folder and recomputed only when
    a file's name, size, mode or mtime changes: a stat walk instead of reading every byte again.
    """
    files = sorted(p for p in path.rglob("*") if p.is_file())
    stats = [(f, f.stat()) for f in files]
    signature = tuple((str(f), st.st_size, st.st_mode, st.st_mtime_ns) for f, st in stats)
    cached = _hash_cache.get(str(path))
    if cached and cached[0] == signature:
        return cached[1]
    h = hashlib.sha256()
    for f, st in stats:
        rel = f.relative_to(path).as_posix()
        h.update(rel.encode() + b"\0" + oct(st.st_mode & 0o777).encode() + b"\0")
        h.update(f.read_bytes())
        h.update(b"\0")
    digest = h.hexdigest()[:16]
    _hash_cache[str(path)] = (signature, digest)
    return digest


def image_tag_for(task) -> str:
    if task.image:
        return task.image
    return f"tbscale-task/{task.id.lower()}:{hash_directory(task.environment_dir)}"


def ensure_image(task, build_timeout_sec: float | None = None) -> tuple[str, bool]:
    """Return (tag, built): build the task's environment unless an image with its content hash
    exists. Concurrent trials of one task wait for a single build."""
    import docker

    tag = image_tag_for(task)
    lock = _build_locks.setdefault(tag, threading.Lock())
    with lock:
        try:
            client().images.get(tag)
            return tag, False
        except docker.errors.ImageNotFound:
            pass
        if task.environment_dir is None:
            try:
                client().images.pull(tag)
                return tag, True
            except docker.errors.APIError as e:
                raise SandboxError(f"image {tag} is not present and cannot be pulled: {e.explanation}") from None
        try:
            client().images.build(
                path=str(task.environment_dir), dockerfile=task.dockerfile, tag=tag, rm=True,
                forcerm=True, labels={LABEL_APP: "1", "org.tbscale.task": task.id},
                timeout=int(build_timeout_sec or task.build_timeout_sec),
            )
        except docker.errors.BuildError as e:
            tail = "".join(str(x.get("stream", x.get("error", ""))) for x in list(e.build_log)[-8:])
            raise SandboxError(f"building {task.id} failed: {e.msg}\n{tail}") from None
        return tag, True


@dataclass
class ExecResult:
    exit_code: int
    output: str
    timed_out: bool
    duration_sec: float


class Sandbox:
    """One running container. Use as a context manager, or call remove() in a finally."""

    _live: dict[str, "Sandbox"] = {}
    _live_lock = threading.Lock()

    def __init__(self, container, workdir: str | None):
        self.container = container
        self.workdir = workdir
        self.id = container.id[:12]

    @classmethod
    def create(cls, image: str, *, cpus: float, memory_mb: int, network: str = "none",
               name: str | None = None, labels: dict[str, str] | None = None,
               workdir: str | None = None, environment: dict[str, str] | None = None) -> "Sandbox":
        """Start a container that idles under an init (tini as PID 1 reaps background
        processes and lets the container die at once when removed)."""
        import docker

        try:
            container = client().containers.run(
                image, command=["sleep", "infinity"], detach=True, init=True,
                name=name, network_mode=network, nano_cpus=int(cpus * 1e9),
                mem_limit=f"{memory_mb}m", memswap_limit=f"{memory_mb}m",
                labels={LABEL_APP: "1", LABEL_SESSION: SESSION_ID, LABEL_HOST: _HOST, **(labels or {})},
                environment=environment or {}, working_dir=workdir,
            )
        except docker.errors.APIError as e:
            raise SandboxError(f"could not start a container from {image}: {e.explanation}") from None
        box = cls(container, workdir)
        with cls._live_lock:
            cls._live[box.id] = box
        return box

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc) -> None:
        self.remove()

    def exec(self, command: str, timeout_sec: float, *, workdir: str | None = None,
             env: dict[str, str] | None = None, user: str = "") -> ExecResult:
        """Run `command` with bash in the container; stdout and stderr interleaved as written.

        The timeout is enforced inside the container by coreutils `timeout`, which kills the
        command's whole process group, so a runaway command cannot outlive its turn.
        """
        wrapped = ["timeout", "-k", "5", f"{max(timeout_sec, 0.1):.1f}", "bash", "-c", command]
        start = time.monotonic()
        try:
            res = self.container.exec_run(wrapped, workdir=workdir or self.workdir,
                                          environment=env, user=user, demux=False)
        except Exception as e:
            raise SandboxError(f"exec failed in container {self.id}: {type(e).__name__}: {e}") from None
        output = (res.output or b"").decode("utf-8", errors="replace")
        code = res.exit_code if res.exit_code is not None else -1
        return ExecResult(code, output, code in (124, 137) and time.monotonic() - start >= timeout_sec,
                          time.monotonic() - start)

    def put_archive(self, files: dict[str, bytes | Path], dest: str = "/") -> None:
        """Copy files in: keys are paths relative to dest; a Path value is a file or folder."""
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for rel, value in files.items():
                if isinstance(value, Path):
                    tar.add(str(value), arcname=rel)
                else:
                    info = tarfile.TarInfo(rel)
                    info.size, info.mode, info.mtime = len(value), 0o755, int(time.time())
                    tar.addfile(info, io.BytesIO(value))
        if dest.rstrip("/"):
            self.exec(f"mkdir -p {shlex.quote(dest)}", 30)
        try:
            ok = self.container.put_archive(dest, buf.getvalue())
        except Exception as e:
            raise SandboxError(f"copy into container {self.id} failed: {e}") from None
        if not ok:
            raise SandboxError(f"copy into container {self.id}:{dest} failed")

    def put_dir(self, local: Path, dest: str) -> None:
        """Copy a local folder's contents to `dest` in the container."""
        parent, name = dest.rstrip("/").rsplit("/", 1)
        self.put_archive({name: Path(local)}, parent or "/")

    def read_file(self, path: str) -> bytes | None:
        import docker

        try:
            stream, _ = self.container.get_archive(path)
        except docker.errors.NotFound:
            return None
        except Exception as e:
            raise SandboxError(f"copy out of container {self.id} failed: {e}") from None
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            member = tar.next()
            if member is None or not member.isfile():
                return None
            return tar.extractfile(member).read()

    def snapshot(self, repository: str, tag: str) -> str:
        """Commit the container's filesystem as an image (to continue a prefix elsewhere)."""
        image = self.container.commit(repository=repository, tag=tag)
        return image.id

    def remove(self) -> None:
        with self._live_lock:
            self._live.pop(self.id, None)
        try:
            self.container.remove(force=True)
        except Exception:  # already gone, or the engine died: nothing left to free here
            pass


def cleanup_session() -> int:
    """Remove every container this process started that is still alive."""
    with Sandbox._live_lock:
        boxes = list(Sandbox._live.values())
    for box in boxes:
        box.remove()
    return len(boxes)


def cleanup_labelled(session: str | None = None) -> int:
    """Remove containers left by tbscale processes (all of them, or one session's)."""
    label = f"{LABEL_SESSION}={session}" if session else LABEL_APP
    return sum(_remove_by_id(c["Id"]) for c in _list_containers([label]))


def _list_containers(labels: list[str]) -> list[dict]:
    # The low-level listing returns what it lists; the high-level one inspects each container
    # afterwards and fails on one that another process removed in between.
    return client().api.containers(all=True, filters={"label": labels})


def _remove_by_id(container_id: str) -> int:
    try:
        client().api.remove_container(container_id, force=True)
        return 1
    except Exception:  # gone already: someone else removed it
        return 0


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def cleanup_orphans() -> int:
    """Remove containers whose tbscale process on this host is gone (killed with SIGKILL, say):
    nothing else would ever free them. Containers of live processes and other hosts are kept."""
    removed = 0
    for c in _list_containers([LABEL_APP, f"{LABEL_HOST}={_HOST}"]):
        session = (c.get("Labels") or {}).get(LABEL_SESSION, "")
        pid = session.split("-", 1)[0]
        if session == SESSION_ID or not pid.isdigit() or _pid_alive(int(pid)):
            continue
        removed += _remove_by_id(c["Id"])
    return removed


atexit.register(cleanup_session)
