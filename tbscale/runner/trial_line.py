"""The trial's line in trials.jsonl (docs/formats.md, "Trial lines"): what its strategy's final
attempt scored and how it ended, with the setting, the models, tokens and cost summed over every
attempt and the strategy's own calls, timings, and what was not enforced."""

from __future__ import annotations


from tbscale import SCHEMA_VERSION
from tbscale.agent.agents import uses_model
from tbscale.config import Experiment
from tbscale.environments import Capabilities
from tbscale.logs import AttemptRecorder
from tbscale.runner.enforcement import not_enforced
from tbscale.runner.plan import TrialSpec
from tbscale.runner.rundir import now
from tbscale.strategies import candidates_per_turn, oracle_selects, selector_key
from tbscale.strategies.base import TrajectoryOutcome
from tbscale.types import sum_usage
from tbscale.types.results import INFRA_STOP_REASONS, ErrorInfo, NotEnforcedKey, TrialResult


def error_info(message: str | None, type_: str | None = None) -> ErrorInfo | None:
    if not message:
        return None
    return ErrorInfo(type=type_ or message.split(":", 1)[0].strip() or "Error", message=message)


def trial_line(exp: Experiment, run: str, caps: Capabilities, spec: TrialSpec, outcome: TrajectoryOutcome,
               recorders: list[AttemptRecorder], *, started: str, wall: float, error: ErrorInfo | None,
               sim_roles: list[str]) -> TrialResult:
    """`recorders`: the trial's own (the strategy's calls) first, then every attempt's; their
    counts of selections, snapshots, forks and candidate executions are summed here."""
    final, s = outcome.final, spec.setting
    trial_rec = recorders[0]
    snapshot_sec = [round(x, 4) for r in recorders for x in r.snapshot_sec]
    fork_sec = [round(x, 4) for r in recorders for x in r.fork_sec]
    gen_cfg = exp.models.get(s.generator) if s.generator and uses_model(s.agent) else None
    pp = s.policy.params()
    sel_key = selector_key(s.policy.name, pp, s.generator)
    usage = sum_usage(*(a.usage for a in outcome.attempts), trial_rec.recorded_usage())
    costs = [u.cost_usd for u in usage.values()]
    error = error or error_info(final.error, final.error_type)
    return TrialResult(
        schema_version=SCHEMA_VERSION, run=run, setting=s.name, setting_key=spec.setting_key,
        trial_key=spec.key, task_id=spec.task.id, task_format=spec.task.format, task_hash=spec.task_hash,
        trial=spec.trial, seed=spec.seed, agent=s.agent, policy=s.policy.name, policy_params=pp,
        trajectory=s.trajectory.name, trajectory_params=s.trajectory.params(), n=candidates_per_turn(s.policy.name, pp),
        generator_model=gen_cfg.model if gen_cfg else None,
        selector_model=exp.models[sel_key].model if sel_key in exp.models else None,
        simulated=bool(sim_roles), simulated_roles=sim_roles,
        oracle_selection=oracle_selects(s.trajectory.name, s.trajectory.params()),
        reward=final.reward, rewards=final.rewards, reward_key=final.reward_key,
        passed=bool(final.passed and final.ending == "pass"),
        steps=final.steps, artifacts_path=final.artifacts_path, tampering=final.tampering,
        package_updates=final.package_updates, debian_packages=final.debian_packages,
        repositories=final.repositories, history_reads=final.history_reads,
        not_enforced=[NotEnforcedKey(key=x.key, why=x.why) for x in not_enforced(spec.task, exp, caps)],
        ending=final.ending, stop_reason=final.stop_reason,
        infra_error=final.stop_reason in INFRA_STOP_REASONS, turns=final.turns,
        tokens=usage, cost_usd=None if any(c is None for c in costs) else round(sum(costs), 6),
        timing={**final.timing, "trial_wall": round(wall, 3)},
        n_attempts=len(outcome.attempts), final_attempt=final.index,
        attempts=[a.brief() for a in outcome.attempts] if len(outcome.attempts) > 1 else None,
        strategy_record=outcome.record or None, trajectory_path=spec.trajectory_relpath,
        error=error, started_at=started, finished_at=now(),
        selection_turns=sum(r.selections for r in recorders), selector_fallbacks=sum(r.fallbacks for r in recorders),
        snapshot_sec=snapshot_sec, fork_sec=fork_sec, snapshots=len(snapshot_sec), forks=len(fork_sec),
        candidate_execs=sum(r.candidate_execs for r in recorders),
        candidate_exec_sec=round(sum(r.candidate_exec_sec for r in recorders), 4),
    )
