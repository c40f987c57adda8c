"""The programs dpkg and the maintainer scripts start by name: those the agent phase wrote under a
name the PATH they run with had at the baseline (docs/tasks.md, "Verification integrity": *the
programs dpkg runs by name*).

Where the verifier's scripts run apt (Terminal-Bench 2's `apt-get update; apt-get install -y curl`),
dpkg and the maintainer scripts it runs start programs by name from the PATH apt gives them
(`DPkg::Path`: /usr/sbin, /usr/bin, /sbin, /bin, in that order), as root: dpkg runs `rm` as it
unpacks each package; libsasl2-modules' scripts run `dpkg-maintscript-helper`, which runs
`basename`. apt runs its own hooks (Debian's images clean apt's cache with `rm` after dpkg) and
`apt-key` (which runs `awk`, as apt's own user, as `apt-get update` checks each signature) with the
PATH the script has, root's: /usr/local/sbin and /usr/local/bin first. On 2026-12-07 an `rm` of the
agent's in /usr/sbin (before the real one in /usr/bin) that ran the agent's code when dpkg ran it
passed a trial with the bugs in place and nothing recorded.

So at the baseline the names of the programs in those four folders are taken; after the sweep, the
files written since the baseline's clock under one of those names, in them or in /usr/local's two
folders before them, and the programs that are links to an alternative whose choice changed since
(`/usr/bin/awk` -> `/etc/alternatives/awk`), are `dpkg_program_changed`: a program replaced in
place, one put before the program of that name, or an alternative pointed elsewhere. So is a shared
object written under a folder a package's file trigger watches, whatever its name: libglib's
triggered `postinst` runs gio-querymodules, which loads every module in gio/modules (gdk-pixbuf's,
its loaders); a GIO module of the agent's, with libglib installed with apt and its trigger set off
(`dpkg-trigger`), passed with nothing recorded on 2026-12-07. A program under
a new name is an install (a package's new programs, a tool the agent wrote): nothing started it by
that name before; so is one in /usr/local under a name only /usr/local had (`pip install -U pip`
writes /usr/local/bin/pip over the image's). What an `apt-get install` or an upgrade wrote is settled
against the archive as any package file is (runner/debian_updates.py): the file its package installs
at its version, or an alternative its package registers. The guard shell's part: `DPKG_PROGRAMS`."""

from __future__ import annotations

from tbscale.runner.findings import listed_entry
from tbscale.types.guard import GuardSnapshot, Tampering, ToolRun

KIND = "dpkg_program_changed"
KEY = "dpkg_programs"  # the snapshot's key (runner/build_tools.py)
FOLDERS = ("/usr/sbin", "/usr/bin", "/sbin", "/bin")  # apt's default DPkg::Path (a setting that changes it is apt's entry)
LOCAL = ("/usr/local/sbin", "/usr/local/bin")  # before them on root's PATH, which apt's hooks and apt-key run with
NAMES = ":names"  # the baseline's line: the names of the programs in FOLDERS, blank-separated
ALL = "*"  # in place of NAMES where there were more than NAMES_MAX characters: every program written counts
NAMES_MAX = 100_000  # python:3.11-slim-bookworm: 408 names, 3,248 characters; with git, build-essential, nodejs: 833, 7,831
MORE = ":more"  # after the sweep: more programs written than are listed
LISTED_MAX = 2_000


def baseline_names(before: dict[str, str]) -> str:
    return before.get(NAMES, "")


def written_programs(after: dict[str, str]) -> list[str]:
    return sorted(p for p, mark in after.items() if mark == "c" and not p.startswith(":"))


def program_groups(before: GuardSnapshot | None, after: GuardSnapshot) -> dict[str, list[str]]:
    """Every path of the entry, for runner/debian_updates.py; none where not all were listed (what
    settles the listed ones says nothing of the rest)."""
    listed = after.get(KEY) or {}
    found = written_programs(listed)  # type: ignore[arg-type]
    return {KIND: found} if found and MORE not in listed else {}


def programs_changed(before: dict[str, str], after: dict[str, str], read_before: dict, read_after: dict,
                     snap, actions: list[tuple[int, str]], run: ToolRun) -> list[Tampering]:
    found = written_programs(after)
    if not found and MORE not in after:
        return []
    more = f" (more than {LISTED_MAX} written: not all were looked at)" if MORE in after else ""
    return [_entry(found, more, actions)]


def programs_seen_outside(changed: dict[str, int], before: dict[str, str] | None, after: dict[str, str] | None,
                          inside: list[Tampering], actions: list[tuple[int, str]]) -> list[Tampering]:
    """From the backend's own listing (`environment.file_checks: outside`): the files written in
    those folders under a name the baseline had that the check inside did not report (a `find` of
    the agent's can make it list nothing; the outside listing cannot be made to)."""
    names = baseline_names(before or {})
    known = None if names == ALL else set(names.split())
    reported = {p for e in inside if e["kind"] == KIND for p in e.get("paths", [])}
    found = sorted(p for p, kind in changed.items()
                   if kind != 2 and p not in reported and p.rpartition("/")[0] in (*LOCAL, *FOLDERS)
                   and (known is None or p.rpartition("/")[2] in known))
    return [_entry(found, ", as seen from outside the environment", actions)] if found else []


def _entry(found: list[str], more: str, actions: list[tuple[int, str]]) -> Tampering:
    return listed_entry(KIND, "a program on the PATH dpkg and its maintainer scripts run with (under the verifier's apt), "
                        "written under a name that PATH had before the agent phase (replaced, or put before the "
                        "program of that name), or an alternative whose choice changed" + more, found, actions)


# ---- the guard shell's part (runner/guard.py runs it in its checks' exec) ----------------------------
# Each folder is walked where it leads (/sbin on a merged /usr is /usr/sbin; /usr/local/sbin made a
# link to a folder of the agent's is that folder). At the baseline a `DP :names` line with the names
# in FOLDERS (ALL past NAMES_MAX characters). After the sweep, a `DP PATH c` line for each
# file in LOCAL and FOLDERS written since the clock under one of those names (TBSCALE_DPKG_PROGRAMS_BEFORE),
# for each program there that is a link to an alternative (`/etc/alternatives/NAME`) written since,
# and for each shared object (`*.so*`) written since under a folder a file trigger watches (dpkg's
# registry, /var/lib/dpkg/triggers/File, and the packages' triggers files); a `DP :more 1` line past LISTED_MAX.
DPKG_PROGRAMS = r'''
if [ -n "${TBSCALE_DPKG_PROGRAMS+set}" ]; then
  # each folder where it leads (a folder made a link to one of the agent's is walked there), a line each
  _dpnl='
'
  _dps=; for _d in @FOLDERS@; do [ -d "$_d" ] && _dps="$_dps$(readlink -f -- "$_d")$_dpnl"; done
  _dpl=; for _d in @LOCAL@; do [ -d "$_d" ] && _dpl="$_dpl$(readlink -f -- "$_d")$_dpnl"; done
  _ifs=$IFS; IFS=$_dpnl; set -f
  if [ -z "${TBSCALE_SINCE:-}" ]; then
    printf 'DP\t:names\t%s\n' "$( [ -z "$_dps" ] || find $_dps -mindepth 1 -maxdepth 1 ! -type d 2>/dev/null |
      awk -v max=@NAMES_MAX@ '{ sub(/.*\//, "") } !seen[$0]++ { out = out $0 " "; if (length(out) > max) { out = "*"; exit } }
                             END { print out }')"
  elif [ -n "$_dps$_dpl" ]; then
    { _newer $_dpl $_dps -mindepth 1 -maxdepth 1 ! -type d
      # a shared object written under a folder a package's file trigger watches, whatever its name
      # (libglib's gio/modules: its triggered postinst runs gio-querymodules, which loads each one)
      _dpt=$( { awk '$1 ~ /^\// { print $1 }' /var/lib/dpkg/triggers/File
                ( set +f; sed -n 's/^[[:space:]]*interest[a-z-]*[[:space:]][[:space:]]*\(\/[^[:space:]]*\).*/\1/p' \
                    /var/lib/dpkg/info/*.triggers )
              } 2>/dev/null | sort -u | while IFS= read -r _d; do [ -d "$_d" ] && printf '%s\n' "$_d"; done)
      # (one readlink and one find for all the folders)
      [ -z "$_dpt" ] || _newer $(readlink -f -- $_dpt) -name '*.so*' ! -type d | sed 's/^/M /'
      _dpa=$(_newer /etc/alternatives -mindepth 1 -maxdepth 1 -type l)
      [ -z "$_dpa" ] || find $_dpl $_dps -mindepth 1 -maxdepth 1 -lname '/etc/alternatives/*' -printf '%p\t%l\n' |
        _dpa=$_dpa awk -F'\t' 'BEGIN { n = split(ENVIRON["_dpa"], a, "\n"); for (i = 1; i <= n; i++) c[a[i]] = 1 }
                               ($2 in c) { print $1 }'
    } 2>/dev/null | _dpn=" ${TBSCALE_DPKG_PROGRAMS_BEFORE:-} " awk -v max=@MAX@ '
        { m = sub(/^M /, ""); n = $0; sub(/.*\//, "", n) }
        (m || ENVIRON["_dpn"] == " * " || index(ENVIRON["_dpn"], " " n " ")) && !seen[$0]++ {
          if (++k > max) { print "DP\t:more\t1"; exit }
          print "DP\t" $0 "\tc" }'
  fi
  set +f; IFS=$_ifs
fi
'''.replace("@FOLDERS@", " ".join(FOLDERS)).replace("@LOCAL@", " ".join(LOCAL)).replace("@NAMES_MAX@", str(NAMES_MAX)).replace("@MAX@", str(LISTED_MAX))
