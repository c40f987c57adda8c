"""The Environment protocol: where an attempt's commands run.

In the style of mini-swe-agent, an environment is a few methods: run a command, copy files in and
out, stop. The agent loop, the runner and the verifiers depend on this protocol only. A backend
(registered by name or entry point, chosen by config, environments/registry.py) prepares a task's
image and starts environments from it; what it can do beyond that it says in its Capabilities.
"""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Callable, Iterable, Protocol

from pydantic import BaseModel, ConfigDict

from tbscale.errors import ForksUnsupported, SandboxError, TbscaleError


@dataclass
class ExecResult:
    """A command's outcome. `output` holds at most the limit the caller gave: the head and the tail,
    with `elided_bytes` cut from the middle (the marker line says so); `output_bytes` is the size
    of the whole output. `abandoned`: the command had not ended by its timeout plus the backend's
    grace, so the caller stopped waiting for it (something stopped it, SIGSTOP, or holds its
    output); it counts as timed out, its exit code is -1 and it may still be running."""

    exit_code: int
    output: str
    timed_out: bool
    duration_sec: float
    output_bytes: int = 0
    elided_bytes: int = 0
    abandoned: bool = False


def first_lines(output: str, key: Callable[[str], str | None]) -> tuple[dict[str, str], list[str]]:
    """The first line of each key (`key(line)`, None for lines that carry none) in a command's
    output, and the keys whose lines came twice with different values. Commands whose output
    decides a verdict print each key once, so a second, different line was written by something
    beside the command: a process the agent left running can write into an exec's output
    (`hostile_peers`), and its line must not be the one read."""
    first: dict[str, str] = {}
    conflicts: list[str] = []
    for line in output.splitlines():
        k = key(line)
        if k is not None and first.setdefault(k, line) != line and k not in conflicts:
            conflicts.append(k)
    return first, conflicts


def tar_of(files: dict[str, bytes | Path]) -> bytes:
    """A tar stream for an archive endpoint: keys are paths relative to where it is unpacked; a
    Path value is a file or folder on this machine, bytes an executable file's content."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for rel, value in files.items():
            if isinstance(value, Path):
                tar.add(str(value), arcname=rel)
            else:
                info = tarfile.TarInfo(rel)
                info.size, info.mode, info.mtime = len(value), 0o755, int(time.time())
                tar.addfile(info, io.BytesIO(value))
    return buf.getvalue()


# The most `Environment.read_file` copies out unless told otherwise: the files read (rewards,
# settings, a patch, a program) are far smaller, and a file the agent made larger is refused.
READ_LIMIT = 256 * 2**20
TAR_SLACK = 64 * 2**10  # a tar stream's headers and its padding to whole records, past a copy's limit


def file_from_tar(data: bytes | IO[bytes]) -> bytes | None:
    """The one regular file of a tar stream as an engine's archive endpoint sends it for a file
    path; None when the path held something else (a folder, a link)."""
    with tarfile.open(fileobj=io.BytesIO(data) if isinstance(data, bytes) else data) as tar:
        member = tar.next()
        if member is None or not member.isfile():
            return None
        return tar.extractfile(member).read()


def tree_from_tar(data: bytes | IO[bytes], path: str) -> dict[str, str]:
    """What an archive endpoint's tar stream of `path` holds, unpacked nowhere: absolute path ->
    `file:SHA256`, `link:TARGET` (a symbolic link, as it is written), `dir` or `other` (a device,
    a fifo). A hard link is its target's digest. The stream names members from `path`'s own name."""
    parent = path.rstrip("/").rsplit("/", 1)[0] if path.rstrip("/") else ""
    out: dict[str, str] = {}
    with tarfile.open(fileobj=io.BytesIO(data) if isinstance(data, bytes) else data) as tar:
        for member in tar:
            name = f"{parent}/{member.name.strip('/')}"
            if member.isfile():
                out[name] = "file:" + hashlib.file_digest(tar.extractfile(member), "sha256").hexdigest()
            elif member.islnk():
                out[name] = out.get(f"{parent}/{member.linkname.strip('/')}", "other")
            else:
                out[name] = ("link:" + member.linkname if member.issym() else "dir" if member.isdir() else "other")
    return out


def extract_tar(data: bytes | IO[bytes], local: Path) -> None:
    """Unpack an archive endpoint's tar stream into the folder `local` (made if missing), with
    tarfile's "data" filter: no absolute paths, links out or device files."""
    local.mkdir(parents=True, exist_ok=True)
    try:
        with tarfile.open(fileobj=io.BytesIO(data) if isinstance(data, bytes) else data) as tar:
            tar.extractall(local, filter="data")
    except tarfile.FilterError as e:
        # what the agent left may be a device file or a link out of the folder: a refused copy,
        # as every caller of a copy out expects one (SandboxError), not a crash of the trial
        raise SandboxError(f"the copy out was refused: {e}") from None


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
        self._boxes: dict[str, Environment] = {}
        self._lock = threading.Lock()

    def add(self, key: str, box: Environment) -> None:
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
    """What to start: an image and its limits. `network` is `public`, `none`, or a name the
    backend gave a network of its own; `env` is set for every command. `task` is the task whose
    environment this is (a backend reads what else it needs from it: a compose file, say)."""

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
    task: Any = None
    tty: bool = False  # the container's own tty / stdin (a legacy compose file's `tty`, `stdin_open`)
    stdin_open: bool = False


@dataclass
class Snapshot:
    """A running environment's filesystem, saved so that forks can start from it
    (docs/forks-and-lookahead.md). `images` maps each service to the image its filesystem was
    committed to ("main" for a single container); `parent` is the id of the environment it was
    taken from; `node` is where it lives (a fork starts only there: a Ray worker's node, else this
    host); `spec` is what started the parent, so a fork gets the same limits, network, user,
    workdir and mounts. Processes are not part of it. `Backend.release` removes its images."""

    id: str
    backend: str
    parent: str
    images: dict[str, str]
    node: str | None = None
    taken_sec: float = 0.0
    spec: StartSpec | None = None
    network: str = "public"  # the parent's network policy when taken (a fork is put under it too)
    size_bytes: int = 0  # disk its own layers take (what it adds to the image budget)
    released: bool = False
    extra: dict[str, Any] = field(default_factory=dict)  # what else the backend keeps


@dataclass(frozen=True)
class IdleProcesses:
    """The processes an environment runs of its own while nothing else runs in it: the command
    lines its init (pid 1) may have, and those of the keep-alive under it, as /proc/PID/cmdline
    gives them with arguments joined by spaces. The verifier guard (runner/guard.py) takes a
    process list of only these as idle (nothing can write a file before the verifier runs)."""

    init: tuple[str, ...]
    children: tuple[str, ...]

    def only(self, processes: list) -> bool:
        """Whether `processes` (dicts with pid, ppid, cmd) are these and nothing else."""
        return all(p["cmd"] in (self.init if p["pid"] == 1 else self.children) and (p["pid"] == 1 or p["ppid"] == 1)
                   for p in processes)


class Environment(Protocol):
    """A running environment: where one attempt's commands run. Every backend's environments have
    all of these; what a backend cannot do (see Capabilities) raises SandboxError, and the runner
    asks the backend's capabilities before it relies on one."""

    id: str
    backend: str  # the name of the kind of environment it is (a trajectory's attempt_start says it)
    workdir: str | None
    services: list[str]  # the sidecars beside the main service (empty for one container)
    # What it runs of its own when idle; None: the backend does not say, and no process list is
    # taken as idle (the guard then never leaves out the copy of the artifacts folder).
    idle_processes: IdleProcesses | None

    def exec(self, command: str, timeout_sec: float, *, workdir: str | None = None,
             env: dict[str, str] | None = None, user: str = "", output_limit: int | None = None,
             tee: Path | None = None, hostile_peers: bool = False) -> ExecResult:
        """Run `command` with bash; stdout and stderr interleaved. The timeout kills the command.
        At most `output_limit` bytes of output are kept (head and tail); `tee` gets all of it.
        `hostile_peers`: processes the agent left may be running beside this command (root ones
        among them) and the result decides a verdict: take the command's end and exit code from
        the backend alone, never from anything such a process could write (a backend that has no
        in-band end signal has nothing to change)."""
        ...

    def put_archive(self, files: dict[str, bytes | Path], dest: str = "/") -> None:
        """Copy files in: keys are paths relative to dest; a Path value is a local file or folder."""
        ...

    def put_dir(self, local: Path, dest: str) -> None:
        """Copy a local folder's contents to `dest`."""
        ...

    def read_file(self, path: str, limit: int | None = READ_LIMIT) -> bytes | None:
        """A file's bytes, or None when there is no such file. SandboxError when the copy is over
        `limit` bytes: what the agent left may be any size, and must not fill the host's memory."""
        ...

    def get_dir(self, path: str, local: Path, limit: int | None = None) -> bool:
        """Copy a file or folder out to `local`; False when `path` does not exist. SandboxError when
        the copy is over `limit` bytes (None: no limit; it goes through a file, not memory)."""
        ...

    def read_tree(self, path: str, limit: int | None = None) -> dict[str, str] | None:
        """What is at `path` and under it, digested as it is copied out and unpacked nowhere
        (`tree_from_tar`): a link is its target, never followed. None when there is no such path;
        SandboxError over `limit` bytes."""
        ...

    @property
    def default_user(self) -> str:
        """The user a command runs as when none is given ("" is root)."""
        ...

    def service(self, name: str | None) -> "Environment":
        """A sidecar by its service name (None, "" or the main service's name: this one)."""
        ...

    def set_network(self, policy: Any) -> None:
        """Put the running environment under a NetworkPolicy (capability `network_policies`)."""
        ...

    def restart(self) -> None:
        """Kill every process, init included, and start again from the same filesystem
        (capability `restart`: the process sweep before verification, runner/guard.py)."""
        ...

    def running(self) -> bool:
        """Whether its init is still alive."""
        ...

    def snapshot(self) -> Snapshot:
        """Save the filesystem (every service's, for a compose project) so that forks can start
        from it (capability `snapshots`; `Backend.fork`). Raises ForksUnsupported when the backend
        cannot, SandboxError when it fails."""
        ...

    def changes(self) -> dict[str, int]:
        """The paths whose content or status differs from what the environment started from (its
        image, or a fork's snapshot), as the backend sees them from outside: path -> 0 changed,
        1 added, 2 deleted. Nothing that runs inside can alter it, a program replaced there
        included (capability `changes`: the guard's outside check, runner/guard.py)."""
        ...

    def stop(self) -> None:
        """Stop and remove; safe to call twice."""
        ...


class PhaseView:
    """An environment as one phase sees it: every exec runs as `user` with `env` added (the
    caller's own env and user win), so an agent, the oracle or a hook needs no knowledge of the
    task's users and env tables. Everything else is the wrapped environment's."""

    def __init__(self, inner: Any, *, user: str | int | None = None, env: dict[str, str] | None = None,
                 hostile_peers: bool = False):
        self.inner = inner
        self.user = "" if user is None else str(user)
        self.env = dict(env or {})
        self.hostile_peers = hostile_peers  # every exec is one with `hostile_peers` (Environment.exec)
        self.abandoned = 0  # execs through this view that came back `abandoned` (ExecResult)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def exec(self, command: str, timeout_sec: float, *, workdir: str | None = None,
             env: dict[str, str] | None = None, user: str = "", output_limit: int | None = None,
             tee: Path | None = None, hostile_peers: bool = False) -> ExecResult:
        merged = {**self.env, **(env or {})}
        res = self.inner.exec(command, timeout_sec, workdir=workdir, env=merged or None, user=user or self.user,
                              output_limit=output_limit, tee=tee, hostile_peers=hostile_peers or self.hostile_peers)
        self.abandoned += res.abandoned
        return res


@dataclass(frozen=True)
class Capabilities:
    """What a backend's environments can do beyond running commands and copying files. The runner
    asks before anything starts, and a task that needs what the backend lacks is refused in one
    line, never run without it (runner/environment.py); `why_not` holds the backend's own words
    for a capability it lacks (they reach refusals and the `not_enforced` notes)."""

    gpus: bool = False  # give an environment GPUs ([environment].gpus)
    gpu_types: bool = False  # give the GPU model asked for ([environment].gpu_types; else any GPU, said so)
    tpus: bool = False  # give an environment a TPU slice ([environment].tpu)
    storage_quota: bool = False  # enforce [environment].storage_mb
    services: bool = False  # run a task's compose file: the main service and its sidecars
    network_policies: bool = False  # switch a running environment between public, no-network and allowlists
    allowlist_hosts: bool = False  # an allowlist may name hosts outside the task (else only its own services)
    restart: bool = False  # Environment.restart(): the process sweep before verification
    # Environment.snapshot(), Backend.fork() and Backend.release(): save a running environment's
    # filesystem and start copies of it (CER prefixes, lookahead candidates).
    snapshots: bool = False
    # Environment.changes(): the files changed since the start, listed from outside the
    # environment (environment.file_checks: outside).
    changes: bool = False
    why_not: dict[str, str] = field(default_factory=dict, compare=False)

    def reason(self, name: str, default: str) -> str:
        return self.why_not.get(name) or default


@dataclass
class CleanResult:
    """What a clean-up removed, and what it kept because its owner is live (or unknown)."""

    containers: int = 0  # environments (a compose project counts its containers)
    networks: int = 0
    images: int = 0
    snapshots: int = 0  # snapshot images (docs/forks-and-lookahead.md), removed with their owner
    kept: dict[str, int] = field(default_factory=dict)  # owner description -> environments left alone


class Backend(Protocol):
    """Where environments come from: registered by name (environments/registry.py), chosen by
    `environment.backend`, built from its own options model (`environment.options`). The runner
    knows backends through these methods only; BaseBackend gives the optional ones a default."""

    name: str

    def capabilities(self) -> Capabilities: ...

    def check(self) -> None:
        """Raise a one-line TbscaleError when the backend cannot be reached (before any work)."""
        ...

    def task_problem(self, task: Any) -> str | None:
        """Why this backend cannot take the task as written (an image name it would refuse), checked
        before the first environment starts; None when it can."""
        ...

    def image_ref(self, task: Any) -> str | None:
        """The image `prepare` gives the task, named without building anything (None: unknown)."""
        ...

    def prepare(self, task: Any, build_timeout_sec: float | None = None) -> tuple[str, bool]:
        """The image a task's attempts start from, built or pulled when missing: (image, built)."""
        ...

    def start(self, spec: StartSpec) -> Environment: ...

    def plan(self, tasks: list) -> None:
        """The tasks whose trials are still to run (a backend with a disk budget keeps their images)."""
        ...

    def keep_images(self, refs: set[str]) -> None:
        """Images pending trials need (image_ref), never evicted: the Ray executor's workers."""
        ...

    def build_swebench_images(self, rows: list, images: dict[str, str], source: Any, log: Callable[[str], None]) -> None:
        """Build SWE-bench instances' images from their task repo (`tasks.swebench.build: docker`
        or `swebench`; `images` maps instance id to the name its trials start from) where this
        backend's environments start, before the first trial; a one-line TbscaleError when it cannot."""
        ...

    def cleanup_orphans(self) -> int:
        """Remove what killed tbscale processes on this host left behind; the number removed."""
        ...

    def clean(self, *, runs: Iterable[str] = (), labels: Iterable[str] = (), images: bool = False,
              every: bool = False) -> CleanResult:
        """`tbscale clean`: what owners that are gone left (and the named runs'); `every`: all of
        tbscale's, live or not; `labels` narrows it."""
        ...

    def stop_all(self) -> int:
        """Stop every environment this process started that is still up (an interrupted worker),
        and release every snapshot it took."""
        ...

    def fork(self, snapshot: Snapshot, *, labels: dict[str, str] | None = None) -> Environment:
        """A new, running environment started from `snapshot` with its parent's limits, network,
        user, workdir and mounts, restarting what the task itself defines (the image's entrypoint,
        its services); processes are not carried over. `stop()` releases it. `labels` are added
        to the fork's own (a trial's, an attempt's). ForksUnsupported when the backend cannot."""
        ...

    def release(self, snapshot: Snapshot) -> None:
        """Remove the snapshot's images (idempotent; images a live fork still runs on go when the
        last such fork stops)."""
        ...


class NoOptions(BaseModel):
    """A backend that takes no options."""

    model_config = ConfigDict(extra="forbid")


class BaseBackend:
    """Defaults for the optional part of the Backend protocol: no capabilities, nothing to check,
    nothing to clean. A backend overrides what it has; `Options` is its options model, validated
    at load (`environment.options`), and `flat_keys` maps older top-level keys of `environment:`
    onto its options."""

    name = "base"
    Options: type[BaseModel] = NoOptions
    flat_keys: dict[str, str] = {}

    def capabilities(self) -> Capabilities:
        return Capabilities()

    def check(self) -> None:
        return None

    def task_problem(self, task: Any) -> str | None:
        return None

    def image_ref(self, task: Any) -> str | None:
        return None

    def plan(self, tasks: list) -> None:
        self.keep_images({ref for ref in (self.image_ref(t) for t in tasks) if ref})

    def keep_images(self, refs: set[str]) -> None:
        return None

    def build_swebench_images(self, rows: list, images: dict[str, str], source: Any, log: Callable[[str], None]) -> None:
        raise TbscaleError(f"tasks.swebench.build: {source.build}: the {self.name} backend cannot build images; "
                           "give images it can start and build: none")

    def cleanup_orphans(self) -> int:
        return 0

    def clean(self, *, runs: Iterable[str] = (), labels: Iterable[str] = (), images: bool = False,
              every: bool = False) -> CleanResult:
        return CleanResult()

    def stop_all(self) -> int:
        return 0

    def fork(self, snapshot: Snapshot, *, labels: dict[str, str] | None = None) -> Environment:
        raise ForksUnsupported(f"the {self.name} backend cannot start an environment from a snapshot")

    def release(self, snapshot: Snapshot) -> None:
        raise ForksUnsupported(f"the {self.name} backend has no snapshots to release")


def snapshot_of(box: Any) -> Snapshot:
    """`box.snapshot()`, or ForksUnsupported when its backend has none (an environment of a
    backend written before snapshots joined the protocol has no such method)."""
    take = getattr(box, "snapshot", None)
    if take is None:
        raise ForksUnsupported(f"a {getattr(box, 'backend', 'this')} environment cannot be snapshotted")
    return take()


def cache_dir() -> Path:
    """tbscale's own folder on this machine (build locks, image use times, unpacked task files):
    $XDG_CACHE_HOME/tbscale."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tbscale"
