"""Running a task's test script and reading its verdict: Harbor tasks (reward files) and
Terminal-Bench legacy tasks (a parser over the test output) alike.

`run_tests` is one verification in an environment: tests copied in (shared mode; a separate
verifier's image already holds them), the command run as the verifier's user, in its folder, with
its env, under its time limit; then the verdict:

* reward files: `/logs/verifier/reward.json` (a flat object of numbers, every key kept) wins over
  `reward.txt` (one number, key `reward`); the scalar reward is the RewardSpec's primary key, or
  the only key;
* a parser: `tbscale.tasks.test_output` on the output; all tests passing is reward 1.

A verifier that could not give a verdict is an error, never a wrong answer: `verifier_timeout`
(the time limit), `tests_not_run` (the script could not be started: exit 126/127 and no reward),
`reward_missing` (no reward file, or one that is not numbers), `no_tests_parsed` (the parser found
no test results).
"""

from __future__ import annotations

import base64
import json
import math
import re
import secrets
import shlex
from dataclasses import replace
from typing import Any, NamedTuple

from tbscale.environments.base import first_lines
from tbscale.tasks.model import RewardSpec, VerifierSpec
from tbscale.tasks.test_output import parse_test_output
from tbscale.verifiers.result import PASS_THRESHOLD, VerifierResult

LOGS = "/logs/verifier"
NOT_RUN_CODES = (126, 127)
_REMOVAL_MARK = "--tbscale: removing the old tests--"
_DIGEST_MARK = "--tbscale: the digest of the tests--"

# `_own`: the exec's own shell and those above it, which a listing of the environment's processes
# leaves out (here, and the guard's, runner/guard_shell.PROCESSES)
OWN_PROCESSES = r"""
_own=" $$ "; _a=$PPID
while [ "${_a:-0}" -gt 1 ] 2>/dev/null; do
  _own="$_own$_a "; read -r _s 2>/dev/null < "/proc/$_a/stat" || break
  _r=${_s##*) }; set -- $_r; _a=$2
done
"""
# The processes of the environment as its tests are about to start: an `L PID:START` line each (the
# start time from /proc, in clock ticks since boot: a pid is used again, the pair is not). Printed at
# the end of the exec that prepares the tests.
_LIVE = OWN_PROCESSES + r"""
for _d in /proc/[0-9]*; do
  _p=${_d#/proc/}; case "$_own" in *" $_p "*) continue;; esac
  read -r _s 2>/dev/null < "$_d/stat" || continue
  _r=${_s##*) }; set -- $_r; printf 'L\t%s:%s\n' "$_p" "${20:-}"
done
"""
# First in the exec that reads the verdict: each process alive now that was not as the tests started
# (TBSCALE_LIVE, `_LIVE`'s pairs) was started by the verification and outlived it; an `O PID
# COMMAND` line each, and it is killed before anything is read, again until none is left (one may
# start others). A process the tests ran (the agent's code among them: a module they import, a
# program they start) that detached kept writing reward 1 after the tests wrote 0; on c529887 the
# verdict read was its (tests/test_verification_outlived.py).
_OUTLIVED = OWN_PROCESSES + r"""
_gone=
_outlived() {
  _k=
  for _d in /proc/[0-9]*; do
    _p=${_d#/proc/}; case "$_own" in *" $_p "*) continue;; esac
    read -r _s 2>/dev/null < "$_d/stat" || continue
    _r=${_s##*) }; set -- $_r
    case " $TBSCALE_LIVE $_gone " in *" $_p:${20:-} "*) continue;; esac
    _k="$_k $_p"; _gone="$_gone $_p:${20:-}"
    printf 'O\t%s\t%.200s\n' "$_p" "$(tr '\0\n\t\r' '    ' 2>/dev/null < "$_d/cmdline")"
  done
  [ -n "$_k" ] && kill -9 $_k 2>/dev/null
  [ -n "$_k" ]
}
if [ -n "${TBSCALE_LIVE+set}" ]; then _outlived && _outlived && _outlived; fi
"""


class RewardFileError(ValueError):
    pass


def parse_reward_file(raw: bytes, name: str) -> dict[str, float]:
    """{key: value} from reward.json (a flat object of numbers) or reward.txt (one number)."""
    text = raw.decode("utf-8", errors="replace").strip()
    if not text:
        raise RewardFileError(f"{name} is empty")
    if name.endswith(".json"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise RewardFileError(f"{name} is not JSON ({e.msg})") from None
        if isinstance(data, (int, float)) and not isinstance(data, bool):
            return {"reward": float(data)}
        if not isinstance(data, dict) or not data:
            raise RewardFileError(f"{name} must be a flat object of numbers")
        out = {}
        for key, value in data.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise RewardFileError(f"{name}: {key!r} is not a number ({value!r})")
            out[str(key)] = float(value)
        return out
    try:
        value = float(text.split()[0])
    except ValueError:
        raise RewardFileError(f"{name} is not a number ({text[:40]!r})") from None
    if not math.isfinite(value):
        raise RewardFileError(f"{name} is not a finite number")
    return {"reward": value}


def read_rewards(box, reward: RewardSpec, details: dict[str, Any] | None = None,
                 read: dict[str, bytes | None] | None = None
                 ) -> tuple[dict[str, float] | None, str | None, str | None]:
    """(rewards, file read, problem) from /logs/verifier: the first of `reward.files` present
    wins (Harbor 0.26's verifier: reward.json, else reward.txt). When both are there and their
    reward differs, `details["reward_disagreement"]` records both. `read` holds the files already
    read (None: absent or not a regular file); the others are copied out of `box`."""
    found: dict[str, bytes] = {}
    for name in reward.files:
        raw = read[name] if read is not None and name in read else box.read_file(f"{LOGS}/{name}")
        if raw is not None:
            found[name] = raw
    if not found:
        return None, None, None
    name = next(n for n in reward.files if n in found)
    try:
        rewards = parse_reward_file(found[name], name)
    except RewardFileError as e:
        return None, name, str(e)
    if details is not None and len(found) > 1:
        others = {}
        for other in found:
            if other == name:
                continue
            try:
                others[other] = reward.primary(parse_reward_file(found[other], other))
            except RewardFileError as e:
                others[other] = str(e)
        used = reward.primary(rewards)
        if any(v != used for v in others.values()):
            details["reward_disagreement"] = {name: used, **others, "used": name}
    return rewards, name, None


def _digest_line(mount: str) -> str:
    """A shell line printing `D<TAB>digest` of the files under `mount` (caches left out); empty
    when the folder is absent."""
    q = shlex.quote(mount)
    return (f"printf 'D\\t%s\\n' \"$([ -d {q} ] || exit 3; cd {q} && find . -xdev -type f ! -path '*/__pycache__/*' "
            "! -path '*/.pytest_cache/*' -exec sha256sum {} + 2>/dev/null | LC_ALL=C sort | sha256sum | cut -c1-16)\"\n")


def _parse_digest(output: str, conflicts: list[str] | None = None) -> str | None:
    """The digest line's value. The exec prints one; two different ones mean something beside it
    wrote into its output (a kept agent process can): noted in `conflicts`, and the first kept."""
    first, twice = first_lines(output, lambda line: "tests digest" if line.startswith("D\t") else None)
    if conflicts is not None:
        conflicts += twice
    return (first["tests digest"][2:].strip() or None) if "tests digest" in first else None


def tests_digest(box, mount: str, first: str = "", conflicts: list[str] | None = None) -> str | None:
    """A digest of the files under the tests folder (caches left out), or None when absent.
    `first`: a root command run before it in the same exec, its output dropped (one round trip)."""
    return _parse_digest(box.exec(_silenced(first) + _digest_line(mount), 60, user="0").output, conflicts)


def _silenced(command: str) -> str:
    """A shell line running `command` with its output dropped (empty for no command)."""
    return f"{{ {command}\n}} >/dev/null 2>&1\n" if command else ""


# Read in the exec that digests the tests after their run, so that reading the verdict needs no
# copy out of the container: each regular file as one base64 line (`none`: absent, a link or not
# a regular file, as a copy would find it); one that cannot be given so (too big, no base64) is
# marked `copy` and copied out as before.
_READ_FILES = r"""
for f in "$@"; do
  if [ -L "$f" ] || [ ! -f "$f" ]; then printf 'F\t%s\tnone\n' "$f"
  elif [ "$(stat -c %s -- "$f" 2>/dev/null || echo x)" -le 65536 ] 2>/dev/null && command -v base64 >/dev/null \
       && b=$(base64 < "$f" | tr -d '\n'); then printf 'F\t%s\tb64\t%s\n' "$f" "$b"
  else printf 'F\t%s\tcopy\n' "$f"; fi
  # when its status last changed (GNU find; none from busybox's): written after the tests ended? Read
  # after the file, so that a write between the two shows as a change, not as an old file's time
  [ -f "$f" ] && printf 'C\t%s\t%s\n' "$f" "$(find "$f" -maxdepth 0 -printf '%C@' 2>/dev/null)"
done
"""


class AfterTests(NamedTuple):
    """What the exec that read the verdict found besides the files: the processes the verification
    left running, killed first (`PID COMMAND`), and when each file read last changed status
    (container clock, seconds)."""

    outlived: list[str]
    changed_at: dict[str, float]


def tests_digest_and_files(box, mount: str, paths: list[str], conflicts: list[str] | None = None,
                           live: list[str] | None = None) -> tuple[str | None, dict[str, bytes | None], AfterTests]:
    """`tests_digest`, then the files at `paths`, in one root exec: (digest, {path: bytes, or
    None when absent or not a regular file}, AfterTests); a path left out of the dict is to be
    copied out, as is one whose line came twice with different values (noted in `conflicts`).
    `live`: the processes alive as the tests started (`_LIVE`'s pairs): any other still running is
    killed first (`_OUTLIVED`)."""
    if not paths:
        return tests_digest(box, mount, conflicts=conflicts), {}, AfterTests([], {})
    script = ((_OUTLIVED if live is not None else "") + _digest_line(mount) + "set -- "
              + " ".join(shlex.quote(x) for x in paths) + _READ_FILES)
    res = box.exec(script, 60, user="0", output_limit=None,
                   env={"TBSCALE_LIVE": " ".join(live)} if live is not None else None)
    files: dict[str, bytes | None] = {}
    # paths whose line came twice with different values are left to be copied out
    lines, twice = first_lines(res.output, lambda line: line.split("\t", 2)[1] if line.startswith("F\t") else None)
    if conflicts is not None:
        conflicts += [f"file {path}" for path in twice]
    for path, line in lines.items():
        parts = line.split("\t")
        if len(parts) >= 3 and path in paths and path not in twice and res.exit_code == 0:
            if parts[2] == "none":
                files[path] = None
            elif parts[2] == "b64" and len(parts) == 4:
                try:
                    files[path] = base64.b64decode(parts[3], validate=True)
                except ValueError:  # binascii.Error
                    pass
    outlived = [line[2:].replace("\t", " ", 1) for line in res.output.splitlines() if line.startswith("O\t")]
    changed_at = {}
    for line in res.output.splitlines():
        parts = line.split("\t")
        if len(parts) == 3 and parts[0] == "C" and parts[1] in paths:
            try:
                changed_at.setdefault(parts[1], float(parts[2]))
            except ValueError:  # no GNU find
                pass
    return _parse_digest(res.output, conflicts), files, AfterTests(outlived, changed_at)


def fresh_logs_script(owner: str, cleanup: str | None = None) -> str:
    """A root shell script that makes /logs a plain root folder (0755) and /logs/verifier a new,
    empty folder owned by `owner` (0755), whatever the agent left there; it prints one
    `OBSTRUCTED <what>` line for each thing it had to undo and `FOUND <path>` for what it removed.
    `cleanup`: a path removed however the script ends (the staged tests, when they were not put
    in place: nothing of them is left for a later step's agent to read)."""
    trap = f"trap 'rm -rf {shlex.quote(cleanup)}' EXIT\n" if cleanup else ""
    return f"""set -u
{trap}if [ -L /logs ] || {{ [ -e /logs ] && [ ! -d /logs ]; }}; then echo "OBSTRUCTED /logs was not a folder"; rm -rf /logs; fi
mkdir -p /logs
st=$(stat -c %u:%g:%a /logs); [ "$st" = 0:0:755 ] || [ "$st" = 0:0:777 ] || echo "OBSTRUCTED /logs was $st (owner:group:mode)"
chown 0:0 /logs && chmod 755 /logs
v={LOGS}
if [ -e "$v" ] || [ -L "$v" ]; then
  if [ -L "$v" ] || [ ! -d "$v" ]; then echo "OBSTRUCTED $v was not a folder"
  else
    st=$(stat -c %u:%g:%a "$v"); [ "$st" = 0:0:777 ] || [ "$st" = 0:0:755 ] || echo "OBSTRUCTED $v was $st (owner:group:mode)"
    find "$v" -mindepth 1 -maxdepth 2 2>/dev/null | head -n 50 | while IFS= read -r f; do
      if [ -d "$f" ] && [ ! -L "$f" ]; then echo "FOUND $f/"; else echo "FOUND $f"; fi; done
  fi
fi
if awk -v m="$v" '$5 == m {{found=1}} END {{exit !found}}' /proc/self/mountinfo; then
  chmod -R u+w "$v" 2>/dev/null; find "$v" -mindepth 1 -delete || exit 3
else
  # Renamed away first, then removed: an agent process kept running (`agent_processes: keep`) that
  # writes into the folder made `rm -rf` fail on a folder it refilled, so the tests never ran.
  # Into a folder made here (mktemp: a new name, never one the agent planted, such as a symbolic
  # link that would carry the old folder elsewhere).
  # A kept process that makes the folder again between the move and the mkdir is moved away again
  # (each time under its own name); one that keeps winning has obstructed the verifier.
  old=$(mktemp -d /logs/.verifier-removed.XXXXXX 2>/dev/null) || old=
  made=
  for try in 1 2 3 4 5; do
    if [ -e "$v" ] || [ -L "$v" ]; then
      {{ [ -n "$old" ] && mv -f "$v" "$old/$try"; }} 2>/dev/null || rm -rf "$v" 2>/dev/null
    fi
    mkdir "$v" 2>/dev/null && {{ made=1; break; }}
  done
  [ -z "$old" ] || rm -rf "$old" 2>/dev/null || true
  [ -n "$made" ] || {{ echo "OBSTRUCTED $v was made again each time it was replaced"; exit 3; }}
fi
chown {owner} "$v" && chmod 755 "$v"
"""


def stage_tests(box, verifier: VerifierSpec) -> str | None:
    """Copy the tests folders (and files) into a new folder under a random name at the root; its
    path (None: nothing to copy). `swap_script` then puts it in place of the tests folder."""
    if not verifier.tests_dirs and not verifier.tests_files:
        return None
    staging = f"/.tbscale-tests-{secrets.token_hex(8)}"
    for folder in verifier.tests_dirs:
        box.put_dir(folder, staging)
    if verifier.tests_files:  # under the folder's name from the root: no exec to make the folder first
        box.put_archive({f"{staging[1:]}/{rel}": path for rel, path in verifier.tests_files.items()}, "/")
    return staging


def swap_script(staging: str, mount: str) -> str:
    """Root shell lines that remove the tests folder `mount` and rename `staging` to it; exit 3
    when either fails or the result is not the staged folder (one made again at `mount` in between
    would take it inside: busybox's mv has no -T). What the removal printed follows."""
    s, m = shlex.quote(staging), shlex.quote(mount)
    parent = shlex.quote(mount.rstrip("/").rsplit("/", 1)[0] or "/")
    inside = shlex.quote(mount.rstrip("/") + "/" + staging.rsplit("/", 1)[-1])
    return (f"rm -rf {m} || exit 3\nmkdir -p {parent} && mv {s} {m} || exit 3\n"
            f"[ -d {m} ] && [ ! -L {m} ] && [ ! -e {inside} ] || exit 3\n")


def run_tests(box, verifier: VerifierSpec, reward: RewardSpec, timeout_sec: float, *,
              env: dict[str, str] | None = None, upload: bool | None = None,
              output_limit: int | None = 2_000_000) -> VerifierResult:
    """One verification in `box` (see the module doc). `env` is the resolved verifier env."""
    upload = verifier.upload_tests if upload is None else upload
    mount = verifier.tests_mount
    # /logs/verifier belongs to whoever runs the tests: the verifier's user, else the environment's
    # default user (the image's USER), as the tests run as that user when the task names none.
    runs_as = verifier.user if verifier.user not in (None, "") else getattr(box, "default_user", "")
    owner = "0:0" if str(runs_as) in ("", "0", "root", "0:0") else shlex.quote(str(runs_as))
    script = verifier.command.split()[-1] if verifier.command else ""
    # The tests are copied in under a new name first (the engine makes its folders), so that one
    # root exec then makes the fresh /logs/verifier, puts the tests in place of the old tests
    # folder, makes the script executable and digests the tests (a mode is not in the digest):
    # an exec costs the engine about 50 ms of CPU, a trial's verification used two.
    staging = stage_tests(box, verifier) if upload else None
    prepare = fresh_logs_script(owner, cleanup=staging) + "rc=$?; [ $rc = 0 ] || exit $rc\n"
    if upload:  # with nothing to copy in, the old folder is only removed
        prepare += f"echo {_REMOVAL_MARK}\n" + (swap_script(staging, mount) if staging else
                                                 f"rm -rf {shlex.quote(mount)} || exit 3\n")
    chmod = f"chmod +x {shlex.quote(script)} 2>/dev/null || true" if script.startswith("/") else ""
    prepare += f"{_silenced(chmod)}echo {_DIGEST_MARK}\n{_digest_line(mount)}" + _LIVE
    res = box.exec(prepare, 60, user="0")
    head, digest_part = res.output.split(_DIGEST_MARK + "\n", 1) if _DIGEST_MARK + "\n" in res.output \
        else (res.output, "")
    found, removal = head.split(_REMOVAL_MARK + "\n", 1) if _REMOVAL_MARK + "\n" in head else (head, None)
    logs = {"obstructed": [x[len("OBSTRUCTED "):] for x in found.splitlines() if x.startswith("OBSTRUCTED ")],
            "found": [x[len("FOUND "):] for x in found.splitlines() if x.startswith("FOUND ")]}
    if res.exit_code != 0:
        return VerifierResult(None, False, res.output if removal is None else removal, "tests_not_run",
                              {"stage": "prepare", "exit_code": res.exit_code, "verifier_logs": logs})
    conflicts: list[str] = []  # lines read here that came twice with different values (_parse_digest)
    tests_before = _parse_digest(digest_part, conflicts)
    live = [line[2:] for line in digest_part.splitlines() if line.startswith("L\t")]
    user = "" if verifier.user is None else str(verifier.user)
    # the container's clock as the command ends, on a line of a mark nothing else can know, taken off
    # the output: a reward file that changed after it was not the tests' doing
    mark = f"--tbscale-tests-ended-{secrets.token_hex(8)}--"
    command = f"{{ {verifier.command}\n}}\n_tbscale_rc=$?; printf '\\n%s\\t%s\\n' {mark} \"$(date +%s.%N 2>/dev/null)\"; " \
              "exit $_tbscale_rc"
    res = box.exec(command, timeout_sec, env=dict(env or {}) or None, user=user, workdir=verifier.cwd,
                   output_limit=output_limit)
    res, ends = _ended(res, mark)
    # the earliest, if the tests' code printed a line of its own: a later end would hide its writes
    ended = min((t for t in ends if t is not None), default=None)
    if len(ends) > 1:
        conflicts.append("the line that ends the tests' command")
    details: dict[str, Any] = {"exit_code": res.exit_code, "duration_sec": round(res.duration_sec, 3)}
    if logs["obstructed"] or logs["found"]:
        details["verifier_logs"] = logs
    if res.abandoned:  # something stopped the tests (ExecResult.abandoned): nothing more is asked of the box
        return VerifierResult(None, False, res.output, "verifier_timeout",
                              {**details, "timeout_sec": timeout_sec, "abandoned": True})
    reads = [f"{LOGS}/{name}" for name in reward.files] if reward.source != "parser" and not res.timed_out else []
    tests_after, read, after = tests_digest_and_files(box, mount, reads, conflicts, live=live if live else None)
    if tests_before != tests_after:
        details["tests_changed"] = {"before": tests_before, "after": tests_after}
    if after.outlived:
        details["outlived"] = after.outlived[:20]
    late = sorted(p for p, t in after.changed_at.items() if ended is not None and t > ended)
    if late:
        details["reward_written_late"] = {"files": late, "ended": ended,
                                          "changed_at": {p: after.changed_at[p] for p in late}}
    elif not ends and res.exit_code > 128 and after.outlived:
        # the shell that ran the tests was killed before its end line, and the verification left
        # processes running: one of them may have killed it, and written the verdict after
        details["reward_written_late"] = {"files": sorted(after.changed_at) or reads, "ended": None, "changed_at": {}}
    if conflicts:
        details["output_conflicts"] = conflicts
    if res.timed_out:
        return VerifierResult(None, False, res.output, "verifier_timeout", {**details, "timeout_sec": timeout_sec})
    if reward.source == "parser":
        parsed = parse_test_output(reward.parser_name or "pytest", res.output)
        details.update(parser=parsed.parser, tests=parsed.tests, parse_error=parsed.error,
                       legacy_resolved=parsed.legacy_resolved)
        if parsed.verdict == "no_tests_parsed":
            error = "tests_not_run" if res.exit_code in NOT_RUN_CODES else "no_tests_parsed"
            return VerifierResult(None, False, res.output, error, details)
        value = 1.0 if parsed.passed else 0.0
        return VerifierResult(value, parsed.passed, res.output, None, details, {"reward": value})
    rewards, name, problem = read_rewards(box, reward, details, read={n: read[f"{LOGS}/{n}"] for n in reward.files
                                                                      if f"{LOGS}/{n}" in read})
    if rewards is None:
        if problem:
            details["bad_reward"] = problem
        elif res.exit_code in NOT_RUN_CODES:
            return VerifierResult(None, False, res.output, "tests_not_run", details)
        return VerifierResult(None, False, res.output, "reward_missing", details)
    details["reward_file"] = name
    value = reward.primary(rewards)
    if value is None:
        details["bad_reward"] = f"{name} has no {reward.primary_key!r} key and more than one key"
        return VerifierResult(None, False, res.output, "reward_missing", details, rewards)
    return VerifierResult(value, value >= PASS_THRESHOLD, res.output, None, details, rewards)


def _ended(res, mark: str) -> tuple[Any, list[float | None]]:
    """The command's result without the lines of `mark` (the one it ends with), and the container's
    clock on each (None: a clock with no %N). No line: the command was cut short, or the shell that
    ran it killed. More than one: the tests' code read the mark (from /proc) and printed its own."""
    lines = re.findall(rf"(?:^|\n){re.escape(mark)}\t([^\n]*)(?:\n|$)", res.output)
    if not lines:
        return res, []
    times: list[float | None] = []
    for value in lines:
        try:
            times.append(float(value))
        except ValueError:
            times.append(None)
    output = re.sub(rf"\n?{re.escape(mark)}\t[^\n]*(?:\n|$)", "", res.output)
    return replace(res, output=output), times


def reward_key(reward: RewardSpec, rewards: dict[str, float] | None) -> str | None:
    """Which key of `rewards` is the scalar reward."""
    if not rewards:
        return None
    if reward.primary_key in rewards:
        return reward.primary_key
    return next(iter(rewards)) if len(rewards) == 1 else None
