"""The Task every loader produces, whatever the on-disk format.

A Task keeps the flat attributes the runner, the verifiers and the agent read (id, instruction,
environment_dir, image, tests_dir, timeouts, cpus, ...) and, beside them, the whole task definition
in structured form: `environment`, `agent`, `verifier`, `solution`, `artifacts`, `steps`,
`multi_step_reward_strategy` and `reward`. The flat attributes are derived from the structured ones
by the loaders; code that only runs single-container, single-step tasks can keep using them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from typing_extensions import NotRequired, TypedDict

from tbscale.tasks.envvars import EnvTable, embedded_host_vars, register_host_refs, unset_embedded
from tbscale.tasks.schema import Artifact, CollectHook, Healthcheck, McpServer, PackageInfo

TaskFormat = Literal["harbor", "terminal-bench", "swebench"]
# Agents that call no model: the reference solution and the agent that does nothing. As Harbor's
# utility agents, they are not handed the task's MCP servers' headers (nor need their variables).
UTILITY_AGENTS = frozenset({"oracle", "nop"})
NetworkMode = Literal["public", "no-network", "allowlist"]

# Harbor's [agent].timeout_sec defaults to None, meaning no limit. tbscale always bounds an
# attempt: a task that sets no agent timeout gets this one (the structured `agent.timeout_sec`
# stays None so the difference is visible).
DEFAULT_AGENT_TIMEOUT_SEC = 600.0
# The flat `cpus` / `memory_mb` of a task that sets none: what a scheduler (Ray) reserves for it.
# The container itself gets no limit then, as under Harbor's Docker backend and the legacy harness.
DEFAULT_CPUS = 1.0
DEFAULT_MEMORY_MB = 2048


@dataclass(frozen=True)
class NotEnforced:
    """A key of the task that this run does not carry out as written, and why: run as the
    reference harness runs it (Harbor's Docker backend ignores `storage_mb`; terminal-bench
    ignored task.yaml keys it did not know), said once per run and kept in the manifest and
    the trial line (docs/tasks.md, "What is not enforced")."""

    key: str
    why: str

    def as_dict(self) -> dict[str, str]:
        return {"key": self.key, "why": self.why}


# Names an allowlist may hold that are the environment itself, not a host to let in.
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


@dataclass(frozen=True)
class NetworkPolicy:
    """`public`: the default bridge network (internet and the task's own services);
    `no-network`: nothing; `allowlist`: only `allowed_hosts` (hostnames, `*.` wildcards, IPs, CIDRs)."""

    mode: NetworkMode = "public"
    allowed_hosts: tuple[str, ...] = ()

    @property
    def internet(self) -> bool:
        return self.mode == "public"


@dataclass(frozen=True)
class TpuRequest:
    """`[environment].tpu`: a TPU slice of this type and topology (only a backend whose
    capabilities include `tpus` runs such a task; others refuse it)."""

    type: str
    topology: str


@dataclass
class EnvironmentSpec:
    """How to make the container(s) a phase runs in.

    Image: `image` (a prebuilt `docker_image`, which wins over a Dockerfile as in Harbor) or a build
    of `dockerfile` in `context_dir`. With `compose_file`, the main container is the compose service
    `main_service` (Harbor: `main`, Terminal-Bench: `client`) and `services` lists every service the
    file declares; sidecars share the compose project's network. `upload_dir` is set when a prebuilt
    image comes with an environment folder holding other files: they are copied into the workdir
    after start.
    """

    context_dir: Path | None = None
    dockerfile: Path | None = None
    image: str | None = None
    compose_file: Path | None = None
    main_service: str = "main"
    services: list[str] = field(default_factory=list)
    upload_dir: Path | None = None
    os: str = "linux"
    build_timeout_sec: float = 600.0
    cpus: int | float | None = None
    memory_mb: int | None = None
    storage_mb: int | None = None
    gpus: int | None = None
    gpu_types: list[str] | None = None
    tpu: TpuRequest | None = None
    network: NetworkPolicy = field(default_factory=NetworkPolicy)
    healthcheck: Healthcheck | None = None
    env: EnvTable = field(default_factory=EnvTable)
    skills_dir: str | None = None
    mcp_servers: list[McpServer] = field(default_factory=list)
    workdir: str | None = None  # None: the image's WORKDIR
    # Terminal-Bench compose files: host folders (in the task folder) bind-mounted into the
    # client, copied in at start instead; `tty` / `stdin_open` for the container; and whether
    # the single service asks for what only docker compose gives (then the compose backend runs it).
    copy_in: list[tuple[Path, str]] = field(default_factory=list)
    tty: bool = False
    stdin_open: bool = False
    compose_required: bool = False

    @property
    def sidecars(self) -> list[str]:
        return [s for s in self.services if s != self.main_service]


@dataclass
class AgentSpec:
    """The agent phase. `timeout_sec` None means the task sets no limit (tbscale then applies
    DEFAULT_AGENT_TIMEOUT_SEC). `network` is the policy during the agent phase: the explicit
    override (`network_override`) if the task gives one, else the environment baseline."""

    timeout_sec: float | None = None
    user: str | int | None = None  # None: the image's USER
    network: NetworkPolicy = field(default_factory=NetworkPolicy)
    network_override: NetworkPolicy | None = None

    @property
    def effective_timeout_sec(self) -> float:
        return self.timeout_sec if self.timeout_sec is not None else DEFAULT_AGENT_TIMEOUT_SEC


@dataclass
class VerifierSpec:
    """The verification phase.

    shared mode: `tests_dirs` (tests/, then a step's own tests/ on top) are copied to `tests_mount`
    after the agent phase and `command` runs in the agent's main container, as `user`, in `cwd`
    (None: the environment workdir), with `env` added. separate mode: the agent environment is
    stopped, `environment` is started (built from `environment.context_dir`, the tests folder), the
    collected artifacts are put back at their source paths, and `command` runs there; tests are not
    copied (the verifier image must contain them). `collect` hooks run after the agent phase,
    before artifacts are collected.
    """

    timeout_sec: float = 600.0
    env: EnvTable = field(default_factory=EnvTable)
    user: str | int | None = None  # None: the container's default user
    mode: Literal["shared", "separate"] = "shared"
    environment: EnvironmentSpec | None = None  # separate mode only
    network: NetworkPolicy = field(default_factory=NetworkPolicy)
    network_override: NetworkPolicy | None = None
    collect: list[CollectHook] = field(default_factory=list)
    tests_dirs: list[Path] = field(default_factory=list)  # copied in order; later files win
    tests_files: dict[str, Path] = field(default_factory=dict)  # name in tests_mount -> file, copied last
    tests_mount: str = "/tests"
    test_script: Path | None = None  # on the host (informational in separate mode)
    command: str = "/tests/test.sh"  # made executable and run directly, so its shebang counts
    cwd: str | None = None  # None: the environment workdir
    upload_tests: bool = True

    @property
    def tests_dir(self) -> Path | None:
        return self.tests_dirs[0] if self.tests_dirs else None


@dataclass
class SolutionSpec:
    """The reference solution, used only by the oracle: `dir` goes to /solution, `command` runs
    with `env` added."""

    dir: Path | None = None
    script: str = "solve.sh"
    command: str = "bash /solution/solve.sh"
    env: EnvTable = field(default_factory=EnvTable)


@dataclass
class RewardSpec:
    """Where the verdict comes from.

    source "file": /logs/verifier/reward.json (a flat {key: number} object; wins when both exist)
    else reward.txt (one number, stored under key "reward"). The scalar reward is key `primary_key`
    ("reward"), or the only key when there is exactly one; other keys are kept as they are.
    source "parser": the legacy harness's parser `parser_name` reads the test output; all tests
    passing is reward 1, and nothing parsed is a verifier error, not a wrong answer.
    """

    source: Literal["file", "parser"] = "file"
    files: tuple[str, ...] = ("reward.json", "reward.txt")
    primary_key: str = "reward"
    parser_name: str | None = None

    def primary(self, rewards: dict[str, float]) -> float | None:
        if self.primary_key in rewards:
            return float(rewards[self.primary_key])
        if len(rewards) == 1:
            return float(next(iter(rewards.values())))
        return None


@dataclass
class StepSpec:
    """One step of a multi-step task, with every override already resolved against the task level
    (agent/verifier timeout, user and network; verifier env merged over the task's; artifacts = the
    task's then the step's)."""

    name: str
    dir: Path
    instruction: str
    agent: AgentSpec
    verifier: VerifierSpec
    tests_dir: Path | None = None  # steps/<name>/tests, copied over the task-level tests/
    solution_dir: Path | None = None  # steps/<name>/solution, else the task's solution/
    workdir_dir: Path | None = None  # steps/<name>/workdir, copied into the workdir before the agent
    setup_script: Path | None = None  # steps/<name>/workdir/setup.sh, run after the copy
    healthcheck: Healthcheck | None = None
    min_reward: float | dict[str, float] | None = None
    artifacts: list[Artifact] = field(default_factory=list)
    trajectory: Path | None = None  # steps/<name>/trajectory.json (prior agent context, ATIF)

    def thresholds(self) -> dict[str, float]:
        """min_reward as {key: threshold}; a float gates on "reward"."""
        if self.min_reward is None:
            return {}
        if isinstance(self.min_reward, dict):
            return dict(self.min_reward)
        return {"reward": float(self.min_reward)}


class SolutionCommand(TypedDict):
    """One keystroke entry of a terminal-bench solution.yaml (terminal_bench._solution_yaml checks
    that an entry has a command and no other keys than these)."""

    command: str
    min_timeout_sec: NotRequired[float]
    max_timeout_sec: NotRequired[float]
    block: NotRequired[bool]
    append_enter: NotRequired[bool]


@dataclass
class LegacySpec:
    """What the Terminal-Bench harness gave a task.yaml task at run time: run-tests.sh copied with
    tests/ into /tests and run as root (`bash /tests/run-tests.sh`) in the image WORKDIR, with
    TEST_DIR=/tests, on the default network (internet on), judged by `parser_name` on the test
    output."""

    parser_name: str = "pytest"
    test_env: dict[str, str] = field(default_factory=lambda: {"TEST_DIR": "/tests"})
    test_user: str | None = "root"  # None: the agent's user (run_tests_in_same_shell)
    run_tests_in_same_shell: bool = False  # tests ran in the agent's shell, as its user, in its cwd
    disable_asciinema: bool = False  # tbscale records no terminal video anyway
    estimated_duration_sec: float | None = None
    # Values the legacy harness gave `docker compose` for a task's compose file (per-trial names
    # and host log paths, T_BENCH_TASK_*, are the run time's to set).
    compose_env: dict[str, str] = field(default_factory=dict)
    solution_yaml: Path | None = None  # the keystroke form of the reference solution
    solution_commands: list[SolutionCommand] = field(default_factory=list)


@dataclass
class Task:
    """Everything a trial needs to know about one task.

    `environment_dir` is the docker build context (with `dockerfile` inside it), or None when the
    task names a ready `image`. `tests_dir` is copied to `tests_mount` only after the agent has
    finished, and `solution_dir` to /solution only for the oracle, so an agent can read neither.
    """

    id: str
    format: TaskFormat
    instruction: str
    path: Path | None = None
    environment_dir: Path | None = None
    dockerfile: str = "Dockerfile"
    image: str | None = None
    tests_dir: Path | None = None
    tests_mount: str = "/tests"
    test_command: str = "bash /tests/test.sh"
    solution_dir: Path | None = None
    solution_command: str = "bash /solution/solve.sh"
    solution_script: str = "solve.sh"  # file in solution_dir whose blank-line blocks are the steps
    workdir: str | None = None  # None: the image's own WORKDIR
    agent_timeout_sec: float = DEFAULT_AGENT_TIMEOUT_SEC
    verifier_timeout_sec: float = 120.0
    build_timeout_sec: float = 600.0
    cpus: float = DEFAULT_CPUS
    memory_mb: int = DEFAULT_MEMORY_MB
    allow_internet: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)
    # Format-specific data (e.g. the SWE-bench instance) for the verifier of that format.
    extra: dict[str, Any] = field(default_factory=dict)

    # ---- the structured definition (filled by the Harbor and Terminal-Bench loaders) ----------
    config_path: Path | None = None  # task.toml / task.yaml
    name: str | None = None  # [task].name ("org/name") when given, else the folder name
    package: PackageInfo | None = None
    schema_version: str | None = None
    source: str | None = None
    environment: EnvironmentSpec = field(default_factory=EnvironmentSpec)
    agent: AgentSpec = field(default_factory=AgentSpec)
    verifier: VerifierSpec = field(default_factory=VerifierSpec)
    solution: SolutionSpec = field(default_factory=SolutionSpec)
    artifacts: list[Artifact] = field(default_factory=list)
    steps: list[StepSpec] = field(default_factory=list)
    multi_step_reward_strategy: Literal["mean", "final"] | None = None
    reward: RewardSpec = field(default_factory=RewardSpec)
    trajectory: Path | None = None  # trajectory.json beside instruction.md (prior agent context, ATIF)
    legacy: LegacySpec | None = None  # Terminal-Bench task.yaml tasks only
    variant: str | None = None  # Terminal-Bench `descriptions` key this task was made from
    # Keys of the task file not carried out as written (ignored unknown keys, ...): see NotEnforced.
    not_enforced: list[NotEnforced] = field(default_factory=list)

    @property
    def is_multi_step(self) -> bool:
        return bool(self.steps)

    @property
    def reward_strategy(self) -> Literal["mean", "final"]:
        """How step rewards combine into the trial reward (multi-step tasks): "mean" unless the
        task says "final"."""
        return self.multi_step_reward_strategy or "mean"

    def env_tables(self) -> list[EnvTable]:
        """Every env table of the task (environment, verifier, solution, separate verifier
        environments, steps' verifiers), e.g. to list or check the host variables a run needs."""
        tables = [self.environment.env, self.verifier.env, self.solution.env]
        for verifier in [self.verifier] + [s.verifier for s in self.steps]:
            if verifier.environment is not None:
                tables.append(verifier.environment.env)
        tables += [s.verifier.env for s in self.steps]
        return tables

    def unset_host_var(self, agent: str) -> str | None:
        """Why the task cannot be given its env here, for a trial of `agent`: the first `${VAR}`
        template (of the tables a trial uses: the solution's only for the oracle) whose host
        variable is unset and has no default, as EnvTable.resolve() says it (file, table, key,
        variable); then the same for a `${VAR}` inside an MCP server's header, for every agent but
        the utility ones (UTILITY_AGENTS), which Harbor does not hand the task's MCP servers."""
        solution = agent == "oracle"
        in_tables = next((problem for table in self.env_tables()
                          if (solution or table is not self.solution.env) and (problem := table.unset())), None)
        if in_tables or agent in UTILITY_AGENTS:
            return in_tables
        return next((problem for where, value in self.mcp_headers() if (problem := unset_embedded(value, where))), None)

    def register_host_values(self) -> None:
        """Hide from what this process writes every value the task's `${VAR}` templates would take
        from this host (tbscale/secrets.py): the process that writes a run's lines may not be the
        one that resolves them (a Ray worker)."""
        for table in self.env_tables():
            table.register_host_values()
        for _where, value in self.mcp_headers():
            register_host_refs(embedded_host_vars(value))

    def mcp_headers(self) -> list[tuple[str, str]]:
        """(where, value) of every MCP server header: a value may hold `${VAR}`s anywhere in it
        (`Bearer ${TOKEN}`), filled from the host when the agent's MCP configuration is written."""
        return [(self.mcp_header_where(s.name, k), v) for s in self.environment.mcp_servers for k, v in s.headers.items()]

    def mcp_header_where(self, server: str, header: str) -> str:
        """An MCP server's header, as messages name it."""
        file = f"{self.config_path}: " if self.config_path else ""
        return f"{file}[[environment.mcp_servers]] {server!r} header {header}"

    def missing_host_vars(self) -> list[str]:
        """Host variables named by `${VAR}` templates that are unset and have no default."""
        return sorted({var for table in self.env_tables() for var in table.missing()})

    def solution_steps(self) -> list[str]:
        """The reference solution as a list of actions: blocks of the solution script separated
        by blank lines (the bundled tasks are written that way). Shebang-only and `set -e`-only
        lines are dropped, since each action runs in its own shell."""
        if not self.solution_dir:
            return []
        script = self.solution_dir / self.solution_script
        if not script.is_file():
            return []
        steps = []
        for block in re.split(r"\n\s*\n", script.read_text()):
            lines = [ln for ln in block.splitlines()
                     if not re.fullmatch(r"\s*(#!.*|set -[a-z]+( -o \w+)*|#.*)?\s*", ln)]
            if lines:
                steps.append("\n".join(lines))
        return steps


def environment_of(task: Task) -> EnvironmentSpec:
    """The task's EnvironmentSpec; tasks made without one (SWE-bench instances, hand-made Tasks)
    get one from their flat attributes."""
    env = task.environment
    if env.image or env.context_dir or env.compose_file:
        return env
    return EnvironmentSpec(context_dir=task.environment_dir, image=task.image, cpus=task.cpus,
                           memory_mb=task.memory_mb, workdir=task.workdir,
                           network=NetworkPolicy("public" if task.allow_internet else "no-network"))


def uses_compose(task: Task, env: EnvironmentSpec | None = None) -> bool:
    """Whether `env` (default: the task's own) runs as a compose project: a main service and its
    sidecars. A Terminal-Bench compose file whose only service is the client was read into the
    task already (build, working_dir, env, limits, volumes, tty) and runs as one container, unless
    that service has keys only a compose project carries out."""
    env = task.environment if env is None else env
    if env.compose_file is None:
        return False
    return task.format != "terminal-bench" or len(env.services) > 1 or env.compose_required
