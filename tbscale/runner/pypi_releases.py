"""The files of a release as PyPI publishes it: the trust root for a package the agent phase
installed over one the verifier runs (runner/package_updates.py).

The index's project page (the simple API in its JSON form, PEP 691, as pip reads it) names each
file of a release with its sha256; the wheel is downloaded, its digest checked against that, and
the digests of its members kept in the cache (a file on PyPI never changes once uploaded, so
neither the lookup nor the digests go stale). Nothing here runs in the environment, and nothing in
the environment can change what it reads.

`TBSCALE_PYPI_SIMPLE` points at another index with that API (a mirror, or the loopback index the
tests start)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from tbscale.environments.base import cache_dir

INDEX = "https://pypi.org/simple"
MAX_WHEEL_BYTES = 100 * 2**20  # a release's wheel larger than this is not checked (not downloaded)
TIMEOUT_SEC = 60


class ReleaseUnavailable(Exception):
    """The release's files could not be had: the reason, in a line."""


@dataclass(frozen=True)
class Wheel:
    """A published wheel: its name and digest as PyPI gives them, and its members' sha256 (hex)
    and sizes by path."""

    filename: str
    sha256: str
    files: dict[str, str]
    sizes: dict[str, int]
    entry_points: str


def canonical(name: str) -> str:
    """A distribution's name as PyPI compares names (PEP 503)."""
    return canonicalize_name(name)


def _wheel_name(filename: str) -> tuple[str, str, set[str]] | None:
    """(name, version, tags) of a wheel's file name, or None when it is not one."""
    try:
        name, version, _build, tags = parse_wheel_filename(filename)
    except (InvalidWheelFilename, InvalidVersion):
        return None
    return name, str(version), {str(t) for t in tags}


def wheel_tags(filename: str) -> set[str]:
    """The tags a wheel's file name says it fits (`py2.py3-none-any` is two), as `py-abi-platform`."""
    parsed = _wheel_name(filename)
    return parsed[2] if parsed else set()


def published_wheel(name: str, version: str, tags: list[str], *, index: str | None = None,
                    cache: Path | None = None) -> Wheel:
    """The wheel of `name` `version` on the index whose tags meet `tags` (the installed
    `.dist-info/WHEEL`'s), with its members' digests; ReleaseUnavailable says why there is none."""
    index = (index or os.environ.get("TBSCALE_PYPI_SIMPLE") or INDEX).rstrip("/")
    cache = (cache or cache_dir()) / "pypi"
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9.+!_-]*", version):
        raise ReleaseUnavailable(f"{name!r} {version!r} is not a name and version an index serves")
    if "+" in version:
        raise ReleaseUnavailable(f"{name} {version} has a local version label: no index publishes it")
    try:
        Version(version)
    except InvalidVersion:
        raise ReleaseUnavailable(f"{name} {version!r} is not a version an index serves") from None
    listing = _release_files(index, canonical(name), version, cache)
    wanted = set(tags)
    fits = [f for f in listing if wheel_tags(f["filename"]) & wanted]
    if not fits:
        raise ReleaseUnavailable(f"{name} {version} has no wheel on {index} for {', '.join(sorted(wanted)) or 'no tag'}")
    chosen = fits[0]
    digest = chosen.get("sha256") or ""
    if not re.fullmatch(r"[0-9a-f]{64}", digest):
        raise ReleaseUnavailable(f"{chosen['filename']}: the index gives no sha256")
    kept = cache / "wheels-v2" / f"{digest}.json"
    if kept.is_file():
        data = json.loads(kept.read_text())
        return Wheel(chosen["filename"], digest, data["files"], data["sizes"], data["entry_points"])
    if (chosen.get("size") or 0) > MAX_WHEEL_BYTES:
        raise ReleaseUnavailable(f"{chosen['filename']} is over {MAX_WHEEL_BYTES // 2**20} MB: not downloaded")
    body = fetch_url(chosen.get("url", ""), MAX_WHEEL_BYTES)
    if hashlib.sha256(body).hexdigest() != digest:
        raise ReleaseUnavailable(f"{chosen['filename']}: the download's sha256 is not the one the index gives")
    files, sizes, entry_points = {}, {}, ""
    with zipfile.ZipFile(io.BytesIO(body)) as z:
        for info in z.infolist():
            if info.is_dir():
                continue
            data = z.read(info)
            files[info.filename], sizes[info.filename] = hashlib.sha256(data).hexdigest(), len(data)
            if re.fullmatch(r"[^/]+\.dist-info/entry_points\.txt", info.filename):
                entry_points = data.decode("utf-8", "replace")
    keep_json(kept, {"files": files, "sizes": sizes, "entry_points": entry_points})
    return Wheel(chosen["filename"], digest, files, sizes, entry_points)


def _release_files(index: str, name: str, version: str, cache: Path) -> list[dict]:
    """The wheels of `name` `version` the index lists: filename, sha256, url, size."""
    kept = cache / "releases" / name / f"{version}.json"
    if kept.is_file():
        return json.loads(kept.read_text())
    page = f"{index}/{name}/"
    try:
        data = json.loads(fetch_url(page, 64 * 2**20, accept="application/vnd.pypi.simple.v1+json"))
    except ReleaseUnavailable as e:
        raise ReleaseUnavailable(f"{name}: {e}") from None
    except ValueError:
        raise ReleaseUnavailable(f"{name}: the index's page is not PEP 691 JSON") from None
    files, wanted = [], Version(version)
    for f in data.get("files") or []:
        filename = f.get("filename") if isinstance(f, dict) else None
        if not isinstance(filename, str) or not filename.endswith(".whl") or f.get("yanked"):
            continue
        parsed = _wheel_name(filename)
        if parsed and parsed[0] == name and Version(parsed[1]) == wanted:
            files.append({"filename": filename, "sha256": (f.get("hashes") or {}).get("sha256"),
                          "url": urllib.parse.urljoin(page, f.get("url") or ""), "size": f.get("size")})
    if files:  # a release not listed yet may be listed later
        keep_json(kept, files)
    return files


def fetch_url(url: str, limit: int, accept: str | None = None, *, error: type[Exception] = ReleaseUnavailable,
              source: str = "the index", missing_ok: bool = False) -> bytes:
    """`url`'s body, over https (or from a loopback server), at most `limit` bytes; `error` says
    why not, naming `source`. With `missing_ok`, a 404 is an empty body."""
    if not url.startswith(("https://", "http://127.0.0.1", "http://localhost")):
        raise error(f"not fetched over https: {url[:120]}")
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_SEC) as response:
            body = response.read(limit + 1)
    except urllib.error.HTTPError as e:
        if e.code == 404 and missing_ok:
            return b""
        raise error(f"{source} answered {e.code} for {url[:160]}") from None
    except (urllib.error.URLError, OSError) as e:
        raise error(f"{source} could not be reached ({getattr(e, 'reason', None) or e})") from None
    if len(body) > limit:
        raise error(f"{url[:160]} is over {limit // 2**20} MB")
    return body


def keep_json(path: Path, data: object) -> None:
    """Written whole or not at all: runs in parallel may look the same release up."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".part-")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)
