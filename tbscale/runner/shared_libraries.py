"""The shared libraries the verifier's programs load: those the agent phase wrote where the dynamic
loader finds them, under a name the loader's folders had at the baseline (docs/tasks.md,
"Verification integrity": the shared libraries the dynamic loader finds).

Every program the verifier runs that is not static (`bash`, `python3`, `pytest`'s interpreter)
is started by the dynamic loader, which first maps the libraries it needs and runs their
constructors. A library of the agent's in their place runs before any test: a libexpat whose
constructor ends a process whose command line names pytest with status 0 (every function of the
real one kept as a stub, so that Python still starts) made the bundled fix-c-textstat pass, nothing
solved, with nothing recorded before 2026-12-07, whether it was written over the real file, put
in `/usr/local/lib`, in a `glibc-hwcaps` folder (searched first) or a folder of its own with
`ldconfig` run on it, or reached only through a cache `ldconfig -f` built from another file.

So, at the baseline, the names of the libraries in the loader's folders are taken, and after the
sweep, the libraries the agent phase wrote in those folders (status changed since the baseline's
clock: it cannot be set back) whose name is one of them are `shared_library_changed`: a library
replaced in place, or one put where the loader may take it before the one it took. The loader's
folders: the system's (`/lib`, `/usr/lib`, and `lib64`), those `/etc/ld.so.conf` and
`/etc/ld.so.conf.d/*.conf` name, those the loader's cache points into (`ldconfig -p`), those of
`LD_LIBRARY_PATH`, and those where the loader finds the libraries of the verifier's programs (a
program's own RPATH, `$ORIGIN/../lib` in a conda environment), each with its `glibc-hwcaps` and
older hardware-capability folders. A library under a new name is an install (`make install` of the
task's own library, a package's new library), not a finding: nothing already loaded it, and what
would load it is the agent's own code. But for a name service module (`libnss_*`): glibc opens the
one `/etc/nsswitch.conf` names in any program that looks up a user, and bash does as it starts
where SHELL is unset (an exec's environment): `passwd: evil files` and a `libnss_evil.so.2` whose
constructor writes the reward and exits 0 end `bash /tests/test.sh` before its first line. Those
count whatever their name. A package's library replaced by `apt-get install` or an upgrade is
settled against the archive as any package file is (runner/debian_updates.py).

OpenSSL's settings load libraries too: every program that uses libcrypto (python3 as it imports
hashlib, pip, curl) reads openssl.cnf as it starts it and loads the providers and engines it
activates, running their constructors. A provider of the agent's named there made a copy of
fix-c-textstat whose tests import hashlib pass, nothing solved, with nothing recorded until
2026-12-07. So after the sweep OpenSSL's settings, what they include and name as modules, and its
module folders are listed for what changed since the clock (`openssl_settings_changed`), whatever
the change says: providers, engines and configuration modules all load code, and no public task's
solution touches these files.
The guard shell's part: `SHARED_LIBRARIES` below."""

from __future__ import annotations

from pathlib import PurePosixPath

from tbscale.runner.findings import listed_entry
from tbscale.types.guard import GuardSnapshot, Tampering, ToolRun

KIND = "shared_library_changed"
KEY = "shared_libraries"  # the snapshot's key (runner/build_tools.py)
NAMES = ":names"  # the baseline's line: the library names in the loader's folders, blank-separated
FOLDERS = ":folders"  # and those folders (without their hardware-capability folders), `:`-separated
# the hardware-capability folders the loader searches in each of its folders, and how deep
CAPABILITY_FOLDERS = ("glibc-hwcaps", "tls", "haswell", "x86_64", "avx512_1", "aarch64", "i686", "sse2", "i386")
CAPABILITY_DEPTH = 3
# glibc opens a name service module by the name /etc/nsswitch.conf gives (`passwd: evil files` opens
# libnss_evil.so.2), in every program that looks up a user: bash does as it starts when SHELL is
# unset, as in a container's exec. So such a module counts whatever its name.
NSS_MODULES = "libnss_"
# Where distributions keep OpenSSL's settings (Debian's /usr/lib/ssl, whose openssl.cnf leads to
# /etc/ssl's; OpenSSL's own default; Fedora's), besides where each libcrypto was built to look
SSL_FOLDERS = ("/usr/lib/ssl", "/etc/ssl", "/usr/local/ssl", "/etc/pki/tls")
OPENSSL = ":openssl"  # the OpenSSL folders: `s` and a settings folder, `m` and a module folder, `:`-separated
OPENSSL_KIND = "openssl_settings_changed"
# `folders` gives this one line: the check needs nothing of the scripts but that they run programs
LOADER = ":loader"


def loader_lines(texts: list[str], tests_mount: str | None = None) -> list[str]:
    """Every verifier runs programs: the check runs wherever the verifier has a script."""
    return [LOADER] if any(t.strip() for t in texts) else []


# A variable of the exec's environment is one string of at most 128 KiB (Linux's MAX_ARG_STRLEN):
# more names than fit (an image with thousands of libraries) are not given back, and the shell
# prints every library written there for the check here to sort (`ALL`)
NAMES_GIVEN_MAX = 100_000
ALL = "*"


def baseline_names(before: dict[str, str]) -> str:
    """What the shell is given back after the sweep: the names the baseline found, or ALL."""
    names = before.get(NAMES, "")
    return names if len(names) <= NAMES_GIVEN_MAX else ALL


def written_libraries(after: dict[str, str], names: str) -> list[str]:
    """The libraries the shell listed after the sweep (written since the baseline, in a loader's
    folder) whose name the loader's folders had at the baseline."""
    known = set(names.split())
    return sorted(p for p, mark in after.items() if mark == "c" and _counts(PurePosixPath(p).name, known))


def openssl_settings(after: dict[str, str]) -> list[str]:
    """OpenSSL's settings and modules the shell listed after the sweep (changed since the baseline)."""
    return sorted(p for p, mark in after.items() if mark == "s")


def _counts(name: str, known: set[str]) -> bool:
    return name in known or name.startswith(NSS_MODULES)


def library_groups(before: GuardSnapshot | None, after: GuardSnapshot) -> dict[str, list[str]]:
    """Every path of the entry (it names the first ENTRY_PATHS), for runner/debian_updates.py: a
    package's library an install replaced is settled against the archive."""
    listed = after.get(KEY) or {}
    groups = {KIND: written_libraries(listed, baseline_names((before or {}).get(KEY) or {})),  # type: ignore[arg-type]
              OPENSSL_KIND: openssl_settings(listed)}  # type: ignore[arg-type]
    return {kind: found for kind, found in groups.items() if found}


def libraries_seen_outside(changed: dict[str, int], before: dict[str, str] | None, after: dict[str, str] | None,
                           inside: list[Tampering], actions: list[tuple[int, str]]) -> list[Tampering]:
    """From the backend's own listing (`environment.file_checks: outside`): the libraries written in
    the loader's folders (the baseline's, and those the check after the sweep found) under a name the
    baseline had, that the check inside did not report (`inside`: its entries). A libc or loader of
    the agent's can make every program inside lie; the outside listing cannot."""
    before, after = before or {}, after or {}
    known = set(before.get(NAMES, "").split())
    folders = {f for f in (before.get(FOLDERS, "") + ":" + after.get(FOLDERS, "")).split(":") if f.startswith("/")}
    # the folders the check inside found, and where distributions keep OpenSSL's settings (what
    # something inside can make that check say does not change these)
    ssl = [f for f in (before.get(OPENSSL, "") + ":" + after.get(OPENSSL, "")).split(":") if f[1:2] == "/"]
    ssl += ["s" + f for f in SSL_FOLDERS]
    reported = {p for e in inside if e["kind"] in (KIND, OPENSSL_KIND) for p in e.get("paths", [])}
    written = [p for p, kind in changed.items() if kind != 2 and p not in reported]
    found = sorted(p for p in written if _counts(PurePosixPath(p).name, known) and _in_folders(p, folders))
    settings = sorted(p for p in written if _openssl_file(p, ssl))
    seen = ", as seen from outside the environment"
    return [*([_entry(found, actions, seen)] if found else []), *([_settings_entry(settings, actions, seen)] if settings else [])]


def _openssl_file(path: str, folders: list[str]) -> bool:
    """A `.cnf` file right in one of OpenSSL's settings folders, or any file right in a module folder
    (what they include is not followed from outside)."""
    parent, name = str(PurePosixPath(path).parent), PurePosixPath(path).name
    return any(parent == f[1:] and (f[0] == "m" or name.endswith(".cnf")) for f in folders)


def _in_folders(path: str, folders: set[str]) -> bool:
    """Whether the loader searches `path`'s folder: one of `folders`, or one of their
    hardware-capability folders (at most CAPABILITY_DEPTH below them)."""
    parents = PurePosixPath(path).parents
    if str(parents[0]) in folders:
        return True
    for depth in range(1, CAPABILITY_DEPTH + 1):
        if depth + 1 < len(parents) and parents[depth - 1].relative_to(parents[depth]).name in CAPABILITY_FOLDERS \
                and str(parents[depth]) in folders:
            return True
    return False


def libraries_changed(before: dict[str, str], after: dict[str, str], read_before: dict, read_after: dict,
                      snap, actions: list[tuple[int, str]], run: ToolRun) -> list[Tampering]:
    found, settings = written_libraries(after, before.get(NAMES, "")), openssl_settings(after)
    return [*([_entry(found, actions)] if found else []), *([_settings_entry(settings, actions)] if settings else [])]


def _entry(found: list[str], actions: list[tuple[int, str]], seen: str = "") -> Tampering:
    return listed_entry(KIND, "a shared library written where the dynamic loader finds the libraries of the verifier's "
                        "programs, under a name one of its folders had before the agent phase (replaced, or put where "
                        f"the loader may take it first), or a name service module{seen}", found, actions)


def _settings_entry(found: list[str], actions: list[tuple[int, str]], seen: str = "") -> Tampering:
    return listed_entry(OPENSSL_KIND, "OpenSSL's settings, or a module in a folder it loads providers and engines from, "
                        "added or changed (every program that uses libcrypto, such as python3's hashlib, pip and curl, "
                        f"reads them and loads the modules they name, running their code){seen}", found, actions)



# ---- the guard shell's part (runner/guard.py runs it in its checks' exec) ----------------------------
# `_sll`: the loader, the first of glibc's (x86-64, aarch64, arm, i386) and musl's that is there; each
# program the verifier runs (SNAPSHOT's `_files`, their real paths) is given to it with `--list`,
# which maps the program and its libraries and prints where it found them without running either
# (no constructor runs; a script it refuses). The folders (`_sld`, real paths,
# one a line): the system's, ld.so.conf's, the cache's, LD_LIBRARY_PATH's and those the programs'
# libraries were found in. At the baseline one `SL :names` line with the names of the `*.so*` files
# there (and in their hardware-capability folders); after the sweep an `SL PATH c` line for each
# such file whose status changed since the baseline's clock (`_newer`, guard_shell._NEWER) and whose
# name is one of those (`baseline_names`, given back to it) or a name service module's.
SHARED_LIBRARIES = r'''
if [ -n "${TBSCALE_SHARED_LIBRARIES+set}" ]; then
  _sll=
  for _l in /lib64/ld-linux-x86-64.so.2 /lib/ld-linux-aarch64.so.1 /lib/ld-linux-armhf.so.3 /lib/ld-linux.so.2 \
            /lib/ld-musl-*.so.1; do [ -f "$_l" ] && { _sll=$_l; break; }; done
  if command -v ldconfig >/dev/null 2>&1; then _slc=ldconfig; elif [ -x /sbin/ldconfig ]; then _slc=/sbin/ldconfig
  else _slc=; fi
  _ifs=$IFS; IFS='
'; _slf=
  for _c in /etc/ld.so.conf /etc/ld.so.conf.d/*.conf /etc/ld-musl-*.path; do [ -f "$_c" ] && _slf="$_slf$_c$IFS"; done
  set -f
  # one awk reads them all: a library's path (`NAME => PATH`, `PATH (0x...)`) gives its folder, a
  # line of the settings its folders. The loader lists every program, the system's too (jammy's
  # ImageMagick programs in /usr/bin carry a RUNPATH of /usr/lib/X11, no folder of the loader's
  # own); a script given to it is refused, not run.
  _sld=$( { printf '%s\n' /lib /usr/lib /lib64 /usr/lib64 /usr/local/lib
            printf '%s\n' "${LD_LIBRARY_PATH:-}" | tr ':' '\n'
            [ -z "$_slc" ] || "$_slc" -p
            [ -z "$_sll" ] || for _f in ${_files:-}; do "$_sll" --list "$_f"; done
          } 2>/dev/null | awk '
      /=>/ { for (i = 1; i < NF; i++) if ($i == "=>") { p = $(i + 1); sub(/\/[^\/]*$/, "", p); print p }; next }
      / \(0x/ { p = $1; sub(/\/[^\/]*$/, "", p); print p; next }
      { sub(/#.*/, ""); n = split($0, a, /[: \t]+/); for (i = 1; i <= n; i++) print a[i] }' $_slf - 2>/dev/null | sort -u)
  _sle=
  for _d in $_sld; do case "$_d" in /*) [ -d "$_d" ] && _sle="$_sle$_d$IFS" ;; esac; done
  _sld=
  [ -z "$_sle" ] || _sld=$(readlink -f -- $_sle 2>/dev/null | sort -u)
  # and each folder's hardware-capability folders (glibc-hwcaps/*, and the older tls, haswell,
  # x86_64, ... that glibc before 2.37 searches), which the loader searches first
  _slh=
  for _d in $_sld; do for _h in @CAPABILITY_FOLDERS@; do [ -d "$_d/$_h" ] && _slh="$_slh$_d/$_h$IFS"; done; done
  _sls() { [ -z "$_sld" ] || "$@" $_sld -mindepth 1 -maxdepth 1 -name '*.so*' ! -type d
           [ -z "$_slh" ] || "$@" $_slh -mindepth 1 -maxdepth @CAPABILITY_DEPTH@ -name '*.so*' ! -type d; }
  printf 'SL\t:folders\t'; for _d in $_sld; do printf '%s:' "$_d"; done; printf '\n'
  if [ -z "${TBSCALE_SINCE:-}" ]; then
    printf 'SL\t:names\t%s\n' "$(_sls find 2>/dev/null | awk -F/ '!seen[$NF]++ { printf "%s ", $NF }')"
  else
    # only those under a name the baseline had (TBSCALE_SHARED_LIBRARIES_BEFORE, its `:names`): the
    # libraries a large install adds under new names are not printed, so none can push one out;
    # and every name service module (`libnss_*`), whatever its name
    _slw=
    for _f in $(_sls _newer); do
      case " ${TBSCALE_SHARED_LIBRARIES_BEFORE:-} " in *" ${_f##*/} "*|' * ') ;; *)
        case "${_f##*/}" in @NSS@*) ;; *) continue ;; esac ;; esac
      printf 'SL\t%s\tc\n' "$_f"; _slw="$_slw$_f$IFS"
    done
    # OpenSSL's folders: where each libcrypto in those folders was built to read its settings
    # (OPENSSLDIR, an `s` before it) and load its providers and engines from (MODULESDIR,
    # ENGINESDIR, an `m`), and where distributions keep its settings
    _slk=; set +f
    for _d in $_sld; do for _f in "$_d"/libcrypto.so*; do [ -f "$_f" ] && _slk="$_slk$_f$IFS"; done; done
    set -f
    _slo=$( { [ -z "$_slk" ] || LC_ALL=C grep -a -o -h -E '(OPENSSLDIR|MODULESDIR|ENGINESDIR): "/[^"]*"' $_slk
              printf 'OPENSSLDIR: "%s"\n' @SSL_FOLDERS@; } 2>/dev/null |
            awk -F'"' '!seen[$2]++ { print ($1 ~ /^OPENSSLDIR/ ? "s" : "m") $2 }')
    _slos=; _slom=; _slt=
    printf 'SL\t:openssl\t'
    for _o in $_slo; do _d=${_o#?}; [ -d "$_d" ] || continue
      printf '%s:' "$_o"
      # a folder that is a link is walked where it leads too (find does not go into a link it is given)
      _r=; [ -L "$_d" ] && _r=$(readlink -f -- "$_d")$IFS
      case "$_o" in m*) _slom="$_slom$_d$IFS$_r"; continue ;; esac
      _slos="$_slos$_d$IFS$_r"; [ -e "$_d/openssl.cnf" ] || [ -L "$_d/openssl.cnf" ] && _slt="$_slt$_d/openssl.cnf$IFS"
    done
    printf '\n'
    # Its settings: each settings folder's `openssl.cnf` (and the file it leads to), the other
    # `.cnf` files there, what they include (`.include PATH`, a folder's files; a relative path
    # from the including file's folder), two levels deep, and the files they name by path as
    # modules (`module`, `dynamic_path`, `path`); and every file of the module folders. An `SL
    # PATH s` line for each changed since the clock (not one listed above).
    [ -z "$_slt" ] || _slt="$_slt$(readlink -f -- $_slt 2>/dev/null)$IFS"
    _slr=$_slt
    for _i in 1 2; do
      _slq=; for _f in $_slr; do [ -f "$_f" ] && _slq="$_slq$_f$IFS"; done
      [ -n "$_slq" ] || break
      _sln=$(awk 'FNR == 1 { dir = FILENAME; sub(/\/[^\/]*$/, "", dir) }
          { sub(/#.*/, ""); sub(/[ \t\r]+$/, ""); sub(/^[ \t]+/, "") }
          /^\.include([ \t=]|$)/ { v = $0; sub(/^\.include[ \t]*=?[ \t]*/, "", v); gsub(/"/, "", v)
                                   if (v != "") print (v ~ /^\// ? v : dir "/" v); next }
          /^(module|dynamic_path|path)[ \t]*=/ { v = $0; sub(/^[^=]*=[ \t]*/, "", v); gsub(/"/, "", v)
                                                  if (v ~ /^\//) print v }' $_slq 2>/dev/null)
      [ -n "$_sln" ] || break
      # the files they lead to: a folder's, and where a link points
      _slr=$( { find $_sln -mindepth 1 -maxdepth 1 ! -type d; readlink -f -- $_sln; } 2>/dev/null)
      _slt="$_slt$_sln$IFS$_slr$IFS"
    done
    # one walk of them all, sorted here: a path named, a `.cnf` file right in a settings folder,
    # any file right in a module folder
    [ -z "$_slt$_slos$_slom" ] || _newer $_slt $_slos $_slom -maxdepth 1 ! -type d |
      _slw=$_slw _slt=$_slt _slos=$_slos _slom=$_slom awk '
        function each(v, into,   a, n, i) { n = split(ENVIRON[v], a, "\n"); for (i = 1; i <= n; i++) into[a[i]] = 1 }
        BEGIN { each("_slw", seen); each("_slt", named); each("_slos", settings); each("_slom", modules) }
        { p = $0; sub(/\/[^\/]*$/, "", p) }
        !seen[$0]++ && ($0 in named || p in modules || (p in settings && $0 ~ /\.cnf$/)) { print "SL\t" $0 "\ts" }'
  fi
  set +f; IFS=$_ifs
fi
'''.replace("@CAPABILITY_FOLDERS@", " ".join(CAPABILITY_FOLDERS)).replace("@CAPABILITY_DEPTH@", str(CAPABILITY_DEPTH)).replace("@NSS@", NSS_MODULES).replace("@SSL_FOLDERS@", " ".join(SSL_FOLDERS))
