"""One trial: the setting's trajectory strategy, whose attempts each get a fresh environment, the
setting's agent, and the task's verifier; then the trial's line for trials.jsonl.

A failure of the harness (the model endpoint, the container engine, the image build, the
verifier) is kept apart from a failure of the agent: the trial line says `infra_error`, and the
report leaves such trials out of pass@1.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from tbscale import SCHEMA_VERSION
from tbscale.agent.agents import AgentRun, create_agent, uses_model
from tbscale.agent.loop import AttemptOutcome
from tbscale.config import Experiment, Setting
from tbscale.environments import Backend, Environment
from tbscale.environments.owner import LABEL_RUN
from tbscale.errors import AttemptStopped, SandboxError, TaskRefused
from tbscale.logs import AttemptRecorder, merge_usage
from tbscale.models.llm import LLM
from tbscale.runner.plan import TrialSpec
from tbscale.runner.rundir import RunFolder, now
from tbscale.runner.attempt import TaskRuntime
from tbscale.runner.enforcement import capabilities, not_enforced
from tbscale.runner.guard import review
from tbscale.runner.resolve import simulated_roles
from tbscale.strategies import entry, oracle_selects, selector_key
from tbscale.strategies.base import AttemptResult, Prefix, TrajectoryOutcome
from tbscale.types import BASH_TOOL
from tbscale.tasks import Task
from tbscale.tasks.model import VerifierSpec
from tbscale.types.results import INFRA_STOP_REASONS, AttemptBrief, ErrorInfo, StepResult, TrialResult
from tbscale.verifiers import PASS_THRESHOLD, VerifierResult, classify_ending
from tbscale.verifiers.script import reward_key
from tbscale.shell.tampering import trajectory_flags


def _error(message: str | None, type_: str | None = None) -> ErrorInfo | None:
    if not message:
        return None
    return ErrorInfo(type=type_ or message.split(":", 1)[0].strip() or "Error", message=message)


class TrialRunner:
    """Runs trials of one experiment into one run folder; `containers` bounds the environments
    alive at once, `on_call` sees every model call (spend ledger, live progress)."""

    def __init__(self, exp: Experiment, folder: RunFolder, backend: Backend, containers: asyncio.Semaphore,
                 on_call: Callable[[TrialSpec, dict[str, Any]], None] | None = None):
        self.exp, self.folder, self.backend, self.containers = exp, folder, backend, containers
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
                                verify: bool = True) -> AttemptResult:
            index = len(attempts)
            attempts.append(None)  # reserve the index before awaiting
            rec = self._recorder(log, spec, index, stage)
            recorders.append(rec)
            result = await self.run_attempt(spec, rec, index, stage, context, context_indices or [],
                                            prefix=prefix, max_new_turns=max_new_turns, verify=verify)
            attempts[index] = result
            return result

        error = None
        try:
            outcome = await strategy.run(spec.task, start_attempt, trial_rec)
        except AttemptStopped as e:  # the strategy's own model calls failed for good
            error = _error(f"{type(e).__name__}: {e}", type(e).__name__)
            done = [a for a in attempts if a is not None]
            outcome = TrajectoryOutcome(final=done[-1], attempts=done, record={"error": error.message}) if done else None
            stop = e.stop_reason
        else:
            stop = None
        if outcome is None:
            final = AttemptResult(0, "final", "final", None, False, "agent_error", stop or "agent_error", 0, [],
                                  error=error.message if error else None)
            outcome = TrajectoryOutcome(final, [final])
        row = self._row(spec, outcome, trial_rec, started, time.monotonic() - t0, error, sim_roles)
        row.selection_turns = sum(r.selections for r in recorders)
        row.selector_fallbacks = sum(r.fallbacks for r in recorders)
        log.write("end", attempt=None, turn=None, reward=row.reward, passed=row.passed, ending=row.ending,
                  final_attempt=outcome.final.index, record=outcome.record)
        log.close()
        return row

    def _row(self, spec: TrialSpec, outcome: TrajectoryOutcome, trial_rec: AttemptRecorder, started: str,
             wall: float, error: ErrorInfo | None, sim_roles: list[str]) -> TrialResult:
        final, s = outcome.final, spec.setting
        gen_cfg = self.exp.models.get(s.generator) if s.generator and uses_model(s.agent) else None
        pp = s.policy.params()
        sel_key = selector_key(s.policy.name, pp, s.generator)
        usage = merge_usage(*(a.usage for a in outcome.attempts), trial_rec.usage_dict())
        costs = [u.get("cost_usd") for u in usage.values()]
        error = error or _error(final.error, final.error_type)
        return TrialResult(
            schema_version=SCHEMA_VERSION, run=self.folder.path.name, setting=s.name, setting_key=spec.setting_key,
            trial_key=spec.key, task_id=spec.task.id, task_format=spec.task.format, task_hash=spec.task_hash,
            trial=spec.trial, seed=spec.seed, agent=s.agent, policy=s.policy.name, policy_params=pp,
            trajectory=s.trajectory.name, trajectory_params=s.trajectory.params(), n=int(pp.get("n", 1)),
            generator_model=gen_cfg.model if gen_cfg else None,
            selector_model=self.exp.models[sel_key].model if sel_key in self.exp.models else None,
            simulated=bool(sim_roles), simulated_roles=sim_roles,
            oracle_selection=oracle_selects(s.trajectory.name, s.trajectory.params()),
            reward=final.reward, rewards=final.rewards, reward_key=final.reward_key,
            passed=bool(final.passed and final.ending == "pass"),
            steps=[StepResult.model_validate(x) for x in final.steps] if final.steps is not None else None,
            artifacts_path=final.artifacts_path, tampering=final.tampering,
            not_enforced=[x.as_dict() for x in not_enforced(spec.task, self.exp, capabilities(self.backend))],
            ending=final.ending, stop_reason=final.stop_reason,
            infra_error=final.stop_reason in INFRA_STOP_REASONS, turns=final.turns,
            tokens=usage, cost_usd=None if any(c is None for c in costs) else round(sum(costs), 6),
            timing={**final.timing, "trial_wall": round(wall, 3)},
            n_attempts=len(outcome.attempts), final_attempt=final.index,
            attempts=[AttemptBrief.model_validate(a.brief()) for a in outcome.attempts]
            if len(outcome.attempts) > 1 else None,
            strategy_record=outcome.record or None, trajectory_path=spec.trajectory_relpath,
            error=error, started_at=started, finished_at=now(),
        )

    # ---- one attempt -------------------------------------------------------------------------
    def artifacts_dir(self, spec: TrialSpec, index: int) -> Path:
        """Where an attempt's artifacts go: results/<run>/artifacts/<trial_key>/attempt-<i>/."""
        return self.folder.path / "artifacts" / spec.key / f"attempt-{index}"

    async def run_attempt(self, spec: TrialSpec, rec: AttemptRecorder, index: int, stage: str,
                          context: str | None, context_indices: list[int], *, prefix: Prefix | None = None,
                          max_new_turns: int | None = None, verify: bool = True) -> AttemptResult:
        """One attempt: a fresh environment from the task's spec, prepared (healthcheck, uploads,
        network), the agent (each step's, for a multi-step task), the verifier, and teardown on
        every path (runner/attempt.py does the environment work)."""
        task, exp = spec.task, self.exp
        timing: dict[str, float] = {}
        outcome = AttemptOutcome("sandbox_error", 0, 0)
        verdict: VerifierResult | None = None
        steps: list[StepResult] | None = None
        art_dir = self.artifacts_dir(spec, index)
        runtime = TaskRuntime(exp, self.backend, task, rec, artifacts_dir=art_dir,
                              labels={"org.tbscale.trial": spec.key, "org.tbscale.task": task.id,
                                      LABEL_RUN: str(self.folder.path.resolve())})
        async with self.containers:
            try:
                refused = await asyncio.to_thread(runtime.refusal)
                if refused:
                    raise TaskRefused(refused)
                box, image, built = await asyncio.to_thread(runtime.start, task, runtime.env, timing)
                rec.event("attempt_start", stage=stage, image=image, image_built=built, container=box.id,
                          environment=runtime.backend_for(task, runtime.env).name, context_attempts=context_indices,
                          prefix_of=prefix.parent if prefix else None, prefix_turns=len(prefix.actions) if prefix else 0)
                t = time.monotonic()
                await asyncio.to_thread(runtime.prepare, box, runtime.env, runtime.env.network)
                timing["prepare"] = time.monotonic() - t
                if task.is_multi_step:
                    outcome, verdict, steps = await self._run_steps(spec, rec, runtime, box, context, prefix, timing,
                                                                    art_dir)
                else:
                    await asyncio.to_thread(runtime.guard_begin, box, task.verifier, timing)
                    if prefix is not None:
                        t = time.monotonic()
                        view = await asyncio.to_thread(runtime.agent_view, box, task.agent)
                        await self._replay(prefix, view, rec)
                        timing["replay"] = time.monotonic() - t
                    t = time.monotonic()
                    view = await asyncio.to_thread(runtime.agent_view, box, task.agent)
                    outcome = await self._act(spec, rec, view, context, prefix, max_new_turns)
                    timing["agent"] = time.monotonic() - t
                    # Every ending but a dead sandbox or a paused prefix gets verified, so "would the
                    # verifier have passed it" stays answerable; the ending still follows Table 5.
                    if verify or outcome.stop_reason != "paused":
                        ran = (prefix.actions if prefix else []) + outcome.actions
                        verdict = await self._verify(runtime, box, task.verifier, task.artifacts, art_dir, timing,
                                                     actions=ran)
            except SandboxError as e:
                outcome.stop_reason, outcome.error, outcome.error_type = e.stop_reason, str(e), type(e).__name__
            finally:
                t = time.monotonic()
                await asyncio.to_thread(runtime.close)
                timing["remove"] = time.monotonic() - t
        ending = classify_ending(outcome.stop_reason, verdict)
        actions = (prefix.actions if prefix else []) + outcome.actions
        tampering = runtime.tampering + trajectory_flags(list(enumerate(actions, 1)),
                                                         tests_mount=task.verifier.tests_mount)
        if spec.setting.agent == "oracle":  # the oracle is given /solution and runs it: that is its job
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
        rec.event("attempt_end", stage=stage, ending=ending, stop_reason=outcome.stop_reason,
                  reward=verdict.reward if verdict else None, turns=outcome.turns, error=outcome.error, tampering=tampering,
                  timing={k: round(v, 4) for k, v in timing.items()}, usage=rec.usage_dict())
        rewards = verdict.rewards if verdict else None
        return AttemptResult(index=index, label=rec.label, stage=stage,
                             reward=verdict.reward if verdict else None,
                             passed=ending == "pass", ending=ending, stop_reason=outcome.stop_reason,
                             turns=outcome.turns, actions=actions, transcript=outcome.messages,
                             usage=rec.usage_dict(), timing={k: round(v, 4) for k, v in timing.items()},
                             error=outcome.error, error_type=outcome.error_type, context_indices=context_indices,
                             rewards=rewards, reward_key=reward_key(task.reward, rewards),
                             steps=[s.model_dump() for s in steps] if steps is not None else None, tampering=tampering,
                             artifacts_path=art_dir.relative_to(self.folder.path).as_posix() if art_dir.is_dir() else None)

    async def _verify(self, runtime: TaskRuntime, box, verifier, artifacts, art_dir: Path, timing: dict[str, float],
                      step: str | None = None, actions: list[str] | None = None) -> VerifierResult:
        sealed: list[dict[str, Any]] = []
        if actions is not None:  # the agent phase is over: stop its processes, check what it changed
            sealed = await asyncio.to_thread(runtime.guard_seal, box, actions, timing, step)
        t = time.monotonic()
        timeout = self.exp.limits.verifier_timeout_sec or verifier.timeout_sec
        verdict = await asyncio.to_thread(verify_attempt, VerifyCall(runtime, box, verifier, artifacts, timeout,
                                                                     art_dir, timing, step))
        verdict, found = review(verdict, sealed)
        for e in found:
            if step:
                e["step"] = step
        runtime.tampering += found
        timing["verify"] = timing.get("verify", 0.0) + time.monotonic() - t
        runtime.rec.event("verifier", reward=verdict.reward, passed=verdict.passed, error=verdict.error,
                          output=verdict.output[-20_000:], details=verdict.details,
                          **({"rewards": verdict.rewards} if verdict.rewards else {}),
                          **({"step": step} if step else {}))
        return verdict

    async def _run_steps(self, spec: TrialSpec, rec: AttemptRecorder, runtime: TaskRuntime, box, context: str | None,
                         prefix: Prefix | None, timing: dict[str, float], art_dir: Path
                         ) -> tuple[AttemptOutcome, VerifierResult | None, list[StepResult]]:
        """A multi-step task in one attempt: the steps in order in the same environment. Each step
        copies its workdir/ files in and runs its setup.sh (as the step's agent user), passes its
        healthcheck, runs a fresh agent session on the step's instruction, then its own verifier
        (collect hooks, artifacts, tests); a step whose rewards miss its min_reward ends the
        attempt, and the rest are recorded as skipped. The attempt's rewards combine the executed
        steps' by the task's strategy (mean per key, or the final step's)."""
        task = spec.task
        if prefix is not None:
            return (AttemptOutcome("agent_error", 0, 0, error="a multi-step task cannot be continued from a prefix"),
                    None, [])
        results: list[StepResult] = []
        verdicts: list[tuple[str, VerifierResult]] = []
        total = AttemptOutcome("submitted", 0, 0)
        stopped = None
        for step in task.steps:
            if stopped is not None:
                results.append(StepResult(name=step.name, skipped=True, stop_reason=stopped))
                continue
            step_task = dataclasses.replace(task, instruction=step.instruction, solution_dir=step.solution_dir,
                                            agent_timeout_sec=step.agent.effective_timeout_sec, agent=step.agent,
                                            steps=[], trajectory=step.trajectory)
            user = "" if step.agent.user is None else str(step.agent.user)
            rec.event("setup", what="step start", step=step.name)
            try:
                await asyncio.to_thread(_setup_step, runtime, box, step, user)
            except SandboxError as e:
                results.append(StepResult(name=step.name, ending="agent_error", stop_reason=e.stop_reason))
                total.stop_reason, total.error, total.error_type = e.stop_reason, f"step {step.name}: {e}", type(e).__name__
                stopped = e.stop_reason
                continue
            t = time.monotonic()
            await asyncio.to_thread(runtime.guard_begin, box, step.verifier, timing)
            view = await asyncio.to_thread(runtime.agent_view, box, step.agent)
            out = await self._act(spec, rec, view, context, None, None, task=step_task)
            timing["agent"] = timing.get("agent", 0.0) + time.monotonic() - t
            total.turns += out.turns
            total.format_errors += out.format_errors
            total.actions += out.actions
            total.messages += out.messages
            if out.stop_reason != "submitted" and total.stop_reason == "submitted":
                total.stop_reason, total.error, total.error_type = out.stop_reason, out.error, out.error_type
            verdict = await self._verify(runtime, box, step.verifier, step.artifacts, art_dir / step.name, timing,
                                         step=step.name, actions=total.actions)
            verdicts.append((step.name, verdict))
            ending = classify_ending(out.stop_reason, verdict)
            if ending == "pass" and any(e.get("step") == step.name and not (
                    spec.setting.agent == "oracle" and e["kind"] == "solution_written") for e in runtime.tampering):
                ending = "tampered"
            results.append(StepResult(name=step.name, reward=verdict.reward, rewards=verdict.rewards,
                                      passed=ending == "pass", ending=ending, stop_reason=out.stop_reason
                                      if out.stop_reason != "submitted" else (verdict.error or "submitted"),
                                      turns=out.turns))
            if verdict.error:
                stopped = verdict.error
                continue
            for key, threshold in step.thresholds().items():
                if (verdict.rewards or {}).get(key, float("-inf")) < threshold:
                    stopped = "min_reward"
                    break
        return total, combine_steps(task, verdicts), results

    async def _replay(self, prefix: Prefix, box: Environment, rec: AttemptRecorder) -> None:
        """Rebuild a prefix's environment state by running its commands again, in order."""
        for i, command in enumerate(prefix.actions, 1):
            res = await asyncio.to_thread(box.exec, command, self.exp.limits.command_timeout_sec,
                                          output_limit=self.exp.limits.stored_output_max_bytes)
            rec.event("replay", turn=i, command=command, exit_code=res.exit_code, timed_out=res.timed_out)

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

    async def _act(self, spec: TrialSpec, rec: AttemptRecorder, box: Environment, context: str | None,
                   prefix: Prefix | None = None, max_new_turns: int | None = None, *,
                   task: Task | None = None) -> AttemptOutcome:
        agent = self.agent_for(spec, spec.seed)
        return await agent.run(AgentRun(task=task or spec.task, env=box, rec=rec, limits=self.exp.limits,
                                        seed=spec.seed + 1000 * rec.attempt, prompts=self.exp.prompts,
                                        context=context, history=prefix.messages if prefix else None,
                                        max_new_turns=max_new_turns))


@dataclass
class VerifyCall:
    """One verification of an attempt (or of one step): what `verify_attempt` needs."""

    runtime: TaskRuntime
    env: Environment
    verifier: VerifierSpec
    artifacts: list[Any]
    timeout_sec: float
    artifacts_dir: Path
    timing: dict[str, float]
    step: str | None = None


def verify_attempt(call: VerifyCall) -> VerifierResult:
    """The task's verifier; a verifier that breaks (copying its tests in fails, its code raises)
    is a verifier error, never a crashed trial or a wrong answer. A refusal (a separate verifier
    environment the engine cannot give) stays a refusal."""
    try:
        result, _ = call.runtime.verify(call.env, call.verifier, call.artifacts, call.timeout_sec, call.artifacts_dir,
                                        timing=call.timing, step=call.step)
        return result
    except TaskRefused as e:
        return VerifierResult(None, False, str(e), "task_refused", {"exception": type(e).__name__})
    except SandboxError as e:
        return VerifierResult(None, False, str(e), e.stop_reason, {"exception": type(e).__name__})


def _setup_step(runtime: TaskRuntime, box, step, user: str) -> None:
    """Before a step's agent: its workdir/ files into the workdir, its setup.sh there (as the step's
    agent user; failing ends the attempt), then its healthcheck."""
    if step.workdir_dir is not None:
        workdir = runtime.workdir(box, runtime.env, user=user)
        box.put_dir(step.workdir_dir, workdir)
        if step.setup_script is not None:
            script = f"{workdir.rstrip('/')}/setup.sh"
            res = box.exec(f"bash {script}", 300, user=user, workdir=workdir, output_limit=20_000)
            runtime.rec.event("setup", what="step setup.sh", command=f"bash {script}", exit_code=res.exit_code,
                              step=step.name)
            if res.exit_code != 0:
                raise SandboxError(f"setup.sh of step {step.name} failed (exit {res.exit_code}): "
                                   f"{res.output.strip()[-200:]}")
    if step.healthcheck is not None:
        runtime.healthcheck(box, step.healthcheck, f"[steps.healthcheck] (step \"{step.name}\")")


def combine_steps(task: Task, verdicts: list[tuple[str, VerifierResult]]) -> VerifierResult | None:
    """The attempt's verdict from its executed steps: "final" takes the last executed step's
    rewards; "mean" (the default) averages every key over the steps that produced rewards, a key a
    step lacks counting 0. A step whose verifier gave no verdict makes the attempt's verdict an
    error of the same kind (an infrastructure error, not a wrong answer)."""
    if not verdicts:
        return None
    errors = [(name, v) for name, v in verdicts if v.error]
    output = "\n".join(f"--- step {name}\n{v.output[-4000:]}" for name, v in verdicts)
    details: dict[str, Any] = {"steps": [name for name, _ in verdicts], "strategy": task.reward_strategy}
    if errors:
        name, v = errors[0]
        more = {"exception": v.details["exception"]} if "exception" in v.details else {}
        return VerifierResult(None, False, v.output + "\n" + output, v.error, {**details, **more, "failed_step": name})
    if task.reward_strategy == "final":
        rewards = dict(verdicts[-1][1].rewards or {})
    else:
        with_rewards = [v.rewards for _, v in verdicts if v.rewards]
        keys = sorted({k for r in with_rewards for k in r})
        rewards = {k: sum(r.get(k, 0.0) for r in with_rewards) / len(with_rewards) for k in keys}
    value = task.reward.primary(rewards) if rewards else None
    if value is None:
        return VerifierResult(None, False, output, "reward_missing", details, rewards or None)
    return VerifierResult(value, value >= PASS_THRESHOLD, output, None, details, rewards)
