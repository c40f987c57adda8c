"""Running experiments: resolving a config's names, planning trials with stable identities,
running each trial (environment, agent, strategy, verifier) through an executor, and keeping the
run folder (manifest, trials.jsonl, spend ledger, trajectories)."""

from tbscale.runner.plan import TrialSpec, experiment_dataset, experiment_tasks, plan_trials
from tbscale.runner.resolve import load_experiment, resolve_experiment
from tbscale.runner.runner import EXIT_CRASHED, EXIT_INFRA_ERRORS, EXIT_MODEL_UNAVAILABLE, Counters, Runner, load_rows

__all__ = ["Counters", "EXIT_CRASHED", "EXIT_INFRA_ERRORS", "EXIT_MODEL_UNAVAILABLE", "Runner", "TrialSpec",
           "experiment_dataset", "experiment_tasks", "load_experiment", "load_rows", "plan_trials", "resolve_experiment"]
