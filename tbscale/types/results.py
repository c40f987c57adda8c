"""A finished trial: the line `trials.jsonl` holds for it, written and read through one model.

How attempts end follows turn-bon Appendix D.2 (Table 5), with two additions that keep numbers
honest: `verifier_error` (the verifier could not give a verdict: a timeout, no reward file, a test
script that could not run, no tests parsed), `tampered` (the verifier passed it, but the attempt
changed what the verifier depends on or tried to forge its verdict: `tampering` is not empty;
counted as a failure) and `unfinished` (a paused prefix; never a trial's final ending). Some stop reasons are failures of the infrastructure rather than of the agent; a
trial that ended in one is flagged `infra_error` and left out of pass@1 by default.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator
from typing_extensions import TypedDict

from tbscale.types.completion import Usage, UsageJSON
from tbscale.types.events import TamperingEntry
from tbscale.types.guard import DebianPackage, PackageUpdate
from tbscale.verdict import PASS_THRESHOLD, place_problem, verdict_problem  # noqa: F401  (re-exported)

ENDINGS = ("pass", "tampered", "wrong_submission", "out_of_context", "time_limit", "agent_error", "verifier_error")
# Stop reasons that say the harness, not the agent, failed: the model endpoint, the container
# engine, the image build, or the verifier. Such a trial measures nothing about the agent.
# `healthcheck_failed`: the task's environment never became healthy; `task_refused`: the task needs
# what the engine cannot give (a GPU, a storage quota), so nothing about the agent was measured.
INFRA_STOP_REASONS = frozenset({"model_error", "sandbox_error", "image_build_error", "verifier_error",
                                "verifier_timeout", "reward_missing", "tests_not_run", "no_tests_parsed",
                                "healthcheck_failed", "task_refused"})


class ErrorInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: str
    message: str


class AttemptBrief(BaseModel):
    """One attempt of a multi-attempt trial (best_of_n, pdr, cer), as the trial line lists it."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    index: int
    label: str
    stage: str
    reward: float | None = None
    passed: bool = False
    ending: str
    stop_reason: str | None = None
    turns: int = 0
    context: list[int] = Field(default_factory=list)
    usage: dict[str, Usage] = Field(default_factory=dict)
    tampering: int = 0  # how many tampering entries the attempt has


class AttemptBriefJSON(TypedDict):
    """An AttemptBrief as the trial line holds it (`model_dump` of one; a test keeps the keys the
    same): what the report's stage and CER sections read back from a packed `attempts` column."""

    index: int
    label: str
    stage: str
    reward: float | None
    passed: bool
    ending: str
    stop_reason: str | None
    turns: int
    context: list[int]
    usage: dict[str, UsageJSON]
    tampering: int


class StepResult(BaseModel):
    """One step of a multi-step task: its verifier's reward and how it ended."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    name: str
    reward: float | None = None
    rewards: dict[str, float] | None = None
    passed: bool = False
    ending: str | None = None
    stop_reason: str | None = None
    turns: int = 0
    skipped: bool = False


class NotEnforcedKey(BaseModel):
    """A key of the task this trial did not carry out as written, and why (docs/tasks.md)."""

    model_config = ConfigDict(extra="forbid")

    key: str
    why: str


class RepositoryHistory(BaseModel):
    """A repository the agent was asked to fix, as the agent got it: what it kept beyond its HEAD,
    commits the base commit does not lead to, and of those the ones committed after it, where a fix
    may be (runner/repository_history.py)."""

    model_config = ConfigDict(extra="forbid")

    path: str
    head: str
    beyond_head: int = 0  # commit objects HEAD does not lead to, as found (from any ref, a reflog, or none)
    after_head: int = 0  # of those, the ones committed after HEAD was
    refs_beyond_head: int = 0  # refs whose tips HEAD does not lead to, as found
    refs: list[str] = Field(default_factory=list)  # the first of those refs' names
    scrubbed: bool = False  # environment.repository_history: scrub removed them first
    left_beyond_head: int = 0  # what the agent was given: after the scrub, else as found
    left_after_head: int = 0
    left_refs: int = 0
    errors: list[str] = Field(default_factory=list)  # scrub steps that failed


class TrialResult(BaseModel):
    """One line of trials.jsonl. See docs/formats.md (checked against this model by a test)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    schema_version: int
    run: str
    setting: str
    setting_key: str
    trial_key: str
    task_id: str
    task_format: str = "unknown"
    task_hash: str | None = None
    trial: int
    seed: int | None = None
    agent: str = "bash"
    policy: str = "baseline"
    policy_params: dict[str, Any] = Field(default_factory=dict)
    trajectory: str = "single"
    trajectory_params: dict[str, Any] = Field(default_factory=dict)
    n: int = 1
    generator_model: str | None = None
    selector_model: str | None = None
    simulated: bool = False
    simulated_roles: list[str] = Field(default_factory=list)
    oracle_selection: bool = False
    reward: float | None = None
    rewards: dict[str, float] | None = None
    reward_key: str | None = None
    passed: bool = False
    ending: str
    stop_reason: str | None = None
    infra_error: bool = False
    turns: int = 0
    selection_turns: int = 0  # turns where a selector or verifier chose among several candidates
    selector_fallbacks: int = 0  # of those, turns where every selector call failed (a fallback pick)
    # Forks (docs/forks-and-lookahead.md), over every attempt of the trial: snapshots taken and
    # forks started with the seconds each took, and the lookahead's candidate commands run in
    # forks with the exec seconds they added.
    snapshots: int = 0
    snapshot_sec: list[float] = Field(default_factory=list)
    forks: int = 0
    fork_sec: list[float] = Field(default_factory=list)
    candidate_execs: int = 0
    candidate_exec_sec: float = 0.0
    steps: list[StepResult] | None = None
    tokens: dict[str, Usage] = Field(default_factory=dict)
    cost_usd: float | None = 0.0
    timing: dict[str, float] = Field(default_factory=dict)
    n_attempts: int = 1
    final_attempt: int = 0
    attempts: list[AttemptBrief] | None = None
    strategy_record: dict[str, Any] | None = None
    trajectory_path: str | None = None
    artifacts_path: str | None = None
    not_enforced: list[NotEnforcedKey] = Field(default_factory=list)
    tampering: list[TamperingEntry] = Field(default_factory=list)
    # Published releases the agent phase installed over a program, test library or start-up hook
    # the verifier runs, which settled those tampering entries (runner/package_updates.py).
    package_updates: list[PackageUpdate] = Field(default_factory=list)
    # Debian packages it installed with apt over files the verifier runs, found file for file to
    # be the archive's, which settled those entries (runner/debian_updates.py).
    debian_packages: list[DebianPackage] = Field(default_factory=list)
    # The repositories the agent was asked to fix, as it got them (SWE-bench style tasks), and its
    # commands that read past their HEAD (shell/git_history.py): docs/formats.md.
    repositories: list[RepositoryHistory] = Field(default_factory=list)
    history_reads: list[str] = Field(default_factory=list)
    error: ErrorInfo | None = None
    started_at: str | None = None
    finished_at: str | None = None
    imported_from: str | None = None
    source: str | None = None

    @model_validator(mode="after")
    def _true_verdict(self) -> "TrialResult":
        # Rewards are finite by their types (allow_inf_nan=False, here and in steps and attempts).
        problem = verdict_problem(self.reward, self.passed, self.ending) \
            or place_problem(self.setting, self.trajectory_path, self.artifacts_path)
        if problem:
            raise ValueError(problem)
        return self
