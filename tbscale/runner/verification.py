"""Verification of one attempt (or of one step of it): the verifier's verdict, and nothing of the
agent phase in it unseen (docs/tasks.md, "Verification integrity" and "At run time").

Before an agent phase `begin` takes the baseline the verifier's integrity is checked against
(runner/guard.py). After it, `verify`:
1. seals the agent phase: its processes are stopped (the environment restarts; the healthcheck is
   passed again) and what it changed that the verifier depends on is recorded as tampering;
2. runs the collect hooks, copies the artifacts out (runner/artifacts.py), then the tests: in the
   same environment (shared) or in a fresh one from the verifier's environment into which only the
   artifacts are put back (separate); SWE-bench instances are graded by swebench's own code;
3. reviews the verdict against what the seal found (an obstructed verifier is the agent's
   failure) and writes the `verifier` event.
A verifier that breaks is a verifier error, never a crashed trial or a wrong answer.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path

from typing_extensions import NotRequired, TypedDict

from tbscale.environments import Environment, PhaseView, StartSpec
from tbscale.errors import SandboxError, TaskRefused
from tbscale.logs import AttemptRecorder
from tbscale.runner.artifacts import collect_artifacts, restore_artifacts
from tbscale.runner.environment import LOG_FOLDERS_COMMAND, AttemptEnvironments, log_folders_error
from tbscale.runner.findings import review
from tbscale.runner.guard import VerifierGuard
from tbscale.tasks import Task
from tbscale.tasks.model import DEFAULT_CPUS, DEFAULT_MEMORY_MB, EnvironmentSpec, VerifierSpec
from tbscale.tasks.schema import Artifact
from tbscale.types.guard import DebianPackage, PackageUpdate, Tampering
from tbscale.verifiers import VerifierContext, VerifierResult, verify
from tbscale.verifiers.script import run_tests


class CollectHookRun(TypedDict):
    """How one [[verifier.collect]] hook ran (the verifier's `details.collect`)."""

    service: str
    command: str
    exit_code: NotRequired[int | None]
    timed_out: NotRequired[bool]
    error: NotRequired[str]


class AttemptVerification:
    """The verifications of one attempt, in its environments; `tampering` gathers every entry
    found (all steps)."""

    def __init__(self, envs: AttemptEnvironments, rec: AttemptRecorder, *, verifier_timeout_sec: float | None,
                 sweep: bool, artifacts_root: Path, outside_checks: bool = False):
        self.envs, self.rec = envs, rec
        self.artifacts_root = artifacts_root  # the run's artifacts/ (empty folders are pruned up to it)
        self.task = envs.task
        self.verifier_timeout_sec = verifier_timeout_sec
        self.sweep = sweep
        self.outside_checks = outside_checks  # environment.file_checks: outside
        self.guard: VerifierGuard | None = None
        self.tampering: list[Tampering] = []
        self.package_updates: list[PackageUpdate] = []  # the seals' settled releases (runner/package_updates.py)
        self.debian_packages: list[DebianPackage] = []  # and Debian packages (runner/debian_updates.py)
        self.artifacts_folder: str | None = None  # the last seal's finding (VerifierGuard.artifacts_folder)
        self.writers_kept = False  # the last seal left agent processes running (agent_processes: keep)
        self.log_folders_pending = False  # the environment just started left them to `begin`

    def take_log_folders(self) -> bool:
        """For an environment just started: whether `begin`'s baseline makes its log folders in
        its own exec (then `prepare` leaves them out). Not for a SWE-bench instance (no baseline)
        nor a multi-step task (its first step's setup.sh runs before the baseline)."""
        self.log_folders_pending = self.task.format != "swebench" and not self.task.is_multi_step
        return self.log_folders_pending

    # ---- around the agent phase (runner/guard.py) -------------------------------------------------
    def begin(self, box: Environment, verifier: VerifierSpec, timing: dict[str, float]) -> None:
        """Before an agent phase: the baseline the verifier's integrity is checked against."""
        if self.task.format == "swebench":
            return
        self.guard = VerifierGuard(box, verifier, sweep=self.sweep, outside=self.outside_checks,
                                   can_list_outside=self.envs.caps.changes)
        setup, self.log_folders_pending = (LOG_FOLDERS_COMMAND if self.log_folders_pending else ""), False
        self.guard.baseline(setup=setup)
        if self.guard.setup_failed is not None:
            raise log_folders_error(self.guard.setup_failed)
        for k, v in self.guard.timing.items():
            timing[k] = timing.get(k, 0.0) + v

    def seal(self, box: Environment, actions: list[str], timing: dict[str, float],
             step: str | None = None) -> list[Tampering]:
        """After an agent phase, before anything of the verifier runs: stop the agent's processes
        (the environment restarts; the task's healthcheck is passed again), then record what the
        agent phase changed that the verifier depends on. Returns this phase's entries."""
        guard, self.guard = self.guard, None
        if guard is None:
            return []
        healthcheck = self.envs.env.healthcheck

        def after_restart() -> None:
            if healthcheck is not None:
                self.envs.healthcheck(box, healthcheck, "[environment.healthcheck] (after the process sweep)")

        guard.timing.clear()
        entries, record = guard.seal(list(enumerate(actions, 1)), restart_hook=after_restart)
        self.artifacts_folder = guard.artifacts_folder
        self.writers_kept = record["method"] == "none" and record.get("agent_processes_count", 0) > 0
        for k, v in guard.timing.items():
            timing[k] = timing.get(k, 0.0) + v
        if step:
            for e in entries:
                e["step"] = step
        self.tampering += entries
        self.package_updates += record.get("package_updates", [])
        self.debian_packages += record.get("debian_packages", [])
        self.rec.event("sweep", **record, tampering=entries, **({"step": step} if step else {}),
                       timing={k: round(v, 4) for k, v in guard.timing.items()})
        return entries

    # ---- one verification -------------------------------------------------------------------------
    async def verify(self, box: Environment, verifier: VerifierSpec, artifacts: list[Artifact], artifacts_dir: Path,
                     timing: dict[str, float], *, step: str | None = None,
                     actions: list[str] | None = None) -> VerifierResult:
        """Seal the agent phase whose `actions` ran (when given), verify, review; the verdict."""
        sealed: list[Tampering] = []
        self.writers_kept = False
        if actions is not None:
            sealed = await asyncio.to_thread(self.seal, box, actions, timing, step)
        t = time.monotonic()
        timeout = self.verifier_timeout_sec or verifier.timeout_sec
        verdict = await asyncio.to_thread(verify_attempt, VerifyCall(self, box, verifier, artifacts, timeout,
                                                                     artifacts_dir, timing, step))
        verdict, found = review(verdict, sealed, writers_kept=self.writers_kept, peers_kept=not self.sweep)
        for e in found:
            if step:
                e["step"] = step
        self.tampering += found
        timing["verify"] = timing.get("verify", 0.0) + time.monotonic() - t
        self.rec.event("verifier", reward=verdict.reward, passed=verdict.passed, error=verdict.error,
                       output=verdict.output[-20_000:], details=verdict.details,
                       **({"rewards": verdict.rewards} if verdict.rewards else {}),
                       **({"step": step} if step else {}))
        return verdict

    def run_verifier(self, box: Environment, verifier: VerifierSpec, artifacts: list[Artifact], timeout_sec: float,
                     artifacts_dir: Path, timing: dict[str, float], step: str | None = None) -> VerifierResult:
        """Collect hooks, artifacts, then the tests (shared or separate)."""
        task = self.task
        if task.format == "swebench":
            spec = self.envs.specs.get(id(box)) or StartSpec(image=task.image or "")
            ctx = VerifierContext(task=task, env=box, spec=spec, start=self.envs.backend.start, timeout_sec=timeout_sec)
            return verify(ctx)
        known, self.artifacts_folder = self.artifacts_folder, None  # true only of the seal just before
        hooks = self.run_collect_hooks(box, verifier)
        t = time.monotonic()
        manifest = collect_artifacts(box, artifacts, artifacts_dir, workdir=lambda: self.envs.workdir(box, self.envs.env),
                                     run_root=self.artifacts_root, convention=None if hooks else known)
        timing["artifacts"] = timing.get("artifacts", 0.0) + time.monotonic() - t
        env = verifier.env.resolve()
        if verifier.mode == "separate" and verifier.environment is not None:
            result = self._verify_separate(verifier, manifest, artifacts_dir, timeout_sec, env, timing, step)
        else:
            self.envs.apply_network(box, verifier.network)
            # With the sweep off the agent's processes run beside the tests (Environment.exec's
            # `hostile_peers`): no exec's end or exit code may come from what they write.
            tests_box = box if self.sweep else PhaseView(box, hostile_peers=True)
            result = run_tests(tests_box, verifier, task.reward, timeout_sec, env=env)
            if getattr(tests_box, "abandoned", 0):  # any of its execs, not only the tests': review()
                result.details["abandoned"] = True
        if hooks:
            result.details["collect"] = hooks
        result.details["mode"] = verifier.mode
        return result

    def run_collect_hooks(self, box: Environment, verifier: VerifierSpec) -> list[CollectHookRun]:
        """[[verifier.collect]]: best effort, each in its service, as its user."""
        out: list[CollectHookRun] = []
        for hook in verifier.collect:
            try:
                res = box.service(hook.service).exec(hook.command, hook.timeout_sec, output_limit=4000,
                                                     user="" if hook.user is None else str(hook.user),
                                                     hostile_peers=not self.sweep)
                out.append({"service": hook.service, "command": hook.command, "exit_code": res.exit_code,
                            "timed_out": res.timed_out})
            except SandboxError as e:
                out.append({"service": hook.service, "command": hook.command, "error": str(e)[:300]})
        return out

    def _verify_separate(self, verifier: VerifierSpec, manifest, artifacts_dir: Path, timeout_sec: float,
                         env: dict[str, str], timing: dict[str, float], step: str | None) -> VerifierResult:
        venv = verifier.environment
        assert venv is not None
        box, image, built = self.envs.start(verifier_task(self.task, venv, step), venv, timing, prefix="verifier_")
        try:
            self.envs.prepare(box, venv, verifier.network, "[verifier.environment]")
            restore_artifacts(box, manifest, artifacts_dir)
            self.envs.apply_network(box, verifier.network)
            result = run_tests(box, verifier, self.task.reward, timeout_sec, env=env, upload=False)
            result.details.update(verifier_image=image, verifier_image_built=built)
            return result
        finally:
            self.envs.stop(box)


@dataclass
class VerifyCall:
    """One verification of an attempt (or of one step): what `verify_attempt` needs."""

    verification: AttemptVerification
    env: Environment
    verifier: VerifierSpec
    artifacts: list[Artifact]
    timeout_sec: float
    artifacts_dir: Path
    timing: dict[str, float]
    step: str | None = None


def verify_attempt(call: VerifyCall) -> VerifierResult:
    """The task's verifier; a verifier that breaks (copying its tests in fails, its code raises)
    is a verifier error, never a crashed trial or a wrong answer. A refusal (a separate verifier
    environment the backend cannot give) stays a refusal."""
    try:
        return call.verification.run_verifier(call.env, call.verifier, call.artifacts, call.timeout_sec,
                                              call.artifacts_dir, call.timing, call.step)
    except TaskRefused as e:
        return VerifierResult(None, False, str(e), "task_refused", {"exception": type(e).__name__})
    except SandboxError as e:
        return VerifierResult(None, False, str(e), e.stop_reason, {"exception": type(e).__name__})


def verifier_task(task: Task, env: EnvironmentSpec, step: str | None) -> Task:
    """The Task a backend builds a separate verifier environment from (its image: the tests
    folder's Dockerfile or compose file, or a prebuilt image)."""
    suffix = f"verifier-{step}" if step else "verifier"
    return dataclasses.replace(
        task, id=f"{task.id}.{suffix}", environment=env, image=env.image,
        environment_dir=env.context_dir if not env.image else None,
        dockerfile=env.dockerfile.name if env.dockerfile is not None else "Dockerfile",
        build_timeout_sec=env.build_timeout_sec, cpus=env.cpus or DEFAULT_CPUS,
        memory_mb=env.memory_mb or DEFAULT_MEMORY_MB, workdir=env.workdir, legacy=None)
