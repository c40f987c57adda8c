"""Reading finished runs: trial lines as one table (current configuration only), and trajectory
event streams grouped into attempts and turns. What every analysis, post-hoc pipeline and the
viewer read, so they agree on what a run holds."""

from tbscale.rundata.trajectories import AttemptTrace, TrialTrace, TurnTrace, read_trial
from tbscale.rundata.trials import ROLES, TrialTable, load_trials, read_trial_table
from tbscale.runfiles import find_run_dirs

__all__ = ["AttemptTrace", "ROLES", "TrialTable", "TrialTrace", "TurnTrace", "find_run_dirs", "load_trials",
           "read_trial", "read_trial_table"]
