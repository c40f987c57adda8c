"""The files of a Debian package as the Debian archive publishes it: the trust root for a package
the agent phase installed with apt over files the verifier runs (runner/debian_updates.py).

A suite's `InRelease` is checked with `gpgv` against the archive's keyring on this machine, as apt
checks it; the signed text gives the sha256 of each `Packages` index, the index the sha256 of each
package file (`.deb`), and the `.deb`'s own `data.tar` the files it installs. The digests of those
files are kept in the cache by the `.deb`'s sha256 (a file in the archive's pool never changes),
the parsed indexes by their own sha256. Nothing here runs in the environment, and nothing in the
environment can change what it reads.

Where to look, for a Debian release named CODENAME: `CODENAME`, `CODENAME-updates` and
`CODENAME-security`, as a stock image's apt sources name them. `TBSCALE_DEBIAN_MIRROR` and
`TBSCALE_DEBIAN_SECURITY_MIRROR` point at other mirrors (or the loopback archive the tests start),
`TBSCALE_APT_KEYRINGS` (paths, `:` between them) at other keyrings."""

from __future__ import annotations

import bz2
import gzip
import hashlib
import io
import json
import lzma
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from tbscale.environments.base import cache_dir
from tbscale.runner.pypi_releases import fetch_url, keep_json

MIRROR = "https://deb.debian.org/debian"
SECURITY_MIRROR = "https://deb.debian.org/debian-security"
KEYRINGS = ("/usr/share/keyrings/debian-archive-keyring.gpg",)
MAX_DEB_BYTES = 256 * 2**20
MAX_INDEX_BYTES = 128 * 2**20
RELEASE_TTL_SEC = 1800  # a suite's InRelease is fetched again after this (the archive updates it daily)


class ArchiveUnavailable(Exception):
    """The package's files could not be had from the archive: the reason, in a line."""


@dataclass(frozen=True)
class Deb:
    """A package file of the archive: where it is in the pool, its sha256, the suite whose signed
    index listed it, and what it installs: absolute path -> `file:SHA256` or `link:TARGET`, with
    the files' sizes."""

    package: str
    version: str
    architecture: str
    filename: str
    sha256: str
    suite: str
    files: dict[str, str]
    sizes: dict[str, int]


def suites(codename: str) -> list[tuple[str, str]]:
    """(mirror, suite) of a Debian release, where its packages are published."""
    main = (os.environ.get("TBSCALE_DEBIAN_MIRROR") or MIRROR).rstrip("/")
    security = (os.environ.get("TBSCALE_DEBIAN_SECURITY_MIRROR") or SECURITY_MIRROR).rstrip("/")
    return [(main, codename), (main, f"{codename}-updates"), (security, f"{codename}-security")]


def published_deb(package: str, version: str, architecture: str, codename: str, *, native: str,
                  cache: Path | None = None) -> Deb:
    """The archive's `package` `version` for `architecture` (`all` is listed in the `native`
    architecture's indexes), with what it installs; ArchiveUnavailable says why there is none."""
    if not re.fullmatch(r"[a-z0-9][a-z0-9+.-]+", package) or not re.fullmatch(r"[A-Za-z0-9.+~:-]+", version) \
            or not re.fullmatch(r"[a-z0-9-]+", architecture) or not re.fullmatch(r"[a-z0-9-]+", native) \
            or not re.fullmatch(r"[a-z][a-z0-9-]*", codename):
        raise ArchiveUnavailable(f"{package!r} {version!r} {architecture!r} ({codename!r}) is not a package the archive names")
    cache = (cache or cache_dir()) / "debian"
    index_arch = native if architecture == "all" else architecture
    problems = []
    for mirror, suite in suites(codename):
        try:
            for index in _indexes(mirror, suite, index_arch, cache):
                found = index.get(f"{package} {version} {architecture}")
                if found:
                    return _deb(mirror, suite, package, version, architecture, *found, cache)
        except ArchiveUnavailable as e:
            problems.append(str(e))
    if problems:
        raise ArchiveUnavailable("; ".join(problems)[:400])
    raise ArchiveUnavailable(f"{package} {version} ({architecture}) is in no index of {codename}, "
                             f"{codename}-updates or {codename}-security")


def keyrings() -> list[str]:
    configured = os.environ.get("TBSCALE_APT_KEYRINGS")
    paths = [p for p in configured.split(":") if p] if configured else list(KEYRINGS)
    return [p for p in paths if Path(p).is_file()]


_releases: dict[str, tuple[float, dict[str, tuple[str, int]]]] = {}
_lock = threading.Lock()


def _release(mirror: str, suite: str) -> dict[str, tuple[str, int]]:
    """The signed `InRelease` of `suite`: index path -> (sha256, size), its signature checked."""
    url = f"{mirror}/dists/{suite}/InRelease"
    with _lock:
        kept = _releases.get(url)
        if kept and time.monotonic() - kept[0] < RELEASE_TTL_SEC:
            return kept[1]
    body = fetch_url(url, 16 * 2**20, error=ArchiveUnavailable, source="the archive", missing_ok=True)
    files: dict[str, tuple[str, int]] = {}
    signed = _verified(body, url) if body else ""  # no such suite (sid has no -updates): nothing in it
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


def _verified(data: bytes, url: str) -> str:
    """The text `gpgv` finds signed by a key of the keyrings, or ArchiveUnavailable."""
    gpgv, rings = shutil.which("gpgv"), keyrings()
    if not gpgv:
        raise ArchiveUnavailable("gpgv is not installed on this machine: the archive's signatures cannot be checked")
    if not rings:
        raise ArchiveUnavailable("no archive keyring on this machine (debian-archive-keyring, or TBSCALE_APT_KEYRINGS)")
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


def _indexes(mirror: str, suite: str, arch: str, cache: Path):
    """Each component's `Packages` index for `arch` (parsed: `package version arch` -> (pool
    path, sha256, size)), checked against the signed release, one at a time."""
    release = _release(mirror, suite)
    components = sorted({p.split("/")[0] for p in release if p.endswith(f"/binary-{arch}/Release")}) or ["main"]
    for component in components:
        for ext, open_ in (("xz", lzma.decompress), ("gz", gzip.decompress), ("bz2", bz2.decompress), ("", None)):
            path = f"{component}/binary-{arch}/Packages" + (f".{ext}" if ext else "")
            if path in release:
                break
        else:
            continue
        digest, size = release[path]
        kept = cache / "indexes" / f"{digest}.json"
        if kept.is_file():
            yield json.loads(kept.read_text())
            continue
        body = _get(f"{mirror}/dists/{suite}/{path}", MAX_INDEX_BYTES)
        if len(body) != size or hashlib.sha256(body).hexdigest() != digest:
            raise ArchiveUnavailable(f"{mirror}/dists/{suite}/{path} is not the index its signed release names")
        text = (open_(body) if open_ else body).decode("utf-8", "replace")
        index = {}
        for stanza in text.split("\n\n"):
            fields = dict(re.findall(r"^([A-Za-z0-9-]+):[ \t]*(.*)$", stanza, re.M))
            if all(k in fields for k in ("Package", "Version", "Architecture", "Filename", "SHA256", "Size")):
                index[f"{fields['Package']} {fields['Version']} {fields['Architecture']}"] = [
                    fields["Filename"], fields["SHA256"], int(fields["Size"])]
        keep_json(kept, index)
        yield index


def _deb(mirror: str, suite: str, package: str, version: str, architecture: str, filename: str, digest: str,
         size: int, cache: Path) -> Deb:
    kept = cache / "debs" / f"{digest}.json"
    if kept.is_file():
        data = json.loads(kept.read_text())
        return Deb(package, version, architecture, filename, digest, suite, data["files"], data["sizes"])
    if size > MAX_DEB_BYTES:
        raise ArchiveUnavailable(f"{filename} is over {MAX_DEB_BYTES // 2**20} MB: not downloaded")
    if ".." in filename.split("/") or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.+~/-]*\.deb", filename):
        raise ArchiveUnavailable(f"{filename!r} is not a path in the archive's pool")
    body = _get(f"{mirror}/{filename}", MAX_DEB_BYTES)
    if hashlib.sha256(body).hexdigest() != digest:
        raise ArchiveUnavailable(f"{mirror}/{filename}: the download's sha256 is not the one the signed index gives")
    files, sizes = deb_files(body)
    keep_json(kept, {"files": files, "sizes": sizes})
    return Deb(package, version, architecture, filename, digest, suite, files, sizes)


def deb_files(body: bytes) -> tuple[dict[str, str], dict[str, int]]:
    """What a `.deb` installs: absolute path -> `file:SHA256`, `link:TARGET` (hard links: their
    target's digest), and the files' sizes. Its `data.tar` may be uncompressed, gzip, xz, bzip2
    or (with the `zstandard` module) zstd."""
    if not body.startswith(b"!<arch>\n"):
        raise ArchiveUnavailable("not a Debian package (no ar header)")
    pos, data, name = 8, None, ""
    while pos + 60 <= len(body):
        header = body[pos:pos + 60]
        name, length = header[:16].decode("ascii", "replace").strip().rstrip("/"), int(header[48:58].strip() or 0)
        if name.startswith("data.tar"):
            data = body[pos + 60:pos + 60 + length]
            break
        pos += 60 + length + (length % 2)
    if data is None:
        raise ArchiveUnavailable("the package has no data.tar")
    if name.endswith(".zst"):
        try:
            import zstandard  # type: ignore[import-not-found]
        except ImportError:
            raise ArchiveUnavailable("the package's data.tar.zst needs the zstandard module to be read") from None
        data = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data)).read()
    files: dict[str, str] = {}
    sizes: dict[str, int] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
            for member in tar:
                path = _absolute(member.name)
                if member.isfile():
                    f = tar.extractfile(member)
                    files[path], sizes[path] = "file:" + hashlib.sha256(f.read() if f else b"").hexdigest(), member.size
                elif member.issym():
                    files[path] = "link:" + member.linkname
                elif member.islnk():
                    target = _absolute(member.linkname)
                    files[path], sizes[path] = files.get(target, "other"), sizes.get(target, 0)
    except (tarfile.TarError, lzma.LZMAError, OSError, EOFError) as e:
        raise ArchiveUnavailable(f"the package's {name} could not be read: {e}") from None
    return files, sizes


def _get(url: str, limit: int) -> bytes:
    return fetch_url(url, limit, error=ArchiveUnavailable, source="the archive")


def _absolute(name: str) -> str:
    """A tar member's name (`./usr/bin/x`) as the path it is unpacked to."""
    name = name[2:] if name.startswith("./") else name
    return "/" + name.strip("/") if name not in ("", ".") else "/"
