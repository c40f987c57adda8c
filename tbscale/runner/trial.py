"""One trial: the setting's trajectory strategy, whose attempts each get a fresh environment
(runner/attempt.py), the setting's agent, and the task's verifier; then the trial's line for
trials.jsonl (runner/trial_line.py).

A failure of the harness (the model endpoint, the environment backend, the image build, the
verifier) is kept apart from a failure of the agent: the trial line says `infra_error`, and the
report leaves such trials out of pass@1.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Callable

from tbscale.agent.agents import AgentRun, create_agent, uses_model
from tbscale.agent.loop import AttemptOutcome
from tbscale.agent.policy import Branches
from tbscale.config import Experiment, Setting
from tbscale.environments import Backend, Environment
from tbscale.errors import AttemptStopped
from tbscale.logs import AttemptRecorder
from tbscale.models.llm import LLM
from tbscale.runner.attempt import Attempt, AttemptRequest
from tbscale.runner.enforcement import capabilities
from tbscale.runner.forks import ForkGate
from tbscale.runner.plan import TrialSpec
from tbscale.runner.resolve import simulated_roles
from tbscale.runner.rundir import RunFolder, now
from tbscale.runner.trial_line import error_info, trial_line
from tbscale.strategies import entry
from tbscale.strategies.base import AttemptResult, Prefix, TrajectoryOutcome
from tbscale.tasks import Task
from tbscale.types import BASH_TOOL
from tbscale.types.results import TrialResult
from tbscale.types.spend import CallRecord


def release_snapshots(attempts: list[AttemptResult | None]) -> None:
    for a in attempts:
        if a is not None and a.snapshot is not None:
            try:
                a.release_snapshot()
            except Exception:  # noqa: BLE001 - the process's exit and the orphan sweep remove it then
                pass


class TrialRunner:
    """Runs trials of one experiment into one run folder; `containers` bounds the attempts'
    environments alive at once and `fork_gate` the lookahead forks beside them (the experiment's
    `fork_concurrency`), `on_call` sees every model call (spend ledger, live progress)."""

    def __init__(self, exp: Experiment, folder: RunFolder, backend: Backend, containers: asyncio.Semaphore,
                 on_call: Callable[[TrialSpec, CallRecord], None] | None = None):
        self.exp, self.folder, self.backend, self.containers = exp, folder, backend, containers
        self.fork_gate = ForkGate(exp.fork_concurrency)
        self.on_call = on_call

    def _recorder(self, log, spec: TrialSpec, attempt: int, label: str) -> AttemptRecorder:
        hook = (lambda record: self.on_call(spec, record)) if self.on_call else None
        return AttemptRecorder(log, attempt=attempt, label=label, on_call=hook)

    def _models(self, setting: Setting) -> Callable[[str | None, str], LLM]:
        def get(key: str | None, role: str) -> LLM:
            key = key or setting.generator
            return LLM(self.exp.models[key], role, key=key)
        return get

    # ---- one trial ---------------------------------------------------------------------------
    async def run_trial(self, spec: TrialSpec) -> TrialResult:
        t0, started = time.monotonic(), now()
        sim_roles = simulated_roles(self.exp, spec.setting)
        log = self.folder.event_log(spec, trial_key=spec.key, task_id=spec.task.id, setting=spec.setting.name,
                                    setting_key=spec.setting_key, trial=spec.trial, seed=spec.seed,
                                    simulated=bool(sim_roles), simulated_roles=sim_roles,
                                    instruction=spec.task.instruction)
        trial_rec = self._recorder(log, spec, -1, "trial")  # calls made by the strategy itself
        tentry = entry("trajectory", spec.setting.trajectory.name)
        tparams = tentry.params.model_validate(spec.setting.trajectory.params())
        models = self._models(spec.setting) if uses_model(spec.setting.agent) else None
        strategy = tentry.factory(tparams, models=models, seed=spec.seed, prompts=self.exp.prompts)
        attempts: list[AttemptResult | None] = []
        recorders: list[AttemptRecorder] = [trial_rec]

        async def start_attempt(stage: str, context: str | None = None, context_indices: list[int] | None = None,
                                *, prefix: Prefix | None = None, max_new_turns: int | None = None,
                                verify: bool = True, keep_snapshot: str = "no") -> AttemptResult:
            index = len(attempts)
            attempts.append(None)  # reserve the index before awaiting
            rec = self._recorder(log, spec, index, stage)
            recorders.append(rec)
            req = AttemptRequest(index, stage, context, context_indices or [], prefix=prefix,
                                 max_new_turns=max_new_turns, verify=verify, keep_snapshot=keep_snapshot)
            result = await self.run_attempt(spec, rec, req)
            attempts[index] = result
            return result

        error = None
        try:
            outcome = await strategy.run(spec.task, start_attempt, trial_rec)
        except AttemptStopped as e:  # the strategy's own model calls failed for good
            error = error_info(f"{type(e).__name__}: {e}", type(e).__name__)
            done = [a for a in attempts if a is not None]
            outcome = TrajectoryOutcome(final=done[-1], attempts=done, record={"error": error.message}) if done else None
            stop = e.stop_reason
        else:
            stop = None
        finally:  # no snapshot outlives its trial, whatever the strategy left
            await asyncio.to_thread(release_snapshots, attempts)
        if outcome is None:
            final = AttemptResult(0, "final", "final", None, False, "agent_error", stop or "agent_error", 0, [],
                                  error=error.message if error else None)
            outcome = TrajectoryOutcome(final, [final])
        row = trial_line(self.exp, self.folder.path.name, capabilities(self.backend), spec, outcome, recorders,
                         started=started, wall=time.monotonic() - t0, error=error, sim_roles=sim_roles)
        log.write("end", attempt=None, turn=None, reward=row.reward, passed=row.passed, ending=row.ending,
                  final_attempt=outcome.final.index, record=outcome.record)
        log.close()
        return row

    # ---- one attempt -------------------------------------------------------------------------
    async def run_attempt(self, spec: TrialSpec, rec: AttemptRecorder, req: AttemptRequest) -> AttemptResult:
        return await Attempt(self, spec, rec, req).run()

    def artifacts_dir(self, spec: TrialSpec, index: int) -> Path:
        """Where an attempt's artifacts go: results/<run>/artifacts/<trial_key>/attempt-<i>/."""
        return self.folder.path / "artifacts" / spec.key / f"attempt-{index}"

    # ---- the agent phase (the seam runner/attempt.py and runner/steps.py call) ------------------
    def agent_for(self, spec: TrialSpec, seed: int):
        setting = spec.setting
        if not uses_model(setting.agent):
            return create_agent(setting.agent)
        models = self._models(setting)
        generator = models(setting.generator, "generator")
        pentry = entry("policy", setting.policy.name)
        tools = [BASH_TOOL] if setting.action_format == "tool" else None
        policy = pentry.factory(pentry.params.model_validate(setting.policy.params()), generator=generator,
                                models=models, seed=seed, tools=tools)
        return create_agent(setting.agent, policy=policy, action_format=setting.action_format,
                            context_window=generator.context_window())

    async def act(self, spec: TrialSpec, rec: AttemptRecorder, box: Environment, context: str | None,
                  prefix: Prefix | None = None, max_new_turns: int | None = None, *,
                  task: Task | None = None, branches: Branches | None = None) -> AttemptOutcome:
        """The setting's agent in `box` (a phase's view of the environment), on `task` (a step's);
        `branches`: forks of it, for a policy that looks ahead."""
        agent = self.agent_for(spec, spec.seed)
        return await agent.run(AgentRun(task=task or spec.task, env=box, rec=rec, limits=self.exp.limits,
                                        seed=spec.seed + 1000 * rec.attempt, prompts=self.exp.prompts,
                                        context=context, history=prefix.messages if prefix else None,
                                        max_new_turns=max_new_turns, branches=branches))
