"""Perl's module folders: the modules the agent phase wrote where the verifier's perl finds them
(docs/tasks.md, "Verification integrity": Perl's modules).

The verifier runs perl more often than its scripts say: on Debian and Ubuntu, `apt-get install`
runs `dpkg-preconfigure` and debconf's frontend, both perl, as root, before and while dpkg installs
(Terminal-Bench 2's test scripts begin `apt-get update; apt-get install -y curl`). Perl looks for a
module in the folders of its @INC in order, and Debian's begins with `/etc/perl` and the
`/usr/local` ones: a `strict.pm` of the agent's in `/etc/perl` that runs its own code and then
loads the real one ran in both when the verifier installed curl, with nothing recorded until
2026-12-07; so would the library's `strict.pm` written over, or a `strict.pmc` beside it (perl
takes a `.pmc` over the `.pm` of its folder).

So at the baseline (before any process of the agent's) the folders of @INC are taken from the
environment's perl, with the module files in them (`.pm`, `.pmc`, `.pl`, an XS module's `auto/`
files) by their path below their folder; after the sweep, the module files there that changed since
the baseline's clock under one of those paths (a `.pmc` as its `.pm`: perl takes it first) are
`perl_module_changed`: a module replaced in place, or one put in a folder perl searches before the
one that had it. A module under a new path is an install (a package's new modules, a CPAN install of
the agent's): nothing loaded it before. A package's modules an `apt-get install` or an upgrade wrote
are settled against the archive as any package file is (runner/debian_updates.py). The guard
shell's part: `PERL_PATH`."""

from __future__ import annotations

from tbscale.runner.findings import listed_entry
from tbscale.types.guard import GuardSnapshot, Tampering, ToolRun

KIND = "perl_module_changed"
KEY = "perl_path"  # the snapshot's key (runner/build_tools.py)
INC = ":inc"  # the baseline's line: perl's @INC, `:`-separated
NAMES = ":names"  # and the module files in those folders, by their path below their folder, blank-separated
ALL = "*"  # in place of NAMES where there were more than NAMES_MAX: every module file changed counts
NAMES_MAX = 150_000  # bookworm's perl with its library (`apt-get install perl`): 1,417 files, 31,596 characters
LINK = ":link:"  # after the sweep: `:link:FOLDER` -> where a folder that is a link leads (it is walked there)
MORE = ":more"  # after the sweep: more module files changed than are listed
LISTED_MAX = 5_000
MODULE_ENDINGS = (".pm", ".pmc", ".pl")  # and every file under an `auto/` folder (an XS module's)
# Modules that count wherever they are written, new or not: `/etc/perl` holds settings, not modules
# (no package or CPAN install puts a module there); and the modules debconf, which apt runs as root,
# loads by a name its settings or database give (`Debconf::FrontEnd::`, `Debconf::DbDriver::`,
# `Debconf::Element::`, `Debconf::Format::`) or only when they are there (`eval "use ..."`)
NO_MODULES = ("/etc/perl",)
LOADED_IF_THERE = ("Debconf/", "Locale/gettext.pm", "Text/Iconv.pm", "Text/WrapI18N.pm", "Text/CharWidth.pm")
PERL = ":perl"  # `folders` gives this one line: perl runs where the verifier runs apt, not only where it says perl


def perl_lines(texts: list[str], tests_mount: str | None = None) -> list[str]:
    """Every verifier with a script gets the check: apt and many tools run perl unnamed."""
    return [PERL] if any(t.strip() for t in texts) else []


def baseline_folders(before: dict[str, str]) -> str:
    return before.get(INC, "")


def perl_modules(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """The module files listed after the sweep (changed since the baseline, in a folder of @INC)
    whose path below their folder one of the folders had at the baseline, or that count wherever
    they are (NO_MODULES, LOADED_IF_THERE)."""
    links = [v for k, v in after.items() if k.startswith(LINK) and v.startswith("/")]
    folders = sorted({f for f in before.get(INC, "").split(":") if f.startswith("/")} | set(links), key=len, reverse=True)
    names = before.get(NAMES, "")
    known = None if names == ALL else set(names.split())
    found = []
    for path in (p for p in after if not p.startswith(":")):
        folder = next((f for f in folders if path.startswith(f.rstrip("/") + "/")), None)
        if folder is None:
            continue
        rel = path[len(folder.rstrip("/")) + 1:]
        as_pm = rel.removesuffix("c") if rel.endswith(".pmc") else rel  # perl takes a .pmc for its .pm
        if known is None or as_pm in known or folder in NO_MODULES or as_pm.startswith(LOADED_IF_THERE):
            found.append(path)
    return sorted(found)


def perl_groups(before: GuardSnapshot | None, after: GuardSnapshot) -> dict[str, list[str]]:
    """Every path of the entry, for runner/debian_updates.py: a package's modules an install replaced
    are settled against the archive; none where not all were listed (what settles the listed ones
    says nothing of the rest)."""
    listed = after.get(KEY) or {}
    found = perl_modules((before or {}).get(KEY) or {}, listed)  # type: ignore[arg-type]
    return {KIND: found} if found and MORE not in listed else {}


def perl_changed(before: dict[str, str], after: dict[str, str], read_before: dict, read_after: dict,
                 snap, actions: list[tuple[int, str]], run: ToolRun) -> list[Tampering]:
    found = perl_modules(before, after)
    if not found and MORE not in after:
        return []
    more = f" (more than {LISTED_MAX} module files changed: not all were looked at)" if MORE in after else ""
    return [_entry(found, more, actions)]


def perl_seen_outside(changed: dict[str, int], before: dict[str, str] | None, after: dict[str, str] | None,
                      inside: list[Tampering], actions: list[tuple[int, str]]) -> list[Tampering]:
    """From the backend's own listing (`environment.file_checks: outside`): the module files written
    in the baseline's folders under a path they had, that the check inside did not report (a `find`
    of the agent's can make it list nothing; the outside listing cannot be made to)."""
    reported = {p for e in inside if e["kind"] == KIND for p in e.get("paths", [])}
    written = {p: "c" for p, kind in changed.items()
               if kind != 2 and p not in reported and (p.endswith(MODULE_ENDINGS) or "/auto/" in p)}
    links = {k: v for k, v in (after or {}).items() if k.startswith(LINK)}
    found = perl_modules(before or {}, {**written, **links})
    return [_entry(found, ", as seen from outside the environment", actions)] if found else []


def _entry(found: list[str], more: str, actions: list[tuple[int, str]]) -> Tampering:
    return listed_entry(KIND, "a Perl module written where the perl the verifier runs (debconf's, under apt-get "
                        "install) finds it, under a path one of its folders had before the agent phase (replaced, or "
                        "put where perl looks first), in /etc/perl, or one debconf loads by name or when it is there"
                        + more, found, actions)


# ---- the guard shell's part (runner/guard.py runs it in its checks' exec) ----------------------------
# At the baseline a `PL :inc` line with the folders of the environment's perl's @INC, those that are
# not there yet too (Debian's `/etc/perl` is made by the first file put in it; `-f`: no
# sitecustomize.pl; the one-liner loads no module), and a `PL :names` line with the module files in
# them by their path below their folder (ALL past NAMES_MAX characters). After the sweep, those
# folders (TBSCALE_PERL_PATH_BEFORE) are walked for the module files changed since the clock, a
# `PL PATH c` line each (perl_modules sorts them), and a `PL :more 1` line past LISTED_MAX. A
# folder that is a link is walked where it leads (Debian's `/usr/share/perl/5.36` leads to
# `5.36.0`, the path dpkg lists; `/etc/perl` made a link to a folder of the agent's), with a
# `PL :link:FOLDER TARGET` line; at the baseline `FOLDER/` is walked, which find follows.
PERL_PATH = r'''
if [ -n "${TBSCALE_PERL_PATH+set}" ]; then
  _plm() { "$@" \( -name '*.pm' -o -name '*.pmc' -o -name '*.pl' -o -path '*/auto/*' \) ! -type d; }
  if [ -z "${TBSCALE_SINCE:-}" ]; then
    if command -v perl >/dev/null 2>&1; then
      _plf=$(perl -f -e 'print join(":", grep { m{^/} } @INC)' 2>/dev/null)
      printf 'PL\t:inc\t%s\n' "$_plf"
      _ifs=$IFS; IFS=:; set -f
      # by the longest of the folders each is under
      _pla=; for _d in $_plf; do _pla="$_pla$_d/:"; done
      _plm find $_pla 2>/dev/null |
        _plf=$_plf awk 'BEGIN { n = split(ENVIRON["_plf"], f, ":") }
          { best = ""; for (i = 1; i <= n; i++) if (index($0, f[i] "/") == 1 && length(f[i]) > length(best)) best = f[i]
            if (best != "" && !seen[r = substr($0, length(best) + 2)]++) { out = out r " "; if (length(out) > @NAMES_MAX@) { out = "*"; exit } } }
          END { printf "PL\t:names\t%s\n", out }'
      set +f; IFS=$_ifs
    fi
  elif [ -n "${TBSCALE_PERL_PATH_BEFORE:-}" ]; then
    _ifs=$IFS; IFS=:; set -f
    _plf=; for _d in $TBSCALE_PERL_PATH_BEFORE; do
      [ -d "$_d" ] || continue
      if [ -L "$_d" ]; then _r=$(readlink -f -- "$_d"); printf 'PL\t%s%s\t%s\n' "@LINK@" "$_d" "$_r"; _d=$_r; fi
      _plf="$_plf$_d:"
    done
    [ -z "$_plf" ] || _plm _newer $_plf |
      awk -v max=@MAX@ 'NR > max { print "PL\t:more\t1"; exit } { print "PL\t" $0 "\tc" }'
    set +f; IFS=$_ifs
  fi
fi
'''.replace("@MAX@", str(LISTED_MAX)).replace("@NAMES_MAX@", str(NAMES_MAX)).replace("@LINK@", LINK)
