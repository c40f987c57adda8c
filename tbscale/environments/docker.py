"""Containers on a Docker engine, through the docker SDK: cached image builds, one fresh container
per attempt, exec with a timeout, copy in and out, and removal on every path. The `docker` backend
(environments/docker_backend.py) is made of these and of compose projects (compose.py).

The engine is the local one, or any Docker host given by `docker_host` in the config or by
DOCKER_HOST (tcp://, ssh://). The SDK is synchronous; the async runner calls these methods in
worker threads. Containers carry labels naming the tbscale process that made them, so whatever an
interrupted process leaves behind can be found and removed (`cleanup_session`, `tbscale clean`).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import secrets
import shlex
import socket
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Callable

from tbscale.environments.cleanup import (cleanup_labelled, cleanup_orphans,  # noqa: F401  (re-exported)
                                          remove_compose_project)
from tbscale.environments.engine import (CLIENT_TIMEOUT_SEC, _use_record, build_lock,  # noqa: F401  (re-exported)
                                         cache_dir, client, note_image_use)
from tbscale.environments.dockerfile import for_classic_builder
from tbscale.environments.base import (READ_LIMIT, TAR_SLACK, BoundedOutput, ExecResult, IdleProcesses, LiveSet, StartSpec,
                                      extract_tar, file_from_tar, tar_of, tree_from_tar)
from tbscale.environments.network import NetworkSwitch
from tbscale.environments.network_failures import build_error_log
from tbscale.environments.owner import (HOST, LABEL_APP, LABEL_HOST, LABEL_PROJECT,  # noqa: F401  (re-exported)
                                        LABEL_RUN, LABEL_SESSION, SESSION_ID, owner_labels)
from tbscale.errors import BuilderUnsupported, ImageBuildError, SandboxError, TaskRefused
from tbscale.seeds import hash_directory

_HOST = HOST
# Run by the shell as `sh -c _GO_THEN_RUN TIMEOUT SHELL COMMAND`: wait for the go line, which
# carries this exec's end token (see Container.exec), then run `timeout`, which runs the command
# with stdin from /dev/null and its stderr on its stdout: one pipe, so the output keeps the order
# it was written in. (The engine copies an exec's stdout and stderr pipes in separate goroutines;
# frames of the two streams come back in whatever order those ran, measured here: 20 of 20 runs
# of 300 alternating lines reordered, and under load a test script's "FAILED ..." line landed
# inside a "cat: ..." error message, where the pytest parser no longer saw it, and a nop agent
# passed.) When the command has ended the wrapper prints the end line
# "\n<token> <exit code> <held>\n" (one write, so nothing splits it) after everything the command
# printed; <held> is 1 when another process (one the command left in the background) still holds
# the output, found by comparing every open file in /proc with the wrapper's stdout (shell builtins
# only). The wrapper's own notices (a shell says so when `timeout` is killed) go nowhere. An empty
# go line (`hostile_peers`) asks for no end line: the wrapper exits with the command's exit code,
# which the engine reports, and the output is whatever the stream carries to its end.
_GO_THEN_RUN = ('read -r end || exit 125; exec 2>/dev/null; timeout -k 5 "$0" "$1" -c "$2" </dev/null 2>&1; '
                'rc=$?; [ -n "$end" ] || exit "$rc"; '
                'held=0; for f in /proc/[0-9]*/fd/[0-9]*; do case "$f" in "/proc/$$/"*) continue;; esac; '
                'if [ "$f" -ef "/proc/$$/fd/1" ]; then held=1; break; fi; done; '
                'printf \'\\n%s %s %s\\n\' "$end" "$rc" "$held"; exit "$rc"')

# An exec whose command has not ended this long after its timeout is abandoned (ExecResult.abandoned):
# `timeout -k 5` has killed the command by then, unless something stopped `timeout` or the wrapper
# themselves (a root process the agent left running can: SIGSTOP). Without this deadline such an
# exec waited for ever, and its trial with it (tests/fixtures/wrapper_stopper.py). Measured here,
# quiet: a command ends 0.08-0.12 s after its timeout, 5.1 s after it when it ignores SIGTERM (the
# `-k 5`), and the engine holds the stream 2 s more when a background process keeps the output.
EXEC_GRACE_SEC = 20.0


def _hang_up(sock, abandoned: threading.Event) -> None:
    """Run by an exec's deadline timer: end the stream, so that the reader sees its end."""
    abandoned.set()
    with contextlib.suppress(OSError):
        getattr(sock, "_sock", sock).shutdown(socket.SHUT_RDWR)


class _UntilEndLine:
    """Passes an exec's output on to `out` up to the wrapper's end line, and reads the exit code
    from it. The token is random per exec and reaches the wrapper on its stdin, so no output can
    end the command's output early by guessing it.

    The engine holds an exec whose output a background process keeps until that process lets go
    of it or 2 s pass, and then holds the container's next exec as long, though nothing holds
    that one (measured: its output in 0.08 s, the end of its stream at 2.0 s). When the end line
    says nothing else holds the output, the exec is over there; when something does, the caller
    reads on to the end of the stream, as `docker exec` does, and what the background process
    prints meanwhile is part of the output (`after`: what came with the end line)."""

    def __init__(self, token: str, out: BoundedOutput):
        self.mark = b"\n" + token.encode() + b" "
        self.out = out
        self.pending = b""  # bytes that may be the start of the end line
        self.code: int | None = None
        self.held = False
        self.after = b""

    def feed(self, chunk: bytes) -> bool:
        """Take one chunk; True once the end line has come."""
        data = self.pending + chunk
        at = data.find(self.mark)
        if at >= 0:
            nl = data.find(b"\n", at + len(self.mark))
            if nl >= 0:
                self.out.add(data[:at])
                fields = data[at + len(self.mark):nl].split()
                self.code = int(fields[0]) if fields and fields[0].isdigit() else -1
                self.held = fields[1:2] == [b"1"]
                self.after, self.pending = data[nl + 1:], b""
                return True
            self.out.add(data[:at])
            self.pending = data[at:]
            return False
        cut = max(len(data) - len(self.mark) + 1, 0)
        self.out.add(data[:cut])
        self.pending = data[cut:]
        return False

    def close(self) -> None:
        """The stream ended with no end line (the wrapper was killed): what was held back is output."""
        self.out.add(self.pending)
        self.pending = b""


# An image reference as the engine parses it (distribution/reference): a name of path components,
# an optional registry host first, an optional tag and digest.
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN = r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)(?:\.(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?))*(?::[0-9]+)?"
_REFERENCE = re.compile(rf"^(?:{_DOMAIN}/)?{_COMPONENT}(?:/{_COMPONENT})*(?::[\w][\w.-]{{0,127}})?"
                        r"(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$")


def reference_problem(ref: str) -> str | None:
    """Why the engine would refuse `ref` as an image reference ("invalid reference format"), or None."""
    name = ref.split("@", 1)[0].rsplit(":", 1)[0] if ":" in ref.split("/")[-1] else ref.split("@", 1)[0]
    if not _REFERENCE.fullmatch(ref) or len(name) > 255:
        return (f"{ref!r} is not a valid image reference (lowercase letters, digits and '.', '_', '-' "
                "between them; then an optional :tag)")
    return None


def image_name_part(text: str) -> str:
    """`text` as one component of an image name: lowercased when that is one (every tag tbscale
    made before stays the same), else as Harbor names task images: anything but letters, digits,
    '.', '_' and '-' turned into '-', and separators only single, between letters and digits."""
    part = text.lower()
    if re.fullmatch(_COMPONENT, part) and len(part) <= 128:
        return part
    part = re.sub(r"[._-]{2,}", "-", re.sub(r"[^a-z0-9._-]+", "-", part))
    return part.strip("._-")[:128].strip("._-") or "task"


def image_tag_for(task) -> str:
    if task.image:
        return task.image
    return f"tbscale-task/{image_name_part(task.id)}:{hash_directory(task.environment_dir)}"


def ensure_image(task, build_timeout_sec: float | None = None, host: str | None = None) -> tuple[str, bool]:
    """Return (tag, built): build the task's environment unless an image with its content hash
    exists (or pull a prebuilt `docker_image`). Concurrent trials of one task wait for one build."""
    import docker

    tag = image_tag_for(task)
    engine = client(host)
    with build_lock(host, tag):
        note_image_use(tag)
        try:
            engine.images.get(tag)
            return tag, False
        except docker.errors.ImageNotFound:
            pass
        if task.environment_dir is None:
            try:
                engine.images.pull(tag)
                return tag, True
            except docker.errors.APIError as e:
                raise ImageBuildError(f"image {tag} is not present and cannot be pulled: {e.explanation}") from None
        context = Path(task.environment_dir)
        with classic_dockerfile(context / task.dockerfile, context) as dockerfile:
            try:
                engine.images.build(
                    path=str(task.environment_dir), dockerfile=dockerfile or task.dockerfile, tag=tag, rm=True,
                    forcerm=True, labels={**owner_labels(), "org.tbscale.task": task.id},
                    timeout=int(build_timeout_sec or task.build_timeout_sec),
                )
            except docker.errors.BuildError as e:
                raise build_failed(f"building {task.id} failed: {e.msg}\n{build_error_log(e.build_log)}") from None
            except docker.errors.APIError as e:
                raise build_failed(f"building {task.id} failed: {e.explanation}") from None
        return tag, True


# What the classic builder (and dockerfile.py, which rewrites what it can) says of a Dockerfile
# that only BuildKit builds: `--chmod`/`RUN --mount`/here-documents "require BuildKit", and
# several sources copied to a folder not spelt with its trailing slash.
_NEEDS_BUILDKIT = ("requires BuildKit", "must be a directory and end with a /")


def build_failed(message: str) -> ImageBuildError:
    """The error for a failed build: BuilderUnsupported when the Dockerfile needs BuildKit."""
    if any(words in message for words in _NEEDS_BUILDKIT):
        return BuilderUnsupported("BuildKit", "its Dockerfile uses BuildKit-only syntax (e.g. RUN --mount, heredocs) "
                                              "that the classic builder, which the docker SDK drives, refuses", message)
    return ImageBuildError(message)


@contextlib.contextmanager
def classic_dockerfile(path: Path, context: Path):
    """The path of a rewritten copy of the Dockerfile (outside the build context, which the SDK
    then sends with the context) when the classic builder needs one, else None."""
    try:
        rewritten = for_classic_builder(path.read_text(encoding="utf-8"),
                                        is_dir=lambda source: (context / source.lstrip("/")).is_dir())
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise build_failed(f"{path}: {e}") from None
    if rewritten is None:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="tbscale-dockerfile-") as tmp:
        copy = Path(tmp) / "Dockerfile"
        copy.write_text(rewritten, encoding="utf-8")
        yield str(copy)


class Container:
    """One running container: the Docker backend's Environment."""

    live = LiveSet()
    backend = "docker"
    # `start` runs `sleep infinity` under the engine's init (docker-init, with init=True); a
    # restart of the same container runs them again.
    idle_processes = IdleProcesses(init=("sleep infinity", "/sbin/docker-init -- sleep infinity"),
                                   children=("sleep infinity",))

    def __init__(self, container, workdir: str | None, shell: str = "bash"):
        self.container = container
        self.workdir = workdir
        self.id = container.id[:12]
        self.shell = shell  # sidecars of a compose environment may have only `sh`
        self.network: NetworkSwitch | None = None
        self.services: list[str] = []  # compose sidecars (none for a single container)

    def set_network(self, policy) -> None:
        """Put the container under a network policy (environments/network.py)."""
        if self.network is None:
            run = (self.container.labels or {}).get(LABEL_RUN)
            self.network = NetworkSwitch(self.container.client.api, self.container.id, name_prefix=f"tbscale-{self.id}",
                                         labels={**owner_labels(), **({LABEL_RUN: run} if run else {})})
        self.network.apply(policy)

    def service(self, name: str | None) -> "Container":
        if name in (None, "", "main"):
            return self
        raise SandboxError(f"no service {name!r}: a single container has no sidecars")

    @property
    def default_user(self) -> str:
        """The user a command runs as when none is given (the image's USER; "" is root)."""
        return ((self.container.attrs or {}).get("Config") or {}).get("User") or ""

    def restart(self) -> None:
        """Kill every process in the container, its init included, and start it again from the
        same filesystem, networks and command (the image's entrypoint runs again)."""
        try:
            self.container.restart(timeout=0)
            self.container.reload()
        except Exception as e:
            raise SandboxError(f"could not restart container {self.id}: {type(e).__name__}: {e}") from None
        if self.container.status != "running":
            raise SandboxError(f"container {self.id} did not come back after a restart ({self.container.status})")

    def running(self) -> bool:
        try:
            self.container.reload()
        except Exception:  # noqa: BLE001 - gone
            return False
        return self.container.status == "running"

    @classmethod
    def start(cls, spec: StartSpec, host: str | None = None) -> "Container":
        """Start a container that idles under an init (tini as PID 1 reaps background processes
        and lets the container die at once when removed)."""
        import docker

        options: dict = {}
        if spec.storage_mb:
            options["storage_opt"] = {"size": f"{spec.storage_mb}m"}
        if spec.gpus:
            options["device_requests"] = [docker.types.DeviceRequest(count=spec.gpus, capabilities=[["gpu"]])]
        if spec.cpus:
            options["nano_cpus"] = int(spec.cpus * 1e9)
        if spec.memory_mb:
            options["mem_limit"] = options["memswap_limit"] = f"{spec.memory_mb}m"
        try:
            container = client(host).containers.run(
                spec.image, command=["sleep", "infinity"], detach=True, init=True, tty=spec.tty,
                stdin_open=spec.stdin_open, network_mode="bridge" if spec.network == "public" else spec.network,
                pids_limit=spec.pids_limit,
                labels={**owner_labels(), **spec.labels},
                environment=spec.env or {}, working_dir=spec.workdir, extra_hosts=spec.extra_hosts or None,
                **options,
            )
        except docker.errors.APIError as e:
            text = str(e.explanation or e)
            if spec.storage_mb and ("storage-opt" in text or "storage_opt" in text or "quota" in text.lower()):
                raise TaskRefused(f"[environment].storage_mb = {spec.storage_mb}: this Docker engine cannot enforce a "
                                  f"storage quota ({text.strip()[:160]})") from None
            if spec.gpus and ("gpu" in text.lower() or "device driver" in text.lower()):
                raise TaskRefused(f"[environment].gpus = {spec.gpus}: this Docker engine cannot give the container a "
                                  f"GPU ({text.strip()[:160]})") from None
            raise SandboxError(f"could not start a container from {spec.image}: {text}") from None
        box = cls(container, spec.workdir)
        cls.live.add(box.id, box)
        return box

    def __enter__(self) -> "Container":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def exec(self, command: str, timeout_sec: float, *, workdir: str | None = None,
             env: dict[str, str] | None = None, user: str = "", output_limit: int | None = None,
             tee: Path | None = None, hostile_peers: bool = False) -> ExecResult:
        """Run `command` with bash in the container; stdout and stderr interleaved as written
        (the command's stderr is its stdout: one pipe, one order).

        The timeout is enforced inside the container by coreutils `timeout`, which kills the
        command's whole process group, so a runaway command cannot outlive its turn. Output is
        streamed into a bounded buffer, so a command that prints gigabytes costs no memory.

        The command waits for a go line on its stdin before it starts, and is sent it only once
        this side holds the attached stream. Without the handshake the engine can start a short
        command and lose all it printed before the stream attaches (moby/moby#27289): measured
        here under CPU load in Ray workers, 65 of 240 `echo`s came back empty with exit code 0,
        and an agent's submission went unseen. The command itself reads /dev/null, as before.

        The exit code comes with the wrapper's end line (`_UntilEndLine`), and the exec is over
        there unless a process the command left in the background still holds the output: then it
        is over when the engine closes the stream, as under `docker exec`. Without the end line
        (the wrapper killed) the stream's end and the engine's exit code are used.

        With `hostile_peers` (processes the agent left may be running beside the command, as root)
        nothing in the stream is trusted to end it: a root process can read the end token from the
        wrapper's memory (/proc/PID/mem) and print a forged end line into the exec's output, which
        ended a guard's process listing early (tried: emptied in each of 8 runs). So no token is sent, the
        output is read to the end of the stream and the exit code is the engine's. What such a
        process writes into the output cannot be kept out; readers of a verdict's output reject
        a line given twice with different values (runner/guard.py, verifiers/script.py).

        Either way this side waits for the command at most its timeout plus EXEC_GRACE_SEC, then
        hangs up and returns it `abandoned` (timed out, exit code -1): a process that stops the
        wrapper or `timeout` (SIGSTOP) could otherwise hold the exec, and its trial, for ever.
        """
        from docker.utils.socket import frames_iter

        start = time.monotonic()
        api = self.container.client.api
        sink = open(tee, "wb") if tee is not None else None
        out = BoundedOutput(output_limit, sink)
        sock = watchdog = None
        abandoned = threading.Event()
        try:
            exec_id = api.exec_create(self.container.id, [self.shell, "-c", _GO_THEN_RUN, f"{max(timeout_sec, 0.1):.1f}",
                                                          self.shell, command],
                                      stdin=True, workdir=workdir or self.workdir, environment=env, user=user)["Id"]
            sock = api.exec_start(exec_id, socket=True)
            watchdog = threading.Timer(max(timeout_sec, 0.1) + EXEC_GRACE_SEC, _hang_up, (sock, abandoned))
            watchdog.daemon = True
            watchdog.start()
            token = "" if hostile_peers else secrets.token_hex(16)
            getattr(sock, "_sock", sock).sendall(token.encode() + b"\n")
            if hostile_peers:
                for _stream, chunk in frames_iter(sock, tty=False):
                    out.add(chunk)
                code = None if abandoned.is_set() else self._exit_code(exec_id)
                return self._result(code, out, start, timeout_sec, abandoned.is_set())
            until, ended = _UntilEndLine(token, out), False
            for _stream, chunk in frames_iter(sock, tty=False):
                if ended:
                    out.add(chunk)  # a background process's, while it holds the output
                elif until.feed(chunk):
                    ended = True
                    if not until.held:
                        break
                    out.add(until.after)
            if not ended:
                until.close()
            if abandoned.is_set() and not ended:
                code = None
            else:
                code = until.code if until.code is not None else self._exit_code(exec_id)
        except Exception as e:
            if abandoned.is_set():  # the deadline's hang-up, wherever the read was
                return self._result(None, out, start, timeout_sec, True)
            raise SandboxError(f"exec failed in container {self.id}: {type(e).__name__}: {e}") from None
        finally:
            if watchdog is not None:
                watchdog.cancel()
            if sock is not None:
                sock.close()
            if sink is not None:
                sink.close()
        return self._result(code, out, start, timeout_sec, abandoned.is_set() and code is None)

    def _exit_code(self, exec_id: str) -> int | None:
        """The engine's exit code of an exec whose stream has ended; the engine may mark the exec
        ended a moment after it closed the stream, so it is asked again for up to 5 s."""
        api = self.container.client.api
        deadline = time.monotonic() + 5
        while True:
            state = api.exec_inspect(exec_id)
            if not state.get("Running") or time.monotonic() > deadline:
                return state.get("ExitCode")
            time.sleep(0.02)

    @staticmethod
    def _result(code: int | None, out: BoundedOutput, start: float, timeout_sec: float,
                abandoned: bool = False) -> ExecResult:
        code = code if code is not None else -1
        elapsed = time.monotonic() - start
        return ExecResult(code, out.text(), abandoned or (code in (124, 137) and elapsed >= timeout_sec), elapsed,
                          output_bytes=out.total, elided_bytes=out.elided, abandoned=abandoned)

    def put_archive(self, files: dict[str, bytes | Path], dest: str = "/") -> None:
        """Copy files in: keys are paths relative to dest; a Path value is a file or folder."""
        data = tar_of(files)
        if dest.rstrip("/"):
            self.exec(f"mkdir -p {shlex.quote(dest)}", 30, user="0")
        try:
            ok = self.container.put_archive(dest, data)
        except Exception as e:
            raise SandboxError(f"copy into container {self.id} failed: {e}") from None
        if not ok:
            raise SandboxError(f"copy into container {self.id}:{dest} failed")

    def put_dir(self, local: Path, dest: str) -> None:
        """Copy a local folder's contents to `dest` in the container."""
        parent, name = dest.rstrip("/").rsplit("/", 1)
        self.put_archive({name: Path(local)}, parent or "/")

    def _archive(self, path: str, limit: int | None) -> IO[bytes] | None:
        """The engine's tar stream of `path`, in a file kept in memory while small, or None when
        there is no such path; SandboxError past `limit` bytes (the copy stops there; the tar's
        own headers and padding are allowed TAR_SLACK besides)."""
        import docker

        try:
            stream, _ = self.container.get_archive(path)
        except docker.errors.NotFound:
            return None
        except Exception as e:
            raise SandboxError(f"copy out of container {self.id} failed: {e}") from None
        out = tempfile.SpooledTemporaryFile(max_size=16 * 2**20)
        total = 0
        try:
            for chunk in stream:
                total += len(chunk)
                if limit is not None and total > limit + TAR_SLACK:
                    raise SandboxError(f"copy out of container {self.id}: {path} is over {limit:,} bytes; "
                                       "the copy stopped there")
                out.write(chunk)
        except SandboxError:
            out.close()
            raise
        except Exception as e:
            out.close()
            raise SandboxError(f"copy out of container {self.id} failed: {e}") from None
        out.seek(0)
        return out

    def _read(self, path: str, limit: int | None, take: Callable[[IO[bytes]], Any], missing: Any = None) -> Any:
        data = self._archive(path, limit)
        if data is None:
            return missing
        with data:
            return take(data)

    def read_file(self, path: str, limit: int | None = READ_LIMIT) -> bytes | None:
        return self._read(path, limit, file_from_tar)

    def get_dir(self, path: str, local: Path, limit: int | None = None) -> bool:
        """Copy a file or folder out of the container into the folder `local`."""
        return self._read(path, limit, lambda data: extract_tar(data, local) or True, missing=False)

    def read_tree(self, path: str, limit: int | None = None) -> dict[str, str] | None:
        return self._read(path, limit, lambda data: tree_from_tar(data, path))

    def changes(self) -> dict[str, int]:
        """The engine's list of the container's changes against its image (`docker diff`): the
        storage driver's upper layer, which no process in the container can rewrite."""
        try:
            found = self.container.client.api.diff(self.container.id) or []
        except Exception as e:
            raise SandboxError(f"could not list the changes of container {self.id}: {type(e).__name__}: {e}") from None
        return {item["Path"]: int(item["Kind"]) for item in found}

    def stop(self) -> None:
        self.live.discard(self.id)
        try:
            self.container.remove(force=True)
        except Exception:  # already gone, or the engine died: nothing left to free here
            pass
        if self.network is not None:
            self.network.close()

    remove = stop


_capabilities: dict[str | None, dict[str, bool]] = {}


def engine_capabilities(host: str | None = None) -> dict[str, bool]:
    """What the engine can give a task beyond CPU and memory limits: `gpus` (a GPU runtime is
    registered) and `storage_quota` (a storage driver on which `--storage-opt size` works:
    overlay2 on xfs, btrfs, zfs, devicemapper)."""
    if host not in _capabilities:
        info = client(host).info()
        runtimes = set((info.get("Runtimes") or {}).keys())
        driver = info.get("Driver") or ""
        backing = dict((k, v) for k, v in (info.get("DriverStatus") or []) if isinstance(k, str))
        quota = driver in ("btrfs", "zfs", "devicemapper", "windowsfilter") or (
            driver == "overlay2" and backing.get("Backing Filesystem", "").lower() == "xfs")
        # TBSCALE_ENGINE_HAS_GPUS=1 vouches for GPUs the engine gives through CDI without a runtime.
        gpus = "nvidia" in runtimes or os.environ.get("TBSCALE_ENGINE_HAS_GPUS") == "1"
        _capabilities[host] = {"gpus": gpus, "storage_quota": quota}
    return _capabilities[host]


def cleanup_session() -> int:
    """Remove every container this process started that is still alive."""
    return Container.live.stop_all()


def _image_present(tag: str, host: str | None) -> bool:
    import docker

    try:
        client(host).images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


@dataclass
class ImageUse:
    id: str
    tags: list[str]
    size: int
    last_used: float  # unix seconds: the last ensure_image on this machine, else when it was built


def tbscale_images(host: str | None = None, label: str = LABEL_APP) -> list[ImageUse]:
    """Images tbscale built (labelled `org.tbscale`, or `label`) with their size and last use."""
    out = []
    sizes = {img["Id"]: int(img.get("Size") or 0) for img in client(host).api.images()}
    for img in client(host).api.images(filters={"label": label}):
        tags = [t for t in (img.get("RepoTags") or []) if t != "<none>:<none>"]
        used = [_use_record(t).stat().st_mtime for t in tags if _use_record(t).exists()]
        last = max(used, default=float(img.get("Created") or 0))
        size = int(img.get("Size") or 0)
        if "org.tbscale.snapshot" in (img.get("Labels") or {}):  # a snapshot adds only its own layer
            size -= sizes.get(img.get("ParentId") or "", 0)
        out.append(ImageUse(img["Id"], tags, max(size, 0), last))
    return out


def evict_images(budget_gb: float, keep: set[str], host: str | None = None, label: str = LABEL_APP,
                 log=None) -> list[str]:
    """Remove tbscale-built images, least recently used first, until their total size is within
    `budget_gb`; never one whose tag is in `keep` (what pending trials need) nor one a container
    still uses. The total counts each image's whole size (layers shared between images are
    counted once per image), so it overstates the disk used and the budget errs on the safe side.
    Returns the tags (or ids) removed."""
    import docker

    images = tbscale_images(host, label)
    total = sum(i.size for i in images)
    budget = budget_gb * 1e9
    removed: list[str] = []
    for img in sorted(images, key=lambda i: i.last_used):
        if total <= budget:
            break
        if keep.intersection(img.tags):
            continue
        try:
            client(host).api.remove_image(img.id, force=False)
        except docker.errors.APIError:  # a container (another trial's, or a user's) still uses it
            continue
        total -= img.size
        removed.append(img.tags[0] if img.tags else img.id)
        for t in img.tags:
            _use_record(t).unlink(missing_ok=True)
        if log:
            log(f"evicted image {removed[-1]} ({img.size / 1e9:.2f} GB) to stay within {budget_gb} GB")
    return removed


atexit.register(cleanup_session)
