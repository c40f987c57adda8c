"""What the verifier guard (runner/guard.py, runner/findings.py) records, and the tampering entries it and the
trajectory rules (shell/tampering.py) find, as they are held in memory.

They stay plain dicts at run time: an entry goes onto the `sweep` event, the attempt and the trial
line as it was built (`TamperingEntry` in types/events.py is the model those are read back
through, docs/formats.md "Tampering entries"); these types say which keys each has.
"""

from __future__ import annotations

from typing import NamedTuple

from typing_extensions import NotRequired, Required, TypedDict


class ToolState(TypedDict, total=False):
    """A program the verifier runs, as it resolved on the container's PATH: a shell builtin, or a
    file (`path` as resolved, `real` path, `sha256`, `owner` uid:gid, `mode`, `size`). For a
    replacement the guard adds the script's `first_line`, the Debian `package` that owns the file
    and whether the file is that package's own (`package_file_intact`)."""

    builtin: bool
    path: str
    real: str
    sha256: str
    owner: str | None
    mode: str | None
    size: int | None
    first_line: str | None
    package: str
    package_file_intact: bool


class MountState(TypedDict, total=False):
    """One of the verifier's mount points: `type` (dir, file, link, absent), `stat` (uid:gid:mode),
    a link's `target`, and a folder's `digest` of the files under it."""

    type: Required[str]
    stat: str
    target: str
    digest: str


class ProcessInfo(TypedDict):
    """A process running in a container: pid, start time (clock ticks after boot), uid, parent
    pid and command line."""

    pid: int
    start: str
    uid: str
    ppid: int
    cmd: str


class AgentProcessInfo(TypedDict):
    """A process the agent phase left running, as the `sweep` event lists it."""

    pid: int
    uid: str
    cmd: str


class ProcessBaseline(TypedDict):
    """The processes running when an agent phase began, in the main container and in each
    sidecar (compose service name -> processes)."""

    processes: list[ProcessInfo]
    sidecar_processes: dict[str, list[ProcessInfo]]
    # A fork's, as it started: the clock its own changes are found against.
    now: NotRequired[str | None]


class GuardSnapshot(TypedDict, total=False):
    """One look at what the verifier depends on: its tools (None: no longer resolves), its mount
    points, the container's clock (`now`), the paths whose status changed since the baseline
    (path -> 0 changed, 1 added, 2 deleted; None at the baseline) and, when listed in the same
    exec, the processes and the artifacts folder's state (empty, absent, other)."""

    tools: Required[dict[str, ToolState | None]]
    mounts: Required[dict[str, MountState]]
    now: Required[str | None]
    changes: Required[dict[str, int] | None]
    processes: list[ProcessInfo]
    sidecar_processes: dict[str, list[ProcessInfo]]
    artifacts_folder: str | None
    conflicts: list[str]  # lines given twice with different values ("T python3", "M /logs", "N")
    flooded: list[str]  # places with more changed paths than the listing keeps of one (runner/guard.py `_CHANGES`)
    executes: list[str]  # changed `.pth` files with a line site.py executes (`import ...`)
    plugins: list[str]  # changed entry_points.txt files that declare a pytest plugin (`[pytest11]`)
    startup_copies: dict[str, str]  # setuptools' start-up files in the Python folders -> sha256 (`Q`)
    pth_modules: list[str]  # what the `.pth` files in the packages' folders import at every start (`X`)
    uv_own: list[str]  # changed `_virtualenv.py` files that are uv's own (`K`: findings.UV_VIRTUALENV_MODULES)
    bytecode_removed: int  # compiled modules the agent phase wrote, removed before the verifier (`_BYTECODE`)
    no_find: bool  # the environment has no `find`: the check inside cannot list changed paths
    workdir: str  # the folder an exec starts in, where the verifier runs unless it names one (`D`)
    home: str  # root's home, as an exec gets it from /etc/passwd (`V`)
    project: dict[str, str]  # the workdir's pyproject.toml and uv.lock -> digest, `-` absent, `other` (`J`)
    npm: dict[str, str]  # npm's and the JS test runners' files where the verifier's npm runs -> digest (`G`)
    npm_absent: list[str]  # at the baseline: `node_modules` absent in or above a folder where it installs (`Z`)
    node_modules_removed: list[str]  # after the sweep: those the agent phase made, removed (`L`)
    uv_absent: list[str]  # at the baseline: uv's folders absent, where the verifier runs uv (`UZ`)
    uv_removed: list[str]  # after the sweep: those the agent phase made, removed (`UL`)
    go: dict[str, str]  # go's settings files and module files where the verifier's go runs -> digest (`GO`)
    cargo: dict[str, str]  # cargo's settings, Cargo.toml files and build.rs where the verifier's cargo runs (`CG`)
    cmake: dict[str, str]  # the build files the verifier's cmake and make read (`CM`)
    make: dict[str, str]  # the makefiles the verifier's own make reads, or may (`MK`)
    tests_here: dict[str, str]  # the tests the verifier runs from where the agent worked, and their files (`WT`)
    repository_tests: dict[str, str]  # what the tests read in a repository the verifier patches and tests (`RT`)
    git: dict[str, str]  # git's hooks and settings where the verifier runs git (`GI`)
    go_test_mains: list[str]  # `_test.go` files the agent phase wrote that declare TestMain (`GT`)
    build_times_forward: list[str]  # after the sweep: files dated in the future where cargo or make builds (`TF`)
    build_sources_touched: int  # after the sweep: files the agent phase changed there, touched (`TT`)
    node_roots: list[str]  # the Node packages the verifier's npm starts, whose changed files are listed (`GL`)
    project_envs: list[str]  # the `.venv` folders the verifier's uv commands use, as the scripts name them (`Y`)
    sourced: dict[str, str]  # script the verifier sources -> digest of the lines that run, `-` absent, `other` (`F`)


class SweepRecord(TypedDict, total=False):
    """How the agent's processes were stopped (the `sweep` event's fields besides its tampering)."""

    method: Required[str]  # restart | none
    agent_processes: list[AgentProcessInfo]
    agent_processes_count: int
    sidecar_processes_killed: dict[str, list[AgentProcessInfo]]
    bytecode_removed: int  # compiled Python modules the agent phase wrote, removed before the verifier
    node_modules_removed: list[str]  # `node_modules` the agent phase made where the verifier's npm installs, removed
    uv_removed: list[str]  # uv's folders (cache, managed Pythons, tools) the agent phase made, removed
    build_sources_touched: int  # files the agent phase changed where the verifier's cargo or make builds, touched
    # Releases the agent phase installed over a program or test library the verifier runs, each
    # found, file for file, to be the release PyPI publishes: the entries they settled are not
    # tampering (runner/package_updates.py).
    package_updates: list[PackageUpdate]
    # Debian packages the agent phase installed with apt over files the verifier runs, each found,
    # file for file, to be the package the Debian archive publishes (runner/debian_updates.py).
    debian_packages: list[DebianPackage]
    # Where the changed paths were listed from, when not from inside alone: "inside and outside"
    # (environment.file_checks: outside), "outside" (no `find` inside), "nowhere" (no `find` inside
    # and a backend that cannot list changes from outside: changed files went unchecked).
    changes_listed: str


class PackageUpdate(TypedDict):
    """A published release that settled tampering entries (runner/package_updates.py): its name,
    version, wheel and the wheel's sha256 as the index gives them, the packages folder it is in,
    the entries' details, and the command that installed it."""

    package: str
    version: str
    wheel: str
    wheel_sha256: str
    site: str
    settles: list[str]
    by_command: CommandAttribution | None


class DebianPackage(TypedDict):
    """A Debian package that settled tampering entries (runner/debian_updates.py): its name,
    version and architecture as dpkg has them installed, its `.deb` in the archive's pool with the
    sha256 the signed index gives, the suite of that index, the entries' details, and the command
    that installed it."""

    package: str
    version: str
    architecture: str
    deb: str
    deb_sha256: str
    suite: str
    settles: list[str]
    by_command: CommandAttribution | None


class CommandAttribution(TypedDict, total=False):
    """The command that most likely made a change (shell/tampering.py attribute_command)."""

    turn: Required[int]
    command: Required[str]
    package_install: bool


class Tampering(TypedDict, total=False):
    """One tampering entry (docs/formats.md, "Tampering entries"): `kind`, `source`
    (environment | trajectory) and `detail`, plus what applies to its kind. `before` and `after`
    are a tool's states, or the tests' digests for `tests_modified_during_verification`."""

    kind: Required[str]
    source: Required[str]
    detail: Required[str]
    turn: int
    command: str
    step: str
    tool: str
    path: str
    before: ToolState | str
    after: ToolState | str
    by_command: CommandAttribution | None
    paths: list[str]
    # why a program or test library a package install replaced was not settled as the published
    # release (runner/package_updates.py)
    published_check: str
    # an `apt_package_planted` entry whose packages' scripts run only if the verifier's apt upgrades
    # or removes them (runner/apt_settings.py, runner/debian_updates.py), and what the verifier's
    # scripts install with apt
    if_replaced: bool
    verifier_installs: list[str]


class ToolRun(NamedTuple):
    """Where the verifier runs a build tool (runner/build_tools.py): the lines the tool's `folders`
    gave, and the folder the guard shell took a relative one from (TBSCALE_WORKDIR, else the folder
    its exec started in)."""

    folders: list[str]
    workdir: str | None
