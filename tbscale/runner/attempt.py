"""What the run time does with a task's keys during one attempt (docs/tasks.md, "At run time").

`TaskRuntime` owns the environments of one attempt: it refuses what the engine cannot give (a GPU,
a storage quota, an allowlist entry outside the task), starts the agent's environment from the
task's EnvironmentSpec (a single container, or a compose project when the task brings a compose
file), prepares it (the /logs folders, a prebuilt image's environment files, the baseline network
policy, the healthcheck), hands each phase its view (the agent's user and env, the skills folder
and MCP configuration, the phase's network policy), and verifies: collect hooks, artifacts copied
into the run folder, then the tests in the same container (shared) or in a fresh one from the
verifier's environment into which only the artifacts are put back (separate). Everything it
started is stopped by `close()`, on every path.

The multi-step loop itself is in trial.py; each step uses the same runtime and environment.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import shutil
import tempfile
import time
from pathlib import Path, PurePosixPath
from typing import Any

from tbscale.config import Experiment
from tbscale.environments import Backend, Environment, PhaseView, StartSpec, get_backend
from tbscale.errors import HealthcheckFailed, SandboxError
from tbscale.logs import AttemptRecorder
from tbscale.tasks import Task
from tbscale.tasks.envvars import expand_host_vars
from tbscale.runner.enforcement import capabilities, environment_tables
from tbscale.tasks.model import DEFAULT_CPUS, DEFAULT_MEMORY_MB, AgentSpec, EnvironmentSpec, NetworkPolicy, VerifierSpec
from tbscale.tasks.schema import Artifact, Healthcheck
from tbscale.runner.guard import VerifierGuard
from tbscale.verifiers import VerifierContext, VerifierResult, verify
from tbscale.verifiers.script import run_tests

LOG_DIRS = ("/logs/agent", "/logs/verifier", "/logs/artifacts")
CONVENTION_ARTIFACTS = "/logs/artifacts"
MCP_CONFIG_PATH = "/logs/agent/tbscale-mcp.json"


def environment_of(task: Task) -> EnvironmentSpec:
    """The task's EnvironmentSpec; tasks made without one (SWE-bench instances, hand-made Tasks)
    get one from their flat attributes."""
    env = task.environment
    if env.image or env.context_dir or env.compose_file:
        return env
    return EnvironmentSpec(context_dir=task.environment_dir, image=task.image, cpus=task.cpus,
                           memory_mb=task.memory_mb, workdir=task.workdir,
                           network=NetworkPolicy("public" if task.allow_internet else "no-network"))


def uses_compose(task: Task, env: EnvironmentSpec) -> bool:
    """A compose file makes a compose environment; a Terminal-Bench compose file whose only service
    is the client was read into the task already (build, working_dir, env, limits, volumes, tty) and
    runs as one container, unless that service has keys only docker compose carries out."""
    if env.compose_file is None:
        return False
    return task.format != "terminal-bench" or len(env.services) > 1 or env.compose_required


class TaskRuntime:
    def __init__(self, exp: Experiment, backend: Backend, task: Task, rec: AttemptRecorder, *,
                 labels: dict[str, str], artifacts_dir: Path):
        self.exp, self.backend, self.task, self.rec = exp, backend, task, rec
        self.labels = labels
        self.artifacts_dir = artifacts_dir
        self.env = environment_of(task)
        self.started: list[Any] = []
        self.specs: dict[int, StartSpec] = {}  # id(environment) -> what started it
        self._compose: Backend | None = None
        self.agent_env: dict[str, str] = {}
        self.guard: VerifierGuard | None = None
        self.tampering: list[dict[str, Any]] = []  # every entry found in this attempt (all steps)

    # ---- policies and refusals ---------------------------------------------------------------------
    def policy(self, policy: NetworkPolicy) -> NetworkPolicy:
        """A phase's policy after the experiment's override (environment.network: none / bridge)."""
        forced = self.exp.environment.network
        if forced == "none":
            return NetworkPolicy("no-network")
        if forced == "bridge":
            return NetworkPolicy("public")
        return policy

    def backend_for(self, task: Task, env: EnvironmentSpec) -> Backend:
        if uses_compose(task, env) and self.backend.name in ("docker", "compose"):
            if self.backend.name == "compose":
                return self.backend
            if self._compose is None:
                self._compose = get_backend("compose", host=self.exp.environment.docker_host)
            return self._compose
        return self.backend

    def refusal(self) -> str | None:
        """Why this engine cannot run the task as written (checked before anything starts)."""
        from tbscale.environments.network import refusal

        caps = capabilities(self.backend)
        envs = [("[environment]", self.env)] + environment_tables(self.task)[1:]
        for table, env in envs:
            if env.gpus and not caps["gpus"]:
                return (f"{table}.gpus = {env.gpus}: this Docker engine has no GPUs (no nvidia runtime); "
                        "a GPU task is refused, not run without one")
            if env.storage_mb and not caps["storage_quota"] and self.exp.environment.storage_limit == "enforce":
                return (f"{table}.storage_mb = {env.storage_mb}: this Docker engine cannot enforce a storage quota "
                        "(it needs overlay2 on xfs with pquota, btrfs or zfs); the task is refused, not run without it "
                        "(storage_limit: enforce)")
        sidecars = [s for s in self.env.services if s != self.env.main_service] if uses_compose(self.task, self.env) else []
        phases = [("[environment]", self.env.network), ("[agent]", self.task.agent.network),
                  ("[verifier]", self.task.verifier.network)]
        for step in self.task.steps:
            phases += [(f"[steps.agent] (step \"{step.name}\")", step.agent.network),
                       (f"[steps.verifier] (step \"{step.name}\")", step.verifier.network)]
        for table, policy in phases:
            problem = refusal(self.policy(policy), sidecars, key=f"{table}.allowed_hosts")
            if problem:
                return problem
        return None

    # ---- starting and preparing environments ------------------------------------------------------
    def start(self, task: Task, env: EnvironmentSpec, timing: dict[str, float], prefix: str = "") -> tuple[Any, str, bool]:
        """Prepare the image(s) and start an environment for `env` (the agent's or a separate
        verifier's); returns (environment, image, built)."""
        backend = self.backend_for(task, env)
        t = time.monotonic()
        image, built = backend.prepare(task, self.exp.environment.build_timeout_sec)
        timing[prefix + "image"] = time.monotonic() - t
        t = time.monotonic()
        spec = self.start_spec(task, env, image)
        box = backend.start(spec)
        self.started.append(box)
        self.specs[id(box)] = spec
        timing[prefix + "create"] = time.monotonic() - t
        return box, image, built

    def start_spec(self, task: Task, env: EnvironmentSpec, image: str) -> StartSpec:
        cfg = self.exp.environment
        compose = None
        if uses_compose(task, env) and self.backend_for(task, env).name == "compose":
            from tbscale.environments.compose import compose_spec

            compose = compose_spec(task, image)
        # storage_mb is a quota only where the engine can enforce one; elsewhere the task was
        # refused (storage_limit: enforce) or runs without it, as Harbor's Docker backend runs it.
        storage = env.storage_mb if env.storage_mb and capabilities(self.backend)["storage_quota"] else None
        # cpus / memory_mb the task does not set are no limit, as under Harbor's Docker backend and
        # the legacy harness (the experiment's environment.cpus / memory_mb set one for every task).
        return StartSpec(image=image, cpus=cfg.cpus or env.cpus or None, memory_mb=cfg.memory_mb or env.memory_mb or None,
                         pids_limit=cfg.pids_limit, storage_mb=storage, gpus=env.gpus or None,
                         network="bridge", workdir=env.workdir, env=env.env.resolve(),
                         labels=dict(self.labels), compose=compose, tty=env.tty, stdin_open=env.stdin_open)

    def prepare(self, box: Environment, env: EnvironmentSpec, baseline: NetworkPolicy, where: str = "[environment]") -> None:
        """After start: the /logs folders (writable by any user), a prebuilt image's environment
        files in the workdir, the baseline network policy, and the healthcheck."""
        dirs = " ".join(LOG_DIRS)
        res = box.exec(f"mkdir -p {dirs} && chmod 777 {dirs}", 60, user="0")
        if res.exit_code != 0:
            raise SandboxError(f"could not make {dirs} in the container: {res.output.strip()[-200:]}")
        if env.upload_dir is not None:
            box.put_dir(env.upload_dir, self.workdir(box, env))
        if not uses_compose(self.task, env):  # under compose, docker compose mounts them itself
            for local, target in env.copy_in:  # a legacy compose file's bind mounts of task folders
                box.put_dir(local, target)
        set_network = getattr(box, "set_network", None)
        if set_network is not None:
            set_network(self.policy(baseline))
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
        `retries` in a row. As the container's default user, in the workdir."""
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
        set_network = getattr(box, "set_network", None)
        if set_network is not None:
            set_network(self.policy(agent.network))
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
                entry: dict[str, Any] = {"name": s.name, "transport": s.transport}
                if s.transport == "stdio":
                    entry.update(command=s.command, args=list(s.args))
                else:
                    entry["url"] = s.url
                    if s.headers:
                        entry["headers"] = {k: expand_host_vars(v, f"[[environment.mcp_servers]] {s.name!r} "
                                                                   f"header {k}") for k, v in s.headers.items()}
                servers[s.name] = entry
            data = json.dumps({"mcpServers": servers}, indent=2).encode()
            parent, name = MCP_CONFIG_PATH.rsplit("/", 1)
            box.put_archive({name: data}, parent)
            box.exec(f"chmod 644 {MCP_CONFIG_PATH}", 30, user="0")
            env["TBSCALE_MCP_CONFIG"] = MCP_CONFIG_PATH
        return env

    # ---- verification integrity (runner/guard.py) -------------------------------------------------
    def guard_begin(self, box: Environment, verifier: VerifierSpec, timing: dict[str, float]) -> None:
        """Before an agent phase: the baseline the verifier's integrity is checked against."""
        if self.task.format == "swebench":
            return
        self.guard = VerifierGuard(box, verifier, sweep=self.exp.environment.agent_processes == "stop")
        self.guard.baseline()
        for k, v in self.guard.timing.items():
            timing[k] = timing.get(k, 0.0) + v

    def guard_seal(self, box: Environment, actions: list[str], timing: dict[str, float],
                   step: str | None = None) -> list[dict[str, Any]]:
        """After an agent phase, before anything of the verifier runs: stop the agent's processes
        (the container restarts; the task's healthcheck is passed again), then record what the
        agent phase changed that the verifier depends on. Returns this phase's entries."""
        guard, self.guard = self.guard, None
        if guard is None:
            return []

        def after_restart() -> None:
            if self.env.healthcheck is not None:
                self.healthcheck(box, self.env.healthcheck, "[environment.healthcheck] (after the process sweep)")

        guard.timing.clear()
        entries, record = guard.seal(list(enumerate(actions, 1)), restart_hook=after_restart)
        for k, v in guard.timing.items():
            timing[k] = timing.get(k, 0.0) + v
        if step:
            for e in entries:
                e["step"] = step
        self.tampering += entries
        self.rec.event("sweep", **record, tampering=entries, **({"step": step} if step else {}),
                       timing={k: round(v, 4) for k, v in guard.timing.items()})
        return entries

    # ---- verification -----------------------------------------------------------------------------
    def verify(self, box: Environment, verifier: VerifierSpec, artifacts: list[Artifact], timeout_sec: float,
               artifacts_dir: Path, spec: StartSpec | None = None, timing: dict[str, float] | None = None,
               step: str | None = None) -> tuple[VerifierResult, list[dict[str, Any]]]:
        """Collect hooks, artifacts, then the tests (shared or separate); returns the verdict and the
        artifact manifest."""
        task = self.task
        timing = timing if timing is not None else {}
        if task.format == "swebench":
            spec = spec or self.specs.get(id(box)) or StartSpec(image=task.image or "")
            ctx = VerifierContext(task=task, env=box, spec=spec,
                                  start=self.backend.start, timeout_sec=timeout_sec)
            return verify(ctx), []
        hooks = self.run_collect_hooks(box, verifier)
        t = time.monotonic()
        manifest = self.collect_artifacts(box, artifacts, artifacts_dir)
        timing["artifacts"] = timing.get("artifacts", 0.0) + time.monotonic() - t
        env = verifier.env.resolve()
        if verifier.mode == "separate" and verifier.environment is not None:
            result = self._verify_separate(verifier, manifest, artifacts_dir, timeout_sec, env, timing, step)
        else:
            set_network = getattr(box, "set_network", None)
            if set_network is not None:
                set_network(self.policy(verifier.network))
            result = run_tests(box, verifier, task.reward, timeout_sec, env=env)
        if hooks:
            result.details["collect"] = hooks
        result.details["mode"] = verifier.mode
        return result, manifest

    def run_collect_hooks(self, box: Environment, verifier: VerifierSpec) -> list[dict[str, Any]]:
        """[[verifier.collect]]: best effort, each in its service, as its user."""
        out = []
        for hook in verifier.collect:
            try:
                target = box.service(hook.service) if hasattr(box, "service") else box
                res = target.exec(hook.command, hook.timeout_sec, user="" if hook.user is None else str(hook.user),
                                  output_limit=4000)
                out.append({"service": hook.service, "command": hook.command, "exit_code": res.exit_code,
                            "timed_out": res.timed_out})
            except SandboxError as e:
                out.append({"service": hook.service, "command": hook.command, "error": str(e)[:300]})
        return out

    def collect_artifacts(self, box: Environment, artifacts: list[Artifact], dest: Path) -> list[dict[str, Any]]:
        """Copy the convention folder /logs/artifacts and every declared artifact out, mirrored
        under `dest` (`/app/x.json` -> `dest/app/x.json`, or `dest/<destination>`), with a
        manifest.json. Missing sources are recorded, never fatal."""
        entries = list(artifacts)
        if not any(a.source.rstrip("/") == CONVENTION_ARTIFACTS for a in entries):
            entries.insert(0, Artifact(source=CONVENTION_ARTIFACTS))
        manifest = []
        workdir = None
        with tempfile.TemporaryDirectory(prefix="tbscale-artifacts-") as tmp:
            for i, art in enumerate(entries):
                source = art.source
                if not source.startswith("/"):
                    workdir = workdir or self.workdir(box, self.env)
                    source = str(PurePosixPath(workdir) / source)
                rel = art.destination or source.strip("/")
                record = {"source": art.source, "destination": rel, "service": art.effective_service}
                try:
                    where = box.service(art.service) if art.service not in (None, "main") and hasattr(box, "service") \
                        else box
                    stage = Path(tmp) / str(i)
                    ok = where.get_dir(source.rstrip("/") or "/", stage)
                except SandboxError as e:
                    manifest.append({**record, "status": "failed", "error": str(e)[:200]})
                    continue
                got = stage / PurePosixPath(source.rstrip("/")).name if ok else None
                if got is None or not (got.exists() or got.is_symlink()):
                    manifest.append({**record, "status": "missing"})
                    continue
                target = dest / rel
                if target.exists():
                    manifest.append({**record, "status": "skipped", "error": "destination already claimed"})
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                if got.is_dir():
                    ignore = shutil.ignore_patterns(*art.exclude) if art.exclude else None
                    shutil.copytree(got, target, ignore=ignore, symlinks=True)
                    kind = "directory"
                    if art.source.rstrip("/") == CONVENTION_ARTIFACTS and not any(target.iterdir()):
                        target.rmdir()
                        _prune(target.parent, dest.parent)
                        manifest.append({**record, "status": "empty", "type": kind})
                        continue
                else:
                    shutil.copy2(got, target, follow_symlinks=False)
                    kind = "file"
                manifest.append({**record, "status": "ok", "type": kind, "container_path": source})
        if any(m["status"] == "ok" for m in manifest) or artifacts:
            dest.mkdir(parents=True, exist_ok=True)
            (dest / "manifest.json").write_text(json.dumps(manifest, indent=2))
        elif dest.is_dir():
            _prune(dest, self.artifacts_dir.parent.parent)
        return manifest

    def restore_artifacts(self, box: Environment, manifest: list[dict[str, Any]], dest: Path) -> None:
        """Put collected artifacts back at their source paths (a separate verifier's container)."""
        for m in manifest:
            if m["status"] != "ok":
                continue
            path = PurePosixPath(m["container_path"])
            box.exec(f"mkdir -p {shlex.quote(str(path.parent))}", 30, user="0")
            box.put_archive({path.name: dest / m["destination"]}, str(path.parent))

    def _verify_separate(self, verifier: VerifierSpec, manifest, artifacts_dir: Path, timeout_sec: float,
                         env: dict[str, str], timing: dict[str, float], step: str | None) -> VerifierResult:
        venv = verifier.environment
        assert venv is not None
        vtask = verifier_task(self.task, venv, step)
        box, image, built = self.start(vtask, venv, timing, prefix="verifier_")
        try:
            self.prepare(box, venv, verifier.network, "[verifier.environment]")
            self.restore_artifacts(box, manifest, artifacts_dir)
            set_network = getattr(box, "set_network", None)
            if set_network is not None:
                set_network(self.policy(verifier.network))
            result = run_tests(box, verifier, self.task.reward, timeout_sec, env=env, upload=False)
            result.details.update(verifier_image=image, verifier_image_built=built)
            return result
        finally:
            self.stop(box)

    # ---- teardown --------------------------------------------------------------------------------
    def stop(self, box: Any) -> None:
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


def _prune(folder: Path, root: Path) -> None:
    while folder != root and folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
        folder = folder.parent


def verifier_task(task: Task, env: EnvironmentSpec, step: str | None) -> Task:
    """The Task a backend builds a separate verifier environment from (its image: the tests
    folder's Dockerfile or compose file, or a docker_image)."""
    suffix = f"verifier-{step}" if step else "verifier"
    return dataclasses.replace(
        task, id=f"{task.id}.{suffix}", environment=env, image=env.image,
        environment_dir=env.context_dir if not env.image else None,
        dockerfile=env.dockerfile.name if env.dockerfile is not None else "Dockerfile",
        build_timeout_sec=env.build_timeout_sec, cpus=env.cpus or DEFAULT_CPUS,
        memory_mb=env.memory_mb or DEFAULT_MEMORY_MB, workdir=env.workdir, legacy=None)
