"""A run folder's manifest.json, written and read through one model (RunManifest).

`tbscale run` creates it, then checks and extends it on every invocation; `tbscale import` writes
one for the runs it imports. Readers (the report's current-configuration filter and plan, the
viewer, sweeps, the judge, `import --force`) read it back through the same model. A manifest lives
as long as its run and is rewritten by every later invocation, so keys this version does not know
(written by a newer or older tbscale) are kept as they are (`extra="allow"`) rather than refused or
lost. docs/formats.md lists the fields; a test checks the list against these models.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Kept(BaseModel):
    """A part of a long-lived file (a run's manifest, a post-hoc pipeline's): unknown keys are kept,
    and written back as they were. Writers update a manifest in place: assignments are validated
    like the fields read."""

    model_config = ConfigDict(extra="allow", validate_assignment=True)


class CurrentConfig(Kept):
    """The configuration of the latest invocation; reports read only the trials that belong to it."""

    settings: list[str] = Field(default_factory=list)
    setting_keys: dict[str, str] = Field(default_factory=dict)
    trials: int | None = None
    seed: int | None = None
    task_hashes: dict[str, str] | None = None  # task id -> content hash
    planned_trials: dict[str, int] | None = None  # setting -> trials its plan holds (tasks x trials)


class InfraRetry(Kept):
    """A trial a distributed executor ran again because its node or worker died (docs/scale.md)."""

    trial_key: str
    attempt: int  # the lost execution's number (0: the first)
    error: str  # the executor's exception type, e.g. NodeDiedError
    at: float  # when it was seen (Unix time)
    retry_started_at: float | None = None


class ExecutorSummary(Kept):
    """What a distributed executor records about an invocation (the local executor records none)."""

    name: str
    address: str | None = None
    nodes_used: int | None = None
    infra_retries: list[InfraRetry] | None = None


class Invocation(Kept):
    """One `tbscale run` of the run: when, how it was called, what it did, why it stopped early."""

    started_at: str
    argv: list[str] = Field(default_factory=list)
    orphan_containers_removed: int | None = None
    finished_at: str | None = None
    trials_run: int | None = None
    crashed: int | None = None
    infra_errors: int | None = None
    executor: ExecutorSummary | None = None
    stopped: str | None = None  # why it ended before its plan did
    stop_kind: str | None = None  # model_unavailable | interrupted

    def update(self, **fields: object) -> None:
        """Set several fields at once (each validated; keys an executor adds are kept)."""
        for name, value in fields.items():
            setattr(self, name, value)


class NotEnforcedTasks(Kept):
    """A task key the invocation did not carry out as written, why, and the tasks it concerns."""

    key: str
    why: str
    tasks: list[str] = Field(default_factory=list)


class DatasetSource(Kept):
    """Where one task of a registry dataset comes from."""

    git_url: str | None = None
    path: str | None = None
    pinned: str | None = None  # the commit the registry pins (None: the branch's tip)
    branch: str | None = None


class DatasetRecord(Kept):
    """A registry dataset the run's tasks came from (`tasks.dataset`)."""

    name: str
    version: str | None = None
    registry: str | None = None
    format: str | None = None
    path: str | None = None  # the cache folder
    commits: dict[str, str | None] = Field(default_factory=dict)  # task folder -> the commit it was fetched at
    sources: dict[str, DatasetSource] = Field(default_factory=dict)


class PublishedRun(Kept):
    """One imported run's own numbers, as its results file states them (terminal-bench)."""

    run: str
    path: str
    agent: str | None = None
    model: str | None = None
    n_attempts: int | None = None
    setting: str | None = None
    results_file: str | None = None
    accuracy: float | None = None
    n_resolved: int | None = None
    n_unresolved: int | None = None
    pass_at_k: dict[str, float | None] = Field(default_factory=dict)
    trials: int | None = None


class ImportedFrom(Kept):
    """Where an imported run came from."""

    format: str
    paths: list[str] = Field(default_factory=list)
    at: str | None = None
    published: list[PublishedRun] | None = None


class RunManifest(Kept):
    """manifest.json. Fields a run never had are left out when it is written (exclude_unset); a
    fresh run's keys come in the order below."""

    # Both always written by tbscale; a hand-made manifest may lack them (readers take what it has;
    # `import --force` replaces only a folder whose manifest has both, naming the folder).
    schema_version: int | None = None
    run_name: str | None = None
    # The experiment config as first validated (Experiment.model_dump), or, for an imported run,
    # a sketch of one (its settings' names, agents and models): free-form JSON here, because the
    # config's model lives in a layer above this one.
    experiment: dict[str, Any] = Field(default_factory=dict)
    setting_keys: dict[str, str] = Field(default_factory=dict)
    setting_identities: dict[str, dict[str, Any]] = Field(default_factory=dict)  # what each key hashes
    created_at: str | None = None
    invocations: list[Invocation] = Field(default_factory=list)
    current: CurrentConfig | None = None
    simulated_roles: dict[str, list[str]] = Field(default_factory=dict)
    versions: dict[str, str] = Field(default_factory=dict)
    git_commit: str | None = None
    host: str | None = None
    simulated_models: bool = False
    simulated_note: str | None = None
    not_enforced: list[NotEnforcedTasks] = Field(default_factory=list)
    dataset: DatasetRecord | None = None
    config_history: list[dict[str, Any]] = Field(default_factory=list)  # later invocations' configs
    imported_from: ImportedFrom | None = None
