"""What keeps the agent phase out of the verifier's verdict in shared mode (docs/tasks.md,
"Verification integrity").

Before the agent phase `VerifierGuard.baseline` records:
* the verifier's toolchain: every program the test script runs and every interpreter its tests'
  shebangs name, plus bash, sh, python3, pytest, uv, ..., as resolved on the container's PATH:
  resolved path, real path, sha256, size, owner and mode;
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
Every command it runs while the agent's processes may be alive (before the restart; throughout
with the sweep off) is an exec with `hostile_peers` (Environment.exec): read to the end of its
output, its exit code from the backend; and a line of its output given twice with different
values is `verifier_output_forged`.
"""

from __future__ import annotations

import re
import shlex
import time
from pathlib import Path, PurePosixPath
from typing import Any

from tbscale.environments import Environment
from tbscale.environments.base import first_lines
from tbscale.runner.findings import VERIFIER_LOGS, entry, tampering_entries
from tbscale.shell.parse import invocation, split_segments
from tbscale.types.guard import (AgentProcessInfo, GuardSnapshot, MountState, ProcessBaseline, ProcessInfo,
                                 SweepRecord, Tampering, ToolState)

DEFAULT_TOOLS = ("bash", "sh", "env", "python3", "python", "pytest", "uv", "uvx", "pip", "pip3", "timeout")
MAX_TOOLS = 48
_SHELL_WORDS = frozenset("""! [ [[ ]] { } alias bg break builtin case cd command continue declare do done echo elif else
    esac eval exec exit export false fc fg fi for function getopts hash if in jobs kill let local printf pwd read
    readonly return select set shift source test then time trap true type typeset ulimit umask unalias unset until
    wait while . :""".split())

_CLEAR_VERIFIER_LOGS = (f"[ -d {VERIFIER_LOGS} ] && [ ! -L {VERIFIER_LOGS} ] && "
                        f"find {VERIFIER_LOGS} -mindepth 1 -delete 2>/dev/null\n")

# The container's clock, the reference of the changes `_CHANGES` lists later: to the nanosecond
# where date and find have it (GNU). Busybox's date has no %N (it prints it as it is) and its find
# no -newerct; the clock is then the next whole second, waited for, so that nothing changed before
# it shares its second, and a clock without a fraction tells `_CHANGES` (which runs it in a later
# exec, the agent's phase between) to read each path's status change second from stat: the choice
# is probed once, here, before the agent could touch `find`.
_CLOCK = r'''
_now=$(date +%s.%N 2>/dev/null)
case "$_now" in *[!0-9.]*|''|.*|*.) _now= ;; esac
if [ -z "$_now" ] || ! find / -maxdepth 0 -newerct @0 >/dev/null 2>&1; then
  _s=$(date +%s); _now=$_s
  while [ "$_now" = "$_s" ]; do sleep 0.05 2>/dev/null || sleep 1; _now=$(date +%s); done
fi
printf 'N\t%s\n' "$_now"
'''
# The paths whose status changed after $TBSCALE_SINCE, where they matter to the verifier.
_CHANGES = r'''
if [ -n "${TBSCALE_SINCE:-}" ]; then
  case "$TBSCALE_SINCE" in
    *.*) _newer() { find "$@" -newerct "@$TBSCALE_SINCE" 2>/dev/null; } ;;
    # A whole second: _CLOCK found no -newerct or no %N (busybox); each candidate's status
    # change second, from stat.
    *) _newer() { find "$@" -exec stat -c '%Z %n' {} + 2>/dev/null |
                  awk -v s="$TBSCALE_SINCE" '$1 >= s { sub(/^[0-9]+ /, ""); print }'; } ;;
  esac
  { _newer / -xdev -maxdepth 1
    _newer /logs "$TBSCALE_TESTS" /solution -xdev
    _newer /etc/ld.so.preload
    [ -n "${TBSCALE_WORKDIR:-}" ] && _newer "$TBSCALE_WORKDIR" -xdev -maxdepth 4 \
      \( -name pytest.py -o -path '*/pytest/__init__.py' -o -path '*/_pytest/__init__.py' -o -name conftest.py \
      -o -name sitecustomize.py -o -name usercustomize.py \)
    for d in /usr/lib/python3* /usr/local/lib/python3* /root/.local/lib/python3*; do [ -d "$d" ] || continue
      _newer "$d" -xdev \( -name sitecustomize.py -o -name usercustomize.py -o -name '*.pth' \
        -o -path '*/_pytest/*' -o -path '*/pytest/*' -o -path '*/pluggy/*' -o -name pytest.py \); done
  } | head -n 2000 | sed 's/^/C\t/'
fi
'''
# Few programs per line: a program run costs far more in a busy container than a builtin. Each
# name is resolved by a builtin; the paths found are then resolved by one readlink (one a path
# where readlink takes a single operand, as busybox's does), hashed by one sha256sum and described
# by one stat (`R`, `H` and `O` lines, joined to the name's `P` line by path in parse_snapshot):
# with three programs a tool, this part of the exec cost about twice a bare exec.
_SNAPSHOT = r'''
_paths=; _t=$(printf '\t'); _n=0
for name in "$@"; do
  p=$(command -v -- "$name" 2>/dev/null) || { printf 'T\t%s\t-\n' "$name"; continue; }
  case "$p" in
    /*) printf 'P\t%s\t%s\n' "$name" "$p"; _paths="$_paths$p
"; _n=$((_n + 1)) ;;
    *) printf 'T\t%s\tbuiltin\n' "$name" ;;
  esac
done
if [ "$_n" -gt 0 ]; then
  _ifs=$IFS; IFS='
'; set -f
  _reals=$(readlink -f -- $_paths 2>/dev/null)
  if [ -z "$_reals" ] || [ "$(printf '%s\n' "$_reals" | wc -l)" != "$_n" ]; then
    _reals=$(for p in $_paths; do readlink -f -- "$p" 2>/dev/null || printf '%s\n' "$p"; done)
  fi
  set -- $_reals; _files=
  for p in $_paths; do
    printf 'R\t%s\t%s\n' "$p" "$1"; [ -f "$1" ] && _files="$_files$1
"; shift
  done
  if [ -n "$_files" ]; then
    sha256sum -- $_files 2>/dev/null | while IFS= read -r _h; do printf 'H\t%s\t%s\n' "${_h%% *}" "${_h#*  }"; done
    stat -c "O$_t%u:%g:%a:%s$_t%n" -- $_files 2>/dev/null
  fi
  set +f; IFS=$_ifs
fi
'''
# The verifier's mount points: type, owner and mode, and a digest of the files under a folder.
_MOUNTS = r'''
for m in /logs /logs/verifier "$TBSCALE_TESTS"; do
  if [ -L "$m" ]; then printf 'M\t%s\tlink\t%s\n' "$m" "$(readlink -- "$m")"
  elif [ -d "$m" ]; then
    d=$(cd "$m" && find . -xdev -type f ! -path '*/__pycache__/*' ! -path '*/.pytest_cache/*' -exec sha256sum {} + \
        2>/dev/null | LC_ALL=C sort | sha256sum)
    printf 'M\t%s\tdir\t%s\t%.16s\n' "$m" "$(stat -c '%u:%g:%a' -- "$m")" "$d"
  elif [ -e "$m" ]; then printf 'M\t%s\tfile\t%s\n' "$m" "$(stat -c '%u:%g:%a' -- "$m")"
  else printf 'M\t%s\tabsent\n' "$m"; fi
done
'''
# One line per process: pid, start time (clock ticks after boot), uid, parent pid, command line
# (its newlines and tabs made spaces: a command line cannot forge a line of this output, which
# may share an exec with the snapshot's).
# Shell builtins read /proc, so that a process costs one program run (tr), not four. The exec's
# own processes (this shell and its ancestors up to the engine's: `timeout` and the exec's
# wrapper) are left out.
_PROCESSES = r'''
own=" $$ "; a=$PPID
while [ "${a:-0}" -gt 1 ] 2>/dev/null; do
  own="$own$a "; read -r s 2>/dev/null < "/proc/$a/stat" || break
  rest=${s##*) }; set -- $rest; a=$2
done
for d in /proc/[0-9]*; do
  p=${d#/proc/}; case "$own" in *" $p "*) continue;; esac
  read -r s 2>/dev/null < "$d/stat" || continue
  rest=${s##*) }; set -- $rest
  u=; while read -r k v _; do [ "$k" = Uid: ] && { u=$v; break; }; done 2>/dev/null < "$d/status"
  c=$(tr '\0\n\t\r' '    ' 2>/dev/null < "$d/cmdline")
  printf '%s\t%s\t%s\t%s\t%.200s\n' "$p" "${20}" "$u" "$2" "$c"
done
'''
# After the sweep: is the artifacts convention folder a plain folder with nothing in it (`empty`),
# absent (`absent`), or anything else (`other`)? With the process list of the same exec, it tells
# whether copying it out can be left out (runner/artifacts.py).
_ARTIFACTS_PROBE = r'''
a=other; f=/logs/artifacts
if [ ! -e "$f" ] && [ ! -L "$f" ]; then a=absent
elif [ -d "$f" ] && [ ! -L "$f" ] && [ -z "$(find "$f" -mindepth 1 -maxdepth 1 2>&1 | head -n 1)" ]; then a=empty; fi
printf 'A\t%s\n' "$a"
'''
# A root command run first in the baseline's exec (`VerifierGuard.baseline`'s `setup`); when it
# fails, one `S` line with what it printed, its lines joined (the caller keeps the end). The
# standard folders follow the PATH it is given: the exec carries the verifier's env, whose PATH
# may leave them out.
_SETUP = r'''_setup=$(PATH="${PATH:+$PATH:}/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"; { %s
} 2>&1) || printf 'S\t%%s\n' "$(printf %%s "$_setup" | tr '\n\t' '  ')"
'''
_KILL = r'''
for pair in "$@"; do
  p=${pair%:*}; want=${pair#*:}
  s=$(cat "/proc/$p/stat" 2>/dev/null) || continue
  rest=${s##*) }; set -- $rest
  [ "${20}" = "$want" ] && kill -9 "$p" 2>/dev/null && echo "$p"
done
'''


def tool_names(verifier, tests_dirs: list[Path] | None = None) -> list[str]:
    """The programs the verifier runs: the command's program, the programs of its test script(s)
    and the interpreters their shebangs name, and DEFAULT_TOOLS."""
    names: list[str] = list(DEFAULT_TOOLS)

    def add(word: str) -> None:
        if word and word not in _SHELL_WORDS and re.fullmatch(r"[A-Za-z0-9_./+-]+", word) and word not in names:
            names.append(word)

    def from_text(text: str) -> None:
        for segment in split_segments(text):
            inv = invocation(segment)
            add(inv.raw_program)
            if inv.program in ("python", "python3") and inv.args[:1] == ["-m"] and len(inv.args) > 1:
                add(inv.args[1])  # python -m pytest: the module's console script too
            if inv.raw_program in ("uvx",) or (inv.raw_program == "uv" and inv.args[:1] == ["run"]):
                add(next((a for a in inv.args[1:] if not a.startswith("-")), ""))

    from_text(verifier.command or "")
    scripts: list[Path] = []
    for folder in tests_dirs if tests_dirs is not None else verifier.tests_dirs:
        folder = Path(folder)
        if folder.is_dir():
            scripts += [p for p in sorted(folder.rglob("*")) if p.is_file() and p.stat().st_size < 2_000_000]
    for path in scripts:
        try:
            head = path.read_bytes()[:4096].decode("utf-8", errors="replace")
        except OSError:
            continue
        if head.startswith("#!"):
            words = head[2:].splitlines()[0].split()
            for w in words[:2]:
                if not w.startswith("-"):
                    add(w.rsplit("/", 1)[-1] if w.startswith("/") and PurePosixPath(w).name in ("env",) else w)
        if path.suffix in (".sh", "") or head.startswith("#!") and "sh" in head.splitlines()[0]:
            try:
                from_text(path.read_text(encoding="utf-8", errors="replace"))
            except OSError:
                pass
    return names[:MAX_TOOLS]


def _value_line(line: str) -> str | None:
    """The key of a snapshot line that carries a value the check reads: "N" (the clock), "T tool",
    "M mount", "R path", "H file" and "O file" (a tool's real path, digest and status)."""
    parts = line.split("\t", 2)
    if parts[0] == "N" and len(parts) >= 2:
        return "N"
    if parts[0] in ("T", "M", "P") and len(parts) >= 2:
        return f"T {parts[1]}" if parts[0] == "P" else f"{parts[0]} {parts[1]}"
    if parts[0] in ("H", "O") and len(parts) == 3:
        return f"{parts[0]} {parts[2]}"
    if parts[0] == "R" and len(parts) == 3:
        return f"R {parts[1]}"
    return None


def parse_snapshot(output: str) -> GuardSnapshot:
    """A snapshot from the guard's exec output. A clock, tool or mount line given twice with
    different values is listed in `conflicts`: the exec printed each once, so something beside
    it wrote into its output (a kept agent process can; Container.exec's `hostile_peers`)."""
    tools: dict[str, ToolState | None] = {}
    mounts: dict[str, MountState] = {}
    changes: dict[str, int] = {}
    now = None
    _, conflicts = first_lines(output, _value_line)
    lines = [line.split("\t") for line in output.splitlines()]
    digests = {parts[2]: parts[1] for parts in lines if parts[0] == "H" and len(parts) == 3}
    statuses = {parts[2]: parts[1] for parts in lines if parts[0] == "O" and len(parts) == 3}
    reals = {parts[1]: parts[2] for parts in lines if parts[0] == "R" and len(parts) == 3}
    for parts in lines:
        if parts[0] == "P" and len(parts) == 3:  # a tool found on the PATH: the T line it stands for
            path, real = parts[2], reals.get(parts[2], parts[2])
            parts = ["T", parts[1], path, real, *([digests.get(real, ""), statuses.get(real, "")] if real in statuses
                                                  else ["not-a-file", "-"])]
        if parts[0] == "N" and len(parts) == 2:
            now = parts[1]
        elif parts[0] == "C" and len(parts) == 2:
            changes[parts[1]] = 0
        elif parts[0] == "T" and len(parts) >= 3:
            if parts[2] in ("-", "builtin"):
                tools[parts[1]] = None if parts[2] == "-" else {"builtin": True}
            elif len(parts) >= 6:
                owner = parts[5].split(":")
                tools[parts[1]] = {"path": parts[2], "real": parts[3], "sha256": parts[4],
                                   "owner": ":".join(owner[:2]) if len(owner) >= 2 else None,
                                   "mode": owner[2] if len(owner) >= 3 else None,
                                   "size": int(owner[3]) if len(owner) >= 4 and owner[3].isdigit() else None}
        elif parts[0] == "M" and len(parts) >= 3:
            mount: MountState = {"type": parts[2]}
            if len(parts) >= 4:
                mount["stat" if parts[2] != "link" else "target"] = parts[3]  # type: ignore[literal-required]
            if len(parts) >= 5:
                mount["digest"] = parts[4]
            mounts[parts[1]] = mount
    snap: GuardSnapshot = {"tools": tools, "mounts": mounts, "now": now, "changes": changes}
    if conflicts:
        snap["conflicts"] = conflicts
    return snap


def parse_processes(output: str) -> list[ProcessInfo]:
    out: list[ProcessInfo] = []
    for line in output.splitlines():
        parts = line.split("\t")
        if len(parts) >= 5 and parts[0].isdigit():
            out.append({"pid": int(parts[0]), "start": parts[1], "uid": parts[2], "ppid": int(parts[3] or 0),
                        "cmd": parts[4].strip()})
    return out


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

    def __init__(self, box: Environment, verifier, *, sweep: bool = True, tests_dirs: list[Path] | None = None):
        self.box, self.verifier, self.sweep = box, verifier, sweep
        self.names = tool_names(verifier, tests_dirs)
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
        # Whether processes the agent left may be running in `box` as the guard's commands run
        # (Environment.exec's `hostile_peers`): with the sweep off, always (an earlier step's or
        # attempt's may be, even at a baseline); with it on, from the end of an agent phase to
        # the restart.
        self.exposed = not sweep
        # The guard's commands that did not end by their timeout plus the backend's grace
        # (ExecResult.abandoned): while the agent's processes may run, one of them can stop a
        # command (SIGSTOP). Reported by the next seal as `check_stalled`.
        self.stalled: list[str] = []
        self.setup_failed: str | None = None  # `baseline`'s setup: what it printed when it failed

    def _exec(self, target: Environment, what: str, command: str, timeout_sec: float, **kw: Any):
        res = target.exec(command, timeout_sec, user="0", **kw)
        if res.abandoned:
            self.stalled.append(f"{what} (after {res.duration_sec:.0f} s)")
        return res

    # ---- probes ----------------------------------------------------------------------------------
    def _snapshot(self, since: str | None = None, *, processes: bool = False, probe: bool = False,
                  setup: str = "") -> GuardSnapshot:
        """Digests and mount points; with `since` (the container's clock at the baseline), also
        the paths whose status changed after it, where they matter to the verifier. A status
        change time cannot be set back from inside a container (it needs the clock), so what the
        agent phase changed there cannot hide. With `processes`, the same exec also lists the
        processes running (`processes`), as `_processes` does: one round trip instead of two."""
        env = self._env(self.box, since)
        cmd = "set -- " + " ".join(shlex.quote(n) for n in self.names) + "\n" + _SNAPSHOT + _CLOCK + _MOUNTS + _CHANGES
        if not since:
            # What an earlier verification (a previous step's) left in /logs/verifier is not the
            # agent's: clear it before this agent phase, so that anything found there later is.
            cmd = _CLEAR_VERIFIER_LOGS + cmd
        if setup:
            cmd = _SETUP % setup + cmd
        if processes:
            cmd += _PROCESSES
        if probe:
            cmd += _ARTIFACTS_PROBE
        res = self._exec(self.box, "the check of the verifier's toolchain and paths", cmd, 120, env=env,
                         output_limit=900_000 if processes else 400_000, hostile_peers=self.exposed)
        snap = parse_snapshot(res.output)
        if not since:
            snap["changes"] = None
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
        if since:
            env["TBSCALE_SINCE"] = since
            workdir = getattr(box, "workdir", None) or self.verifier.cwd
            if workdir:
                env["TBSCALE_WORKDIR"] = workdir
        return env

    def _reference(self) -> str | None:
        """The clock the current environment's changes are found against: the baseline's, or the
        fork's own as it started when the attempt went on in one."""
        return self.since or (self.before or {}).get("now")

    def _with_carried(self, after: GuardSnapshot) -> GuardSnapshot:
        if after.get("changes") is not None and self.carried:
            after["changes"] = {**self.carried, **after["changes"]}
        return after

    def _processes(self, target: Environment) -> list[ProcessInfo]:
        res = self._exec(target, "the process listing", _PROCESSES, 60, output_limit=500_000,
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
        self.timing["guard_digest"] = time.monotonic() - t
        t = time.monotonic()
        self.before["sidecar_processes"] = {n: self._processes(c) for n, c in self._sidecars().items()}
        self.timing["guard_processes"] = time.monotonic() - t

    def processes_of(self, box: Environment) -> ProcessBaseline:
        """The process part of a baseline, of another environment: a fork the attempt may go on in
        (runner/forks.py), listed as it started, with its clock then (`now`, the reference of its
        own changes). Its processes are the task's (entrypoint, services), none of them the
        agent's: a fork carries over no process of its parent's."""
        res = box.exec(_CLOCK + _PROCESSES, 60, user="0", output_limit=500_000)
        return {"processes": parse_processes(res.output), "now": parse_snapshot(res.output)["now"],
                "sidecar_processes": {n: self._processes(box.service(n)) for n in box.services}}

    def carry_changes(self, box: Environment) -> None:
        """Before the attempt leaves `box` for a fork of it: the changes found there (against its
        reference) are kept, since in the fork every file the commit carried looks changed at the
        commit's time, which precedes the fork's own reference."""
        since = self._reference()
        if not since:
            return
        # The agent's processes still run in `box` (nothing stops them before the attempt leaves it).
        res = self._exec(box, "the listing of changed files before a fork", _CHANGES, 120, env=self._env(box, since),
                         output_limit=400_000, hostile_peers=True)
        self.carried.update(parse_snapshot(res.output)["changes"])

    def go_on_in(self, box: Environment, started: ProcessBaseline) -> None:
        """The attempt goes on in `box`, a fork that started as `started` (`processes_of`)."""
        self.box = box
        if self.before is not None:
            self.before.update({k: v for k, v in started.items() if k != "now"})
        if started.get("now"):
            self.since = started["now"]

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
            after = self._with_carried(self._snapshot(since=self._reference(), processes=True, probe=True))
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
                    self._exec(side, f"the sweep of sidecar {name}", f"set -- {args}\n{_KILL}", 60, hostile_peers=True)
                    killed[name] = [_agent_process(p) for p in fresh[:50]]
            if killed:
                record["sidecar_processes_killed"] = killed
        self.timing["guard_sweep"] = time.monotonic() - t
        t = time.monotonic()
        if after is None:
            after = self._with_carried(self._snapshot(since=self._reference(), processes=True, probe=True))
        folder = after["artifacts_folder"]
        self.artifacts_folder = folder if folder in ("empty", "absent") and self._idle(after["processes"]) else None
        # A check cut short (`stalled`) is still compared: only what it printed counts, and what is
        # missing from it is no finding.
        entries += tampering_entries(self.before, after, self.verifier.tests_mount, actions)
        if self.stalled:
            entries.append(entry("check_stalled", "a command of the guard's did not end by its timeout plus grace "
                                 "while the agent's processes could run beside it (something stopped it): "
                                 + "; ".join(self.stalled[:10])))
            self.stalled = []
        forged = [*(self.before or {}).get("conflicts", []), *after.get("conflicts", [])]
        if forged:
            entries.append(entry("verifier_output_forged", "a line of the guard's check was given twice with different "
                                 "values (something beside the check wrote into its output): " + ", ".join(forged[:10])))
        entries += self._describe(entries)
        self.timing["guard_check"] = time.monotonic() - t
        return entries, record

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
