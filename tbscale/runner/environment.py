"""The environments of one attempt, from refusal to teardown (docs/tasks.md, "At run time").

`AttemptEnvironments` asks the backend what it can give (its Capabilities) and refuses, before
anything starts, a task that needs more (a GPU, a storage quota under `storage_limit: enforce`, a
compose project's services, a network policy, an allowlist entry outside the task, the restart the
process sweep needs). It starts the agent's environment from the task's EnvironmentSpec, prepares
it (the /logs folders, a prebuilt image's environment files, the baseline network policy, the
healthcheck), hands each phase its view (the agent's user and env, the skills folder and MCP
configuration, the phase's network policy), and stops everything it started in `close()`, on
every path. It knows no backend by name.
"""

from __future__ import annotations

import json
import shlex
import time
from pathlib import PurePosixPath

from typing_extensions import NotRequired, TypedDict

from tbscale.config import Experiment
from tbscale.environments import (Backend, Capabilities, Environment, PhaseView, Snapshot, StartSpec, backend_name,
                                   snapshot_of)
from tbscale.errors import HealthcheckFailed, SandboxError
from tbscale.logs import AttemptRecorder
from tbscale.runner.enforcement import capabilities, environment_tables
from tbscale.tasks import Task
from tbscale.tasks.envvars import expand_host_vars, unset_embedded
from tbscale.tasks.model import (LOOPBACK_NAMES, UTILITY_AGENTS, AgentSpec, EnvironmentSpec, NetworkPolicy,
                                 environment_of, uses_compose)
from tbscale.tasks.schema import Healthcheck, McpServer

LOG_DIRS = ("/logs/agent", "/logs/verifier", "/logs/artifacts")
# The root command that makes them, writable by any user.
LOG_FOLDERS_COMMAND = "mkdir -p {0} && chmod 777 {0}".format(" ".join(LOG_DIRS))
MCP_CONFIG_PATH = "/logs/agent/tbscale-mcp.json"


def log_folders_error(output: str) -> SandboxError:
    """The error of log folders that could not be made, with the end of what the command printed."""
    return SandboxError(f"could not make {' '.join(LOG_DIRS)} in the container: {output.strip()[-200:]}")


class McpServerEntry(TypedDict):
    """One server of the MCP configuration an agent finds at MCP_CONFIG_PATH: a stdio server's
    command and arguments, or a remote one's URL and headers (host variables expanded)."""

    name: str
    transport: str
    command: NotRequired[str | None]
    args: NotRequired[list[str]]
    url: NotRequired[str | None]
    headers: NotRequired[dict[str, str]]


class AttemptEnvironments:
    """Every environment one attempt starts (the agent's, a separate verifier's): refused, started,
    prepared, viewed per phase, stopped."""

    def __init__(self, exp: Experiment, backend: Backend, task: Task, rec: AttemptRecorder, *,
                 labels: dict[str, str], agent: str = "bash"):
        self.exp, self.backend, self.task, self.rec = exp, backend, task, rec
        self.agent = agent  # the setting's agent: a utility agent does without unset MCP header variables
        self.labels = labels
        self.env = environment_of(task)
        self.started: list[Environment] = []
        self.specs: dict[int, StartSpec] = {}  # id(environment) -> what started it
        self.agent_env: dict[str, str] = {}
        self._caps: Capabilities | None = None

    @property
    def caps(self) -> Capabilities:
        if self._caps is None:
            self._caps = capabilities(self.backend)
        return self._caps

    @property
    def backend_name(self) -> str:
        return getattr(self.backend, "name", None) or backend_name(self.exp.environment)

    # ---- policies and refusals ---------------------------------------------------------------------
    def policy(self, policy: NetworkPolicy) -> NetworkPolicy:
        """A phase's policy after the experiment's override (environment.network: none / bridge)."""
        forced = self.exp.environment.network
        if forced == "none":
            return NetworkPolicy("no-network")
        if forced == "bridge":
            return NetworkPolicy("public")
        return policy

    def apply_network(self, box: Environment, policy: NetworkPolicy) -> None:
        """Put `box` under a phase's policy (a backend without network policies runs every phase
        public: refusal() made sure no phase asks for anything else)."""
        if self.caps.network_policies:
            box.set_network(self.policy(policy))

    def refusal(self) -> str | None:
        """Why this backend cannot run the task as written (checked before anything starts)."""
        caps, name = self.caps, self.backend_name
        for table, env in [("[environment]", self.env)] + environment_tables(self.task)[1:]:
            if env.gpus and not caps.gpus:
                return (f"{table}.gpus = {env.gpus}: {caps.reason('gpus', f'the {name} backend gives no GPUs')}; "
                        "a GPU task is refused, not run without one")
            if env.tpu is not None and not caps.tpus:
                why = caps.reason("tpus", f"the {name} backend gives no TPU slices")
                return (f"{table}.tpu = {env.tpu.type} ({env.tpu.topology}): {why}; a TPU task is refused, not run "
                        "without one")
            if env.storage_mb and not caps.storage_quota and self.exp.environment.storage_limit == "enforce":
                why = caps.reason("storage_quota", f"the {name} backend cannot enforce a storage quota")
                return (f"{table}.storage_mb = {env.storage_mb}: {why}; the task is refused, not run without it "
                        "(storage_limit: enforce)")
            if uses_compose(self.task, env) and not caps.services:
                why = caps.reason("services", f"the {name} backend runs no services beside the main environment")
                return (f"{table}: the task's compose file runs as a project of services ({', '.join(env.services)}), "
                        f"and {why}; the task is refused")
        if self.exp.environment.agent_processes == "stop" and not caps.restart and self.task.format != "swebench":
            return ("environment.agent_processes = stop: the process sweep before verification restarts the "
                    f"environment, and {caps.reason('restart', f'the {name} backend cannot restart one')} (set "
                    "environment.agent_processes: keep to leave the agent's processes running, as Harbor does)")
        sidecars = self.env.sidecars if uses_compose(self.task, self.env) else []
        phases = [("[environment]", self.env.network), ("[agent]", self.task.agent.network),
                  ("[verifier]", self.task.verifier.network)]
        for step in self.task.steps:
            phases += [(f"[steps.agent] (step \"{step.name}\")", step.agent.network),
                       (f"[steps.verifier] (step \"{step.name}\")", step.verifier.network)]
        for table, policy in phases:
            problem = self.network_problem(self.policy(policy), sidecars, table)
            if problem:
                return problem
        return None

    def network_problem(self, policy: NetworkPolicy, services: list[str], table: str) -> str | None:
        """Why `policy` cannot be given here, or None."""
        caps, name = self.caps, self.backend_name
        if policy.mode != "public" and not caps.network_policies:
            why = caps.reason("network_policies", f"the {name} backend cannot apply network policies")
            return f"{table} network {policy.mode}: {why}; the task is refused, not run with the network open"
        if policy.mode != "allowlist" or caps.allowlist_hosts:
            return None
        for host in policy.allowed_hosts:
            if host in LOOPBACK_NAMES or host in services:
                continue
            where = f"services: {', '.join(services)}" if services else "the task has no compose services"
            why = caps.reason("allowlist_hosts", f"the {name} backend lets in only the task's own services")
            return f"{table}.allowed_hosts entry {host!r} is not one of the task's compose services ({where}): {why}"
        return None

    # ---- starting and preparing environments ------------------------------------------------------
    def start(self, task: Task, env: EnvironmentSpec, timing: dict[str, float], prefix: str = ""
              ) -> tuple[Environment, str, bool]:
        """Prepare the image(s) and start an environment for `env` (the agent's or a separate
        verifier's); returns (environment, image, built)."""
        t = time.monotonic()
        image, built = self.backend.prepare(task, self.exp.environment.build_timeout_sec)
        timing[prefix + "image"] = time.monotonic() - t
        t = time.monotonic()
        spec = self.start_spec(task, env, image)
        box = self.backend.start(spec)
        self.started.append(box)
        self.specs[id(box)] = spec
        timing[prefix + "create"] = time.monotonic() - t
        return box, image, built

    def fork(self, snapshot: Snapshot, timing: dict[str, float]) -> Environment:
        """An environment started from `snapshot` (a paused attempt's), with this attempt's labels;
        stopped by close() like the rest."""
        t = time.monotonic()
        box = self.backend.fork(snapshot, labels=dict(self.labels))
        self.started.append(box)
        if snapshot.spec is not None:
            self.specs[id(box)] = snapshot.spec
        sec = time.monotonic() - t
        timing["fork"] = sec
        self.rec.event("fork", op="fork", snapshot=snapshot.id, container=box.id, sec=round(sec, 4),
                       purpose="prefix", node=snapshot.node)
        return box

    def prepare_fork(self, box: Environment, env: EnvironmentSpec, baseline: NetworkPolicy) -> None:
        """After a fork: its filesystem is its parent's (the /logs folders, the uploads); what is
        not carried over is started again: the baseline network policy and the healthcheck."""
        self.apply_network(box, baseline)
        if env.healthcheck is not None:
            self.healthcheck(box, env.healthcheck, "[environment.healthcheck] (in a fork)")

    def snapshot(self, box: Environment, purpose: str = "prefix") -> Snapshot:
        """Save `box` for forks (capability `snapshots`)."""
        t = time.monotonic()
        snap = snapshot_of(box)
        self.rec.event("fork", op="snapshot", snapshot=snap.id, container=box.id, images=snap.images,
                       sec=round(time.monotonic() - t, 4), purpose=purpose, node=snap.node)
        return snap

    def release(self, snapshot: Snapshot) -> None:
        if snapshot.released:
            return
        t = time.monotonic()
        self.backend.release(snapshot)
        self.rec.event("fork", op="release", snapshot=snapshot.id, sec=round(time.monotonic() - t, 4))

    def start_spec(self, task: Task, env: EnvironmentSpec, image: str) -> StartSpec:
        cfg = self.exp.environment
        # storage_mb is a quota only where the backend can enforce one; elsewhere the task was
        # refused (storage_limit: enforce) or runs without it, as Harbor's Docker backend runs it.
        storage = env.storage_mb if env.storage_mb and self.caps.storage_quota else None
        # cpus / memory_mb the task does not set are no limit, as under Harbor's Docker backend and
        # the legacy harness (the experiment's environment.cpus / memory_mb set one for every task).
        return StartSpec(image=image, cpus=cfg.cpus or env.cpus or None, memory_mb=cfg.memory_mb or env.memory_mb or None,
                         pids_limit=cfg.pids_limit, storage_mb=storage, gpus=env.gpus or None,
                         network="public", workdir=env.workdir, env=env.env.resolve(),
                         labels=dict(self.labels), task=task, tty=env.tty, stdin_open=env.stdin_open)

    def prepare(self, box: Environment, env: EnvironmentSpec, baseline: NetworkPolicy, where: str = "[environment]",
                *, log_folders: bool = True) -> None:
        """After start: the /logs folders (writable by any user), a prebuilt image's environment
        files in the workdir, the baseline network policy, and the healthcheck. `log_folders`
        False leaves the folders to the verifier guard's baseline, which makes them in its own
        exec (runner/verification.py): an exec costs the engine about 50 ms of CPU."""
        if log_folders:
            res = box.exec(LOG_FOLDERS_COMMAND, 60, user="0")
            if res.exit_code != 0:
                raise log_folders_error(res.output)
        if env.upload_dir is not None:
            box.put_dir(env.upload_dir, self.workdir(box, env))
        if not uses_compose(self.task, env):  # a compose project mounts them itself
            for local, target in env.copy_in:  # a legacy compose file's bind mounts of task folders
                box.put_dir(local, target)
        self.apply_network(box, baseline)
        if env.healthcheck is not None:
            self.healthcheck(box, env.healthcheck, f"{where.rstrip(']')}.healthcheck]")

    def workdir(self, box: Environment, env: EnvironmentSpec | None = None, user: str = "") -> str:
        if env is not None and env.workdir:
            return env.workdir
        if getattr(box, "workdir", None):
            return box.workdir  # type: ignore[return-value]
        lines = box.exec("pwd", 30, user=user).output.strip().splitlines()
        return lines[-1] if lines else "/"

    def healthcheck(self, box: Environment, hc: Healthcheck, where: str) -> None:
        """Harbor's healthcheck: run the command until it succeeds once; failures during the start
        period do not count (retry every start_interval), later ones do (every interval) until
        `retries` in a row. As the environment's default user, in the workdir."""
        started = time.monotonic()
        failures = 0
        last = None
        while True:
            last = box.exec(hc.command, max(1, int(hc.timeout_sec)), output_limit=4000)
            if last.exit_code == 0:
                self.rec.event("setup", what=f"healthcheck {where}", command=hc.command, exit_code=0)
                return
            if time.monotonic() - started < hc.start_period_sec:
                time.sleep(hc.start_interval_sec)
                continue
            failures += 1
            if failures >= hc.retries:
                tail = (last.output or "").strip().splitlines()[-1:] if last else []
                raise HealthcheckFailed(f"{where} `{hc.command}` failed {failures} times in a row (exit "
                                        f"{last.exit_code}{': ' + tail[0][:160] if tail else ''})")
            time.sleep(hc.interval_sec)

    # ---- the agent phase --------------------------------------------------------------------------
    def agent_view(self, box: Environment, agent: AgentSpec) -> PhaseView:
        """The agent phase's network policy, its env (skills, MCP) and user."""
        self.apply_network(box, agent.network)
        if not self.agent_env:
            self.agent_env = self._agent_env(box)
        return PhaseView(box, user=agent.user, env=self.agent_env)

    def _agent_env(self, box: Environment) -> dict[str, str]:
        env: dict[str, str] = {}
        spec = self.env
        if spec.skills_dir:
            present = box.exec(f"test -d {shlex.quote(spec.skills_dir)}", 30).exit_code == 0
            local = spec.context_dir / PurePosixPath(spec.skills_dir).name if spec.context_dir else None
            if not present and local is not None and local.is_dir():
                box.put_dir(local, spec.skills_dir)  # the environment folder's copy, when the image has none
            env["TBSCALE_SKILLS_DIR"] = spec.skills_dir
        if spec.mcp_servers:
            servers = {}
            for s in spec.mcp_servers:
                entry: McpServerEntry = {"name": s.name, "transport": s.transport}
                if s.transport == "stdio":
                    entry.update(command=s.command, args=list(s.args))
                else:
                    entry["url"] = s.url
                    if headers := self._mcp_headers(s):
                        entry["headers"] = headers
                servers[s.name] = entry
            data = json.dumps({"mcpServers": servers}, indent=2).encode()
            parent, name = MCP_CONFIG_PATH.rsplit("/", 1)
            box.put_archive({name: data}, parent)
            box.exec(f"chmod 644 {MCP_CONFIG_PATH}", 30, user="0")
            env["TBSCALE_MCP_CONFIG"] = MCP_CONFIG_PATH
        return env

    def _mcp_headers(self, server: McpServer) -> dict[str, str]:
        """A server's headers with their `${VAR}`s filled from the host. A header whose variable is
        unset has refused any other agent's trial already (Task.unset_host_var); a utility agent,
        which Harbor hands no MCP server, gets the configuration without that header."""
        out = {}
        for name, value in server.headers.items():
            where = self.task.mcp_header_where(server.name, name)
            if self.agent in UTILITY_AGENTS and unset_embedded(value, where):
                continue
            out[name] = expand_host_vars(value, where)
        return out

    # ---- teardown --------------------------------------------------------------------------------
    def stop(self, box: Environment) -> None:
        try:
            box.stop()
        finally:
            if box in self.started:
                self.started.remove(box)

    def close(self) -> None:
        for box in list(reversed(self.started)):
            try:
                self.stop(box)
            except Exception:  # noqa: BLE001 - teardown goes on for the rest
                pass
