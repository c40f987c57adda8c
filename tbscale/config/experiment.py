"""The experiment a user writes in YAML, as pydantic models: schema and defaults only.

Every model forbids unknown keys, so a typo is an error that names the key instead of a silently
ignored setting. Names that refer to registered components (agents, policies, trajectory
strategies, environments, executors) are checked after loading, against the registries, by
`tbscale.runner.resolve` (this layer knows no registry).
"""

from __future__ import annotations

import os
import re
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from tbscale.config import bounds
from tbscale.names import name_problem

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def url_problem(value: str, schemes: tuple[str, ...]) -> str | None:
    """Why `value` is not a URL with one of `schemes` and a host (a socket path for unix/npipe)."""
    if not value or value != value.strip() or any(c.isspace() or ord(c) < 32 for c in value):
        return f"{value!r} is not a URL (empty, or holds spaces or control characters)"
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as e:
        return f"{value!r} is not a URL ({e})"
    if parts.scheme not in schemes:
        return f"{value!r} is not a URL starting with {' or '.join(s + '://' for s in schemes)}"
    if parts.scheme in ("unix", "npipe"):
        return None if (parts.netloc or parts.path) else f"{value!r} names no socket"
    if not parts.hostname:
        return f"{value!r} names no host"
    return None


def _folder_name(v: str) -> str:
    problem = name_problem(v)
    if problem:
        raise ValueError(f"{v!r} {problem}")
    return v


# A name that becomes a folder (the run, a setting's files): the one rule of tbscale.names.
FolderName = Annotated[str, AfterValidator(_folder_name)]


class Strict(BaseModel):
    # Not-a-number and infinity are never meant in a config (a `.nan` timeout would never end).
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class Prices(Strict):
    """USD per million tokens; overrides litellm's bundled cost map (e.g. for a vLLM server)."""

    input_per_mtok: float = Field(0.0, ge=0)
    output_per_mtok: float = Field(0.0, ge=0)
    cached_input_per_mtok: float | None = Field(None, ge=0)


class ModelConfig(Strict):
    """One model endpoint. `model` is a litellm model string (e.g. `openai/gpt-4.1`,
    `hosted_vllm/Qwen/Qwen3-32B`, `anthropic/claude-sonnet-4`), or `sim/<role>` for the embedded
    simulated model. Keys are read from the environment variable named by `api_key_env` at call
    time and are never stored in logs or results."""

    model: str
    api_base: str | None = None
    api_key_env: str | None = None
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    max_tokens: int | None = Field(None, gt=0)
    context_window: int | None = Field(None, gt=0, description="tokens; default from litellm's model map")
    timeout_sec: float = Field(600.0, gt=0)
    max_retries: int = Field(6, ge=0)
    retry_backoff_sec: float = Field(1.0, ge=0)
    # Consecutive tries failing the same unfixable way (missing or rejected key, unknown model,
    # refused connection) after which the model counts as unavailable and the run stops.
    circuit_breaker_tries: int = Field(5, ge=1)
    # "auto": one request with n=N where the provider supports it, else N concurrent requests.
    sampling: Literal["auto", "n", "parallel"] = "auto"
    prices: Prices | None = None
    extra_params: dict[str, Any] = Field(default_factory=dict, description="passed to litellm as is")
    # Parameters of the simulated model (only for sim/...): skill, accuracy, seed offsets.
    sim: dict[str, float] = Field(default_factory=dict)

    @field_validator("model")
    @classmethod
    def _model_string(cls, v: str) -> str:
        if not v or not v.strip():
            raise ValueError("must not be empty: a litellm model string such as openai/gpt-4.1, or sim/<role>")
        if any(c.isspace() or ord(c) < 32 for c in v):
            raise ValueError(f"{v!r} holds spaces or control characters; a model string has none")
        return v

    @field_validator("api_base")
    @classmethod
    def _api_base_url(cls, v: str | None) -> str | None:
        if v is not None and (problem := url_problem(v, ("http", "https"))):
            raise ValueError(problem)
        return v

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, v: str | None) -> str | None:
        if v is not None and not ENV_NAME.fullmatch(v):
            # The value is not shown: it may be the key itself, put here by mistake.
            raise ValueError("not an environment variable name (letters, digits, '_'); name the variable that "
                             "holds the key, never the key itself")
        return v

    @property
    def is_simulated(self) -> bool:
        return self.model.startswith("sim/")

    def api_key(self) -> str | None:
        return os.environ.get(self.api_key_env) if self.api_key_env else None


class TaskSource(Strict):
    """Where tasks come from: directories of Harbor / Terminal-Bench tasks, or SWE-bench."""

    path: str | None = Field(None, description="a task directory or a folder of them")
    swebench: dict[str, Any] | None = Field(None, description="see docs/swebench.md")
    dataset: str | None = Field(None, description="NAME@VERSION of a dataset in `registry` (docs/datasets.md)")
    registry: str | None = Field(None, description="the registry for `dataset`: a URL, a file, or a registry.json "
                                                   "path; default: Harbor's public registry")
    include: list[str] | None = None
    exclude: list[str] = Field(default_factory=list)
    strict_keys: bool = Field(False, description="refuse task-file keys the reference harness would ignore (unknown "
                                                 "keys), instead of ignoring them and saying so")
    reward_key: str | None = Field(
        None, min_length=1, description="which key of a task's reward.json is the trial's reward (pass@1 reads it); "
                                        "default: `reward`, else the only key. A reward.json with several keys and "
                                        "none of these is a verifier error (reward_missing). Every key is kept.")

    @model_validator(mode="after")
    def _one_source(self) -> "TaskSource":
        if sum(x is not None for x in (self.path, self.swebench, self.dataset)) != 1:
            raise ValueError("give exactly one of `path`, `dataset` or `swebench`")
        if self.registry is not None and self.dataset is None:
            raise ValueError("`registry` goes with `dataset`")
        return self


def _bounded(name: str, value: int) -> int:
    problem = bounds.over_limit(name, value)
    if problem:
        raise ValueError(problem)
    return value


class Limits(Strict):
    max_turns: int = Field(50, gt=0)
    agent_timeout_sec: float | None = Field(None, gt=0, description="default: the task's own")
    verifier_timeout_sec: float | None = Field(None, gt=0, description="default: the task's own")
    command_timeout_sec: float = Field(180.0, gt=0)
    max_format_errors: int = Field(5, ge=0)
    observation_max_chars: int = Field(10_000, gt=100, description="what the model sees of one output")
    # What the trajectory stores of one output: head and tail up to this many bytes, with the
    # elided byte count; `keep_full_output` also writes every whole output to a side file.
    stored_output_max_bytes: int = Field(1_000_000, ge=1000)
    keep_full_output: bool = False

    @field_validator("max_turns")
    @classmethod
    def _turns_bound(cls, v: int) -> int:
        return _bounded("max_turns", v)


class EnvironmentConfig(Strict):
    """Where attempts run. `backend` names a registered backend (environments/registry.py) and
    `options` are that backend's own, checked by its options model when the config is loaded.

    Any other key is one of the backend's options spelt flat, as configs wrote them before
    `options` existed: the backend's `flat_keys` say which it takes and what they map to, and a key
    it does not take is refused at load (runner/resolve.py), naming it. This layer knows no
    backend, so it keeps them as given (`model_extra`, `flat_options`)."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    backend: str | None = Field(None, description="a registered backend; unset: the default one "
                                                 "(environments/registry.py, DEFAULT_BACKEND)")
    options: dict[str, Any] = Field(default_factory=dict, description="the backend's own options (docs/configuration.md)")
    network: Literal["task", "none", "bridge"] = "task"
    cpus: float | None = Field(None, gt=0, description="override the task's cpus")
    memory_mb: int | None = Field(None, gt=0, description="override the task's memory")
    pids_limit: int = Field(1024, ge=16, description="processes a container may hold at once")
    build_timeout_sec: float | None = Field(None, gt=0)
    agent_processes: Literal["stop", "keep"] = Field(
        "stop", description="before verification in the agent's container: stop (every process the agent phase "
                            "started is stopped: the container restarts) or keep (they run on into verification, as "
                            "Harbor and Terminal-Bench leave them; tasks whose tests need a service the agent left "
                            "running need this)")
    file_checks: Literal["inside", "outside"] = Field(
        "inside", description="where the verifier guard lists the files the agent phase changed: inside (programs in "
                              "the environment: find, stat, sha256sum; a program the agent replaced could hide a "
                              "change) or outside (also the backend's own list of the environment's changes, which "
                              "nothing inside can alter; a backend with the `changes` capability; on Docker one "
                              "`docker diff` before and one after each agent phase)")
    repository_history: Literal["keep", "scrub"] = Field(
        "keep", description="a repository the agent is asked to fix (a SWE-bench instance's, one a verifier script "
                            "patches): keep (as the image holds it, as Harbor, terminal-bench and mini-swe-agent run "
                            "it; commits beyond its HEAD, where a fix may be, are counted and the report says so) or "
                            "scrub (remove them before the agent starts, as swebench's own image builder does: "
                            "docs/swebench.md)")
    storage_limit: Literal["auto", "enforce", "ignore"] = Field(
        "auto", description="a task's storage_mb on an engine that cannot enforce a quota: auto (run the task "
                            "without it, as Harbor's Docker backend does, and say so; `ignore` is the same) or enforce "
                            "(refuse the task). An engine that can enforce a quota always does.")

    def flat_options(self) -> dict[str, Any]:
        """The keys given beside the declared ones (a backend's options spelt flat), unset ones left out."""
        return {key: value for key, value in (self.model_extra or {}).items() if value is not None}


class ComponentSpec(Strict):
    """A named, registered component with its own parameters (validated by the component)."""

    model_config = ConfigDict(extra="allow")
    name: str

    def params(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class Setting(Strict):
    """One configuration to compare: an agent, its models, an action policy and a trajectory
    strategy. Several settings in one experiment run over the same tasks and trials."""

    name: FolderName
    agent: str = Field("bash", description="a registered agent: bash, oracle, nop")
    generator: str | None = Field(None, description="key into `models`")
    # How the model names its command: a fenced ```bash block (any chat model), or a call of the
    # `bash` tool (models with function calling).
    action_format: Literal["fenced", "tool"] = "fenced"
    policy: ComponentSpec = Field(default_factory=lambda: ComponentSpec(name="baseline"))
    trajectory: ComponentSpec = Field(default_factory=lambda: ComponentSpec(name="single"))


class Experiment(Strict):
    name: FolderName
    description: str = ""
    tasks: TaskSource
    trials: int = Field(1, gt=0)
    seed: int = 0
    concurrency: int = Field(4, gt=0)
    fork_concurrency: int | None = Field(
        None, gt=0, description="lookahead forks alive at once, beside the attempts' own environments, per process "
                                "(the local executor's run; each Ray worker); a turn waits until all its forks can "
                                "start, so the bound changes when they start, never what a trial does. Default: no "
                                "bound but each policy's own per turn (docs/forks-and-lookahead.md)")
    output_dir: str = "results"
    models: dict[str, ModelConfig] = Field(default_factory=dict)
    settings: list[Setting] = Field(min_length=1)
    limits: Limits = Field(default_factory=Limits)
    environment: EnvironmentConfig = Field(default_factory=EnvironmentConfig)
    prompts: dict[str, str] = Field(default_factory=dict, description="template name -> file path")
    executor: ComponentSpec = Field(default_factory=lambda: ComponentSpec(name="local"))
    # A sim/ model beside real ones would let an answer key choose a real model's actions.
    allow_simulated_roles: bool = False

    @field_validator("output_dir")
    @classmethod
    def _output_dir(cls, v: str) -> str:
        if not v.strip() or "\x00" in v:
            raise ValueError("must name a folder")
        return v

    @field_validator("trials")
    @classmethod
    def _trials_bound(cls, v: int) -> int:
        return _bounded("trials", v)

    @field_validator("concurrency")
    @classmethod
    def _concurrency_bound(cls, v: int) -> int:
        return _bounded("concurrency", v)

    @field_validator("settings")
    @classmethod
    def _unique_names(cls, settings: list[Setting]) -> list[Setting]:
        _bounded("settings", len(settings))
        names = [s.name for s in settings]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"setting names must be unique, repeated: {', '.join(dupes)}")
        return settings

    def setting(self, name: str) -> Setting:
        for s in self.settings:
            if s.name == name:
                return s
        raise KeyError(name)

    def simulated_models(self) -> list[str]:
        return sorted(k for k, m in self.models.items() if m.is_simulated)
