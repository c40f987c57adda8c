"""One attempt, phase by phase (docs/architecture.md, "One attempt").

`Attempt.run` holds an environment slot for the whole attempt and goes through:
1. `start`: refuse what the backend cannot give, prepare the image and start a fresh environment
   from the task's spec, prepare it (runner/environment.py);
2. `agent_phase`: the verifier's baseline, the prefix's state (a continued attempt: forked from
   its snapshot in `start`, or its commands replayed), the setting's agent, and a snapshot of a
   paused attempt that keeps one; or, for a multi-step task, every step in turn (runner/steps.py);
3. verification: the agent phase sealed, the verifier run and reviewed (runner/verification.py);
4. teardown of everything it started, on every path;
5. `result`: how the attempt ended (Table 5 endings, tampering never a plain pass, an obstructed
   or broken verifier), the `attempt_end` event and the AttemptResult its strategy gets.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from tbscale.agent.loop import AttemptOutcome
from tbscale.config import Experiment
from tbscale.environments import Backend, Environment
from tbscale.environments.owner import LABEL_RUN
from tbscale.errors import SandboxError, TaskRefused
from tbscale.logs import AttemptRecorder
from tbscale.runner.environment import AttemptEnvironments
from tbscale.runner.forks import AttemptForks, ForkGate
from tbscale.runner.plan import TrialSpec
from tbscale.runner.rundir import RunFolder
from tbscale.runner.steps import run_steps
from tbscale.runner.verification import AttemptVerification
from tbscale.runner.repository_history import check_history, repository_paths
from tbscale.shell.git_history import trial_history_reads
from tbscale.shell.tampering import trajectory_flags
from tbscale.strategies.base import AttemptResult, Prefix
from tbscale.tasks import Task
from tbscale.types.guard import GuardSnapshot
from tbscale.types.results import RepositoryHistory, StepResult
from tbscale.verifiers import VerifierResult, classify_ending
from tbscale.verifiers.script import reward_key


@dataclass
class AttemptRequest:
    """What a trajectory strategy asks of one attempt (strategies/base.py, StartAttempt)."""

    index: int
    stage: str
    context: str | None = None
    context_indices: list[int] = field(default_factory=list)
    prefix: Prefix | None = None  # continue this unfinished attempt: fork its snapshot or replay its commands
    max_new_turns: int | None = None  # pause the agent after this many more turns
    verify: bool = True  # verify a paused attempt too
    keep_snapshot: str = "no"  # "if_able" / "required": save a paused attempt's environment for forks


class TrialSide(Protocol):
    """What an attempt uses of its trial's runner (runner/trial.py, TrialRunner)."""

    exp: Experiment
    backend: Backend
    folder: RunFolder
    containers: asyncio.Semaphore  # bounds the attempts' environments alive at once
    fork_gate: ForkGate  # bounds the lookahead forks alive at once beside them

    def artifacts_dir(self, spec: TrialSpec, index: int) -> Path: ...

    async def act(self, spec: TrialSpec, rec: AttemptRecorder, box: Environment, context: str | None,
                  prefix: Prefix | None = None, max_new_turns: int | None = None, *,
                  task: Task | None = None, branches: AttemptForks | None = None) -> AttemptOutcome:
        """The setting's agent in `box`, on `task` (a step's) or the trial's own; `branches`: forks
        of it for a policy that looks ahead."""
        ...


class Attempt:
    """One attempt of a trial (see the module doc)."""

    def __init__(self, trial: TrialSide, spec: TrialSpec, rec: AttemptRecorder, req: AttemptRequest):
        self.trial, self.spec, self.rec, self.req = trial, spec, rec, req
        self.task, self.exp = spec.task, trial.exp
        self.timing: dict[str, float] = {}
        self.restore: str | None = None  # how the prefix's state came back: "fork" or "replay"
        self.snapshot = None  # this attempt's own, when it paused and keeps one
        self.guard_baseline: GuardSnapshot | None = None
        self.repositories: list[RepositoryHistory] = []  # the task's repositories, as the agent got them
        self.artifacts_dir = trial.artifacts_dir(spec, req.index)
        self.envs = AttemptEnvironments(self.exp, trial.backend, self.task, rec, agent=spec.setting.agent,
                                        labels={"org.tbscale.trial": spec.key, "org.tbscale.task": self.task.id,
                                                LABEL_RUN: trial.folder.run_label})
        self.checks = AttemptVerification(self.envs, rec, verifier_timeout_sec=self.exp.limits.verifier_timeout_sec,
                                          sweep=self.exp.environment.agent_processes == "stop",
                                          artifacts_root=self.artifacts_dir.parent.parent,
                                          outside_checks=self.exp.environment.file_checks == "outside")
        self.forks: AttemptForks | None = None  # when the backend can fork (a lookahead policy's branches)

    async def run(self) -> AttemptResult:
        outcome = AttemptOutcome("sandbox_error", 0, 0)
        verdict: VerifierResult | None = None
        steps: list[StepResult] | None = None
        async with self.trial.containers:
            try:
                box = await self.start()
                if self.task.is_multi_step:
                    outcome, verdict, steps = await self.steps(box)
                else:
                    outcome, verdict = await self.agent_phase(box)
            except SandboxError as e:
                outcome.stop_reason, outcome.error, outcome.error_type = e.stop_reason, str(e), type(e).__name__
            finally:
                t = time.monotonic()
                try:
                    if self.forks is not None:
                        await self.forks.drain()
                finally:
                    await asyncio.to_thread(self.envs.close)
                    if self.forks is not None:
                        await asyncio.to_thread(self.forks.close)
                self.timing["remove"] = time.monotonic() - t
        return self.result(outcome, verdict, steps)

    # ---- the phases ---------------------------------------------------------------------------------
    async def start(self) -> Environment:
        """Refuse what the backend cannot give; otherwise a fresh environment, prepared."""
        envs, req = self.envs, self.req
        refused = await asyncio.to_thread(envs.refusal)
        if refused:
            raise TaskRefused(refused)
        # A `${VAR}` the host does not set would stop the attempt midway; it is refused instead,
        # naming the variable, and the trial's other settings and tasks run on.
        unset = self.task.unset_host_var(self.spec.setting.agent)
        if unset:
            raise TaskRefused(f"{unset}; the task is refused, not run without it")
        if req.keep_snapshot == "required" and not envs.caps.snapshots:
            raise TaskRefused(envs.caps.reason("snapshots", f"the {envs.backend_name} backend cannot snapshot an "
                                                            "environment") + " (prefix_restore: fork asks for forks)")
        snap = req.prefix.snapshot if req.prefix is not None else None
        if snap is not None:
            try:
                box = await asyncio.to_thread(envs.fork, snap, self.timing)
            except SandboxError as e:  # the prefix's state is rebuilt by replay instead, and that is said
                self.rec.event("setup", what=f"fork of snapshot {snap.id} failed, replaying the prefix: {e}"[:500])
            else:
                self.restore = "fork"
                self._started(box, snap.images.get("main") or next(iter(snap.images.values()), None), False)
                t = time.monotonic()
                await asyncio.to_thread(envs.prepare_fork, box, envs.env, envs.env.network)
                self.timing["prepare"] = time.monotonic() - t
                # The fork holds what the prefix's agent did to the repository since the chain began (a
                # `git gc` after reading the fix would count as nothing there): the first count stands,
                # as the guard's baseline does.
                self.repositories = list(req.prefix.repositories)
                return box
        if req.prefix is not None:
            self.restore = "replay"
        box, image, built = await asyncio.to_thread(envs.start, self.task, envs.env, self.timing)
        self._started(box, image, built)
        t = time.monotonic()
        # The guard's baseline, the next exec in this environment, makes its log folders too.
        await asyncio.to_thread(envs.prepare, box, envs.env, envs.env.network,
                                log_folders=not self.checks.take_log_folders())
        self.timing["prepare"] = time.monotonic() - t
        await self.repository_history(box)
        return box

    async def repository_history(self, box: Environment) -> None:
        """What the task's repositories keep beyond their HEAD, removed first under `repository_history:
        scrub` (runner/repository_history.py): one exec, only for a task that has one."""
        paths = repository_paths(self.task)
        if not paths:
            return
        t = time.monotonic()
        scrub = self.exp.environment.repository_history == "scrub"
        self.repositories = await asyncio.to_thread(check_history, box, paths, scrub)
        self.timing["repository_history"] = time.monotonic() - t
        for repo in self.repositories:
            self.rec.event("setup", what=f"repository {repo.path}: {repo.beyond_head} commits and {repo.refs_beyond_head} "
                                         f"refs beyond HEAD" + (f"; scrubbed, {repo.left_beyond_head} left" if repo.scrubbed
                                                                else ""))

    def branches(self, box: Environment, agent) -> AttemptForks | None:
        """Forks of `box` for a policy that looks ahead, when the backend can take snapshots;
        verification runs in whichever environment the attempt ends in (`self.forks.box`)."""
        if self.envs.caps.snapshots:
            self.forks = AttemptForks(self.envs, self.checks, box, agent, self.rec, self.trial.fork_gate)
        return self.forks

    def current(self, box: Environment) -> Environment:
        """The attempt's environment now: `box`, or the fork a lookahead policy went on in."""
        return self.forks.box if self.forks is not None else box

    def _started(self, box: Environment, image: str | None, built: bool) -> None:
        req = self.req
        self.rec.event("attempt_start", stage=req.stage, image=image, image_built=built, container=box.id,
                       environment=getattr(box, "backend", self.envs.backend_name),
                       context_attempts=req.context_indices, prefix_of=req.prefix.parent if req.prefix else None,
                       prefix_turns=len(req.prefix.actions) if req.prefix else 0,
                       **({"prefix_restore": self.restore} if self.restore else {}))

    async def agent_phase(self, box: Environment) -> tuple[AttemptOutcome, VerifierResult | None]:
        """The verifier's baseline, the prefix replayed, the agent, then verification: every
        ending but a paused prefix gets verified (so "would the verifier have passed it" stays
        answerable; the ending still follows Table 5). Verification runs in the environment the
        agent ended in (a fork, under a lookahead policy)."""
        task, req, timing = self.task, self.req, self.timing
        await asyncio.to_thread(self.checks.begin, box, task.verifier, timing)
        guard = getattr(self.checks, "guard", None)
        if self.restore == "fork" and guard is not None and req.prefix.guard_baseline is not None:
            # The fork already holds what the prefix did: the verifier is checked against the
            # baseline taken before the chain's first agent phase, as a replay would have been.
            guard.before = req.prefix.guard_baseline
        if guard is not None:
            self.guard_baseline = guard.before
        if self.restore == "replay":
            t = time.monotonic()
            view = await asyncio.to_thread(self.envs.agent_view, box, task.agent)
            await self.replay(req.prefix, view)
            timing["replay"] = time.monotonic() - t
        t = time.monotonic()
        view = await asyncio.to_thread(self.envs.agent_view, box, task.agent)
        outcome = await self.trial.act(self.spec, self.rec, view, req.context, req.prefix, req.max_new_turns,
                                       branches=self.branches(box, task.agent))
        timing["agent"] = time.monotonic() - t
        box = self.current(box)
        if outcome.stop_reason == "paused" and req.keep_snapshot != "no" and self.envs.caps.snapshots:
            t = time.monotonic()
            try:
                self.snapshot = await asyncio.to_thread(self.envs.snapshot, box)
            except SandboxError as e:  # its continuations replay it instead
                self.rec.event("setup", what=f"snapshot failed, continuations will replay the prefix: {e}"[:500])
            timing["snapshot"] = time.monotonic() - t
        verdict = None
        if req.verify or outcome.stop_reason != "paused":
            verdict = await self.checks.verify(box, task.verifier, task.artifacts, self.artifacts_dir, timing,
                                               actions=self.actions(outcome))
        return outcome, verdict

    async def steps(self, box: Environment) -> tuple[AttemptOutcome, VerifierResult | None, list[StepResult]]:
        """A multi-step task: every step in turn, each with its own agent phase and verification."""
        if self.req.prefix is not None:
            return (AttemptOutcome("agent_error", 0, 0, error="a multi-step task cannot be continued from a prefix"),
                    None, [])

        async def act(view: Environment, step_task: Task) -> AttemptOutcome:
            branches = self.forks or self.branches(box, step_task.agent)
            if branches is not None:
                branches.agent = step_task.agent
            return await self.trial.act(self.spec, self.rec, view, self.req.context, None, None, task=step_task,
                                        branches=branches)

        return await run_steps(self.task, box, envs=self.envs, checks=self.checks, act=act,
                               artifacts_dir=self.artifacts_dir, timing=self.timing,
                               oracle=self.spec.setting.agent == "oracle", current=lambda: self.current(box))

    async def replay(self, prefix: Prefix, box: Environment) -> None:
        """Rebuild a prefix's environment state by running its commands again, in order."""
        limits = self.exp.limits
        for i, command in enumerate(prefix.actions, 1):
            res = await asyncio.to_thread(box.exec, command, limits.command_timeout_sec,
                                          output_limit=limits.stored_output_max_bytes)
            self.rec.event("replay", turn=i, command=command, exit_code=res.exit_code, timed_out=res.timed_out)

    def actions(self, outcome: AttemptOutcome) -> list[str]:
        """Every command this attempt's environment ran: the prefix's, then the agent's."""
        return (self.req.prefix.actions if self.req.prefix else []) + outcome.actions

    # ---- how it ended -------------------------------------------------------------------------------
    def result(self, outcome: AttemptOutcome, verdict: VerifierResult | None,
               steps: list[StepResult] | None) -> AttemptResult:
        task, rec, req = self.task, self.rec, self.req
        ending = classify_ending(outcome.stop_reason, verdict)
        actions = self.actions(outcome)
        tampering = self.checks.tampering + trajectory_flags(list(enumerate(actions, 1)),
                                                             tests_mount=task.verifier.tests_mount)
        if self.spec.setting.agent == "oracle":  # the oracle is given /solution and runs it: that is its job
            tampering = [e for e in tampering if e["kind"] not in ("solution_written", "reads_solution")]
        if tampering and ending == "pass":
            ending = "tampered"  # never a plain pass (docs/tasks.md, "Verification integrity")
        if verdict is not None and verdict.details.get("obstructed_by_agent") and outcome.stop_reason == "submitted":
            outcome.stop_reason = "verifier_obstructed"
            outcome.error = outcome.error or f"verifier obstructed by the agent: {verdict.details['obstructed_by_agent']}"
            outcome.error_type = outcome.error_type or "VerifierObstructed"
        if verdict is not None and verdict.error and outcome.stop_reason == "submitted":
            outcome.stop_reason = verdict.error
            why = verdict.output.strip().splitlines()[0][:300] if verdict.details.get("exception") and verdict.output else ""
            outcome.error = outcome.error or f"verifier: {verdict.error}" + (f": {why}" if why else "")
            outcome.error_type = outcome.error_type or "VerifierError"
        # Commands that read past HEAD matter where a repository was given to fix (a git-recovery task's
        # `git reflog` is its job).
        reads = trial_history_reads(actions, [r for repo in self.repositories for r in repo.refs]) \
            if self.repositories else []
        timing = {k: round(v, 4) for k, v in self.timing.items()}
        usage = rec.recorded_usage()
        rec.event("attempt_end", stage=req.stage, ending=ending, stop_reason=outcome.stop_reason,
                  reward=verdict.reward if verdict else None, turns=outcome.turns, error=outcome.error, tampering=tampering,
                  timing=timing, usage=usage)
        rewards = verdict.rewards if verdict else None
        art_dir = self.artifacts_dir
        return AttemptResult(index=req.index, label=rec.label, stage=req.stage,
                             reward=verdict.reward if verdict else None,
                             passed=ending == "pass", ending=ending, stop_reason=outcome.stop_reason,
                             turns=outcome.turns, actions=actions, transcript=outcome.messages,
                             usage=usage, timing=timing,
                             error=outcome.error, error_type=outcome.error_type, context_indices=req.context_indices,
                             rewards=rewards, reward_key=reward_key(task.reward, rewards), steps=steps,
                             tampering=tampering, package_updates=list(self.checks.package_updates),
                             debian_packages=list(self.checks.debian_packages),
                             artifacts_path=art_dir.relative_to(self.trial.folder.path).as_posix()
                             if art_dir.is_dir() else None, snapshot=self.snapshot,
                             guard_baseline=self.guard_baseline if self.snapshot is not None else None,
                             prefix_restore=self.restore, repositories=self.repositories, history_reads=reads,
                             release=(lambda snap=self.snapshot: self.envs.release(snap)) if self.snapshot else None)
