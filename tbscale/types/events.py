"""Trajectory events: one pydantic model per event type, used to write and to read.

Every line of `trajectories/<task>/<...>.jsonl` is one event. Each has `type`, `ts` (unix
seconds), `attempt` (index within the trial; -1 for calls the trajectory strategy makes itself;
None for trial-level events) and `turn`. Writers set only the fields that apply (`exclude_unset`),
so a Turn-BoN `selection` carries `tries` and a verifier's carries `scores`; readers get defaults
for the rest. docs/formats.md is checked against these models by a test.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from tbscale.types.completion import Usage
from tbscale.types.guard import DebianPackage, PackageUpdate


class EventBase(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ts: float = 0.0
    attempt: int | None = None
    turn: int | None = None


class TamperingEntry(BaseModel):
    """What an attempt did to its verifier or its verdict (docs/formats.md, "Tampering entries").
    Besides these three, an entry carries what applies to its kind (`turn`, `command`, `step`,
    `tool`, `before`, `after`, `by_command`, `paths`, `published_check`, `if_replaced`, `verifier_installs`), kept as written."""

    model_config = ConfigDict(extra="allow")

    kind: str
    source: str  # environment | trajectory
    detail: str = ""


class Start(EventBase):
    type: Literal["start"] = "start"
    schema_version: int | None = None  # every writer gives it; a hand-made stream may leave it out
    trial_key: str
    task_id: str = ""
    setting: str = ""
    setting_key: str = ""
    trial: int = 0
    seed: int | None = None  # None for runs imported from other harnesses
    simulated: bool = False
    simulated_roles: list[str] = Field(default_factory=list)
    instruction: str | None = ""
    imported_from: str | None = None
    source: str | None = None


class AttemptStart(EventBase):
    type: Literal["attempt_start"] = "attempt_start"
    stage: str = "final"
    image: str | None = None
    image_built: bool = False
    container: str | None = None
    environment: str | None = None
    context_attempts: list[int] = Field(default_factory=list)
    prefix_of: int | None = None
    prefix_turns: int = 0
    prefix_restore: str | None = None  # how the prefix's state was restored: "fork" or "replay"
    step: str | None = None
    imported: bool | None = None


class ModelCall(EventBase):
    type: Literal["model_call"] = "model_call"
    role: str
    model: str
    n: int = 1
    usage: Usage = Field(default_factory=Usage)
    latency_sec: float | None = 0.0
    retries: int = 0
    retry_causes: list[str] = Field(default_factory=list)
    error: str | None = None
    stage: str | None = None


class CandidateRecord(BaseModel):
    """One sampled response, with everything the behaviour and cost analyses need."""

    model_config = ConfigDict(extra="forbid")

    text: str = ""
    reasoning: str | None = None
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    finish_reason: str | None = None
    output_tokens: int = 0
    reasoning_tokens: int = 0
    command: str | None = None
    runnable: bool = False
    submission: bool = False
    parse_error: str | None = None


class Candidates(EventBase):
    type: Literal["candidates"] = "candidates"
    candidates: list[CandidateRecord]
    path: str | None = None  # adaptive Turn-BoN: which path the turn took


class Selection(EventBase):
    """Which candidate runs, and why. Turn-BoN adds `tries`; verifiers add scores and the rest."""

    type: Literal["selection"] = "selection"
    index: int
    rationale: str = ""
    selector_failed: bool = False
    method: str = "listwise"
    model: str | None = None
    tries: int | None = None
    scores: list[float | None] | None = None
    tied: list[int] | None = None
    judged: list[int] | None = None
    same_as: dict[int, int] | None = None
    comparisons: list[list[int | float]] | None = None
    pairs_asked: int | None = None
    samples: int | None = None
    self_verification: bool | None = None
    path: str | None = None
    prompt_elided_chars: int | None = None


class FormatError(EventBase):
    type: Literal["format_error"] = "format_error"
    error: str | None = None
    count: int | None = 0


class VerifierCall(EventBase):
    """A verifier, judge or summarizer call (what `tbscale export verifier-data` reads)."""

    type: Literal["verifier_call"] = "verifier_call"
    role: str
    method: str
    model: str | None = None
    messages: list[dict[str, Any]] | None = None
    response: str | None = None
    parsed: Any = None
    error: str | None = None
    calls: int | None = None
    stage: str | None = None
    self_verification: bool | None = None
    candidate: int | None = None
    sample: int | None = None
    pair: list[int] | None = None
    margin: float | None = None
    shown: list[int] | None = None
    round: int | None = None
    group: int | None = None
    vote: int | None = None
    of_attempt: int | None = None
    rubric_set: str | None = None
    purpose: str | None = None
    members: list[int] | None = None


class Summary(EventBase):
    type: Literal["summary"] = "summary"
    of_attempt: int
    source: str
    fields: dict[str, Any] = Field(default_factory=dict)
    text: str = ""
    error: str | None = None
    stage: str | None = None


class ActionEvent(EventBase):
    type: Literal["action"] = "action"
    command: str
    selected_index: int = 0
    n_candidates: int = 1
    ran_in_fork: bool | None = None  # a lookahead pick: it ran in its fork, which the attempt went on in


class LookaheadRun(BaseModel):
    """One distinct command a lookahead turn ran in a fork: which candidates proposed it, what it
    did, and what of its output the selector was shown (head and tail)."""

    model_config = ConfigDict(extra="forbid")

    candidates: list[int]
    command: str
    exit_code: int | None = None
    timed_out: bool = False
    duration_sec: float = 0.0
    output_bytes: int | None = None
    output: str = ""
    picked: bool = False


class LookaheadEvent(EventBase):
    """A lookahead turn (strategies/lookahead.py): the commands run in forks and where the turn's
    time went (sampling, waiting for forks, running the commands, choosing and adopting)."""

    type: Literal["lookahead"] = "lookahead"
    path: str
    ran: list[LookaheadRun] = Field(default_factory=list)
    picked: int | None = None
    exec_added_sec: float = 0.0
    sample_sec: float | None = None
    fork_wait_sec: float | None = None
    exec_sec: float | None = None
    select_sec: float | None = None
    turn_sec: float | None = None


class Observation(EventBase):
    """What a command printed. `output` holds at most the configured cap: head and tail with the
    number of elided bytes; `full_output` names a side file when full outputs are kept."""

    type: Literal["observation"] = "observation"
    exit_code: int | None  # None when a run imported from elsewhere did not record it
    output: str = ""
    timed_out: bool = False
    duration_sec: float | None = 0.0
    output_bytes: int | None = None
    elided_bytes: int | None = None
    full_output: str | None = None


class Replay(EventBase):
    type: Literal["replay"] = "replay"
    command: str
    exit_code: int
    timed_out: bool = False


class ForkEvent(EventBase):
    """A snapshot taken (`op` "snapshot"), a fork started from one ("fork") or a snapshot released
    ("release"); `sec` is how long it took (docs/forks-and-lookahead.md). A fork that could not be
    stopped ("stop_failed") or a snapshot that could not be released ("release_failed") carries the
    `error`; the run's clean-up removes what it left."""

    type: Literal["fork"] = "fork"
    op: Literal["snapshot", "fork", "release", "stop_failed", "release_failed"]
    snapshot: str
    container: str | None = None
    images: dict[str, str] | None = None
    sec: float | None = None
    purpose: str | None = None
    node: str | None = None  # where the snapshot lives (a Ray node id, or the host)
    error: str | None = None


class SetupEvent(EventBase):
    """What the run time did in an attempt's environment besides the agent: a healthcheck that
    passed, a step's setup.sh, the start of a step (multi-step tasks)."""

    type: Literal["setup"] = "setup"
    what: str
    command: str | None = None
    exit_code: int | None = None
    step: str | None = None


class AgentProcess(BaseModel):
    """A process the agent phase left running, as the sweep saw it."""

    model_config = ConfigDict(extra="forbid")

    pid: int
    uid: str | int
    cmd: str


class SweepEvent(EventBase):
    """Between the agent phase and the verifier (docs/tasks.md, "Verification integrity"): how the
    agent's processes were stopped (`method` restart, or none when they are kept), which ones were
    running, and the tampering the checks found."""

    type: Literal["sweep"] = "sweep"
    method: str
    agent_processes: list[AgentProcess] = Field(default_factory=list)
    agent_processes_count: int = 0
    sidecar_processes_killed: dict[str, list[AgentProcess]] | None = None  # compose service -> processes
    # compiled Python modules the agent phase wrote or changed, removed before the verifier ran
    bytecode_removed: int | None = None
    # `node_modules` folders the agent phase made where the verifier's npm installs, removed before
    # it ran (runner/npm_project.py): its own `npm install` makes them again
    node_modules_removed: list[str] | None = None
    # uv's folders (its cache, managed Pythons, tools) the agent phase made where the verifier runs uv or
    # uvx, removed before it ran (runner/uv_cache.py): its own uv makes them again
    uv_removed: list[str] | None = None
    # published releases that settled tampering entries (runner/package_updates.py)
    package_updates: list[PackageUpdate] | None = None
    # Debian packages that settled tampering entries (runner/debian_updates.py)
    debian_packages: list[DebianPackage] | None = None
    # files the agent phase changed where the verifier's cargo or make builds, touched before it ran so
    # that it compiles them again whatever time they were given (runner/build_times.py)
    build_sources_touched: int | None = None
    # where the changed paths were listed from when not from inside alone (runner/guard.py)
    changes_listed: str | None = None
    tampering: list[TamperingEntry] = Field(default_factory=list)
    timing: dict[str, float] = Field(default_factory=dict)
    step: str | None = None


class VerifierEvent(EventBase):
    type: Literal["verifier"] = "verifier"
    reward: float | None = None
    rewards: dict[str, float] | None = None
    passed: bool = False
    error: str | None = None
    output: str = ""
    details: dict[str, Any] = Field(default_factory=dict)
    step: str | None = None


class AttemptEnd(EventBase):
    type: Literal["attempt_end"] = "attempt_end"
    stage: str = "final"
    ending: str
    stop_reason: str | None = None
    reward: float | None = None
    turns: int = 0
    error: str | None = None
    timing: dict[str, float] = Field(default_factory=dict)
    usage: dict[str, Usage] = Field(default_factory=dict)
    tampering: list[TamperingEntry] = Field(default_factory=list)


class End(EventBase):
    type: Literal["end"] = "end"
    reward: float | None = None
    passed: bool = False
    ending: str
    final_attempt: int = 0
    record: dict[str, Any] | None = None


Event = Annotated[Union[Start, AttemptStart, ModelCall, Candidates, Selection, FormatError, VerifierCall, Summary,
                        ActionEvent, LookaheadEvent, Observation, Replay, ForkEvent, SetupEvent, SweepEvent,
                        VerifierEvent, AttemptEnd, End],
                  Field(discriminator="type")]
EVENT_TYPES: dict[str, type[EventBase]] = {
    m.model_fields["type"].default: m
    for m in (Start, AttemptStart, ModelCall, Candidates, Selection, FormatError, VerifierCall, Summary, ActionEvent,
              LookaheadEvent, Observation, Replay, ForkEvent, SetupEvent, SweepEvent, VerifierEvent, AttemptEnd, End)}
event_adapter: TypeAdapter[Event] = TypeAdapter(Event)
