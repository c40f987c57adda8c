"""The two seams strategies plug into.

- Action level: an ActionPolicy (defined by the agent, tbscale.agent.policy) is asked for the next
  action given the history and returns the chosen response plus what it did (candidates, selector
  calls, scores) as events. Baseline is the policy that samples once.
- Trajectory level: a TrajectoryStrategy receives a task and a way to start attempts (fresh, or
  conditioned on summaries of earlier ones) and returns the final attempt with its own record.
Any action policy runs inside any trajectory strategy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, ClassVar, Protocol

from pydantic import BaseModel, ConfigDict

from tbscale.agent.policy import ActionPolicy, Decision, TurnContext
from tbscale.logs import AttemptRecorder
from tbscale.tasks import Task
from tbscale.types.completion import Usage
from tbscale.types.guard import DebianPackage, GuardSnapshot, PackageUpdate, Tampering
from tbscale.types.messages import ChatMessage
from tbscale.types.results import AttemptBrief, RepositoryHistory, StepResult


class Params(BaseModel):
    """Base for a component's parameters: unknown keys are errors that name the key."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    # Policies: the field of `model_refs()` naming the model that picks among a turn's candidates
    # (unset: the generator picks itself); None for a policy that never picks (the trial line's
    # `selector_model`).
    selector_field: ClassVar[str | None] = None
    # Policies registered with `adaptive=True`: the field holding a setting's adaptive parameters
    # (a mapping when the setting is adaptive; the adaptive report pairs it with a plain one).
    adaptive_field: ClassVar[str | None] = None

    def model_refs(self) -> dict[str, str | None]:
        """Fields that name a key of the experiment's `models` (checked at load time)."""
        return {}

    def file_refs(self) -> dict[str, str]:
        """Fields that name a prompt file (their contents are part of a setting's identity):
        by convention, every field whose name ends in `prompt`."""
        return {name: value for name, value in self if name.endswith("prompt") and isinstance(value, str)}

    def oracle_selects(self) -> bool:
        """Trajectory strategies: whether these parameters let the verifier's verdict pick attempts
        (the `oracle` selector: an upper bound for analysis, labelled `oracle_selection`)."""
        return False

    def candidates_per_turn(self) -> int:
        """Policies: the candidate actions a turn samples (the trial line's `n`), defaults
        included: a policy whose parameters call it `n` needs nothing more, another overrides this."""
        return int(getattr(self, "n", 1))

    def forks_a_turn(self) -> int:
        """Policies: the most forks of the environment one turn starts at once (0: it runs in the
        environment itself). A run's `fork_concurrency` must allow it (runner/checks.py)."""
        return 0


@dataclass
class AttemptResult:
    """One finished and verified attempt, as a trajectory strategy sees it. `reward` and
    `passed` come from the verifier and are for the record: a strategy that selects must not use
    them (only the `oracle` selector does, for analysis)."""

    index: int
    label: str
    stage: str
    reward: float | None
    passed: bool
    ending: str
    stop_reason: str
    turns: int
    actions: list[str]
    transcript: list[ChatMessage] = field(repr=False, default_factory=list)
    usage: dict[str, Usage] = field(default_factory=dict)  # per role, as records hold it (Usage.recorded)
    timing: dict[str, float] = field(default_factory=dict)
    error: str | None = None
    summary: str | None = None
    context_indices: list[int] = field(default_factory=list)
    error_type: str | None = None
    rewards: dict[str, float] | None = None
    reward_key: str | None = None  # which key of `rewards` is `reward`
    steps: list[StepResult] | None = None  # multi-step tasks: one per step
    artifacts_path: str | None = None  # the attempt's collected artifacts, relative to the run folder
    tampering: list[Tampering] = field(default_factory=list)  # docs/formats.md, `tampering`
    # published releases that settled tampering entries (runner/package_updates.py)
    package_updates: list[PackageUpdate] = field(default_factory=list)
    # Debian packages that settled tampering entries (runner/debian_updates.py)
    debian_packages: list[DebianPackage] = field(default_factory=list)
    # the task's repositories as the agent got them, and its commands that read past their HEAD
    repositories: list[RepositoryHistory] = field(default_factory=list)
    history_reads: list[str] = field(default_factory=list)
    # A paused attempt's environment saved for its continuations (docs/forks-and-lookahead.md):
    # the Snapshot, the verifier guard's baseline from before the first agent phase of the chain,
    # and how this attempt's own prefix was restored ("fork", "replay"; None: no prefix).
    snapshot: Any = field(default=None, repr=False)
    guard_baseline: GuardSnapshot | None = field(default=None, repr=False)
    prefix_restore: str | None = None
    release: Callable[[], None] | None = field(default=None, repr=False, compare=False)

    def release_snapshot(self) -> None:
        """Remove this attempt's snapshot (no continuation will start from it any more)."""
        if self.snapshot is not None and self.release is not None:
            self.release()

    def brief(self) -> AttemptBrief:
        """The attempt as a multi-attempt trial's line lists it."""
        return AttemptBrief(index=self.index, label=self.label, stage=self.stage, reward=self.reward,
                            passed=self.passed, ending=self.ending, stop_reason=self.stop_reason, turns=self.turns,
                            context=self.context_indices, usage=self.usage, tampering=len(self.tampering))


@dataclass
class Prefix:
    """An unfinished attempt to continue elsewhere: its history, and its environment state: a
    snapshot to fork from when the attempt kept one, else the commands that built it (replayed in
    a fresh container before the agent goes on)."""

    messages: list[ChatMessage]
    actions: list[str]
    parent: int | None = None
    snapshot: Any = None  # the parent's Snapshot: the continuation forks from it instead of replaying
    guard_baseline: GuardSnapshot | None = None
    # the task's repositories as the chain's first agent got them: a fork holds what the prefix's
    # agent did to them since, so they are not counted again there
    repositories: list[RepositoryHistory] = field(default_factory=list)

    @classmethod
    def of(cls, attempt: "AttemptResult", *, restore: str = "fork") -> "Prefix":
        """`restore` "replay" ignores the attempt's snapshot; a released one is never used."""
        snap = attempt.snapshot if restore != "replay" else None
        if snap is not None and getattr(snap, "released", False):
            snap = None
        return cls(attempt.transcript, attempt.actions, attempt.index, snap, attempt.guard_baseline,
                   list(attempt.repositories))


# start_attempt(stage, context_text, context_indices, *, prefix=None, max_new_turns=None,
# verify=True, keep_snapshot="no") -> a finished attempt: verified when it submitted or `verify` is
# set. With max_new_turns the agent stops after that many more turns (stop reason "paused", ending
# "unfinished"), leaving a prefix to score or continue; keep_snapshot "if_able" (or "required":
# refused on a backend without snapshots) saves a paused attempt's environment for continuations
# to fork from (AttemptResult.snapshot; release it with release_snapshot()).
StartAttempt = Callable[..., Awaitable[AttemptResult]]


@dataclass
class TrajectoryOutcome:
    final: AttemptResult
    attempts: list[AttemptResult]
    record: dict[str, Any] = field(default_factory=dict)


class TrajectoryStrategy(Protocol):
    async def run(self, task: Task, start_attempt: StartAttempt, rec: AttemptRecorder) -> TrajectoryOutcome: ...


__all__ = ["ActionPolicy", "AttemptResult", "Decision", "Params", "Prefix", "StartAttempt", "TrajectoryOutcome",
           "TrajectoryStrategy", "TurnContext"]
