"""What apt and dpkg run when the verifier runs them (docs/tasks.md, "Verification integrity",
*apt's and dpkg's hooks*).

Terminal-Bench 2.0's test scripts, and terminal-bench's own `run-tests.sh` template, start with
`apt-get update` and `apt-get install -y curl`, as root, after the guard's last look. apt then runs
what its settings tell it to: a command before or after `update` (`APT::Update::Pre-Invoke`), before
and after dpkg (`DPkg::Pre-Invoke`, `DPkg::Post-Invoke`), the programs `Dir::Bin` names; it installs
from the sources it is given, a folder of the agent's marked `[trusted=yes]` among them; and dpkg runs
the options of its own settings (`post-invoke=`), and the maintainer scripts of the packages a
trigger wakes (libc-bin's runs `ldconfig` when any library is installed), with the PATH apt gives
them (`DPkg::Path`; `/usr/local` is not on it, so a program of the agent's there is not run).
On 2026-12-06, on a copy of fix-python-inventory whose test script runs apt as that template does
(tests/test_apt_settings_integrity.py), each of these passed a trial with the bugs in place and
nothing recorded.

So where the scripts run apt, aptitude or dpkg, the guard shell takes, at the baseline and after
the sweep:
* the settings files: `/etc/apt/apt.conf` and `apt.conf.d/*`, `sources.list` and `sources.list.d/*`,
  `/etc/dpkg/dpkg.cfg`, `dpkg.cfg.d/*` and the user's `~/.dpkg.cfg` (at the baseline with their
  bytes, `PATH?text`, in hex: no process of the agent's has run yet; after the sweep those whose
  digest changed are read from outside), and whether `/etc/apt`, `/etc/dpkg` or their folders are
  links (`?link`);
and after the sweep, what changed since the baseline's clock (a status change time cannot be set
back from inside a container):
* dpkg's files of each installed package in `/var/lib/dpkg/info` (`PATH?c`), with whether its
  package's file list is there (`PKG.list?e`) and, where the list was written anew, whether dpkg's
  log (`/var/log/dpkg.log`) has that package installed or unpacked at the version it has
  (`PKG.list?logged`): a
  maintainer script, triggers or md5sums file changed while dpkg did not install that package
  again (its list unchanged, or rewritten with no install logged) was written by something else;
* a package whose scripts dpkg runs when the verifier runs apt: one dpkg installed or unpacked in
  the agent phase that waits on a trigger (`interest` in its triggers file, or its name in dpkg's
  own registry of them, `/var/lib/dpkg/triggers`), is not configured (`dpkg --unpack`: apt
  configures it first), or has a `prerm` or `postrm` and a newer version apt has (an install that
  needs it upgrades it); with whether apt's log of what it installed names that version or apt has
  it from one of its sources, or neither (`PKG.list?runs ORIGIN:WHY`). These are `apt_package_planted`, an entry of its own that only the
  archive settles, package by package (runner/debian_updates.py): where a package came from is read
  from apt's log and lists, which the agent can write (a package of its own under the name and
  version of the archive's `shared-mime-info`, or one whose install it appended to apt's log, passed
  with nothing recorded when that origin was believed);
* the programs apt and dpkg run (`/usr/lib/apt`, dpkg's and debconf's programs, `ldconfig`,
  `update-alternatives`, `invoke-rc.d` and `policy-rc.d`, apt-cache, libapt, the perl debconf
  runs in), and the hooks `update-ca-certificates` runs (`/etc/ca-certificates/update.d`, run as
  root when an install of curl brings ca-certificates), each with whether it is still its Debian
  package's own file (`PATH?prog`: `intact` by the package's md5sums or, in `/etc`, its conffiles'
  digests, else `changed` or `unowned`).
Only what makes apt or dpkg run a command, moves what they work on, or gives apt a source the
agent controls counts (`_apt_runs`, `_dpkg_options`, `_local_sources`): an honest agent's
`APT::Install-Recommends "false"`, a signed source on the network it added to install a tool, a
package it installed or upgraded with apt, are not entries. What counts is `apt_hook_planted`.
The programs dpkg and the maintainer scripts start by name from their PATH are runner/dpkg_programs.py's.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any

from tbscale.runner.findings import entry, file_state, texts_at_baseline
from tbscale.shell.parse import invocation, shell_variables, split_segments
from tbscale.shell.tampering import attribute_command
from tbscale.types.guard import GuardSnapshot, Tampering, ToolRun

KIND = "apt_hook_planted"
# a package whose scripts the verifier's apt runs, not settled as its archive's (runner/debian_updates.py)
PACKAGE_KIND = "apt_package_planted"
PACKAGES_CHECKED = 100  # such packages at most in one check (each is read from the archive and from outside)
_PROGRAMS = frozenset({"apt-get", "apt", "aptitude", "dpkg"})
# dpkg's files of a package (`/var/lib/dpkg/info/PKG.EXT`) that decide what it runs
_CONTROL = ("preinst", "postinst", "prerm", "postrm", "config", "triggers", "md5sums")
# dpkg's files listed after the sweep at most (those and the file lists only): past it the entry says
# not all were looked at, so files written there in bulk cannot push a planted one out unseen
INFO_LISTED = 4000


def apt_folders(texts: list[str], tests_mount: str | None = None) -> list[str]:
    """`["a:NAMES"]` where the scripts run apt, aptitude or dpkg (their settings are the system's,
    not a folder's), NAMES the packages they install with apt or aptitude, space-separated, and
    UNTOLD_INSTALL among them where a word of an install cannot be read as names (what the install
    may remove is told by them: runner/debian_updates.py); none where they run neither."""
    segments = [segment for text in texts for segment in split_segments(text)]
    # a variable's values: every value the scripts give it, wherever (a branch, a function, a loop)
    variables: dict[str, set[str] | None] = {}
    for segment in segments:
        for name, value in shell_variables(segment).items():
            known = variables.get(name, set())
            variables[name] = None if value is None or known is None else known | {value}
    found = False
    names: set[str] = set()
    for segment in segments:
        call = invocation(segment)
        if call.program in _PROGRAMS:
            found = True
            names |= _installs(call.program, call.args, variables)
    return [("a:" + " ".join(sorted(names))).rstrip()] if found else []


# apt-get's, apt's and aptitude's options that take a value (apt-get(8))
_WITH_VALUE = frozenset({"-o", "--option", "-c", "--config-file", "-t", "--target-release", "--default-release"})
UNTOLD_INSTALL = "?"  # an install's word that is not a package's name: a variable set elsewhere, a pattern, a `.deb`
# what may remove packages besides an install's conflicts: these, and an install with `-f` (alone or
# among other short options, `-yf`) or `--fix-broken`, `--autoremove`, `--auto-remove`
_REMOVES = frozenset({"remove", "purge", "autoremove", "autopurge", "dist-upgrade", "full-upgrade"})
_REMOVING = re.compile(r"-[a-zA-Z]*f[a-zA-Z]*|--fix-broken|--auto-?remove")
_NAME = re.compile(r"[a-z0-9][a-z0-9+.-]+(?=$|[=/:])")
_REFERENCE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


def _installs(program: str, args: list[str], variables: dict[str, set[str] | None]) -> set[str]:
    """The packages an `apt-get install`, `apt install` or `aptitude install` names (`curl=7.88.1`,
    `curl/bookworm`, `curl:amd64`: curl), a variable the scripts set read as each of its values;
    UNTOLD_INSTALL for a word that is none of those (a variable set elsewhere, a glob, a `.deb`),
    and for a command that removes packages otherwise (`remove`, `autoremove`, `dist-upgrade`,
    `install -f`, `install --autoremove`: none of the public test scripts looked at does)."""
    words = [a for i, a in enumerate(args) if not a.startswith("-") and not (i and args[i - 1] in _WITH_VALUE)]
    if program == "dpkg" or not words:
        return set()
    if words[0] in _REMOVES or (words[0] == "install" and any(_REMOVING.fullmatch(a) for a in args)):
        return {UNTOLD_INSTALL}  # which of the agent's packages go is not read off the words
    if words[0] not in ("install", "reinstall"):
        return set()
    names: set[str] = set()
    for word in words[1:]:
        ref = _REFERENCE.fullmatch(word)
        values = variables.get(ref.group(1) or ref.group(2)) if ref else {word}
        for one in [w for value in values for w in value.split()] if values is not None else [word]:
            name = None if values is None else _NAME.match(one)
            names.add(name[0] if name else UNTOLD_INSTALL)
    return names


def verifier_installs(folders: list[str]) -> list[str]:
    """The packages the verifier's scripts install with apt, from `apt_folders`' line (with
    UNTOLD_INSTALL where a word of an install could not be read as names)."""
    return sorted({n for line in folders if line.startswith("a:") for n in line[2:].split()})


# ---- the settings files ------------------------------------------------------------------------------

def read_settings(path: str, data: bytes) -> dict[str, Any]:
    """A settings file's lines that make apt or dpkg run a command, move what they work on, or
    give apt a source the agent controls (`runs`), by the file's kind (its path)."""
    text = data.decode("utf-8", "replace")
    if path.startswith("/etc/dpkg/") or path.endswith("/.dpkg.cfg"):
        return {"runs": sorted(_dpkg_options(text))}
    if posixpath.basename(path).startswith("sources.list") or "/sources.list.d/" in path:
        return {"runs": sorted(_local_sources(path, text))}
    return {"runs": sorted(_apt_settings(text))}


# apt.conf(5)'s tokens, in the order apt's reader takes them: a quoted value (in which nothing is a
# comment), a comment (`//`, `/* */`, `#` to the end of the line, but for `#include` and `#clear`),
# a brace or semicolon, a word (a key, or a value left unquoted: apt takes `Dir::Bin::dpkg /opt/x;`)
_TOKEN = re.compile(r'"([^"]*)"|//[^\n]*|/\*.*?(?:\*/|\Z)|(#(?:include|clear)\b)|#[^\n]*|([{};])|((?:[^\s{};"#/]|/(?![/*]))+)',
                    re.S)


def apt_config(text: str) -> list[tuple[str, str]]:
    """apt.conf(5) read as (key, value) pairs: scopes joined by `::`, a list's items each under
    its scope's key, values quoted or not; `#include` and `#clear` as keys of their own."""
    out: list[tuple[str, str]] = []
    scope: list[str] = []
    key: str | None = None
    valued = False
    directive: str | None = None

    def scoped(*more: str) -> str:
        return "::".join(s for s in [*scope, *more] if s)

    for quoted, hashed, punct, word in (m.groups() for m in _TOKEN.finditer(text)):
        if quoted is None and hashed is None and punct is None and word is None:
            continue  # a comment
        if directive is not None:
            if punct == ";":
                directive = None
            elif quoted is not None or word:
                out.append((directive, word or quoted or ""))
            continue
        if hashed:
            directive = hashed
        elif punct == "{":
            scope.append(key or "")
            key, valued = None, False
        elif punct == "}":
            if scope:
                scope.pop()
            key, valued = None, False
        elif punct == ";":
            if key is not None and not valued and scope:
                out.append((scoped(), key))  # a bare word in a list: one of its items
            key, valued = None, False
        elif word and key is None:
            key = word.rstrip(":")  # `Key::` appends to a list
        else:  # a value, of the key before it or an item of the scope's list
            out.append((scoped(key or ""), word or quoted or ""))
            valued = True
    return out


def _apt_runs(key: str) -> bool:
    """Whether an apt setting makes apt run a command, or moves what it works on (apt.conf(5),
    apt-get(8)). `Binary::NAME::` scopes a setting to one program, as `apt-get`."""
    k = re.sub(r"^binary::[^:]+::", "", key.lower())
    if k in ("#include", "#clear"):
        return k == "#include"  # a file read from anywhere
    if re.search(r"(^|::)(pre|post)-invoke(-success|-stats)?$", k) or re.search(r"(^|::)(pre|post)-install-pkgs$", k):
        return True  # APT::Update::Pre-Invoke, DPkg::Post-Invoke, DPkg::Pre-Install-Pkgs
    if k.startswith("dpkg::tools::") or k in ("dpkg::options", "dpkg::chroot-directory", "dpkg::run-directory",
                                              "dpkg::path"):  # the PATH maintainer scripts run with
        return True
    if k == "dir" or k.startswith("dir::"):  # where apt finds its programs (Dir::Bin), settings, state
        return not (k.startswith("dir::log") or k == "dir::ignore-files-silently")
    if k in ("apt::sandbox::user", "apt::solver", "apt::planner"):  # methods run as root; another solver's program
        return True
    return bool(re.search(r"^acquire::[^:]+::proxy-?auto-?detect$", k))


def _apt_settings(text: str) -> set[str]:
    return {f"{key}={value}" if value else key for key, value in apt_config(text) if _apt_runs(key)}


# dpkg.cfg(5): a command dpkg runs, or the folders it takes for its database and the system
_DPKG_RUNS = frozenset({"pre-invoke", "post-invoke", "status-logger", "admindir", "instdir", "root"})


def _dpkg_options(text: str) -> set[str]:
    out = set()
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name = re.split(r"[\s=]", line, maxsplit=1)[0]
        value = line[len(name):].lstrip(" \t=")
        if name.lstrip("-") in _DPKG_RUNS:
            out.add(f"{name.lstrip('-')}={value}")
    return out


_LOCAL = ("file:", "copy:", "cdrom:", "mirror+file:", "mirror+copy:")
_UNSIGNED = re.compile(r"\b(trusted|allow-insecure|allow-weak|allow-downgrade-to-insecure)\s*[=:]\s*yes\b", re.I)


def _local_sources(path: str, text: str) -> set[str]:
    """The sources that serve what the agent put there: a folder of the container's (`file:`,
    `copy:`, `cdrom:`), or any source whose signatures apt is told not to check (`trusted=yes`).
    One-line entries (sources.list) and deb822 stanzas (`.sources`) alike."""
    out = set()
    if path.endswith(".sources"):
        for fields in _deb822(text):
            if not fields.get("uris") or fields.get("enabled", "yes").lower() == "no":
                continue
            if any(u.startswith(_LOCAL) for u in fields["uris"].split()) or any(
                    fields.get(k, "").lower() == "yes" for k in ("trusted", "allow-insecure", "allow-weak",
                                                                 "allow-downgrade-to-insecure")):
                out.add(" ".join(f"{k}: {fields[k]}" for k in ("types", "uris", "suites", "trusted") if k in fields))
        return out
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        m = re.match(r"(deb|deb-src)\s+(\[[^\]]*\]\s+)?(\S+)", line)
        if m and (m.group(3).startswith(_LOCAL) or _UNSIGNED.search(m.group(2) or "")):
            out.add(" ".join(line.split()))
    return out


def _deb822(text: str) -> list[dict[str, str]]:
    """A `.sources` file's stanzas (deb822), each field by its lowercased name, its lines joined."""
    return [{m[1].lower(): " ".join(m[2].split()) for m in re.finditer(r"^([A-Za-z-]+):[ \t]*(.*(?:\n[ \t]+.*)*)", stanza, re.M)}
            for stanza in re.split(r"\n\s*\n", text)]


def source_suites(name: str, text: str) -> set[str]:
    """The suites a file of apt's sources names for binary packages: one-line entries
    (`deb [options] URI SUITE COMPONENT...`, sources.list(5)) or deb822 stanzas (`.sources`)."""
    if name.endswith(".sources"):
        return {suite for fields in _deb822(text) if "deb" in fields.get("types", "").split()
                and fields.get("enabled", "yes").lower() != "no" for suite in fields.get("suites", "").split()}
    if name == "sources.list" or name.endswith(".list"):
        return {m[2] for line in text.splitlines()
                for m in [re.match(r"deb\s+(\[[^\]]*\]\s+)?\S+\s+(\S+)", line.split("#", 1)[0].strip())] if m}
    return set()


_WHY_RUN = {"trigger": "it waits on a trigger the verifier's install may wake",
            "unconfigured": "it is not configured, and apt configures it first",
            "upgrade": "apt has a newer version, which an install that needs it puts in its place"}


def _packages_entry(runs: list[str], after: dict[str, str], actions: list[tuple[int, str]]) -> Tampering:
    """The packages whose maintainer scripts dpkg runs when the verifier runs apt, each by its file
    list (`/var/lib/dpkg/info/PKG.list`): an entry the archive settles package by package
    (runner/debian_updates.py), whatever dpkg's database and apt's log and lists say of where it
    came from, since the agent can write all three."""
    said = []
    for path in runs[:5]:
        origin, _, whys = after[path + "?runs"].partition(":")
        why = "; ".join(_WHY_RUN.get(w, w) for w in whys.split("+"))
        said.append(f"{posixpath.basename(path)[:-5]} ({'from no source apt has' if origin == 'none' else 'apt names it'}"
                    f": {why})")
    return entry(PACKAGE_KIND, "packages whose maintainer scripts dpkg runs when the verifier runs apt, not settled "
                 "as their archive's packages: " + "; ".join(said) + (f" and {len(runs) - 5} more" if len(runs) > 5 else ""),
                 paths=runs, by_command=attribute_command(actions, posixpath.basename(runs[0])[:-5].split(":")[0], runs[:5]))


def _upgradable_entry(removes: list[str], after: dict[str, str], actions: list[tuple[int, str]],
                      installs: list[str]) -> Tampering:
    """The packages installed in the agent phase that have a `prerm` or `postrm` and that apt's lists
    give no newer version of: dpkg runs those scripts when the verifier's install puts a newer
    version in their place, or removes them for a package it brings that conflicts with them (or
    they with it). apt's lists may be gone or the agent's: a package of its own under an archive
    package's name at an older version, apt's lists then removed, passed unseen, and so did one
    with `Conflicts: curl`. runner/debian_updates.py asks the archive whether it has a newer
    version, and what the packages the verifier's scripts install (`verifier_installs`) bring: the
    packages neither replaces are dropped, the others settled as the archive's (`if_replaced`)."""
    named = [posixpath.basename(p)[:-5] + " " + after[p + "?rm"].split(" ")[0] for p in removes[:5]]
    return entry(PACKAGE_KIND, "packages with a prerm or postrm that dpkg runs if the verifier's apt upgrades or "
                 "removes them, not settled as their archive's packages: " + ", ".join(named)
                 + (f" and {len(removes) - 5} more" if len(removes) > 5 else ""),
                 paths=removes, if_replaced=True, verifier_installs=installs or None,
                 by_command=attribute_command(actions, posixpath.basename(removes[0])[:-5].split(":")[0], removes[:5]))


def settings_file(path: str) -> bool:
    """What is read again from outside: the settings files."""
    return "?" not in path


# ---- what changed ---------------------------------------------------------------------------------

def apt_changed(before: dict[str, str], after: dict[str, str], read_before: dict, read_after: dict,
                snap: GuardSnapshot, actions: list[tuple[int, str]], run: ToolRun) -> list[Tampering]:
    """The entry for what changed in apt's and dpkg's settings, dpkg's files and the programs they
    run (`before`, `after`: path -> digest, `-` absent, `other` a folder or link; and the
    pseudo-paths the shell prints), with the settings files as `read_settings` gives them: at the
    baseline from the shell's `PATH?text` lines, after the sweep read from outside."""
    read_before = texts_at_baseline(before, read_settings)
    found: list[str] = []
    keys: list[str] = []
    for path in sorted(p for p in set(before) | set(after) if p.endswith("?link")):
        if before.get(path, "-") != after.get(path, "-"):
            found.append(f"{path[:-5]} (made a link to {after.get(path, '-')}: apt or dpkg now read settings from there)"
                         if after.get(path, "-") != "-" else f"{path[:-5]} (was a link, now is not)")
    for path in sorted(p for p in set(before) | set(after) if "?" not in p):
        was, now = before.get(path, "-"), after.get(path, "-")
        if was == now or now == "-":
            continue
        if now == "other":
            found.append(f"{path} ({file_state(was, now)})")
            continue
        read_now = read_after.get(path) or {}
        old, current = set((read_before.get(path) or {}).get("runs") or []), set(read_now.get("runs") or [])
        new = sorted(current - old)
        if new:
            found.append(f"{path} ({'; '.join(new)[:300]})")
            keys += [line.split("=", 1)[0] for line in new]
    if after.get("/var/lib/dpkg/info?more") == "1":
        found.append(f"/var/lib/dpkg/info (more than {INFO_LISTED} of dpkg's files changed since the baseline: not all "
                     "were looked at)")
    changed = {p[:-2] for p in after if p.endswith("?c")}
    for path in sorted(changed):
        package, _, ext = posixpath.basename(path).rpartition(".")
        listed = posixpath.join(posixpath.dirname(path), package + ".list")
        if ext not in _CONTROL or after.get(listed + "?e") != "1":
            continue
        if listed not in changed:
            found.append(f"{path} (changed, and dpkg did not install {package} again: dpkg runs it)")
        elif after.get(listed + "?logged") == "0":
            found.append(f"{path} (changed, and dpkg's log has no install or unpack of {package} at the version it has: "
                         "dpkg runs it)")
    runs = sorted(p[:-5] for p in after if p.endswith("?runs"))
    if len(runs) > PACKAGES_CHECKED:
        found.append(f"/var/lib/dpkg/info ({len(runs)} packages whose scripts dpkg runs when the verifier runs apt, "
                     f"more than the {PACKAGES_CHECKED} checked against their archive)")
    for path in sorted(p for p in after if p.endswith("?prog") and after[p] != "intact"):
        what = "not its package's copy" if after[path] == "changed" else "added, of no package"
        found.append(f"{path[:-5]} ({what}: " + ("which archive the packages are checked against is read from it)"
                                                   if path.endswith("os-release?prog") else "apt or dpkg runs it)"))
    out = [_packages_entry(runs, after, actions)] if runs and len(runs) <= PACKAGES_CHECKED else []
    removes = sorted(p[:-3] for p in after if p.endswith("?rm"))
    out += [_upgradable_entry(removes, after, actions, verifier_installs(run.folders))] if removes else []
    if not found:
        return out
    paths = sorted({f.split(" (", 1)[0] for f in found})
    return out + [entry(KIND, "what apt or dpkg runs where the verifier runs them was changed (a setting that runs a "
                  "command or names a source of the agent's, a maintainer script, a program they run): "
                  + "; ".join(found[:5])[:700],
                  paths=paths[:20], by_command=attribute_command(actions, posixpath.basename(paths[0]),
                                                                 [*keys[:5], *paths[:5]]))]


# ---- the guard shell's part (runner/guard.py runs it in its checks' exec) ----------------------------
# `TBSCALE_APT`, `apt_folders`' lines; `_fd`, `_ft` and `_newer` are guard_shell.PROJECT's. `AP PATH DIGEST` for each settings
# file, `AP PATH?text HEX` at the baseline, `AP DIR?link TARGET|-`; after the sweep `AP PATH?c -`,
# `AP PKG.list?e 1`, `AP PKG.list?logged 1|0`, `AP PKG.list?runs source|none:WHY`, `AP PATH?prog intact|changed|unowned`.
APT = r'''
if [ -n "${TBSCALE_APT+set}" ]; then
  for _d in /etc/apt /etc/apt/apt.conf.d /etc/apt/sources.list.d /etc/dpkg /etc/dpkg/dpkg.cfg.d; do
    if [ -L "$_d" ]; then printf 'AP\t%s?link\t%s\n' "$_d" "$(readlink -- "$_d" | tr '\t\n' '  ')"
    else printf 'AP\t%s?link\t-\n' "$_d"; fi
  done
  for _f in /etc/apt/apt.conf /etc/apt/apt.conf.d/* /etc/apt/sources.list /etc/apt/sources.list.d/* \
      /etc/dpkg/dpkg.cfg /etc/dpkg/dpkg.cfg.d/* "${HOME:-/root}/.dpkg.cfg"; do
    { [ -e "$_f" ] || [ -L "$_f" ]; } && _ft AP "$_f"
  done
  if [ -n "${TBSCALE_SINCE:-}" ]; then
    _ap_info=$(_newer /var/lib/dpkg/info -maxdepth 1 -type f \( -name '*.list' @INFO_NAMES@ \) | head -n @INFO_MORE@)
    if [ "$(printf '%s\n' "$_ap_info" | wc -l)" -ge @INFO_MORE@ ]; then
      printf 'AP\t/var/lib/dpkg/info?more\t1\n'; _ap_info=$(printf '%s\n' "$_ap_info" | head -n @INFO_LISTED@)
    fi
    printf '%s\n' "$_ap_info" | while IFS= read -r _f; do
      [ -n "$_f" ] || continue
      printf 'AP\t%s?c\t-\n' "$_f"
      case $_f in *.list) ;; *) [ -e "${_f%.*}.list" ] && printf 'AP\t%s.list?e\t1\n' "${_f%.*}" ;; esac
    done
    # each package whose file list dpkg wrote anew, and whether dpkg's log says it installed or
    # unpacked that package at the version it has now (`PKG.list?logged 1`): a file list rewritten
    # by anything else does not make the package's other files dpkg's (an install cut short leaves
    # packages unpacked or half-installed, logged as such: its scripts are settled below)
    # (dpkg's log lines from the baseline's second on: it writes the container's local time)
    _ap_from=$(date -d "@${TBSCALE_SINCE%.*}" '+%Y-%m-%d %H:%M:%S' 2>/dev/null || echo 0)
    # (each installed package's name, version and status, read once for this and the check below)
    _ap_pkgs=$(dpkg-query -W -f='${binary:Package} ${Version} ${Architecture} ${Status}\n' 2>/dev/null)
    { printf '%s\n' "$_ap_pkgs"; echo '--'
      grep -h -E ' status (installed|unpacked|half-installed|half-configured|triggers-awaited|triggers-pending) ' \
        /var/log/dpkg.log 2>/dev/null | awk -v f="$_ap_from" '$1 " " $2 >= f'; echo '--'
      printf '%s\n' "$_ap_info" | sed -n 's|^/var/lib/dpkg/info/\(.*\)\.list$|\1|p'; } \
      | awk -v OFS='\t' '
          $0 == "--" { part++; next }
          part == 0 { v[$1] = $2; n = $1; sub(/:.*/, "", n); if (!(n in v)) v[n] = $2; next }
          part == 1 { logged[$5 " " $6] = 1; n = $5; sub(/:.*/, "", n); logged[n " " $6] = 1; next }
          { print "AP", "/var/lib/dpkg/info/" $1 ".list?logged", (($1 in v) && (($1 " " v[$1]) in logged)) ? 1 : 0 }'
    # a package whose scripts dpkg runs when the verifier runs apt: one dpkg installed or unpacked in
    # the agent phase that waits on a trigger (its triggers file, or dpkg's own registry of them),
    # is not configured yet (apt configures it first), or has a prerm or postrm and a newer version
    # apt has (an install that needs it upgrades it). With whether apt's log names its
    # version or apt has it from a source (`apt-cache madison`), or neither (`dpkg -i`): what the
    # entry says; what settles it is the archive's package (runner/debian_updates.py).
    # `PKG.list?runs ORIGIN:WHY[+WHY]`
    # (one pass: the packages whose file list is new, those with a trigger's interest in their
    # triggers file, those with a prerm or postrm, the names in dpkg's registry of triggers, each
    # package's version and status, the versions apt's log names; then one `apt-cache policy` for
    # those that may be upgraded, and apt-cache madison for those apt's log does not name)
    _ap_runs=$({ printf '%s\n' "$_ap_info" | sed -n 's|^/var/lib/dpkg/info/\(.*\)\.list$|L \1|p'
      grep -l '^[[:space:]]*interest' /var/lib/dpkg/info/*.triggers 2>/dev/null | sed 's|^.*/\(.*\)\.triggers$|I \1|'
      printf '%s\n' /var/lib/dpkg/info/*.prerm /var/lib/dpkg/info/*.postrm | sed -n -e 's|^.*/\(.*\)\.prerm$|R \1|p' -e 's|^.*/\(.*\)\.postrm$|R \1|p'
      awk '{ print "T " $NF }' /var/lib/dpkg/triggers/* 2>/dev/null
      printf '%s\n' "$_ap_pkgs" | sed 's/^/S /'
      grep -h -e '^Install: ' -e '^Upgrade: ' -e '^Reinstall: ' /var/log/apt/history.log 2>/dev/null | sed 's/^/H /'
    } | awk '
        $1 == "L" { l[$2] = 1; next }  $1 == "I" { i[$2] = 1; next }  $1 == "R" { r[$2] = 1; next }
        $1 == "T" { n = $2; sub(/\/noawait$/, "", n); sub(/:.*/, "", n); t[n] = 1; next }
        $1 == "S" { v[$2] = $3; a[$2] = $4; st[$2] = $NF; next }
        $1 == "H" { e = $0; sub(/^H [A-Za-z]+: /, "", e)
                    while (match(e, /[^ ,()]+ \([^)]*\)/)) {
                      one = substr(e, RSTART, RLENGTH); e = substr(e, RSTART + RLENGTH)
                      n = one; sub(/ .*/, "", n); sub(/:.*/, "", n); sub(/^[^(]*\(/, "", one); sub(/\)$/, "", one)
                      k = split(one, vs, ", "); for (j = 1; j <= k; j++) h[n " " vs[j]] = 1 } }
        END { for (p in l) { n = p; sub(/:.*/, "", n); why = ""
                if ((p in i) || (n in t)) why = why "+trigger"
                if (st[p] != "installed") why = why "+unconfigured"
                if (why == "" && !(p in r)) continue
                print p, n, (v[p] == "" ? "-" : v[p]), ((n " " v[p]) in h) ? "source" : "?", (why == "" ? "-" : substr(why, 2)),
                      (p in r) ? 1 : 0, (a[p] == "" ? "-" : a[p]) } }')
    _ap_up=" $(printf '%s\n' "$_ap_runs" | awk '$6 == 1 { print $2 }' | sort -u | xargs -r apt-cache policy 2>/dev/null |
      awk '/^[^ ].*:$/ { n = substr($0, 1, length($0) - 1) } $1 == "Installed:" { i = $2 }
           $1 == "Candidate:" && $2 != "(none)" && $2 != i { printf "%s ", n }')"
    printf '%s\n' "$_ap_runs" | while read -r _pkg _n _v _o _why _rm _arch; do
      [ -n "$_pkg" ] || continue
      [ "$_why" = - ] && _why=
      case $_ap_up in *" $_n "*) _why=$_why+upgrade ;; esac
      # one with a prerm or postrm that apt's lists give no newer version of: whether the archive has
      # one is asked from outside (apt's lists may be gone, or the agent's)
      if [ -z "$_why" ]; then printf 'AP\t/var/lib/dpkg/info/%s.list?rm\t%s %s\n' "$_pkg" "$_v" "$_arch"; continue; fi
      [ "$_o" = source ] || if [ "$_v" != - ] && apt-cache madison "$_n" 2>/dev/null | awk -F'|' -v v="$_v" \
          '{ gsub(/^ +| +$/, "", $2) } $2 == v { f = 1 } END { exit !f }'; then _o=source; else _o=none; fi
      printf 'AP\t/var/lib/dpkg/info/%s.list?runs\t%s:%s\n' "$_pkg" "$_o" "${_why#+}"
    done
    _newer /usr/lib/apt /usr/share/debconf /usr/share/perl5/Debconf /usr/bin/dpkg* /usr/bin/update-alternatives \
        /usr/bin/gpgv /usr/bin/sqv /usr/bin/apt-key /usr/bin/apt-cache /usr/bin/debconf* /usr/bin/ucf* /usr/sbin/ldconfig \
        /sbin/ldconfig /usr/sbin/invoke-rc.d /usr/sbin/policy-rc.d /usr/sbin/update-rc.d /usr/bin/deb-systemd-* \
        /usr/sbin/dpkg-preconfigure /usr/sbin/dpkg-reconfigure /usr/bin/perl /usr/bin/perl5* \
        /usr/sbin/update-ca-certificates /etc/ca-certificates/update.d /usr/lib/os-release /etc/os-release \
        /usr/lib/*/libapt-pkg.so* /usr/lib/*/libapt-private.so* \
        -maxdepth 3 \( -type f -o -type l \) | head -n 200 | while IFS= read -r _f; do
      # its package, by the path dpkg has for it (before a merged /usr, /sbin/ldconfig for /usr/sbin/ldconfig)
      _pk=; for _o in "$_f" "${_f#/usr}" "/usr$_f"; do
        _pk=$(grep -l -x -F -- "$_o" /var/lib/dpkg/info/*.list 2>/dev/null | head -n 1); [ -n "$_pk" ] && break
      done
      if [ -z "$_pk" ]; then _st=unowned
      else
        _want=$(awk -v f="${_o#/}" '$2 == f { print $1; exit }' "${_pk%.list}.md5sums" 2>/dev/null)
        # a file in /etc is a conffile: its digest is in dpkg's status, not the md5sums
        [ -n "$_want" ] || _want=$(_pk=${_pk##*/}; dpkg-query -W -f='${Conffiles}\n' "${_pk%.list}" 2>/dev/null |
          awk -v f="$_o" '$1 == f && $3 != "obsolete" { print $2; exit }')
        _got=$(md5sum < "$_f" 2>/dev/null | cut -d' ' -f1)
        if [ -n "$_want" ] && [ "$_want" = "$_got" ]; then _st=intact
        elif [ -z "$_want" ] && [ -L "$_f" ]; then _st=intact
        else _st=changed; fi
      fi
      printf 'AP\t%s?prog\t%s\n' "$_f" "$_st"
    done
  fi
fi
'''.replace("@INFO_NAMES@", " ".join(f"-o -name '*.{ext}'" for ext in _CONTROL)).replace(
    "@INFO_MORE@", str(INFO_LISTED + 1)).replace("@INFO_LISTED@", str(INFO_LISTED))
