"""A multi-step task in one attempt (docs/tasks.md, "Multi-step tasks").

The steps run in order in the same environment. Each step copies its workdir/ files in and runs
its setup.sh (as the step's agent user), passes its healthcheck, runs a fresh agent session on the
step's instruction, then its own verification (the agent phase sealed, collect hooks, artifacts,
tests). A step whose rewards miss its min_reward ends the attempt, and the rest are recorded as
skipped. The attempt's rewards combine the executed steps' by the task's strategy (mean per key,
or the final step's).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

from tbscale.agent.loop import AttemptOutcome
from tbscale.environments import Environment
from tbscale.errors import SandboxError
from tbscale.runner.environment import AttemptEnvironments
from tbscale.runner.verification import AttemptVerification
from tbscale.tasks import Task
from tbscale.types.results import StepResult
from tbscale.verifiers import PASS_THRESHOLD, VerifierResult, classify_ending

# The setting's agent on one step: (the step's view of the environment, the step as a Task).
AgentPhase = Callable[[Environment, Task], Awaitable[AttemptOutcome]]


async def run_steps(task: Task, box: Environment, *, envs: AttemptEnvironments, checks: AttemptVerification,
                    act: AgentPhase, artifacts_dir: Path, timing: dict[str, float], oracle: bool,
                    current: Callable[[], Environment] | None = None
                    ) -> tuple[AttemptOutcome, VerifierResult | None, list[StepResult]]:
    """Every step of `task` in `box` (see the module doc): the attempt's outcome, its combined
    verdict and one StepResult per step. `oracle`: the agent is the oracle, whose own
    /solution is no tampering. `current`: the environment the attempt is in after a step's agent
    (a fork a lookahead policy went on in), when it may change."""
    rec = envs.rec
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
            await asyncio.to_thread(setup_step, envs, box, step, user)
        except SandboxError as e:
            results.append(StepResult(name=step.name, ending="agent_error", stop_reason=e.stop_reason))
            total.stop_reason, total.error, total.error_type = e.stop_reason, f"step {step.name}: {e}", type(e).__name__
            stopped = e.stop_reason
            continue
        t = time.monotonic()
        await asyncio.to_thread(checks.begin, box, step.verifier, timing)
        view = await asyncio.to_thread(envs.agent_view, box, step.agent)
        out = await act(view, step_task)
        if current is not None:
            box = current()
        timing["agent"] = timing.get("agent", 0.0) + time.monotonic() - t
        total.turns += out.turns
        total.format_errors += out.format_errors
        total.actions += out.actions
        total.messages += out.messages
        if out.stop_reason != "submitted" and total.stop_reason == "submitted":
            total.stop_reason, total.error, total.error_type = out.stop_reason, out.error, out.error_type
        verdict = await checks.verify(box, step.verifier, step.artifacts, artifacts_dir / step.name, timing,
                                      step=step.name, actions=total.actions)
        verdicts.append((step.name, verdict))
        ending = classify_ending(out.stop_reason, verdict)
        if ending == "pass" and any(e.get("step") == step.name and not (oracle and e["kind"] == "solution_written")
                                    for e in checks.tampering):
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


def setup_step(envs: AttemptEnvironments, box: Environment, step, user: str) -> None:
    """Before a step's agent: its workdir/ files into the workdir, its setup.sh there (as the step's
    agent user; failing ends the attempt), then its healthcheck."""
    if step.workdir_dir is not None:
        workdir = envs.workdir(box, envs.env, user=user)
        box.put_dir(step.workdir_dir, workdir)
        if step.setup_script is not None:
            script = f"{workdir.rstrip('/')}/setup.sh"
            res = box.exec(f"bash {script}", 300, user=user, workdir=workdir, output_limit=20_000)
            envs.rec.event("setup", what="step setup.sh", command=f"bash {script}", exit_code=res.exit_code,
                           step=step.name)
            if res.exit_code != 0:
                raise SandboxError(f"setup.sh of step {step.name} failed (exit {res.exit_code}): "
                                   f"{res.output.strip()[-200:]}")
    if step.healthcheck is not None:
        envs.healthcheck(box, step.healthcheck, f"[steps.healthcheck] (step \"{step.name}\")")


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
