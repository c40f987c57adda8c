"""A Terminal-Bench task's docker-compose.yaml, read as the legacy harness used it.

The legacy harness ran `docker compose up` on the task's file, so every key of its services took
effect. tbscale runs a single-service file (the common case: one `client` service) as one
container, and so must carry out each key of that service itself, or hand the task to the compose
backend (which gives the file to docker compose as the legacy harness did), or refuse it naming the
key. Nothing is dropped without a word (docs/tasks.md, "Terminal-Bench compose files").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tbscale.errors import TbscaleError
from tbscale.tasks.model import NotEnforced
from tbscale.tasks.schema import parse_size_mb

# What the legacy harness put in the environment of `docker compose` (compose files refer to them).
COMPOSE_VALUES = {
    "T_BENCH_TEST_DIR": "/tests",
    "T_BENCH_CONTAINER_LOGS_PATH": "/logs",
    "T_BENCH_CONTAINER_AGENT_LOGS_PATH": "/agent-logs",
}
# Per-trial values the harness set (names, host log folders); tbscale sets its own per trial.
_PER_TRIAL = re.compile(r"^\$\{(T_BENCH_TASK_[A-Z_]+|COMPOSE_PROJECT_NAME)\}$")
_HOST_LOGS = re.compile(r"^\$\{T_BENCH_TASK_(AGENT_)?LOGS_PATH\}$")
_KEEP_ALIVE = re.compile(r"^(sh -c )?'?(sleep infinity|tail -f /dev/null)'?$")
# Keys of a single service tbscale carries out in one container.
NATIVE_KEYS = frozenset({"build", "image", "container_name", "command", "environment", "working_dir", "deploy",
                         "volumes", "tty", "stdin_open", "init", "platform"})
# Keys docker compose carries out and tbscale's container does not: such a task runs under the
# compose backend, whose project includes the task's own file (so compose applies them).
COMPOSE_KEYS = frozenset({"user", "entrypoint", "env_file", "shm_size", "ulimits", "cap_add", "cap_drop",
                          "privileged", "sysctls", "extra_hosts", "dns", "dns_search", "security_opt", "devices",
                          "hostname", "domainname", "healthcheck", "labels", "expose", "restart", "logging",
                          "mem_limit", "memswap_limit", "mem_reservation", "cpus", "cpu_shares", "cpuset",
                          "pids_limit", "read_only", "tmpfs", "ipc", "stop_signal", "stop_grace_period", "group_add",
                          "oom_score_adj", "storage_opt", "runtime", "pull_policy"})
# Everything else is refused: what tbscale cannot give a trial without breaking its isolation
# from other trials (fixed host ports, the host's network or PID namespace, ...).
REFUSED_WHY = {
    "ports": "publishes fixed host ports, which concurrent trials would fight over",
    "network_mode": "tbscale switches the container's networks itself (docs/tasks.md, Network)",
    "networks": "tbscale switches the container's networks itself (docs/tasks.md, Network)",
    "pid": "shares a PID namespace outside the trial",
    "volumes_from": "mounts another container's volumes",
    "links": "links to containers outside the task",
    "external_links": "links to containers outside the task",
}


@dataclass
class ClientService:
    """What a task's compose file says about the container the agent works in."""

    context: Path
    dockerfile_name: str = "Dockerfile"
    image: str | None = None
    workdir: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    cpus: float | None = None
    memory_mb: int | None = None
    copy_in: list[tuple[Path, str]] = field(default_factory=list)
    tty: bool = False
    stdin_open: bool = False
    compose_required: list[str] = field(default_factory=list)  # keys only docker compose carries out
    notes: list[NotEnforced] = field(default_factory=list)


def compose_value(value: str) -> str:
    for name, resolved in COMPOSE_VALUES.items():
        value = value.replace("${" + name + "}", resolved)
    return value


def _command_text(command: Any) -> str:
    return " ".join(str(c) for c in command) if isinstance(command, list) else str(command)


def _volume(entry: Any, compose: Path, key: str, out: ClientService) -> None:
    if isinstance(entry, dict):
        source, target, read_only = entry.get("source"), entry.get("target"), bool(entry.get("read_only"))
        if entry.get("type", "bind") != "bind":
            raise TbscaleError(f"{compose}: {key} = {entry!r}: a {entry.get('type')} volume is not supported "
                               "(tbscale copies folders of the task in; it keeps no volumes between trials)")
    else:
        parts = str(entry).split(":")
        if len(parts) < 2:
            raise TbscaleError(f"{compose}: {key} = {entry!r}: an anonymous volume is not supported")
        source, target, read_only = parts[0], parts[1], len(parts) > 2 and "ro" in parts[2].split(",")
    if not isinstance(source, str) or not isinstance(target, str):
        raise TbscaleError(f"{compose}: {key} = {entry!r}: needs a source and a target")
    if _HOST_LOGS.match(source):
        return  # the harness's log folders: tbscale makes /logs in the container itself
    if not source.startswith((".", "/")) and "/" not in source:
        raise TbscaleError(f"{compose}: {key} = {entry!r}: a named volume is not supported (tbscale keeps no "
                           "volumes between trials)")
    local = (compose.parent / source).resolve()
    task_dir = compose.parent.resolve()
    if local != task_dir and task_dir not in local.parents:
        raise TbscaleError(f"{compose}: {key} = {entry!r}: mounts {source!r}, outside the task folder")
    if not local.exists():
        raise TbscaleError(f"{compose}: {key} = {entry!r}: {local} does not exist")
    if not target.startswith("/"):
        raise TbscaleError(f"{compose}: {key} = {entry!r}: the target must be an absolute path")
    out.copy_in.append((local, compose_value(target)))
    note = (f"{source} is copied to {target} when the container starts instead of bind-mounted: the container "
            "sees the same files, but its writes do not reach the task folder on the host")
    out.notes.append(NotEnforced(f"{key} ({entry})", note + (" (and `:ro` is not enforced)" if read_only else "")))


def read_client(compose: Path, services: dict[str, dict[str, Any]], main: str, single: bool) -> ClientService:
    """The client service of a legacy compose file. With `single` (no sidecars), every key of the
    service is carried out here, marked for the compose backend, or refused naming the key."""
    client = services[main]
    where = f"services.{main}"
    out = ClientService(context=compose.parent)
    build = client.get("build")
    if isinstance(build, str):
        out.context = (compose.parent / build).resolve()
    elif isinstance(build, dict):
        out.context = (compose.parent / str(build.get("context", "."))).resolve()
        out.dockerfile_name = str(build.get("dockerfile", "Dockerfile"))
    elif isinstance(client.get("image"), str) and "$" not in client["image"]:
        out.image = client["image"]
    if isinstance(client.get("working_dir"), str):
        out.workdir = client["working_dir"]
    raw_env = client.get("environment") or {}
    if isinstance(raw_env, list):
        raw_env = dict(item.split("=", 1) if "=" in item else (item, "${" + item + "}") for item in raw_env)
    out.env = {str(k): compose_value(str(v)) for k, v in raw_env.items() if v is not None}
    deploy = client.get("deploy") or {}
    limits = ((deploy.get("resources") or {}).get("limits") or {}) if isinstance(deploy, dict) else {}
    if limits.get("cpus") is not None:
        out.cpus = float(limits["cpus"])
    if isinstance(limits.get("memory"), str):
        try:
            out.memory_mb = parse_size_mb(limits["memory"].rstrip("bB"), "memory")
        except ValueError:
            raise TbscaleError(f"{compose}: {where}.deploy.resources.limits.memory = "
                               f"{limits['memory']!r} is not a size like \"2g\" or \"512m\"") from None
    if not single:
        return out  # the compose backend gives the whole file to docker compose
    refused = [k for k in client if k not in NATIVE_KEYS and k not in COMPOSE_KEYS]
    if refused:
        why = "; ".join(f"`{k}` {REFUSED_WHY.get(k, 'is not a key tbscale can carry out')}" for k in sorted(refused))
        raise TbscaleError(f"{compose}: {where}: {why}")
    out.compose_required = sorted(k for k in client if k in COMPOSE_KEYS)
    extra_deploy = sorted(set(deploy) - {"resources"}) if isinstance(deploy, dict) else []
    extra_resources = sorted(set(deploy.get("resources") or {}) - {"limits"}) if isinstance(deploy, dict) else []
    extra_limits = sorted(set(limits) - {"cpus", "memory"})
    for name, keys in (("deploy", extra_deploy), ("deploy.resources", extra_resources),
                       ("deploy.resources.limits", extra_limits)):
        if keys:
            out.compose_required.append(f"{name}.{','.join(keys)}")
    container_name = client.get("container_name")
    if container_name is not None and not _PER_TRIAL.match(str(container_name)):
        out.notes.append(NotEnforced(f"{where}.container_name", f"{container_name!r} is not used: every trial's "
                                     "container gets its own name, so trials can run side by side"))
    command = client.get("command")
    if command is not None and not _KEEP_ALIVE.match(_command_text(command).strip()):
        out.compose_required.append("command")
    for i, entry in enumerate(client.get("volumes") or []):
        _volume(entry, compose, f"{where}.volumes[{i}]", out)
    for key in ("tty", "stdin_open", "init"):
        if key in client and not isinstance(client[key], bool):
            raise TbscaleError(f"{compose}: {where}.{key} must be true or false, got {client[key]!r}")
    out.tty, out.stdin_open = bool(client.get("tty")), bool(client.get("stdin_open"))
    platform = client.get("platform")
    if platform is not None and str(platform) not in ("linux/amd64", "linux/x86_64"):
        out.compose_required.append("platform")
    return out
