"""The files of a Debian or Ubuntu package as its archive publishes it: the trust root for a
package the agent phase installed with apt over files the verifier runs (runner/debian_updates.py).

A suite's `InRelease` is checked with `gpgv` against the archive's keyring, as apt checks it; the
signed text gives the sha256 of each `Packages` index, the index the sha256 of each package file
(`.deb`), and the `.deb`'s own `data.tar` the files it installs. The digests of those files are
kept in the cache by the `.deb`'s sha256 (a file in the archive's pool never changes), the parsed
indexes by their own sha256. Nothing here runs in the environment, and nothing in the environment
can change what it reads.

Where to look, for a release named CODENAME, as a stock image's apt sources name its suites:
Debian's `CODENAME`, `CODENAME-updates` and `CODENAME-security` on deb.debian.org; Ubuntu's
`CODENAME`, `-updates`, `-backports` and `-security` on archive.ubuntu.com and security.ubuntu.com.
`TBSCALE_DEBIAN_MIRROR`, `TBSCALE_DEBIAN_SECURITY_MIRROR`, `TBSCALE_UBUNTU_MIRROR` and
`TBSCALE_UBUNTU_SECURITY_MIRROR` point at other mirrors (or the loopback archive the tests start).

Keys: Debian's archive keyring on this machine (`TBSCALE_APT_KEYRINGS`, paths with `:` between
them, names others). Ubuntu's (`TBSCALE_UBUNTU_KEYRINGS`) is this machine's
`ubuntu-archive-keyring.gpg` where installed; elsewhere it is taken from Debian's own `ubuntu-keyring`
package, through Debian's signed archive as any package is: Debian's keys vouch for Ubuntu's."""

from __future__ import annotations

import bz2
import gzip
import hashlib
import io
import json
import lzma
import os
import re
import shlex
import shutil
import subprocess
import tarfile
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import zstandard
from debian.debian_support import version_compare

from tbscale.environments.base import cache_dir
from tbscale.runner.pypi_releases import fetch_url, keep_json

MIRROR = "https://deb.debian.org/debian"
SECURITY_MIRROR = "https://deb.debian.org/debian-security"
KEYRINGS = ("/usr/share/keyrings/debian-archive-keyring.gpg",)
UBUNTU_MIRROR = "https://archive.ubuntu.com/ubuntu"
UBUNTU_SECURITY_MIRROR = "https://security.ubuntu.com/ubuntu"
UBUNTU_KEYRINGS = ("/usr/share/keyrings/ubuntu-archive-keyring.gpg",)
# Where Debian publishes Ubuntu's keys: its `ubuntu-keyring` package (in trixie and later; the
# `stable` suite follows Debian's releases), and the keyring's path in it
UBUNTU_KEYRING_PACKAGE, UBUNTU_KEYRING_SUITE = "ubuntu-keyring", "stable"
UBUNTU_KEYRING_PATH = "/usr/share/keyrings/ubuntu-archive-keyring.gpg"
DISTRIBUTIONS = ("debian", "ubuntu")
MAX_DEB_BYTES = 256 * 2**20
MAX_INDEX_BYTES = 128 * 2**20
RELEASE_TTL_SEC = 1800  # a suite's InRelease is fetched again after this (the archive updates it daily)


class ArchiveUnavailable(Exception):
    """The package's files could not be had from the archive: the reason, in a line."""


@dataclass(frozen=True)
class Deb:
    """A package file of the archive: where it is in the pool, its sha256, the suite whose signed
    index listed it, and what it installs: absolute path -> `file:SHA256` or `link:TARGET`, with
    the files' sizes, and the alternatives its own `postinst` registers with `update-alternatives
    --install`: (link, name, path), the master's and each `--slave`'s."""

    package: str
    version: str
    architecture: str
    filename: str
    sha256: str
    suite: str
    files: dict[str, str]
    sizes: dict[str, int]
    alternatives: tuple[tuple[str, str, str], ...] = ()
    # its maintainer scripts and triggers file (`control.tar`), as dpkg copies them to
    # /var/lib/dpkg/info/PACKAGE.NAME: name -> `file:SHA256`
    scripts: dict[str, str] = field(default_factory=dict)


def suites(codename: str, distribution: str = "debian") -> list[tuple[str, str]]:
    """(mirror, suite) of a release, where its packages are published."""
    if distribution == "ubuntu":
        main = (os.environ.get("TBSCALE_UBUNTU_MIRROR") or UBUNTU_MIRROR).rstrip("/")
        security = (os.environ.get("TBSCALE_UBUNTU_SECURITY_MIRROR") or UBUNTU_SECURITY_MIRROR).rstrip("/")
        return [(main, codename), (main, f"{codename}-updates"), (security, f"{codename}-security"),
                (main, f"{codename}-backports")]
    main = (os.environ.get("TBSCALE_DEBIAN_MIRROR") or MIRROR).rstrip("/")
    security = (os.environ.get("TBSCALE_DEBIAN_SECURITY_MIRROR") or SECURITY_MIRROR).rstrip("/")
    return [(main, codename), (main, f"{codename}-updates"), (security, f"{codename}-security")]


def _names_a_package(package: str, version: str, architecture: str, codename: str, native: str,
                     distribution: str) -> None:
    """ArchiveUnavailable unless each is a name the archive could have (they go into paths and URLs)."""
    if not re.fullmatch(r"[a-z0-9][a-z0-9+.-]+", package) or not re.fullmatch(r"[A-Za-z0-9.+~:-]+", version) \
            or not re.fullmatch(r"[a-z0-9-]+", architecture) or not re.fullmatch(r"[a-z0-9-]+", native) \
            or not re.fullmatch(r"[a-z][a-z0-9-]*", codename) or distribution not in DISTRIBUTIONS:
        raise ArchiveUnavailable(f"{package!r} {version!r} {architecture!r} ({distribution!r} {codename!r}) "
                                 "is not a package the archive names")


def published_deb(package: str, version: str, architecture: str, codename: str, *, native: str,
                  distribution: str = "debian", cache: Path | None = None, parsed: dict | None = None) -> Deb:
    """The archive's `package` `version` for `architecture` (`all` is listed in the `native`
    architecture's indexes), with what it installs; ArchiveUnavailable says why there is none.
    `parsed`: the indexes one check has read, by sha256, kept in it so that its next package does
    not read them again (8 packages of noble: 0.90 s read each time, 0.15 s kept)."""
    _names_a_package(package, version, architecture, codename, native, distribution)
    cache = (cache or cache_dir()) / "debian"
    index_arch = native if architecture == "all" else architecture
    rings = keyrings(distribution, cache)
    problems = []
    for mirror, suite in suites(codename, distribution):
        try:
            for index in _indexes(mirror, suite, index_arch, cache, rings, parsed):
                found = index.get(f"{package} {version} {architecture}")
                if found:
                    return _deb(mirror, suite, package, version, architecture, *found, cache)
        except ArchiveUnavailable as e:
            problems.append(str(e))
    if problems:
        raise ArchiveUnavailable("; ".join(problems)[:400])
    raise ArchiveUnavailable(f"{package} {version} ({architecture}) is in no index of "
                             + ", ".join(suite for _, suite in suites(codename, distribution)))


def newer_published(package: str, version: str, architecture: str, codename: str, *, native: str,
                    distribution: str = "debian", cache: Path | None = None, parsed: dict | None = None,
                    named: frozenset[str] | None = None) -> str | None:
    """The newest version of `package` for `architecture` that the archive's signed indexes (the
    release, its updates and security suites; of those, the ones `named` when given: the suites the
    environment's apt sources name, where it names no other, as `stable` or another release, whose
    packages these do not tell) list and that is newer than `version` by Debian's ordering: what
    `apt-get install` after `apt-get update` may put in its place; None when there is none.
    ArchiveUnavailable when an index could not be read (then it cannot be told)."""
    _names_a_package(package, version, architecture, codename, native, distribution)
    cache = (cache or cache_dir()) / "debian"
    rings = keyrings(distribution, cache)
    parsed = {} if parsed is None else parsed
    # (apt takes an `all` package for one of the native architecture: either upgrades the other)
    archs = {native, "all"} if architecture in (native, "all") else {architecture}
    newest = None
    for mirror, suite in _asked(codename, distribution, named):
        for index in _indexes(mirror, suite, native if architecture == "all" else architecture, cache, rings, parsed):
            # (each index's versions by package, made once for the check that holds `parsed`)
            names = parsed.setdefault(f"names:{id(index)}", _versions_by_package(index))
            for found in (v for arch in sorted(archs) for v in names.get(f"{package} {arch}", ())):
                if version_compare(found, version) > 0 and (newest is None or version_compare(found, newest) > 0):
                    newest = found
    return newest


def _asked(codename: str, distribution: str, named: frozenset[str] | None) -> list[tuple[str, str]]:
    """The suites to ask: the release's three, of them those `named` where it names no other."""
    known = suites(codename, distribution)
    if named is None or not named <= {suite for _, suite in known}:
        return known
    return [(mirror, suite) for mirror, suite in known if suite in named]


def install_closure(packages: set[str], codename: str, *, native: str, distribution: str = "debian",
                    cache: Path | None = None, parsed: dict | None = None, named: frozenset[str] | None = None
                    ) -> tuple[dict[str, str], dict[str, set[str]], dict[str, list[tuple[str, str, str]]]]:
    """What `apt-get install PACKAGES` may bring in, by the archive's signed indexes (the suites
    `newer_published` asks): (each package it may install, at the archive's newest version; each
    name those provide, by whom; each such package's conflicts and breaks). Every dependency,
    alternative and recommendation is followed, and a name only provided by each of its providers,
    whatever the versions: more than apt takes, never less. ArchiveUnavailable when an index could
    not be read."""
    if distribution not in DISTRIBUTIONS or not re.fullmatch(r"[a-z][a-z0-9-]*", codename) \
            or not re.fullmatch(r"[a-z0-9-]+", native):
        raise ArchiveUnavailable(f"{distribution!r} {codename!r} {native!r} is not a release the archive names")
    cache = (cache or cache_dir()) / "debian"
    rings = keyrings(distribution, cache)
    parsed = {} if parsed is None else parsed
    indexes = [index for mirror, suite in _asked(codename, distribution, named)
               for index in _indexes(mirror, suite, native, cache, rings, parsed, kept_of="relations")]
    rows: dict[str, dict | None] = {}

    def row(name: str) -> dict | None:  # (every suite's and architecture's stanzas of a name, merged)
        if name not in rows:
            found = [r for index in indexes for arch in (native, "all") for r in [index.get(f"{name} {arch}")] if r]
            merged = None
            for r in found:
                if merged is None:
                    merged = {"v": r["v"], "d": set(r["d"]), "p": set(r["p"]), "c": set(r["c"])}
                    continue
                if r["v"] != merged["v"] and version_compare(r["v"], merged["v"]) > 0:
                    merged["v"] = r["v"]
                for k in ("d", "p", "c"):
                    merged[k].update(r[k])
            rows[name] = merged
        return rows[name]

    providers: dict[str, set[str]] = {}  # (made the first time a name only provided is met)
    seen: set[str] = set()
    todo = list(packages)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        found = row(name)
        if found is not None:
            todo += found["d"]
            continue
        if not providers:
            for index in indexes:
                for key, r in index.items():
                    if key.rpartition(" ")[2] in (native, "all"):
                        for provided in r["p"]:
                            providers.setdefault(provided, set()).add(key.rpartition(" ")[0])
        todo += providers.get(name, ())
    rows = {name: r for name, r in rows.items() if r is not None and name in seen}
    real = {name: rows[name]["v"] for name in seen if name in rows}
    provided_by: dict[str, set[str]] = {}
    for name in real:
        for provided in rows[name]["p"]:
            provided_by.setdefault(provided, set()).add(name)
    conflicts = {name: [(*c.split(" ", 2), "", "")[:3] for c in rows[name]["c"]] for name in real if rows[name]["c"]}
    return real, provided_by, conflicts  # type: ignore[return-value]


def _versions_by_package(index: dict) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for key in index:
        name, found, arch = key.split(" ")
        out.setdefault(f"{name} {arch}", []).append(found)
    return out


def keyrings(distribution: str = "debian", cache: Path | None = None) -> list[str]:
    """The keyrings a release's signatures are checked against (ArchiveUnavailable: Ubuntu's could
    not be had)."""
    name = "TBSCALE_UBUNTU_KEYRINGS" if distribution == "ubuntu" else "TBSCALE_APT_KEYRINGS"
    configured = os.environ.get(name)
    paths = [p for p in configured.split(":") if p] if configured else \
        list(UBUNTU_KEYRINGS if distribution == "ubuntu" else KEYRINGS)
    found = [p for p in paths if Path(p).is_file()]
    if distribution == "ubuntu" and not found and not configured:
        found = [str(ubuntu_keyring(cache or cache_dir() / "debian"))]
    return found


_ubuntu_rings: dict[Path, tuple[float, Path]] = {}


def ubuntu_keyring(cache: Path) -> Path:
    """Ubuntu's archive keyring, from Debian's `ubuntu-keyring` package as Debian's signed archive
    publishes it (checked against Debian's keys), kept in the cache by the package's sha256."""
    with _lock:
        known = _ubuntu_rings.get(cache)
        if known and time.monotonic() - known[0] < RELEASE_TTL_SEC and known[1].is_file():
            return known[1]
    mirror, suite = suites(UBUNTU_KEYRING_SUITE)[0]
    # (an `all` package: listed in every architecture's index)
    for index in _indexes(mirror, suite, "amd64", cache, keyrings("debian")):
        # a suite lists one version of a package; were there more, the last in order is taken
        found = sorted((k, v) for k, v in index.items() if k.startswith(UBUNTU_KEYRING_PACKAGE + " "))
        if not found:
            continue
        filename, digest, size = found[-1][1]
        kept = cache / "keyrings" / f"{digest}.gpg"
        if not kept.is_file():
            body = _pool_file(suites(UBUNTU_KEYRING_SUITE)[0][0], filename, digest, size)
            kept.parent.mkdir(parents=True, exist_ok=True)
            tmp = kept.with_suffix(f".{os.getpid()}.partial")
            tmp.write_bytes(deb_member(body, UBUNTU_KEYRING_PATH))
            os.replace(tmp, kept)
        with _lock:
            _ubuntu_rings[cache] = (time.monotonic(), kept)
        return kept
    raise ArchiveUnavailable(f"Debian's {UBUNTU_KEYRING_SUITE} suite lists no {UBUNTU_KEYRING_PACKAGE}: "
                             "Ubuntu's signatures cannot be checked (TBSCALE_UBUNTU_KEYRINGS names a keyring)")


_releases: dict[str, tuple[float, dict[str, tuple[str, int]]]] = {}
_lock = threading.Lock()


def _release(mirror: str, suite: str, rings: list[str]) -> dict[str, tuple[str, int]]:
    """The signed `InRelease` of `suite`: index path -> (sha256, size), its signature checked."""
    url = f"{mirror}/dists/{suite}/InRelease"
    with _lock:
        kept = _releases.get(url)
        if kept and time.monotonic() - kept[0] < RELEASE_TTL_SEC:
            return kept[1]
    body = fetch_url(url, 16 * 2**20, error=ArchiveUnavailable, source="the archive", missing_ok=True)
    files: dict[str, tuple[str, int]] = {}
    signed = _verified(body, url, rings) if body else ""  # no such suite (sid has no -updates): nothing in it
    section = ""
    for line in signed.splitlines():
        if not line.startswith(" "):
            section = line.split(":", 1)[0]
            continue
        parts = line.split()
        if section == "SHA256" and len(parts) == 3 and re.fullmatch(r"[0-9a-f]{64}", parts[0]) and parts[1].isdigit():
            files[parts[2]] = (parts[0], int(parts[1]))
    with _lock:
        _releases[url] = (time.monotonic(), files)
    return files


def _verified(data: bytes, url: str, rings: list[str]) -> str:
    """The text `gpgv` finds signed by a key of the keyrings, or ArchiveUnavailable."""
    gpgv = shutil.which("gpgv")
    if not gpgv:
        raise ArchiveUnavailable("gpgv is not installed on this machine: the archive's signatures cannot be checked")
    if not rings:
        raise ArchiveUnavailable(f"no archive keyring on this machine to check {url} with (debian-archive-keyring, "
                                 "or TBSCALE_APT_KEYRINGS / TBSCALE_UBUNTU_KEYRINGS)")
    with tempfile.TemporaryDirectory(prefix="tbscale-apt-") as tmp:
        src, out = Path(tmp) / "InRelease", Path(tmp) / "signed"
        src.write_bytes(data)
        args = [gpgv, "--status-fd", "1", "--output", str(out)]
        for ring in rings:
            args += ["--keyring", ring]
        try:
            res = subprocess.run([*args, str(src)], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise ArchiveUnavailable(f"gpgv could not check {url}: {e}") from None
        if res.returncode != 0 or "[GNUPG:] VALIDSIG" not in res.stdout or not out.is_file():
            raise ArchiveUnavailable(f"{url} is not signed by a key of {', '.join(rings)}")
        return out.read_text("utf-8", "replace")


def _indexes(mirror: str, suite: str, arch: str, cache: Path, rings: list[str], parsed: dict | None = None,
             kept_of: str = "files"):
    """Each component's `Packages` index for `arch`, checked against the signed release, one at a
    time, as `kept_of` keeps it: "files" (`package version arch` -> (pool path, sha256, size)) or
    "relations" (`package arch` -> what `_relations_of` keeps of its stanzas)."""
    release = _release(mirror, suite, rings)
    parsed = {} if parsed is None else parsed
    suffix = "" if kept_of == "files" else f".{kept_of}"
    components = sorted({p.split("/")[0] for p in release if p.endswith(f"/binary-{arch}/Release")}) or ["main"]
    for component in components:
        for ext, open_ in (("xz", lzma.decompress), ("gz", gzip.decompress), ("bz2", bz2.decompress), ("", None)):
            path = f"{component}/binary-{arch}/Packages" + (f".{ext}" if ext else "")
            if path in release:
                break
        else:
            continue
        digest, size = release[path]
        if digest + suffix in parsed:
            yield parsed[digest + suffix]
            continue
        kept = cache / "indexes" / f"{digest}{suffix}.json"
        # (kept in this process for its checks, and read by one of them at a time: trials that end
        # together would each parse the same 12 MB)
        with _loading:
            if digest + suffix in _in_memory:
                parsed[digest + suffix] = _in_memory[digest + suffix]
            elif kept.is_file():
                parsed[digest + suffix] = json.loads(kept.read_text())
                _keep_in_memory(digest + suffix, parsed[digest + suffix])
        if digest + suffix in parsed:
            yield parsed[digest + suffix]
            continue
        body = _get(f"{mirror}/dists/{suite}/{path}", MAX_INDEX_BYTES)
        if len(body) != size or hashlib.sha256(body).hexdigest() != digest:
            raise ArchiveUnavailable(f"{mirror}/dists/{suite}/{path} is not the index its signed release names")
        text = (open_(body) if open_ else body).decode("utf-8", "replace")
        index: dict = {}
        for stanza in text.split("\n\n"):
            fields = dict(re.findall(r"^([A-Za-z0-9-]+):[ \t]*(.*)$", stanza, re.M))
            if kept_of == "relations":
                _relations_of(fields, index)
            elif all(k in fields for k in ("Package", "Version", "Architecture", "Filename", "SHA256", "Size")):
                index[f"{fields['Package']} {fields['Version']} {fields['Architecture']}"] = [
                    fields["Filename"], fields["SHA256"], int(fields["Size"])]
        keep_json(kept, index)
        parsed[digest + suffix] = index
        _keep_in_memory(digest + suffix, index)
        yield index


_loading = threading.Lock()
_in_memory: dict[str, dict] = {}  # the last indexes read, both kinds (a release's three suites, each component)
IN_MEMORY = 32


def _keep_in_memory(key: str, index: dict) -> None:
    """Indexes are kept in this process, a release's worth (its main index is about 60 MB in
    memory, of each kind): each check of a run whose agents install packages asks them again."""
    with _lock:
        _in_memory[key] = index
        while len(_in_memory) > IN_MEMORY:
            _in_memory.pop(next(iter(_in_memory)))


def _relations_of(fields: dict[str, str], index: dict) -> None:
    """A stanza's relations by package name and architecture, every version's together: `v` its
    newest version, `d` the names it depends on, pre-depends on or recommends (each alternative),
    `p` those it provides, `c` its conflicts and breaks as `name`, or `name OP VERSION`."""
    if not fields.get("Package") or not fields.get("Architecture") or not fields.get("Version"):
        return
    row = index.setdefault(f"{fields['Package']} {fields['Architecture']}", {"v": fields["Version"], "d": [], "p": [], "c": []})
    if row["v"] != fields["Version"] and version_compare(fields["Version"], row["v"]) > 0:
        row["v"] = fields["Version"]
    row["d"] = sorted(set(row["d"]) | {n for f in ("Depends", "Pre-Depends", "Recommends")
                                       for n, _, _ in relations(fields.get(f, ""))})
    row["p"] = sorted(set(row["p"]) | {n for n, _, _ in relations(fields.get("Provides", ""))})
    row["c"] = sorted(set(row["c"]) | {" ".join(r).strip() for f in ("Conflicts", "Breaks") for r in relations(fields.get(f, ""))})


_RELATION = re.compile(r"^\s*([a-z0-9][a-z0-9+.-]+)(?::\S+)?\s*(?:\(\s*(<<|<=|=|>=|>>|<|>)\s*([^)\s]+)\s*\))?")


def relations(field: str) -> list[tuple[str, str, str]]:
    """A relationship field's parts as (name, operator, version), every alternative one
    (`a (>= 1) | b:any, c`: (a, >=, 1), (b, "", ""), (c, "", "")); architecture lists and build
    profiles left out."""
    out = []
    for part in re.split(r"[,|]", field):
        m = _RELATION.match(re.sub(r"\[.*?\]|<[^<>=]*>", "", part))
        if m:
            out.append((m[1], {"<": "<=", ">": ">="}.get(m[2] or "", m[2] or ""), m[3] or ""))
    return out


def satisfies(version: str, op: str, wanted: str) -> bool:
    """Whether `version` meets `op wanted` (dpkg's relation operators; no operator: any version)."""
    if not op:
        return True
    c = version_compare(version, wanted)
    return {"<<": c < 0, "<=": c <= 0, "=": c == 0, ">=": c >= 0, ">>": c > 0}[op]


def _deb(mirror: str, suite: str, package: str, version: str, architecture: str, filename: str, digest: str,
         size: int, cache: Path) -> Deb:
    kept = cache / "debs" / f"{digest}.json"
    data = json.loads(kept.read_text()) if kept.is_file() else {}
    if "scripts" not in data:  # (kept before the scripts were read: read again)
        body = _pool_file(mirror, filename, digest, size)
        files, sizes = deb_files(body)
        data = {"files": files, "sizes": sizes, "alternatives": deb_alternatives(body), "scripts": deb_scripts(body)}
        keep_json(kept, data)
    return Deb(package, version, architecture, filename, digest, suite, data["files"], data["sizes"],
               tuple(tuple(a) for a in data["alternatives"]), data["scripts"])


def _pool_file(mirror: str, filename: str, digest: str, size: int) -> bytes:
    """A `.deb` of the pool, downloaded and checked against the sha256 its signed index gives."""
    if size > MAX_DEB_BYTES:
        raise ArchiveUnavailable(f"{filename} is over {MAX_DEB_BYTES // 2**20} MB: not downloaded")
    if ".." in filename.split("/") or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.+~/-]*\.deb", filename):
        raise ArchiveUnavailable(f"{filename!r} is not a path in the archive's pool")
    body = _get(f"{mirror}/{filename}", MAX_DEB_BYTES)
    if len(body) != size or hashlib.sha256(body).hexdigest() != digest:
        raise ArchiveUnavailable(f"{mirror}/{filename}: the download's sha256 is not the one the signed index gives")
    return body


def deb_files(body: bytes) -> tuple[dict[str, str], dict[str, int]]:
    """What a `.deb` installs: absolute path -> `file:SHA256`, `link:TARGET` (hard links: their
    target's digest), and the files' sizes. Its `data.tar` may be uncompressed, gzip, xz, bzip2
    or zstd (Ubuntu's)."""
    files: dict[str, str] = {}
    sizes: dict[str, int] = {}
    for path, member, content in _members(body):
        if member.isfile():
            files[path], sizes[path] = "file:" + hashlib.sha256(content()).hexdigest(), member.size
        elif member.issym():
            files[path] = "link:" + member.linkname
        elif member.islnk():
            target = _absolute(member.linkname)
            files[path], sizes[path] = files.get(target, "other"), sizes.get(target, 0)
    return files, sizes


def deb_member(body: bytes, path: str) -> bytes:
    """The bytes a `.deb` installs at `path` (a regular file)."""
    for at, member, content in _members(body):
        if at == path and member.isfile():
            return content()
    raise ArchiveUnavailable(f"the package installs no file {path}")


# what dpkg runs of a package (and the triggers that make it run `postinst triggered`)
SCRIPTS = ("preinst", "postinst", "prerm", "postrm", "config", "triggers")


def deb_scripts(body: bytes) -> dict[str, str]:
    """A `.deb`'s maintainer scripts and triggers file: name -> `file:SHA256` of its `control.tar`
    member, the bytes dpkg copies to /var/lib/dpkg/info/PACKAGE.NAME."""
    return {path[1:]: "file:" + hashlib.sha256(content()).hexdigest()
            for path, member, content in _members(body, "control.tar") if member.isfile() and path[1:] in SCRIPTS}


def deb_alternatives(body: bytes) -> list[list[str]]:
    """The alternatives a `.deb`'s own `postinst` registers, written out in it (`update-alternatives
    --install LINK NAME PATH PRIORITY [--slave LINK NAME PATH]...`): [link, name, path] each. One
    made up in a loop or from variables is not read, and so registers nothing here."""
    script = b""
    for path, member, content in _members(body, "control.tar"):
        if path == "/postinst" and member.isfile():
            script = content()
    found: list[list[str]] = []
    for line in script.decode("utf-8", "replace").replace("\\\n", " ").splitlines():
        if "update-alternatives" not in line or "--install" not in line:
            continue
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            continue
        i = words.index("--install") if "--install" in words else -1
        if i < 0 or len(words) < i + 5 or "$" in " ".join(words[i + 1:i + 4]):
            continue
        found.append(words[i + 1:i + 4])
        rest = words[i + 5:]
        while len(rest) >= 4 and rest[0] == "--slave" and "$" not in " ".join(rest[1:4]):
            found.append(rest[1:4])
            rest = rest[4:]
    return found


def _members(body: bytes, which: str = "data.tar"):
    """(absolute path, tar member, a callable reading its bytes) for each member of the `.deb`'s
    `data.tar`; ArchiveUnavailable if it cannot be read."""
    name, data = _ar_tar(body, which)
    unreadable = (tarfile.TarError, lzma.LZMAError, OSError, EOFError)
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
            for member in tar:
                def content(member: tarfile.TarInfo = member) -> bytes:
                    try:
                        f = tar.extractfile(member)
                        return f.read() if f else b""
                    except unreadable as e:
                        raise ArchiveUnavailable(f"the package's {name} could not be read: {e}") from None
                yield _absolute(member.name), member, content
    except unreadable as e:
        raise ArchiveUnavailable(f"the package's {name} could not be read: {e}") from None


def _ar_tar(body: bytes, which: str) -> tuple[str, bytes]:
    """The name of a `.deb`'s `data.tar` (or `control.tar`) member and its contents, zstd already
    undone (tarfile undoes the others)."""
    if not body.startswith(b"!<arch>\n"):
        raise ArchiveUnavailable("not a Debian package (no ar header)")
    pos, data, name = 8, None, ""
    while pos + 60 <= len(body):
        header = body[pos:pos + 60]
        name, length = header[:16].decode("ascii", "replace").strip().rstrip("/"), int(header[48:58].strip() or 0)
        if name.startswith(which):
            data = body[pos + 60:pos + 60 + length]
            break
        pos += 60 + length + (length % 2)
    if data is None:
        raise ArchiveUnavailable(f"the package has no {which}")
    if name.endswith(".zst"):
        try:
            data = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data)).read()
        except zstandard.ZstdError as e:
            raise ArchiveUnavailable(f"the package's {name} could not be read: {e}") from None
    return name, data


def _get(url: str, limit: int) -> bytes:
    return fetch_url(url, limit, error=ArchiveUnavailable, source="the archive")


def _absolute(name: str) -> str:
    """A tar member's name (`./usr/bin/x`) as the path it is unpacked to."""
    name = name[2:] if name.startswith("./") else name
    return "/" + name.strip("/") if name not in ("", ".") else "/"
