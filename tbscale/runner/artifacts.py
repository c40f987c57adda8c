"""An attempt's artifacts: copied out of its environment into the run folder after the agent
phase, and back into a separate verifier's environment (docs/tasks.md, "Collect").

The convention folder /logs/artifacts and every declared `[[artifacts]]` entry are mirrored under
`results/<run>/artifacts/<trial key>/attempt-<i>/` (`/app/x.json` -> `.../app/x.json`, or the
entry's `destination`), with a manifest.json saying what was found (one CollectedArtifact per
entry; docs/formats.md lists the fields). A missing source is recorded, never fatal.
"""

from __future__ import annotations

import shlex
import shutil
import tempfile
from pathlib import Path, PurePosixPath
from typing import Callable

from tbscale.environments import Environment
from tbscale.errors import SandboxError
from tbscale.runfiles import artifact_manifest_json
from tbscale.tasks.schema import Artifact
from tbscale.types.artifacts import CollectedArtifact

CONVENTION_ARTIFACTS = "/logs/artifacts"


def collect_artifacts(box: Environment, artifacts: list[Artifact], dest: Path, *, workdir: Callable[[], str],
                      run_root: Path, convention: str | None = None) -> list[CollectedArtifact]:
    """Copy the convention folder and every declared artifact out of `box` into `dest`; returns
    the manifest. `workdir()` resolves relative sources; an empty `dest` is removed up to
    `run_root`. `convention`: the main environment's convention folder, when already known to be
    an empty folder ("empty") or absent ("absent") and unchangeable since (runner/guard.py): it is
    then not copied out, and everything recorded is as if it had been."""
    entries = list(artifacts)
    if not any(a.source.rstrip("/") == CONVENTION_ARTIFACTS for a in entries):
        entries.insert(0, Artifact(source=CONVENTION_ARTIFACTS))
    manifest: list[CollectedArtifact] = []
    base = None
    with tempfile.TemporaryDirectory(prefix="tbscale-artifacts-") as tmp:
        for i, art in enumerate(entries):
            source = art.source
            if not source.startswith("/"):
                base = base or workdir()
                source = str(PurePosixPath(base) / source)
            rel = art.destination or source.strip("/")
            record = {"source": art.source, "destination": rel, "service": art.effective_service}
            try:
                where = box.service(art.service) if art.service not in (None, "main") else box
                stage = Path(tmp) / str(i)
                if convention in ("empty", "absent") and where is box and source.rstrip("/") == CONVENTION_ARTIFACTS:
                    ok = convention == "empty"
                    if ok:  # what copying out an empty folder gives
                        (stage / PurePosixPath(CONVENTION_ARTIFACTS).name).mkdir(parents=True)
                else:
                    ok = where.get_dir(source.rstrip("/") or "/", stage)
            except SandboxError as e:
                manifest.append(CollectedArtifact(**record, status="failed", error=str(e)[:200]))
                continue
            got = stage / PurePosixPath(source.rstrip("/")).name if ok else None
            if got is None or not (got.exists() or got.is_symlink()):
                manifest.append(CollectedArtifact(**record, status="missing"))
                continue
            target = dest / rel
            if target.exists():
                manifest.append(CollectedArtifact(**record, status="skipped", error="destination already claimed"))
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            if got.is_dir():
                ignore = shutil.ignore_patterns(*art.exclude) if art.exclude else None
                shutil.copytree(got, target, ignore=ignore, symlinks=True)
                kind = "directory"
                if art.source.rstrip("/") == CONVENTION_ARTIFACTS and not any(target.iterdir()):
                    target.rmdir()
                    _prune(target.parent, dest.parent)
                    manifest.append(CollectedArtifact(**record, status="empty", type=kind))
                    continue
            else:
                shutil.copy2(got, target, follow_symlinks=False)
                kind = "file"
            manifest.append(CollectedArtifact(**record, status="ok", type=kind, container_path=source))
    if any(m.status == "ok" for m in manifest) or artifacts:
        dest.mkdir(parents=True, exist_ok=True)
        (dest / "manifest.json").write_text(artifact_manifest_json(manifest))
    elif dest.is_dir():
        _prune(dest, run_root)
    return manifest


def restore_artifacts(box: Environment, manifest: list[CollectedArtifact], dest: Path) -> None:
    """Put collected artifacts back at their source paths (a separate verifier's environment)."""
    for m in manifest:
        if m.status != "ok" or m.container_path is None:
            continue
        path = PurePosixPath(m.container_path)
        box.exec(f"mkdir -p {shlex.quote(str(path.parent))}", 30, user="0")
        box.put_archive({path.name: dest / m.destination}, str(path.parent))


def _prune(folder: Path, root: Path) -> None:
    while folder != root and folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
        folder = folder.parent
