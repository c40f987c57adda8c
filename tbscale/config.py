"""Experiment configuration: the YAML a user writes, validated with pydantic.

One place for defaults. Every model forbids unknown keys, so a typo is an error that names the
key instead of a silently ignored setting. Strategy parameters are validated by the strategy's own
pydantic model (looked up by name in the registry), so a new strategy brings its own options
without touching this file.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from tbscale.errors import TbscaleError


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


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
    # "auto": one request with n=N where the provider supports it, else N concurrent requests.
    sampling: Literal["auto", "n", "parallel"] = "auto"
    prices: Prices | None = None
    extra_params: dict[str, Any] = Field(default_factory=dict, description="passed to litellm as is")
    # Parameters of the simulated model (only for sim/...): skill, accuracy, seed offsets.
    sim: dict[str, float] = Field(default_factory=dict)

    @property
    def is_simulated(self) -> bool:
        return self.model.startswith("sim/")

    def api_key(self) -> str | None:
        return os.environ.get(self.api_key_env) if self.api_key_env else None


class TaskSource(Strict):
    """Where tasks come from: directories of Harbor / Terminal-Bench tasks, or SWE-bench."""

    path: str | None = Field(None, description="a task directory or a folder of them")
    swebench: dict[str, Any] | None = Field(None, description="see docs/swebench.md")
    include: list[str] | None = None
    exclude: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_source(self) -> "TaskSource":
        if (self.path is None) == (self.swebench is None):
            raise ValueError("give exactly one of `path` or `swebench`")
        return self


class Limits(Strict):
    max_turns: int = Field(50, gt=0)
    agent_timeout_sec: float | None = Field(None, gt=0, description="default: the task's own")
    verifier_timeout_sec: float | None = Field(None, gt=0, description="default: the task's own")
    command_timeout_sec: float = Field(180.0, gt=0)
    max_format_errors: int = Field(5, ge=0)
    observation_max_chars: int = Field(10_000, gt=100)


class EnvironmentConfig(Strict):
    network: Literal["task", "none", "bridge"] = "task"
    cpus: float | None = Field(None, gt=0, description="override the task's cpus")
    memory_mb: int | None = Field(None, gt=0, description="override the task's memory")
    build_timeout_sec: float | None = Field(None, gt=0)


class ComponentSpec(Strict):
    """A named, registered component with its own parameters (validated by the component)."""

    model_config = ConfigDict(extra="allow")
    name: str

    def params(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class Setting(Strict):
    """One configuration to compare: an agent, its models, an action policy and a trajectory
    strategy. Several settings in one experiment run over the same tasks and trials."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    agent: Literal["bash", "oracle", "nop"] = "bash"
    generator: str | None = Field(None, description="key into `models`")
    # How the model names its command: a fenced ```bash block (any chat model), or a call of the
    # `bash` tool (models with function calling).
    action_format: Literal["fenced", "tool"] = "fenced"
    policy: ComponentSpec = Field(default_factory=lambda: ComponentSpec(name="baseline"))
    trajectory: ComponentSpec = Field(default_factory=lambda: ComponentSpec(name="single"))


class Experiment(Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    description: str = ""
    tasks: TaskSource
    trials: int = Field(1, gt=0)
    seed: int = 0
    concurrency: int = Field(4, gt=0)
    output_dir: str = "results"
    models: dict[str, ModelConfig] = Field(default_factory=dict)
    settings: list[Setting] = Field(min_length=1)
    limits: Limits = Field(default_factory=Limits)
    environment: EnvironmentConfig = Field(default_factory=EnvironmentConfig)
    prompts: dict[str, str] = Field(default_factory=dict, description="template name -> file path")

    @field_validator("settings")
    @classmethod
    def _unique_names(cls, settings: list[Setting]) -> list[Setting]:
        names = [s.name for s in settings]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"setting names must be unique, repeated: {', '.join(dupes)}")
        return settings

    @model_validator(mode="after")
    def _check_references(self) -> "Experiment":
        from tbscale.strategies import validate_component

        for i, s in enumerate(self.settings):
            where = f"settings[{i}]"
            if s.agent == "bash":
                if not s.generator:
                    raise ValueError(f"{where}.generator: required for the bash agent")
                if s.generator not in self.models:
                    raise ValueError(f"{where}.generator: '{s.generator}' is not a key of `models`")
            for kind in ("policy", "trajectory"):
                spec: ComponentSpec = getattr(s, kind)
                try:
                    validate_component(kind, spec.name, spec.params(), self.models)
                except ValueError as e:
                    raise ValueError(f"{where}.{kind}.{e}") from None
        return self

    def setting(self, name: str) -> Setting:
        for s in self.settings:
            if s.name == name:
                return s
        raise KeyError(name)

    def setting_key(self, setting: Setting) -> str:
        """A stable hash of everything that changes what a trial of this setting does.

        Models are resolved into the setting so that changing a model changes the key; output
        paths and concurrency are left out, since they do not change a trial's behaviour.
        """
        payload = {
            "setting": setting.model_dump(mode="json"),
            "models": {k: v.model_dump(mode="json", exclude={"timeout_sec", "max_retries", "retry_backoff_sec"})
                       for k, v in sorted(self.models.items())},
            "limits": self.limits.model_dump(mode="json"),
            "environment": self.environment.model_dump(mode="json"),
            "prompts": self.prompts,
        }
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:12]


def _format_validation_error(path: Path, err: ValidationError) -> str:
    first = err.errors()[0]
    loc = ".".join(str(p) if not isinstance(p, int) else f"[{p}]" for p in first["loc"]).replace(".[", "[")
    msg = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        msg = "unknown key"
    where = f"{path}: {loc}: " if loc else f"{path}: "
    more = f" (and {len(err.errors()) - 1} more)" if len(err.errors()) > 1 else ""
    return f"{where}{msg}{more}"


def read_yaml_mapping(path: str | Path) -> dict[str, Any]:
    """A YAML file whose top level is a mapping; every problem is a one-line TbscaleError."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise TbscaleError(f"{path}: no such file") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise TbscaleError(f"{path}:{where}: not valid YAML ({getattr(e, 'problem', e)})") from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise TbscaleError(f"{path}: the top level must be a mapping of keys")
    return raw


def load_experiment(path: str | Path, overrides: dict[str, Any] | None = None) -> Experiment:
    """Read and validate an experiment YAML; every problem is a one-line TbscaleError naming the
    file and the key. Relative task and prompt paths are resolved against the config's folder
    when they exist there, else against the working directory."""
    path = Path(path)
    raw = read_yaml_mapping(path)
    for key, value in (overrides or {}).items():
        raw[key] = value
    try:
        exp = Experiment.model_validate(raw)
    except ValidationError as e:
        raise TbscaleError(_format_validation_error(path, e)) from None
    base = path.parent
    if exp.tasks.path and not Path(exp.tasks.path).exists() and (base / exp.tasks.path).exists():
        exp.tasks.path = str(base / exp.tasks.path)
    return exp
