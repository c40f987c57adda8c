"""The Harbor task.toml schema (1.0 to 1.4) as strict pydantic models.

Field names, types and defaults follow Harbor's TaskConfig; the one difference is that unknown keys
are refused instead of ignored, so a misspelt key cannot silently change what a task means. The
loader (tasks/harbor.py) turns a validated TaskConfig into a Task and adds the checks that need the
task folder (files, compose services).
"""

from __future__ import annotations

import re
from ipaddress import ip_address, ip_network
from pathlib import PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

KNOWN_SCHEMA_VERSIONS = ("1.0", "1.1", "1.2", "1.3", "1.4")
MAIN_SERVICE = "main"
PACKAGE_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9._-]*/[a-zA-Z0-9][a-zA-Z0-9._-]*$")
SERVICE_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]*$")
HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # an HTTP token (RFC 9110)
HOST_LABEL = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
NetworkMode = Literal["public", "no-network", "allowlist"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _positive(value: float | int, info: ValidationInfo) -> Any:
    if value <= 0:
        raise ValueError(f"`{info.field_name}` must be a positive number, got {value!r}")
    return value


def _not_negative(value: float | int, info: ValidationInfo) -> Any:
    if value < 0:
        raise ValueError(f"`{info.field_name}` must not be negative, got {value!r}")
    return value


# Field types that check themselves and name their key in the message (None passes untouched).
PositiveFloat = Annotated[float, AfterValidator(_positive)]
PositiveInt = Annotated[int, AfterValidator(_positive)]
NonNegativeFloat = Annotated[float, AfterValidator(_not_negative)]
NonNegativeInt = Annotated[int, AfterValidator(_not_negative)]


def _service_name(value: str | None) -> str | None:
    if value is None:
        return None
    value = value.strip()
    if not SERVICE_NAME.match(value):
        raise ValueError(f"{value!r} is not a valid compose service name")
    return value


def normalize_allowed_hosts(hosts: list[str]) -> list[str]:
    """Lower-case, strip a trailing dot, and accept only hostnames, `*.` wildcards, IP literals and
    CIDR ranges (not URLs, ports or paths)."""
    out = []
    for raw in hosts:
        host = raw.strip().lower().rstrip(".")
        if not host:
            raise ValueError("allowed_hosts entries must not be empty")
        if "/" in host:
            try:
                out.append(ip_network(host, strict=True).compressed)
            except ValueError:
                raise ValueError(f"allowed_hosts entry {raw!r} is not a hostname, IP address or CIDR range") from None
            continue
        if ":" in host:
            try:
                addr = ip_address(host)
            except ValueError:
                raise ValueError(f"allowed_hosts entry {raw!r} is not a hostname, IP address or CIDR range "
                                 "(no URLs or ports)") from None
            out.append(addr.compressed)
            continue
        name = host[2:] if host.startswith("*.") else host
        if "*" in name or not name:
            raise ValueError(f"allowed_hosts entry {raw!r}: wildcards must be a leading '*.' before a hostname")
        if host.startswith("*."):
            try:
                ip_address(name)
                raise ValueError(f"allowed_hosts entry {raw!r}: a wildcard must name hosts, not an IP address")
            except ValueError as e:
                if "wildcard" in str(e):
                    raise
        if not all(HOST_LABEL.match(label) for label in name.split(".")):
            raise ValueError(f"allowed_hosts entry {raw!r} is not a valid hostname")
        out.append(host)
    return out


class NetworkFields(Strict):
    """network_mode + allowed_hosts, shared by [environment], [agent], [verifier] and steps."""

    network_mode: NetworkMode | None = None
    allowed_hosts: list[str] | None = None

    @field_validator("allowed_hosts")
    @classmethod
    def _hosts(cls, v: list[str] | None) -> list[str] | None:
        return None if v is None else normalize_allowed_hosts(v)

    @model_validator(mode="after")
    def _hosts_need_allowlist(self):
        if self.allowed_hosts and self.network_mode != "allowlist":
            raise ValueError("allowed_hosts is only valid with network_mode = \"allowlist\"")
        return self


class Author(Strict):
    name: str
    email: str | None = None


class PackageInfo(Strict):
    """[task]: the package identity (schema 1.1+; `version` 1.4+)."""

    name: str
    version: str | None = Field(None, min_length=1)
    description: str = ""
    authors: list[Author] = Field(default_factory=list)
    keywords: list[str] = Field(default_factory=list)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not PACKAGE_NAME.match(v) or ".." in v:
            raise ValueError(f"must be \"org/name\" (letters, digits, '.', '_', '-'), got {v!r}")
        return v


class Healthcheck(Strict):
    command: str
    interval_sec: PositiveFloat = 5.0
    timeout_sec: PositiveFloat = 30.0
    start_period_sec: NonNegativeFloat = 0.0
    start_interval_sec: PositiveFloat = 5.0
    retries: PositiveInt = 3


class TpuSpec(Strict):
    type: str = Field(min_length=1)
    topology: str


class McpServer(Strict):
    name: str
    transport: Literal["stdio", "sse", "streamable-http"] = "sse"
    url: str | None = None
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    # HTTP request headers for the HTTP transports; `${VAR}` in a value comes from the host at run
    # time (Harbor 0.26), so the file holds the variable's name, never the credential.
    headers: dict[str, str] = Field(default_factory=dict)

    @field_validator("transport", mode="before")
    @classmethod
    def _http_alias(cls, v):
        return "streamable-http" if v == "http" else v

    @field_validator("headers")
    @classmethod
    def _header_names(cls, headers: dict[str, str]) -> dict[str, str]:
        for name, value in headers.items():
            if not HEADER_NAME.fullmatch(name):
                raise ValueError(f"invalid MCP HTTP header name {name!r}")
            if "\r" in value or "\n" in value:
                raise ValueError(f"MCP HTTP header {name!r} must not contain newlines")
        return headers

    @model_validator(mode="after")
    def _fields_for_transport(self):
        if self.transport in ("sse", "streamable-http") and not self.url:
            raise ValueError(f"mcp server {self.name!r}: `url` is required for transport {self.transport!r}")
        if self.transport == "stdio" and not self.command:
            raise ValueError(f"mcp server {self.name!r}: `command` is required for transport 'stdio'")
        if self.transport == "stdio" and self.headers:
            raise ValueError(f"mcp server {self.name!r}: `headers` is only for the HTTP transports")
        return self


class Artifact(Strict):
    """An artifact entry: a path in a container to copy out after the agent phase."""

    source: str
    destination: str | None = None
    exclude: list[str] = Field(default_factory=list)
    service: str | None = None

    @field_validator("service")
    @classmethod
    def _service(cls, v):
        return _service_name(v)

    @field_validator("source")
    @classmethod
    def _source(cls, v: str) -> str:
        if not v:
            raise ValueError("artifact source must not be empty")
        if ".." in PurePosixPath(v).parts:
            raise ValueError(f"artifact source must not contain '..', got {v!r}")
        return v

    @field_validator("destination")
    @classmethod
    def _destination(cls, v: str | None) -> str | None:
        if not v:
            return None
        p = PurePosixPath(v)
        if "\\" in v or p.is_absolute() or ".." in p.parts:
            raise ValueError(f"artifact destination must be a relative path without '..', got {v!r}")
        if v.rstrip("/") == "manifest.json":
            raise ValueError("artifact destination 'manifest.json' is reserved for the collection manifest")
        return v

    @model_validator(mode="after")
    def _sidecar_absolute(self):
        if self.service not in (None, MAIN_SERVICE) and not self.source.startswith("/"):
            raise ValueError(f"artifact {self.source!r} from service {self.service!r} needs an absolute source path")
        return self

    @property
    def effective_service(self) -> str:
        return self.service or MAIN_SERVICE


def _artifact_list(v: Any) -> Any:
    if isinstance(v, list):
        return [{"source": e} if isinstance(e, str) else e for e in v]
    return v


# `artifacts = ["/app/out", {source = ...}]`: a bare string is the source path.
ArtifactList = Annotated[list[Artifact], BeforeValidator(_artifact_list)]


class CollectHook(Strict):
    """[[verifier.collect]]: a command run in a service after the agent phase, before artifacts
    are collected."""

    command: str
    service: str = MAIN_SERVICE
    timeout_sec: PositiveFloat = 60.0
    user: str | int | None = None

    @field_validator("service")
    @classmethod
    def _service(cls, v):
        return _service_name(v)


class EnvironmentConfig(NetworkFields):
    build_timeout_sec: PositiveFloat = 600.0
    docker_image: str | None = None
    os: Literal["linux", "windows"] = "linux"
    cpus: PositiveInt | None = None
    memory_mb: PositiveInt | None = None
    storage_mb: PositiveInt | None = None
    gpus: NonNegativeInt | None = None
    gpu_types: list[str] | None = None
    tpu: TpuSpec | None = None
    mcp_servers: list[McpServer] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    skills_dir: str | None = None
    healthcheck: Healthcheck | None = None
    workdir: str | None = None
    allow_internet: bool | None = None  # deprecated: mapped onto network_mode

    @field_validator("os", mode="before")
    @classmethod
    def _os_lower(cls, v):
        return v.lower() if isinstance(v, str) else v

    @field_validator("workdir", "skills_dir")
    @classmethod
    def _absolute(cls, v, info):
        if v is not None and not v.startswith("/"):
            raise ValueError(f"`{info.field_name}` must be an absolute path in the container, got {v!r}")
        return v

    @model_validator(mode="after")
    def _allow_internet_agrees(self):
        if self.allow_internet is not None and self.network_mode is not None \
                and self.allow_internet != (self.network_mode == "public"):
            raise ValueError(f"allow_internet = {str(self.allow_internet).lower()} contradicts network_mode = "
                             f"\"{self.network_mode}\" (allow_internet is the deprecated form of network_mode)")
        return self

    def baseline_network(self) -> tuple[str, list[str]]:
        """The environment's baseline policy: network_mode if given, else the deprecated
        allow_internet (true: public, false: no-network), else public."""
        if self.network_mode is not None:
            return self.network_mode, list(self.allowed_hosts or [])
        if self.allow_internet is False and self.allowed_hosts is None:
            return "no-network", []
        return "public", []

    @model_validator(mode="before")
    @classmethod
    def _deprecated_sizes(cls, data: Any) -> Any:
        """`memory = "2G"` / `storage = "10G"` (schema 1.0) become memory_mb / storage_mb."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for old, new in (("memory", "memory_mb"), ("storage", "storage_mb")):
            if old not in data:
                continue
            value = data.pop(old)
            if not isinstance(value, str):
                raise ValueError(f"`{old}` must be a size string like \"2G\" or \"512M\", got {value!r}")
            mb = parse_size_mb(value, old)
            if new in data and data[new] != mb:
                raise ValueError(f"`{old}` = {value!r} ({mb} MB) conflicts with `{new}` = {data[new]!r}")
            data.setdefault(new, mb)
        return data


def parse_size_mb(text: str, key: str) -> int:
    s = text.strip().upper()
    units = {"G": 1024.0, "M": 1.0, "K": 1 / 1024}
    if not s or s[-1] not in units:
        raise ValueError(f"`{key}` = {text!r}: expected a size like \"2G\", \"512M\" or \"1024K\"")
    try:
        return int(float(s[:-1]) * units[s[-1]])
    except ValueError:
        raise ValueError(f"`{key}` = {text!r}: expected a size like \"2G\", \"512M\" or \"1024K\"") from None


class AgentConfig(NetworkFields):
    timeout_sec: PositiveFloat | None = None
    user: str | int | None = None


class VerifierConfig(NetworkFields):
    timeout_sec: PositiveFloat = 600.0
    env: dict[str, str] = Field(default_factory=dict)
    user: str | int | None = None
    environment_mode: Literal["shared", "separate"] | None = None
    environment: EnvironmentConfig | None = None
    collect: list[CollectHook] = Field(default_factory=list)

    @model_validator(mode="after")
    def _shared_has_no_environment(self):
        if self.environment_mode == "shared" and self.environment is not None:
            raise ValueError("environment_mode = \"shared\" cannot be combined with a [verifier.environment] "
                             "table (drop the table or use \"separate\")")
        return self


class StepVerifierConfig(VerifierConfig):
    # Unset falls back to the task-level [verifier].timeout_sec (see docs/tasks.md).
    timeout_sec: PositiveFloat | None = None


class SolutionConfig(Strict):
    env: dict[str, str] = Field(default_factory=dict)


class StepConfig(Strict):
    name: str
    agent: AgentConfig = Field(default_factory=AgentConfig)
    verifier: StepVerifierConfig = Field(default_factory=StepVerifierConfig)
    min_reward: float | dict[str, float] | None = None
    healthcheck: Healthcheck | None = None
    artifacts: ArtifactList = Field(default_factory=list)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not v or "/" in v or v in (".", "..") or v.startswith("."):
            raise ValueError(f"step name must be a plain folder name under steps/, got {v!r}")
        return v


class TaskConfig(Strict):
    schema_version: str = "1.4"
    task: PackageInfo | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    verifier: VerifierConfig = Field(default_factory=VerifierConfig)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    environment: EnvironmentConfig = Field(default_factory=EnvironmentConfig)
    solution: SolutionConfig = Field(default_factory=SolutionConfig)
    source: str | None = None
    multi_step_reward_strategy: Literal["mean", "final"] | None = None
    steps: list[StepConfig] | None = None
    artifacts: ArtifactList = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _version_alias(cls, data: Any) -> Any:
        if isinstance(data, dict) and "version" in data:
            data = dict(data)
            old = data.pop("version")
            if "schema_version" in data and data["schema_version"] != old:
                raise ValueError(f"both `version` = {old!r} and `schema_version` = {data['schema_version']!r} "
                                 "given (`version` is the pre-1.1 name of `schema_version`)")
            data.setdefault("schema_version", old)
        return data

    @field_validator("schema_version", mode="before")
    @classmethod
    def _known_version(cls, v):
        if not isinstance(v, str) or v not in KNOWN_SCHEMA_VERSIONS:
            raise ValueError(f"{v!r} is not a task.toml schema this loader knows "
                             f"({', '.join(KNOWN_SCHEMA_VERSIONS)})")
        return v

    @model_validator(mode="after")
    def _unique_steps(self):
        names = [s.name for s in self.steps or []]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"step names must be unique, repeated: {', '.join(dup)}")
        return self
