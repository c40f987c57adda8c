"""Files the verifier runs that the agent phase changed by installing Debian or Ubuntu packages
with apt: settled against the packages as their archive publishes them, not counted as tampering.

An honest agent runs `apt-get install -y python3` in an image without Python (to write a helper
script), or `apt-get install -y python3-dev` (to build an extension). The first adds the `python3`
the verifier's scripts may run and some 1,500 files of its standard library, the second rewrites
files of it; the guard reports them (`toolchain_added`, `python_library_changed`,
`startup_hook_planted`) and the trial was a failure. Such an entry is settled when every path it
stands for is, as read from outside the environment, the file (or link) that the package dpkg
says owns it installs at the version dpkg has (installed, or unpacked by an install cut short), in
the `.deb` the archive's signed index names (runner/debian_archive.py):

* a program (`toolchain_added`, `toolchain_replaced`): the path its name resolves to and the file
  that resolves to;
* a kind of changed path (`python_library_changed`, `startup_hook_planted`,
  `test_library_changed`): every path of that kind the guard's listing found, not only those the
  entry names.

A path no installed package owns, a file that differs from the package's, a path removed, a
conffile edited: the entry stays, with `published_check` saying why. What dpkg's database says
(which package, which version) only says where to look: an agent that rewrote it still has to
leave exactly the archive's bytes at every path. The settled entries leave the trial's tampering
and go to the sweep's `debian_packages`, each with the package, its `.deb` and its sha256.

An `apt_package_planted` entry (runner/apt_settings.py: the packages whose maintainer scripts the
verifier's apt runs) is settled package by package, whole: dpkg's copies of its scripts and
triggers file are the `.deb`'s `control.tar` members, and every file of its `data.tar` that is
there is the `.deb`'s (`_package_problems`)."""

from __future__ import annotations

import functools
import hashlib
import os
import posixpath
import re
import tempfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from tbscale.environments.base import Environment
from tbscale.errors import SandboxError
from tbscale.runner.debian_archive import (DISTRIBUTIONS, SCRIPTS, ArchiveUnavailable, Deb, install_closure, newer_published,
                                          published_deb, relations, satisfies)
from tbscale.runner.apt_settings import PACKAGE_KIND, PACKAGES_CHECKED, UNTOLD_INSTALL, source_suites
from tbscale.runner.dpkg_programs import KIND as PROGRAM_KIND
from tbscale.runner.findings import ENTRY_PATHS
from tbscale.runner.package_updates import install_command
from tbscale.types.guard import DebianPackage, Tampering

TOOL_KINDS = ("toolchain_added", "toolchain_replaced")
PATH_KINDS = ("python_library_changed", "startup_hook_planted", "test_library_changed", "shared_library_changed",
              "openssl_settings_changed", "perl_module_changed", PROGRAM_KIND)
# kinds whose paths are read one by one, never as their folder whole: a library folder holds far
# more than the packages whose files an entry names (/usr/lib/x86_64-linux-gnu: tens of MB), and a
# library removed from it forges nothing (what loaded it fails)
ALONE_KINDS = ("shared_library_changed", "openssl_settings_changed", PROGRAM_KIND)
# kinds whose paths are read by a folder one level deeper: Perl's module folders are their own
# (/usr/lib/x86_64-linux-gnu/perl-base, not /usr/lib/x86_64-linux-gnu, which holds tens of MB besides)
DEEPER_KINDS = ("perl_module_changed",)
STATUS_LIMIT = 64 * 2**20
INFO_LIMIT = 256 * 2**20  # dpkg's lists and scripts of every installed package
READ_ONE_BY_ONE = 8  # a folder with more changed paths than this is read whole
TREE_SLACK = 64 * 2**20
PACKAGE_SLACK = 256 * 2**20  # the same, for the files of a package whose scripts apt runs
# Where no Debian package puts a file (Debian policy: /usr/local is the local administrator's, and
# homes and /tmp are no package's): an entry whose paths are all here is not read for (a pip
# install's launcher, a test library under /usr/local), which saves reading dpkg's files (~0.5 s)
_NO_PACKAGE = re.compile(r"^/(usr/local|root|home|tmp)/")
_MERGED = re.compile(r"^/usr(/(bin|sbin|lib[^/]*)/.*)$")  # usrmerge: /usr/lib/x is also /lib/x
_PROGRAM = re.compile(r"^(/usr)?/s?bin/[^/]+$")
# folders every package puts files in, read a package's files one by one there (never whole: a large
# image's /usr/lib/x86_64-linux-gnu holds hundreds of MB besides them)
_SHARED_FOLDER = re.compile(r"^(/usr)?/lib(32|64|x32)?(/[a-z0-9_]+-linux-[a-z0-9_]+)?$")
# dpkg's states in which a package's files are there, whole or in part (dpkg(1)): an install cut short
# (an agent's command timed out in apt) leaves packages unpacked, one half-installed; what is there of
# them is still the archive's question, at the version dpkg unpacked
_FILES_THERE = frozenset({"installed", "unpacked", "half-configured", "triggers-awaited", "triggers-pending",
                          "half-installed"})
UNTOLD = "?"  # whether the archive has a newer version could not be told (_Packages.newer)
_JOURNAL = re.compile(r"^[0-9]+$")  # dpkg's journal in /var/lib/dpkg/updates: records newer than its status file


class _Packages:
    """The environment's installed packages (dpkg's status file and file lists, read from outside)."""

    def __init__(self, box: Environment):
        self.box = box
        self.scripts: dict[str, dict[str, str]] = {}  # package -> script name -> `file:SHA256`
        self.problem: str | None = None  # dpkg's files could not be read
        self.unsupported: str | None = None  # they were, but the release's archive is not checked
        self.distribution = ""
        self.codename = ""
        self.native = ""
        # `name` and `name:arch` -> (name, version, arch), of every package whose files dpkg put there
        self.installed: dict[str, tuple[str, str, str]] = {}
        self.owners: dict[str, str] = {}  # path -> `name` or `name:arch`, as the list file is named
        self.debs: dict[str, Deb | str] = {}  # owner -> the archive's package, or why there is none
        self.indexes: dict[str, dict] = {}  # the archive's indexes this check read, by sha256
        self.dpkg = True  # the environment has dpkg's database
        # the suites apt's sources name, what its `apt-get update` fetches (None: not told, all are asked)
        self.suites: frozenset[str] | None = frozenset()
        # `name` and `name:arch` -> (its conflicts and breaks, the names it provides, its dependencies
        # and pre-dependencies, each a list of alternatives), as dpkg's status has them
        self.relations: dict[str, tuple[list[tuple[str, str, str]], set[str], list[list[tuple[str, str, str]]]]] = {}
        self.brought: dict[tuple[str, ...], tuple | None] = {}  # install_closure's answers, by what is installed
        self._read()

    def _read(self) -> None:
        """The release, and dpkg's database as dpkg reads it: its status file, then its journal's
        records in order (a dpkg that was stopped has not folded them in)."""
        try:
            # (a link to /usr/lib/os-release, in Debian's own images: a copy out does not follow it)
            release = self.box.read_file("/etc/os-release", limit=2**20) or self.box.read_file("/usr/lib/os-release",
                                                                                              limit=2**20)
            status = self.box.read_file("/var/lib/dpkg/status", limit=STATUS_LIMIT)
            if status is None:
                self.dpkg = False
                return  # no dpkg here (Alpine, a distroless image): no package owns anything
            with tempfile.TemporaryDirectory(prefix="tbscale-dpkg-") as tmp:
                self.box.get_dir("/var/lib/dpkg/updates", Path(tmp), limit=STATUS_LIMIT)
                journal = sorted(Path(tmp, "updates").glob("*"), key=lambda f: f.name.zfill(12))
                records = [status, *(f.read_bytes() for f in journal
                                     if _JOURNAL.match(f.name) and f.is_file() and not f.is_symlink())]
                self.box.get_dir("/etc/apt/sources.list", Path(tmp), limit=2**20)
                self.box.get_dir("/etc/apt/sources.list.d", Path(tmp), limit=2**20)
                found = [f for f in [Path(tmp, "sources.list"), *Path(tmp, "sources.list.d").glob("*")]
                         if f.exists() or f.is_symlink()]
                # (apt follows a link, which a copy out does not: where one is there, all suites are asked)
                sources = None if any(f.is_symlink() or not f.is_file() for f in found) else \
                    [(f.name, f.read_bytes()) for f in found]
        except SandboxError as e:
            self.problem = str(e)
            return
        fields = dict(re.findall(r'^([A-Z_]+)="?([^"\n]*)"?$', (release or b"").decode("utf-8", "replace"), re.M))
        if fields.get("ID") in DISTRIBUTIONS and fields.get("VERSION_CODENAME"):
            self.distribution, self.codename = fields["ID"], fields["VERSION_CODENAME"]
        else:  # a derivative's packages are dpkg's too: their entries say why they stay
            self.unsupported = (f"the environment is {fields.get('ID') or 'an unnamed release'}, not a Debian or "
                                "Ubuntu release with a codename (/etc/os-release): its packages are not checked")
        self._statuses(b"\n\n".join(records).decode("utf-8", "replace"))
        self.suites = None if sources is None else frozenset(
            suite for name, data in sources for suite in source_suites(name, data.decode("utf-8", "replace")))

    def read_info(self, scripts_of: frozenset[str]) -> None:
        """dpkg's file lists (who owns a path) and the scripts of the packages `scripts_of`, as dpkg
        keeps them in /var/lib/dpkg/info (read from outside, once)."""
        if not self.dpkg or self.problem or self.owners:
            return
        with tempfile.TemporaryDirectory(prefix="tbscale-dpkg-") as tmp:
            try:
                if not self.box.get_dir("/var/lib/dpkg/info", Path(tmp), limit=INFO_LIMIT):
                    self.problem = "the environment has no /var/lib/dpkg/info"
                    return
            except SandboxError as e:
                self.problem = str(e)
                return
            info = Path(tmp) / "info"
            for lst in sorted(info.glob("*.list")):
                if lst.is_symlink():
                    continue
                for line in lst.read_text("utf-8", "replace").splitlines():
                    self.owners.setdefault(line, lst.name[:-5])
            for package in scripts_of:
                self.scripts[package] = {
                    name: f"link:{os.readlink(f)}" if f.is_symlink() else "file:" + hashlib.sha256(f.read_bytes()).hexdigest()
                    for name in SCRIPTS for f in [info / f"{package}.{name}"] if f.is_symlink() or f.exists()}

    def _statuses(self, text: str) -> None:
        for stanza in text.split("\n\n"):
            f = dict(re.findall(r"^([A-Za-z-]+):[ \t]*(.*)$", stanza, re.M))
            if not f.get("Package"):
                continue
            arch = f.get("Architecture", "")
            # a later record of the same package (its journal's) is what dpkg has
            self.installed.pop(f"{f['Package']}:{arch}", None)
            if self.installed.get(f["Package"], ("", "", arch))[2] == arch:
                self.installed.pop(f["Package"], None)
            if f.get("Status", "").rsplit(" ", 1)[-1] in _FILES_THERE and f.get("Version"):
                row = (f["Package"], f["Version"], arch)
                self.installed.setdefault(f["Package"], row)
                self.installed[f"{f['Package']}:{row[2]}"] = row
                both = (relations(f.get("Conflicts", "")) + relations(f.get("Breaks", "")),
                        {n for n, _, _ in relations(f.get("Provides", ""))},
                        [relations(one) for key in ("Depends", "Pre-Depends") for one in f.get(key, "").split(",")])
                self.relations.setdefault(f["Package"], both)
                self.relations[f"{f['Package']}:{row[2]}"] = both
                if f["Package"] == "dpkg":
                    self.native = row[2]

    def owner(self, path: str) -> str | None:
        twin = _twin(path)
        return self.owners.get(path) or (self.owners.get(twin) if twin else None)

    def newer(self, owner: str, ask: Callable[..., str | None]) -> str | None:
        """The archive's newest version of `owner`'s package that is newer than the one dpkg has;
        None when it has none; UNTOLD when that cannot be told (the archive not reached, no record
        of the package, a version the archive could not have: dpkg's status is the agent's to write,
        and apt compares what it finds there)."""
        row = self.installed.get(owner)
        if row is None:
            return UNTOLD
        try:
            return ask(*row, self.codename, native=self.native or "amd64", distribution=self.distribution,
                       parsed=self.indexes, named=self.suites)
        except ArchiveUnavailable:
            return UNTOLD

    def closure(self, installs: list[str], ask: Callable[..., tuple]) -> tuple | None:
        """install_closure's answer for `installs` (None: the archive could not be asked)."""
        key = tuple(installs)
        if key not in self.brought:
            try:
                self.brought[key] = ask(set(installs), self.codename, native=self.native or "amd64",
                                        distribution=self.distribution, parsed=self.indexes, named=self.suites)
            except ArchiveUnavailable:
                self.brought[key] = None
        return self.brought[key]

    def deb(self, owner: str, fetch: Callable[..., Deb]) -> Deb | str:
        if owner not in self.debs:
            row = self.installed.get(owner)
            if row is None:
                self.debs[owner] = f"dpkg lists files of {owner} but has no such package installed or unpacked"
            else:
                try:
                    self.debs[owner] = fetch(*row, self.codename, native=self.native or "amd64",
                                             distribution=self.distribution, parsed=self.indexes)
                except ArchiveUnavailable as e:
                    self.debs[owner] = f"{row[0]} {row[1]} was not checked against the archive: {e}"
        return self.debs[owner]


def settle_debian(entries: list[Tampering], box: Environment, groups: Callable[[], dict[str, list[str]]],
                  kinds: dict[str, int], *, fetch: Callable[..., Deb] = published_deb,
                  newer: Callable[..., str | None] = newer_published, closure: Callable[..., tuple] = install_closure
                  ) -> tuple[list[Tampering], list[DebianPackage]]:
    """(the entries that stay, the Debian packages that settled the others). `groups`: every
    changed path by the kind of entry it made (findings.changed_groups, called only when an entry
    of those kinds is there, once), `kinds` the listing's (2: removed). Costs nothing unless an
    entry is of a settled kind."""
    groups = functools.cache(groups)
    wanted: list[tuple[Tampering, list[str]]] = []
    packaged = [e for e in entries if e["kind"] == PACKAGE_KIND]
    for e in entries:
        if e["kind"] in TOOL_KINDS and isinstance(e.get("after"), dict):
            after = e["after"]  # type: ignore[typeddict-item]
            wanted.append((e, list(dict.fromkeys(p for p in (after.get("path"), after.get("real")) if p))))
        elif e["kind"] in PATH_KINDS and groups().get(e["kind"]) \
                and (e.get("paths") or []) == groups()[e["kind"]][:ENTRY_PATHS]:
            wanted.append((e, groups()[e["kind"]]))
    wanted = [(e, paths) for e, paths in wanted if not all(_NO_PACKAGE.match(p) for p in paths)]
    if not wanted and not packaged:
        return entries, []
    packages = _Packages(box)
    verdicts: dict[int, str | None] = {}
    # packages whose scripts run only if the verifier's apt upgrades them: those the archive has no
    # newer version of leave first (in an image that is not Debian's or Ubuntu's, none is asked: apt's
    # lists, read inside, said there was no upgrade; where dpkg's files could not be read, all stay)
    for e in packaged:
        if e.get("if_replaced"):
            if not (packages.problem or packages.unsupported):
                _only_replaced(e, packages, newer, closure)
            if (packages.unsupported and not packages.problem) or not e["paths"]:
                verdicts[id(e)] = None
    packaged = [e for e in packaged if id(e) not in verdicts]
    if not wanted and not packaged:
        return [e for e in entries if id(e) not in verdicts], []
    packages.read_info(frozenset(_listed(p) for e in packaged for p in e.get("paths") or []))
    # a path no installed package owns: Debian does not explain the entry, and it is left as it was
    # (a pip-installed pytest's entry keeps what runner/package_updates.py said of it); but a program
    # dpkg runs may be an alternative's link, which no package owns and its package's postinst made
    if packages.problem is None:
        wanted = [(e, paths) for e, paths in wanted if e["kind"] == PROGRAM_KIND or any(packages.owner(p) for p in paths)]
    if not wanted and not packaged:
        return [e for e in entries if id(e) not in verdicts], []
    rows: dict[str, DebianPackage] = {}
    if packages.problem or packages.unsupported:
        verdicts.update({id(e): packages.problem or packages.unsupported for e in [*(e for e, _ in wanted), *packaged]})
    else:
        for e in packaged:
            if len(e.get("paths") or []) > PACKAGES_CHECKED:  # (each may cost a download of its `.deb`)
                verdicts[id(e)] = (f"{len(e.get('paths') or [])} packages, more than the {PACKAGES_CHECKED} checked "
                                   "against their archive")
                continue
            problems, debs = _package_problems(e, packages, fetch, box)
            verdicts[id(e)] = _verdict(problems)
            for deb in [] if problems else debs:
                _settled_by(rows, deb, e)
        paths = sorted({p for _, ps in wanted for p in ps})
        expected, why = _expected(paths, kinds, packages, fetch, box)
        alone = {p for e, ps in wanted if e["kind"] in ALONE_KINDS for p in ps}
        deeper = {p for e, ps in wanted if e["kind"] in DEEPER_KINDS for p in ps}
        found, trees = _read(box, {p: expected[p] for p in paths if p in expected}, why, alone, deeper)
        for e, ps in wanted:
            problems = [why[p] for p in ps if p in why]
            problems += [_differs(p, expected[p], found.get(p)) for p in ps if p in expected and p not in why]
            problems += _incomplete({expected[p][0].sha256: expected[p][0] for p in ps if p in expected}, trees)
            problems = [x for x in problems if x]
            verdicts[id(e)] = _verdict(problems)
            if not problems:
                for p in ps:
                    _settled_by(rows, expected[p][0], e)
    label = "Ubuntu: " if packages.distribution == "ubuntu" else "Debian: "
    kept = []
    for e in entries:
        if id(e) not in verdicts:
            kept.append(e)
        elif verdicts[id(e)]:
            earlier = e.get("published_check")
            e["published_check"] = ((earlier + "; " if earlier else "") + label + verdicts[id(e)])[:900]
            kept.append(e)
    return kept, list(rows.values())


def _verdict(problems: list[str]) -> str | None:
    return f"{problems[0]}" + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "") if problems else None


def _settled_by(rows: dict[str, DebianPackage], deb: Deb, e: Tampering) -> None:
    row = rows.setdefault(deb.sha256, {
        "package": deb.package, "version": deb.version, "architecture": deb.architecture, "deb": deb.filename,
        "deb_sha256": deb.sha256, "suite": deb.suite, "settles": [], "by_command": None})
    if e["detail"] not in row["settles"]:
        row["settles"].append(e["detail"])
    row["by_command"] = install_command(row["by_command"], e.get("by_command"))


def _only_replaced(e: Tampering, packages: _Packages, newer: Callable[..., str | None], closure: Callable[..., tuple]
                   ) -> None:
    """An `if_replaced` entry's packages that the verifier's apt may upgrade (the archive has a newer
    version) or remove (a package its install brings conflicts with or breaks it, or it one of
    them), the others left out: dpkg runs no script of theirs when the verifier installs."""
    installs = e.get("verifier_installs") or []
    found = []
    for path in e.get("paths") or []:
        owner = _listed(path)
        version = packages.newer(owner, newer)
        why = ("whether the archive has a newer version could not be told" if version == UNTOLD
               else f"the archive has {version}" if version else _removed(owner, packages, installs, closure))
        if why:
            found.append((path, why))
    e["paths"] = [path for path, _ in found]
    if found:
        e["detail"] = ("packages with a prerm or postrm that dpkg runs when the verifier's apt upgrades or removes them, "
                       "not settled as their archive's packages: "
                       + ", ".join(f"{_listed(path)} ({why})" for path, why in found[:5])
                       + (f" and {len(found) - 5} more" if len(found) > 5 else ""))[:900]


def _removed(owner: str, packages: _Packages, installs: list[str], closure: Callable[..., tuple]) -> str | None:
    """Why the verifier's install of `installs` may remove `owner`'s package, or None: it conflicts
    with or breaks a package the install brings at the version the archive has (or a name one of
    them provides), it depends on one at a version that is not the archive's, or one of those
    conflicts with or breaks it at the version dpkg has (install_closure: every dependency and
    recommendation followed, so more than apt takes)."""
    if not installs:
        return None
    if UNTOLD_INSTALL in installs:
        return "the verifier's scripts name a package they install with a variable, a pattern or a file, so what it brings could not be told"
    brought = packages.closure(installs, closure)
    if brought is None:
        return "which packages the verifier's install brings could not be told"
    real, provided_by, conflicts = brought
    name, version = packages.installed[owner][0], packages.installed[owner][1]
    mine, provides, depends = packages.relations.get(owner, ([], set(), []))
    for other, op, wanted in mine:
        if other != name and other in real and satisfies(real[other], op, wanted):
            return f"it conflicts with or breaks {other}, which the verifier's install of {' '.join(installs)} brings"
        if other != name and not op and provided_by.get(other, set()) - {name}:
            return f"it conflicts with or breaks {other}, which {min(provided_by[other] - {name})} provides"
    for one in depends:  # (a dependency every alternative of which the install upgrades past: apt removes it)
        if one and all(other in real and op and not satisfies(real[other], op, wanted) for other, op, wanted in one):
            other, op, wanted = one[0]
            return f"it depends on {other} ({op} {wanted}), which the verifier's install of {' '.join(installs)} brings at {real[other]}"
    for other, theirs in sorted(conflicts.items()):
        for them, op, wanted in theirs if other != name else ():
            if (them == name and satisfies(version, op, wanted)) or (not op and them in provides):
                return f"{other}, which the verifier's install of {' '.join(installs)} brings, conflicts with or breaks it"
    return None


def _listed(path: str) -> str:
    """The package a file list names (`/var/lib/dpkg/info/PKG.list`)."""
    return posixpath.basename(path).removesuffix(".list")


def _package_problems(e: Tampering, packages: _Packages, fetch: Callable[..., Deb], box: Environment
                      ) -> tuple[list[str], list[Deb]]:
    """What keeps a package whose scripts the verifier's apt runs (runner/apt_settings.py) from
    being its archive's, at the version dpkg has: each of dpkg's copies of its
    scripts and triggers file that is not the `.deb`'s, and each file the `.deb` installs that is
    there and is not the `.deb`'s (read from outside). A file the `.deb` installs that is not there
    is not one: dpkg's `path-exclude` leaves out documentation, and a file removed runs nothing.
    dpkg's file list is not asked: the agent can write it."""
    problems: list[str] = []
    debs: list[Deb] = []
    expected: dict[str, tuple[Deb, str]] = {}
    for listed in e.get("paths") or []:
        package = _listed(listed)
        deb = packages.deb(package, fetch)
        if isinstance(deb, str):
            problems.append(deb)
            continue
        debs.append(deb)
        for name, have in sorted(packages.scripts.get(package, {}).items()):
            if deb.scripts.get(name) != have:
                problems.append(f"/var/lib/dpkg/info/{package}.{name} is not {deb.filename}'s"
                                + ("" if name in deb.scripts else " (it has none)"))
        expected.update({p: (deb, want) for p, want in deb.files.items()})
    why: dict[str, str] = {}
    # the folders of all the packages' files read once for them all (a shared library folder's by its
    # subfolders, /usr/lib/x86_64-linux-gnu/gdk-pixbuf-2.0; its own files one by one), each with up to
    # PACKAGE_SLACK besides them, whenever more than one is there (a read costs 50-80 ms, and
    # /usr/share/locale whole, 81 MB after a large install, under half a second); one too large
    # still, path by path
    alone = {p for p in expected if _SHARED_FOLDER.match(posixpath.dirname(p))}
    deeper = {p for p in expected if _SHARED_FOLDER.match("/".join(PurePosixPath(p).parts[:4])[1:])}
    found, _ = _read(box, expected, why, alone, deeper, whole_or_each=True, slack=PACKAGE_SLACK, one_by_one=1)
    problems += [why[p] for p in sorted(why)]
    problems += [x for p in sorted(expected) if p not in why and found.get(p) is not None
                 for x in [_differs(p, expected[p], found[p])] if x]
    return problems, debs


def _expected(paths: list[str], kinds: dict[str, int], packages: _Packages, fetch: Callable[..., Deb],
              box: Environment) -> tuple[dict[str, tuple[Deb, str]], dict[str, str]]:
    """For each path, (the package file that installs it, what it installs there), or why none."""
    expected: dict[str, tuple[Deb, str]] = {}
    why: dict[str, str] = {}
    for p in paths:
        if kinds.get(p) == 2:
            why[p] = f"{p} was removed"
            continue
        owner = packages.owner(p)
        if owner is None:
            found = _alternative(p, box, packages, fetch)
            if isinstance(found, str):
                why[p] = found
            else:
                expected[p] = found
            continue
        deb = packages.deb(owner, fetch)
        if isinstance(deb, str):
            why[p] = deb
            continue
        twin = _twin(p)
        want = deb.files.get(p) or (deb.files.get(twin) if twin else None)
        if want is None:
            why[p] = f"{p} is not in {deb.filename}"
            continue
        expected[p] = (deb, want)
    return expected, why


def _twin(path: str) -> str | None:
    """A path's usrmerge twin (`/usr/bin/x` is `/bin/x`): a package's list or `.deb` may name
    either (bookworm's lists the one, Ubuntu 24.04's the other)."""
    m = _MERGED.match(path)
    return m[1] if m else ("/usr" + path if _MERGED.match("/usr" + path) else None)


def _alternative(path: str, box: Environment, packages: _Packages, fetch: Callable[..., Deb]
                 ) -> tuple[Deb, str] | str:
    """A path no package owns that is an alternative's link (`/usr/bin/awk` -> `/etc/alternatives/awk`
    -> `/usr/bin/gawk`, as `apt-get install gawk` leaves it): (the package whose own `postinst`
    registers that link, that name and the path chosen, what the link must be), or why not. The
    choice is read from outside; dpkg's record of alternatives, which the agent can write, is not
    asked: only what the archive's package registers counts, and the path chosen is checked as
    that package's file wherever the entry names it."""
    unowned = f"{path} belongs to no installed package"
    if not _PROGRAM.match(path):  # (an alternative an entry names is a program's: nothing else is read)
        return unowned
    try:
        link = _outside(box, path, 2**20)
        name = link.removeprefix("link:/etc/alternatives/")
        if not link.startswith("link:/etc/alternatives/") or "/" in name:
            return unowned
        chosen = _outside(box, f"/etc/alternatives/{name}", 2**20)
        target = chosen.removeprefix("link:")
        owner = packages.owner(target) if chosen.startswith("link:/") else None
        deb = packages.deb(owner, fetch) if owner else f"/etc/alternatives/{name} is not a link to a package's file"
        if isinstance(deb, str):
            return f"{path} is the alternative {name}: {deb}"
        # (a postinst may name either usrmerge twin: netcat-openbsd registers /bin/nc, found as /usr/bin/nc)
        if not any(a[1] == name and a[0] in (path, _twin(path)) and a[2] in (target, _twin(target))
                   for a in deb.alternatives):
            return f"{path} is the alternative {name}, set to {target}, which {deb.filename} does not register"
        # the path chosen as the package installs it (made a link to another package's program, it
        # would run that program, every path the entry names still some package's)
        twin = _twin(target)
        want = deb.files.get(target) or (deb.files.get(twin) if twin else None)
        if want is None or _outside(box, target, deb.sizes.get(target, 0) + 2**20) != want:
            return f"{path} is the alternative {name}, set to {target}, which is not {deb.filename}'s"
    except SandboxError as e:
        return f"{unowned} ({e})"
    return deb, link


def _outside(box: Environment, path: str, limit: int) -> str:
    """What is at `path` as read from outside (`file:SHA256`, `link:TARGET`), or ""."""
    return (box.read_tree(path, limit=limit) or {}).get(path) or ""


def _read(box: Environment, expected: dict[str, tuple[Deb, str]], why: dict[str, str], alone: set[str] = frozenset(),
          deeper: set[str] = frozenset(), *, whole_or_each: bool = False, slack: int = TREE_SLACK,
          one_by_one: int = READ_ONE_BY_ONE) -> tuple[dict[str, str | None], dict[str, dict[str, str]]]:
    """What is at each path, read from outside (a folder with many of them whole, bounded by what
    the packages put there, but for the paths `alone`; the folder one level deeper for those
    `deeper`), and the folders read whole; a path that could not be read goes to `why`.
    `whole_or_each`: a folder too large to read whole is read path by path (where whether all the
    packages put there is still there does not matter); `slack`: what a folder read whole may hold
    besides the packages' files; `one_by_one`: a folder with at most this many paths is read path by path."""
    by_folder: dict[str, list[str]] = {}
    for p in expected:
        parts = PurePosixPath(p).parts
        depth = 5 if p in deeper else 4
        by_folder.setdefault("/".join(parts[:depth])[1:] if len(parts) > depth and p not in alone else p, []).append(p)
    found: dict[str, str | None] = {}
    trees: dict[str, dict[str, str]] = {}
    for folder, paths in by_folder.items():
        tree = None
        if len(paths) > one_by_one:
            debs = {d.sha256: d for d, _ in (expected[p] for p in paths)}
            limit = sum(n for d in debs.values() for q, n in d.sizes.items() if q.startswith(folder + "/")) + slack
            try:
                tree = box.read_tree(folder, limit=limit)
            except SandboxError as e:
                # more there than the packages put: whether all they put is still there cannot be
                # told (a module removed goes unlisted), so nothing in it settles
                if not whole_or_each:
                    why.update({p: f"{folder} could not be read whole, so its packages' files were not all checked: {e}"
                                for p in paths})
                    continue
            if tree is not None:
                trees[folder] = tree
        for p in paths:
            if tree is not None:
                found[p] = tree.get(p)
                continue
            try:
                one = box.read_tree(p, limit=max(expected[p][0].sizes.get(p, 0), 0) + 2**20)
            except SandboxError as e:
                why[p] = str(e)
                continue
            found[p] = (one or {}).get(p)
    return found, trees


def _incomplete(debs: dict[str, Deb], trees: dict[str, dict[str, str]]) -> list[str]:
    """What a package put in a folder read whole that is not there as it put it: an install the
    agent phase then thinned (a module of the standard library removed) is not the package's."""
    out = []
    for deb in sorted(debs.values(), key=lambda d: d.filename):
        for folder, tree in trees.items():
            for q, want in deb.files.items():
                if q.startswith(folder + "/") and tree.get(q) != want:
                    out.append(f"{q} of {deb.filename} is " + ("missing" if q not in tree else "not the package's"))
    return out


def _differs(path: str, expected: tuple[Deb, str], have: str | None) -> str | None:
    deb, want = expected
    if have == want:
        return None
    if have is None:
        return f"{path} could not be read from outside the environment"
    return (f"{path} is a link to {have[5:]}, not {deb.filename}'s" if have.startswith("link:")
            else f"{path} differs from {deb.filename}'s")[:300]
