"""What keeps the agent phase out of the verifier's verdict in shared mode (docs/tasks.md,
"Verification integrity").

Before the agent phase `VerifierGuard.baseline` records:
* the verifier's toolchain: every program the test script runs and every interpreter its tests'
  shebangs name, plus bash, sh, python3, pytest, uv, ..., as resolved on the container's PATH and in
  the folders the scripts it sources put first on it: resolved path, real path, sha256, size, owner
  and mode (what the scripts say they run, source, make and read: runner/verifier_reads.py);
* the lines that run of each script it sources, whether each virtualenv it makes is there, and the
  workdir's Python project where its uv commands read it (its files read from outside);
* the verifier's mount points (/logs, /logs/verifier, the tests folder): type, owner, mode, and a
  digest of the files under the tests folder when the task has one there already;
* the container's clock, so that afterwards the files whose status changed since then (a status
  change time cannot be set back from inside a container) can be listed where they matter;
* the processes running (pid and start time), in the main container and in every sidecar.
The main container's digests and processes come from one exec.

`VerifierGuard.seal`, after the agent phase and before anything of the verifier runs:
1. lists the processes the agent phase started (user, command line), then stops them all: the
   main container is restarted (every process dies, its init too, whatever user it ran as,
   however detached; the image's entrypoint runs again and the task's healthcheck is passed
   again), and in each sidecar every process that is new and not the child of one of the
   sidecar's own processes is killed;
2. checks again and returns what changed as tampering entries (`tampering_entries`); the same
   exec lists the processes left and looks at /logs/artifacts, so that an empty convention
   folder in a container where nothing else runs is not copied out (`artifacts_folder`).
Why a restart, not a kill from an exec: docs/tasks.md, "Verification integrity".
The shell the guard runs in the environment, and the readers of what it prints:
runner/guard_shell.py.
Every command it runs while the agent's processes may be alive (before the restart; throughout
with the sweep off) is an exec with `hostile_peers` (Environment.exec): read to the end of its
output, its exit code from the backend; and a line of its output given twice with different
values is `verifier_output_forged`.
"""

from __future__ import annotations

import hashlib
import re
import shlex
import time
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

from tbscale.environments import Environment
from tbscale.runner.findings import (UV_VIRTUALENV_MODULES, changed_groups, checked_path, compiled_module, entry,
                                     interpreter_homes, programs_changed, project_changed, project_settings,
                                     tampering_entries, uv_own_pth, venv_homes, venv_interpreters)
from tbscale.runner.guard_shell import (ARTIFACTS_PROBE, BYTECODE, CHANGES, CHECK_END, CLEAR_VERIFIER_LOGS, CLOCK, KILL,
                                        MOUNTS, PROCESSES, PROJECT, SETUP, SNAPSHOT, SOURCED, STARTUP_COPIES, ended,
                                        parse_processes, parse_snapshot)
from tbscale.shell.tampering import TEST_TOOLS, attribute_command
from tbscale.runner.build_tools import TOOLS, seen_outside, tool_groups
from tbscale.runner.build_times import BUILD_TIMES, set_forward
from tbscale.runner.npm_project import NPM, NPM_CLEAR, NPM_READ, node_library_changed, npm_changed, npm_settings
from tbscale.runner.debian_updates import settle_debian
from tbscale.runner.package_updates import settle
from tbscale.runner.uv_cache import UV_CLEAR, UV_FOLDERS
from tbscale.runner.verifier_reads import read_verifier
from tbscale.types.guard import (AgentProcessInfo, GuardSnapshot, ProcessBaseline, ProcessInfo,
                                 SweepRecord, Tampering, ToolRun)

# The programs the guard's own commands run: the outside check (`file_checks: outside`) reports one
# of them written or added in a bin folder, since the checks inside would believe it.
CHECK_PROGRAMS = frozenset({"find", "sha256sum", "stat", "readlink", "date", "sort", "awk", "head", "sed", "wc", "grep",
                            "tr", "rm", "cat", "sleep", "cut", "md5sum", "dpkg", "busybox", "dash", "kill",
                            "od", "ldconfig"})
LIST_MAX = 500  # the changed paths the check lists of a place (guard_shell.CHANGES)
FULL_LIST_MAX = 20_000  # and when it lists a flooded place again (`_list_again`)
# site.py runs a .pth line that starts so (a carriage return ends a line: universal newlines)
_EXECUTES = re.compile(rb"(^|\r)import[ \t]", re.M)
_PLUGIN = re.compile(rb"\[pytest11\]")  # anywhere: see guard_shell.CHANGES
def new_processes(before: list[ProcessInfo], now: list[ProcessInfo], *, keep_children: bool) -> list[ProcessInfo]:
    """Processes in `now` that were not running at `before`. With keep_children, a new process
    whose nearest older ancestor is one of the old processes (other than PID 1) is the child of a
    service the task runs (a database's backend, a server's worker) and is left out."""
    old = {(p["pid"], p["start"]) for p in before}
    by_pid = {p["pid"]: p for p in now}
    fresh = [p for p in now if (p["pid"], p["start"]) not in old and p["pid"] != 1]
    if not keep_children:
        return fresh
    out = []
    for p in fresh:
        parent, seen = by_pid.get(p["ppid"]), 0
        while parent is not None and (parent["pid"], parent["start"]) not in old and seen < 64:
            parent, seen = by_pid.get(parent["ppid"]), seen + 1
        if parent is None or parent["pid"] == 1:
            out.append(p)
    return out


class VerifierGuard:
    """The checks around one shared-mode verification (see the module doc). `sweep` False keeps
    the agent's processes running into verification, as Harbor and Terminal-Bench do."""

    def __init__(self, box: Environment, verifier, *, sweep: bool = True, tests_dirs: list[Path] | None = None,
                 outside: bool = False, can_list_outside: bool = False):
        self.box, self.verifier, self.sweep = box, verifier, sweep
        # `outside` (environment.file_checks: outside): the changed paths are also taken from the
        # backend's own listing (Environment.changes), which nothing inside can alter; the same
        # happens unasked where the environment has no `find` and the backend can list changes.
        self.outside, self.can_list_outside = outside, can_list_outside
        self.outside_base: dict[str, int] | None = None  # that listing at the reference
        self.outside_carried: dict[str, int] = {}  # and what it found in environments the attempt left for a fork
        self.unlisted = False  # no `find` inside, and no listing from outside either
        # what the verifier runs, sources and makes, and whether its uv commands read the workdir's
        # project (runner/verifier_reads.py); the project's files are read at the baseline
        # (`project_settings` of each) and after the sweep
        reads = read_verifier(verifier, tests_dirs)
        self.names, self.sourced, self.project = reads.names + reads.in_folders, reads.sourced, reads.project
        self.envs = reads.envs  # the `.venv` folders its uv commands use (`?`: only beside a project)
        # the folders its npm commands run in and the package.json scripts they run (runner/npm_project.py)
        self.npm, self.npm_scripts = list(reads.npm), list(reads.npm_scripts)
        self.tools = dict(reads.tools)  # where it runs each build tool (runner/build_tools.py)
        self.uv = reads.uv  # it runs uv or uvx, which reuse uv's folders (runner/uv_cache.py)
        self.npm_before: dict[str, dict[str, Any] | None] = {}
        self.tools_before: dict[str, dict[str, dict[str, Any] | None]] = {}
        # SNAPSHOT's arguments: the names, then `--` and the names in folders, which alone it takes
        # as paths in the workdir when relative (a program the script runs as `./build.sh` is its own)
        self.tool_args = " ".join(shlex.quote(n) for n in [*reads.names, "--", *reads.in_folders])
        self.project_before: dict[str, dict[str, Any] | None] = {}
        self.before: GuardSnapshot | None = None
        self.timing: dict[str, float] = {}
        # After `seal`: the artifacts convention folder's state ("empty", "absent") when nothing
        # left running can change it before the verifier's run, else None (it is copied out).
        self.artifacts_folder: str | None = None
        # When the attempt goes on in a fork (runner/forks.py): the fork's clock as it started
        # (the reference its own changes are found against: a commit gives every file it carries
        # a new status change time), and the changes found in the environments it grew from.
        self.since: str | None = None
        self.carried: dict[str, int] = {}
        self.carried_marks: dict[str, list[str]] = {}  # the marks of those listings (parse_snapshot)
        # Whether processes the agent left may be running in `box` as the guard's commands run
        # (Environment.exec's `hostile_peers`): with the sweep off, always (an earlier step's or
        # attempt's may be, even at a baseline); with it on, from the end of an agent phase to
        # the restart.
        self.exposed = not sweep
        # The guard's commands that did not end by their timeout plus the backend's grace
        # (ExecResult.abandoned): while the agent's processes may run, one of them can stop a
        # command (SIGSTOP). Reported by the next seal as `check_stalled`.
        self.stalled: list[str] = []
        self.incomplete: list[str] = []  # the checks that did not run to their end (`_exec`)
        self.setup_failed: str | None = None  # `baseline`'s setup: what it printed when it failed

    def _exec(self, target: Environment, what: str, command: str, timeout_sec: float, *, to_the_end: bool = False,
              **kw: Any):
        """`to_the_end`: the command is one of the checks, which prints END as its last line; one that
        ended without it (not cut for its size, nor stopped by its timeout) was ended from inside (a
        library or name service module of the agent's in the exec's shell can end it with status 0
        before its first line, and an empty check finds nothing): `incomplete`, reported by the seal."""
        res = target.exec(command + (CHECK_END if to_the_end else ""), timeout_sec, user="0", **kw)
        if res.abandoned:
            self.stalled.append(f"{what} (after {res.duration_sec:.0f} s)")
        elif to_the_end and not res.elided_bytes and not ended(res.output):
            self.incomplete.append(f"{what} (exit code {res.exit_code})")
        return res

    # ---- probes ----------------------------------------------------------------------------------
    def _snapshot(self, since: str | None = None, *, processes: bool = False, probe: bool = False,
                  setup: str = "", bytecode: bool = False) -> GuardSnapshot:
        """Digests and mount points; with `since` (the container's clock at the baseline), also
        the paths whose status changed after it, where they matter to the verifier. A status
        change time cannot be set back from inside a container (it needs the clock), so what the
        agent phase changed there cannot hide. With `processes`, the same exec also lists the
        processes running (`processes`), as `_processes` does: one round trip instead of two. With
        `bytecode`, the compiled modules the agent phase wrote are removed (`BYTECODE`)."""
        env = self._env(self.box, since)
        cmd = f"set -- {self.tool_args}\n" + SNAPSHOT + CLOCK + MOUNTS + SOURCED + PROJECT + NPM + UV_FOLDERS + "".join(t.shell for t in TOOLS) + CHANGES + STARTUP_COPIES
        if not since:
            # What an earlier verification (a previous step's) left in /logs/verifier is not the
            # agent's: clear it before this agent phase, so that anything found there later is.
            cmd = CLEAR_VERIFIER_LOGS + cmd
        if setup:
            cmd = SETUP % setup + cmd
        if bytecode and since:
            cmd += BYTECODE + NPM_CLEAR + UV_CLEAR + BUILD_TIMES
        if processes:
            cmd += PROCESSES
        if probe:
            cmd += ARTIFACTS_PROBE
        res = self._exec(self.box, "the check of the verifier's toolchain and paths", cmd, 120, env=env, to_the_end=True,
                         output_limit=900_000 if processes else 400_000, hostile_peers=self.exposed)
        snap = parse_snapshot(res.output)
        if not since:
            snap["changes"] = None
        elif res.elided_bytes:
            snap["flooded"].append("the check's output (cut for its size)")
        if processes:
            snap["processes"] = parse_processes(res.output)
        if probe:
            snap["artifacts_folder"] = next((x[2:] for x in res.output.splitlines() if x.startswith("A\t")), None)
        if setup:
            self.setup_failed = next((x[2:] for x in res.output.splitlines() if x.startswith("S\t")), None)
        return snap

    def _env(self, box: Environment, since: str | None) -> dict[str, str]:
        env = dict(self.verifier.env.resolve()) if hasattr(self.verifier.env, "resolve") else {}
        env["TBSCALE_TESTS"] = self.verifier.tests_mount
        if self.sourced:
            env["TBSCALE_SOURCED"] = "\n".join(self.sourced)
        if self.project:
            env["TBSCALE_PROJECT"] = "1"
        if self.envs:
            env["TBSCALE_PROJECT_ENVS"] = "\n".join(self.envs)
        # What the agent phase made that the verifier's installers make again (runner/made_again.py) is
        # removed after the sweep: not with the sweep off (the agent's processes may still use it), nor
        # where the verifier cannot reach the registry to make it again.
        remade = bool(since and self.sweep
                      and getattr(getattr(self.verifier, "network", None), "mode", "public") == "public")
        made = self.before or {}
        if self.npm:
            env["TBSCALE_NPM"] = "\n".join(self.npm)
            env["TBSCALE_NODE_PROGRAMS"] = " ".join(n for n in self.names if re.fullmatch(r"[A-Za-z0-9_.+-]+", n))
            if remade and made.get("npm_absent"):
                env["TBSCALE_NPM_CLEAR"] = "\n".join(made["npm_absent"])
        if self.uv:
            env["TBSCALE_UV"] = "1"
            if remade and made.get("uv_absent"):
                env["TBSCALE_UV_CLEAR"] = "\n".join(made["uv_absent"])
        for tool in TOOLS:
            if self.tools.get(tool.key):
                env[tool.env] = "\n".join(self.tools[tool.key])
                if since and tool.carried and self.before is not None:
                    env[tool.env + "_BEFORE"] = tool.carried(self.before.get(tool.key) or {})  # type: ignore[misc]
        workdir = self._workdir(box)
        if workdir:  # at the baseline, unless the task names it, the shell takes the folder it starts in
            env["TBSCALE_WORKDIR"] = workdir
        if since:
            env["TBSCALE_SINCE"] = since
        env["TBSCALE_LIST_MAX"] = str(LIST_MAX)  # set here, so that no ENV of the image's sets it
        return env

    def _list_again(self, after: GuardSnapshot) -> None:
        """A place with more changed paths than the check lists (`flooded`: an honest `apt-get
        install python3` writes some 1,500 files into the standard library) is listed again, in
        full up to FULL_LIST_MAX a place, after the restart: what the full listing finds replaces
        the cut one in `after`, so each path in it is judged as any other (and a flood of more
        than that stays `listing_flooded`)."""
        t = time.monotonic()
        env = {**self._env(self.box, self._reference()), "TBSCALE_LIST_MAX": str(FULL_LIST_MAX)}
        res = self._exec(self.box, "the full listing of a flooded place", CHANGES, 300, env=env, to_the_end=True,
                         output_limit=FULL_LIST_MAX * 400, hostile_peers=self.exposed)
        again = parse_snapshot(res.output)
        if res.elided_bytes or res.exit_code != 0:
            again["flooded"].append("the full listing (cut for its size, or failed)")
        for key in ("changes", "flooded", "executes", "plugins", "uv_own", "pth_modules"):
            after[key] = again.get(key) or ({} if key == "changes" else [])  # type: ignore[literal-required]
        self._with_carried(after)
        self.timing["guard_full_listing"] = time.monotonic() - t

    def _workdir(self, box: Environment) -> str | None:
        """Where the verifier's command runs: its own folder, the task's workdir, or else the folder
        the baseline's exec started in (the image's WORKDIR, which most tasks name only there)."""
        return self.verifier.cwd or getattr(box, "workdir", None) or (self.before or {}).get("workdir")

    def _reference(self) -> str | None:
        """The clock the current environment's changes are found against: the baseline's, or the
        fork's own as it started when the attempt went on in one."""
        return self.since or (self.before or {}).get("now")

    def _with_carried(self, after: GuardSnapshot) -> GuardSnapshot:
        if after.get("changes") is not None and self.carried:
            after["changes"] = {**self.carried, **after["changes"]}
        for key, marks in self.carried_marks.items():
            after[key] = [*marks, *after.get(key, [])]  # type: ignore[literal-required]
        return after

    def _processes(self, target: Environment) -> list[ProcessInfo]:
        res = self._exec(target, "the process listing", PROCESSES, 60, output_limit=500_000,
                         hostile_peers=self.exposed)
        return parse_processes(res.output)

    def _sidecars(self) -> dict[str, Environment]:
        return {name: self.box.service(name) for name in self.box.services}

    # ---- before the agent phase ------------------------------------------------------------------
    def baseline(self, setup: str = "") -> None:
        """`setup`: a root command run first in the same exec (the log folders of an environment
        just started: one round trip instead of two); what it printed when it failed is in
        `setup_failed`. Given only where no process of the agent's has run yet."""
        t = time.monotonic()
        self.before = self._snapshot(processes=True, setup=setup)  # the main container's processes too
        self.project_before = self._read_files(self.before, "project", None, project_settings)
        self.npm_before = self._read_files(self.before, "npm", NPM_READ, npm_settings)
        self.tools_before = {t.key: self._read_files(self.before, t.key, t.read, t.parse) for t in TOOLS
                             if self.tools.get(t.key) and t.parse and t.read_at_baseline}
        self.timing["guard_digest"] = time.monotonic() - t
        t = time.monotonic()
        self.before["sidecar_processes"] = {n: self._processes(c) for n, c in self._sidecars().items()}
        self.timing["guard_processes"] = time.monotonic() - t
        if self.outside or (self.before.get("no_find") and self.can_list_outside):
            t = time.monotonic()
            self.outside_base = self.box.changes()
            self.timing["guard_outside"] = time.monotonic() - t
        self.unlisted = bool(self.before.get("no_find")) and self.outside_base is None

    def processes_of(self, box: Environment) -> ProcessBaseline:
        """The process part of a baseline, of another environment: a fork the attempt may go on in
        (runner/forks.py), listed as it started, with its clock then (`now`, the reference of its
        own changes). Its processes are the task's (entrypoint, services), none of them the
        agent's: a fork carries over no process of its parent's."""
        res = box.exec(CLOCK + PROCESSES, 60, user="0", output_limit=500_000)
        started: ProcessBaseline = {"processes": parse_processes(res.output), "now": parse_snapshot(res.output)["now"],
                                    "sidecar_processes": {n: self._processes(box.service(n)) for n in box.services}}
        return started

    def carry_changes(self, box: Environment) -> None:
        """Before the attempt leaves `box` for a fork of it: the changes found there (against its
        reference) are kept, since in the fork every file the commit carried looks changed at the
        commit's time, which precedes the fork's own reference."""
        since = self._reference()
        if not since:
            return
        # The agent's processes still run in `box` (nothing stops them before the attempt leaves it).
        res = self._exec(box, "the listing of changed files before a fork", CHANGES, 120, env=self._env(box, since),
                         to_the_end=True, output_limit=400_000, hostile_peers=True)
        found = parse_snapshot(res.output)
        if res.elided_bytes:
            found["flooded"].append("the listing before a fork (cut for its size)")
        self.carried.update(found["changes"])
        if self.outside_base is not None:
            self.outside_carried.update(self._outside_new(box))
        for key in ("flooded", "executes", "plugins", "uv_own"):
            self.carried_marks[key] = [*self.carried_marks.get(key, []), *found.get(key, [])]

    def go_on_in(self, box: Environment, started: ProcessBaseline) -> None:
        """The attempt goes on in `box`, a fork that started as `started` (`processes_of`)."""
        self.box = box
        if self.before is not None:
            self.before.update({k: v for k, v in started.items() if k != "now"})
        if started.get("now"):
            self.since = started["now"]
        if self.outside_base is not None:
            # The fork's own listing starts empty: its image is the snapshot, and nothing but the
            # task's own start (entrypoint, healthcheck) has run in it, which writes none of the
            # places the check looks at. Not listing it at each fork's start saves a listing a fork
            # (0.5 s here; a lookahead turn starts N forks and keeps one).
            self.outside_base = {}

    # ---- after it ---------------------------------------------------------------------------------
    def seal(self, actions: list[tuple[int, str]], restart_hook=None) -> tuple[list[Tampering], SweepRecord]:
        """Stop the agent's processes (unless sweep is off), then compare with the baseline:
        (tampering entries, record of the sweep)."""
        record: SweepRecord = {"method": "restart" if self.sweep else "none"}
        entries: list[Tampering] = []
        t = time.monotonic()
        self.exposed = True
        alive = self.box.running()
        after: GuardSnapshot | None = None
        if alive and not self.sweep:  # nothing happens in between: one exec lists and checks
            after = self._with_carried(self._snapshot(since=self._reference(), processes=True, probe=True, bytecode=True))
        procs = (after["processes"] if after is not None else self._processes(self.box)) if alive else []
        base = (self.before or {}).get("processes", [])
        left = new_processes(base, procs, keep_children=False)
        record["agent_processes"] = [_agent_process(p) for p in left[:50]]
        record["agent_processes_count"] = len(left)
        if not alive:
            entries.append(entry("init_killed", "the container's init was gone after the agent phase (its processes "
                                 "were killed from inside); the container was started again"))
        if self.sweep or not alive:
            self.box.restart()  # a backend without the `restart` capability raises SandboxError
            self.exposed = False  # a new init: no process of the agent's survived
            if restart_hook is not None:
                restart_hook()
        if self.sweep:
            killed: dict[str, list[AgentProcessInfo]] = {}
            for name, side in self._sidecars().items():
                now = self._processes(side)
                fresh = new_processes(self.before.get("sidecar_processes", {}).get(name, []) if self.before else [], now,
                                      keep_children=True)
                if fresh:
                    args = " ".join(f"{p['pid']}:{p['start']}" for p in fresh)
                    self._exec(side, f"the sweep of sidecar {name}", f"set -- {args}\n{KILL}", 60, hostile_peers=True)
                    killed[name] = [_agent_process(p) for p in fresh[:50]]
            if killed:
                record["sidecar_processes_killed"] = killed
        self.timing["guard_sweep"] = time.monotonic() - t
        t = time.monotonic()
        if after is None:
            after = self._with_carried(self._snapshot(since=self._reference(), processes=True, probe=True, bytecode=True))
        before = self._unused_envs(after)
        if after.get("bytecode_removed"):
            record["bytecode_removed"] = after["bytecode_removed"]
        if after.get("node_modules_removed"):
            record["node_modules_removed"] = after["node_modules_removed"]
        if after.get("uv_removed"):
            record["uv_removed"] = after["uv_removed"]
        if after.get("build_sources_touched"):
            record["build_sources_touched"] = after["build_sources_touched"]
        if after.get("flooded"):
            self._list_again(after)
        folder = after["artifacts_folder"]
        self.artifacts_folder = folder if folder in ("empty", "absent") and self._idle(after["processes"]) else None
        outside = self._from_outside(after, record) if self.outside_base is not None else None
        if self.unlisted:
            record["changes_listed"] = "nowhere"
        # A check cut short (`stalled`) is still compared: only what it printed counts, and what is
        # missing from it is no finding.
        entries += tampering_entries(before, after, self.verifier.tests_mount, actions)
        if self.project:
            was, now = (self.before or {}).get("project") or {}, after.get("project") or {}
            read = self._read_files(after, "project", None, project_settings, {p for p, d in now.items() if d != was.get(p)})
            entries += project_changed(was, now, self.project_before, read, actions)
        if self.npm:
            was, now = (self.before or {}).get("npm") or {}, after.get("npm") or {}
            read = self._read_files(after, "npm", NPM_READ, npm_settings, {p for p, d in now.items() if d != was.get(p)})
            entries += npm_changed(was, now, self.npm_before, read, self.npm_scripts, actions)
            entries += node_library_changed(after.get("changes") or {}, after.get("node_roots", []), actions)
        for tool in (t for t in TOOLS if self.tools.get(t.key)):
            was, now = (self.before or {}).get(tool.key) or {}, after.get(tool.key) or {}  # type: ignore[attr-defined]
            read = self._read_files(after, tool.key, tool.read, tool.parse,
                                    {p for p, d in now.items() if d != was.get(p)}) if tool.parse else {}
            run = ToolRun(self.tools[tool.key], self._workdir(self.box) or after.get("workdir"))
            entries += tool.changed(was, now, self.tools_before.get(tool.key, {}), read, after, actions, run)
        entries += set_forward(after, actions)
        entries += self._venv_homes(before, after, actions)
        if outside:
            # a virtualenv's interpreter made again as a link to one of the baseline's is no program
            # written; what the check inside digested is to be believed unless its own programs
            # were written, which this reports
            seen = {e["tool"] for e in entries if e.get("tool")} | venv_interpreters(
                (before or {}).get("tools") or {}, after.get("tools") or {})
            programs = CHECK_PROGRAMS | TEST_TOOLS | set(self.names)
            entries += programs_changed(outside, (self.before or {}).get("tools") or {}, programs, seen, actions)
            entries += seen_outside(outside, self.before, after, entries, actions)
        if self.stalled:
            entries.append(entry("check_stalled", "a command of the guard's did not end by its timeout plus grace "
                                 "while the agent's processes could run beside it (something stopped it): "
                                 + "; ".join(self.stalled[:10])))
            self.stalled = []
        if self.incomplete:
            entries.append(entry("check_incomplete", "a check of the guard's ended before its last line (something in "
                                 "the environment ended it): " + "; ".join(self.incomplete[:10])))
            self.incomplete = []
        forged = [*(self.before or {}).get("conflicts", []), *after.get("conflicts", [])]
        if forged:
            entries.append(entry("verifier_output_forged", "a line of the guard's check was given twice with different "
                                 "values (something beside the check wrote into its output): " + ", ".join(forged[:10])))
        entries += self._describe(entries)
        entries, updates = settle(entries, self.box, (self.before or {}).get("tools") or {}, after.get("tools") or {},
                                  after.get("changes"), home=after.get("home") or "/root")
        if updates:
            record["package_updates"] = updates
        entries, debs = settle_debian(entries, self.box, lambda: {**changed_groups(before, after, self.verifier.tests_mount),
                                                                  **tool_groups(before, after)},
                                      after.get("changes") or {})
        if debs:
            record["debian_packages"] = debs
        self.timing["guard_check"] = time.monotonic() - t
        return entries, record

    def _read_files(self, snap: GuardSnapshot, key: str, names: tuple[str, ...] | Callable[[str], bool] | None, parse,
                    only: set[str] | None = None) -> dict[str, dict[str, Any] | None]:
        """`parse` of the files `snap[key]` found (those named `names`, or that it takes when a
        function; all when None; those in `only`), read from outside the environment, where nothing
        running in it can change what is read: the workdir's Python project, npm's package.json and
        lockfiles, go.mod."""
        out: dict[str, dict[str, Any] | None] = {}
        for path, digest in (snap.get(key) or {}).items():  # type: ignore[attr-defined]
            if (names is None or (names(path) if callable(names) else PurePosixPath(path).name in names)) \
                    and digest not in ("-", "other") \
                    and (only is None or path in only):
                data = self.box.read_file(path)
                out[path] = None if data is None else parse(path, data)
        return out

    def _venv_homes(self, before: GuardSnapshot | None, after: GuardSnapshot, actions) -> list[Tampering]:
        """A changed pyvenv.cfg of a virtualenv whose Python the verifier runs (one it activates, a
        `.venv` its uv commands use), read from outside: a `home` other than the folder of an
        interpreter the baseline digested points that Python at a standard library elsewhere (one
        the agent copied with a hook in it passed unseen before 2026-12-05)."""
        venvs = self._activated(after)
        cfgs = [p for p, k in (after.get("changes") or {}).items()
                if k != 2 and p.endswith("/pyvenv.cfg") and p.removesuffix("/pyvenv.cfg") in venvs]
        homes, found = interpreter_homes((before or {}).get("tools") or {}), []
        for path in cfgs:
            data = self.box.read_file(path)
            found += [f"{path} (home = {h})" for h in sorted(venv_homes(data or b"")) if h not in homes]
        if not found:
            return []
        return [entry("python_library_changed", "a virtualenv the verifier's Python runs in now takes its standard "
                      "library from a home no interpreter of the baseline's has: " + ", ".join(found[:5]),
                      paths=[f.split(" (")[0] for f in found][:20],
                      by_command=attribute_command(actions, "pyvenv.cfg", [found[0].split(" (")[0]]))]

    def _outside_new(self, box: Environment) -> dict[str, int]:
        """What the backend lists as changed in `box` since the outside reference (a path gone from
        the listing was changed back or removed: 2)."""
        base, now = self.outside_base or {}, box.changes()
        new = {p: k for p, k in now.items() if base.get(p) != k}
        new.update({p: 2 for p in base if p not in now})
        return new

    def _from_outside(self, after: GuardSnapshot, record: SweepRecord) -> dict[str, int]:
        """The outside listing, after the sweep: its paths that the check inside looks at join
        `after`'s changes (with the `.pth` files and entry points read from outside for their
        marks), the compiled modules the agent phase wrote that the check inside did not remove
        are removed, and all of it is returned (for the programs written: findings.programs_changed)."""
        t = time.monotonic()
        new = {**self.outside_carried, **self._outside_new(self.box)}
        tests, workdir, venvs = self.verifier.tests_mount, self._workdir(self.box), self._activated(after)
        modules = set(after.get("pth_modules") or ())
        listed = {p: k for p, k in new.items() if checked_path(p, tests, workdir, venvs, modules)}
        if after.get("changes") is not None:
            after["changes"] = {**listed, **after["changes"]}
        # What the check inside said of the start-up files it digested is taken again from outside
        # (its sha256sum may be the agent's): uv's own module, setuptools' files as the image had them.
        after["uv_own"] = [p for p in after.get("uv_own", []) if p not in listed]
        copies = after["startup_copies"] = {p: d for p, d in after.get("startup_copies", {}).items() if p not in listed}
        for path, kind in listed.items():
            copy = path.endswith(("/_virtualenv.py", "/distutils-precedence.pth")) or "/_distutils_hack/" in path
            mark = ("executes", _EXECUTES) if path.endswith(".pth") else (
                ("plugins", _PLUGIN) if path.endswith("/entry_points.txt") else None)
            if mark and path in after.get(mark[0], []):
                mark = None
            data = self.box.read_file(path) if kind != 2 and (copy or mark) else None  # each file read once
            if data is None:
                continue
            if path.endswith("/_virtualenv.py"):
                after["uv_own"] += [path] if hashlib.sha256(data).hexdigest() in UV_VIRTUALENV_MODULES else []
            elif copy:
                copies[path] = hashlib.sha256(data).hexdigest()
            if mark and not (path.endswith("/_virtualenv.pth")
                             and uv_own_pth(path, data, self.box.read_file(path.removesuffix(".pth") + ".py"))):
                if mark[1].search(data):
                    after[mark[0]] = [*after.get(mark[0], []), path]  # type: ignore[literal-required]
        compiled = sorted(p for p, k in new.items() if k != 2 and compiled_module(p, venvs))
        for i in range(0, len(compiled), 400):  # a command line of a few tens of kB at most
            self._exec(self.box, "the removal of compiled modules",
                       "rm -f -- " + " ".join(map(shlex.quote, compiled[i:i + 400])), 120, hostile_peers=self.exposed)
        if compiled:
            record["bytecode_removed"] = max(len(compiled), after.get("bytecode_removed", 0))
        record["changes_listed"] = "inside and outside" if self.outside else "outside"
        self.timing["guard_outside"] = time.monotonic() - t
        return new

    def _unused_envs(self, after: GuardSnapshot) -> GuardSnapshot | None:
        """The baseline to compare `after` with: the programs looked for in a `.venv` the check did not
        find in use (no `Y` line: one the verifier's uv takes only for a project's, with no project
        beside it) are left out of both."""
        unused = tuple(e.lstrip("?") + "/bin/" for e in self.envs if e.lstrip("?") not in after.get("project_envs", []))
        if not unused or self.before is None:
            return self.before
        after["tools"] = {k: v for k, v in (after.get("tools") or {}).items() if not k.startswith(unused)}
        return {**self.before, "tools": {k: v for k, v in (self.before.get("tools") or {}).items()
                                          if not k.startswith(unused)}}

    def _activated(self, after: GuardSnapshot | None = None) -> tuple[str, ...]:
        """The virtualenvs the verifier activates (a `bin/activate` it sources), and the `.venv`
        folders its uv commands use that the check found (`after`'s `Y` lines), as absolute paths:
        the check inside lists their Python folders too (guard_shell.CHANGES)."""
        home, workdir = (self.before or {}).get("home") or "/root", self._workdir(self.box) or "/"
        roots = [s.removesuffix("/bin/activate") for s in self.sourced if s.endswith("/bin/activate")]
        roots += (after or {}).get("project_envs", [])
        return tuple(home.rstrip("/") + r[1:] if r.startswith("~/") else r if r.startswith("/")
                     else workdir.rstrip("/") + "/" + r for r in roots)

    def _idle(self, processes: list[ProcessInfo]) -> bool:
        """Nothing runs that could write a file before the verifier's run: no sidecars, and no
        process but the ones the environment runs of its own (its init and keep-alive, each with
        the command line it started them with: Environment.idle_processes)."""
        own = self.box.idle_processes
        if self.box.services or not processes or own is None:
            return False
        return own.only(processes)

    def _describe(self, entries: list[Tampering]) -> list[Tampering]:
        """What replaced a tool: its first line when it is a script, and the Debian package that
        owns it with whether the file is the package's own (adds to the entries in place)."""
        for e in entries:
            after = e.get("after") or {}
            real = after.get("real") if isinstance(after, dict) else None
            if e["kind"] != "toolchain_replaced" or not real:
                continue
            q, rel = shlex.quote(real), shlex.quote("  " + real.lstrip("/"))
            res = self.box.exec(
                f"head -c 120 -- {q} | head -n 1 | tr -cd '[:print:]'; echo; "
                f"pkg=$(dpkg -S -- {q} 2>/dev/null | head -n 1 | cut -d: -f1); echo \"$pkg\"; "
                f"if [ -n \"$pkg\" ]; then cat /var/lib/dpkg/info/\"$pkg\".md5sums /var/lib/dpkg/info/\"$pkg\":*.md5sums "
                f"2>/dev/null | grep -F -- {rel} | cut -d' ' -f1 | head -n 1; else echo; fi; md5sum -- {q} | cut -d' ' -f1",
                60, user="0", output_limit=4000, hostile_peers=self.exposed)
            lines = (res.output.splitlines() + ["", "", "", ""])[:4]
            after["first_line"] = lines[0] if lines[0].startswith("#!") else None
            if lines[1]:
                after["package"] = lines[1]
                after["package_file_intact"] = bool(lines[2]) and lines[2] == lines[3]
        return []


def _agent_process(p: ProcessInfo) -> AgentProcessInfo:
    return {"pid": p["pid"], "uid": p["uid"], "cmd": p["cmd"]}
