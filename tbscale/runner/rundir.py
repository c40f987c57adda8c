"""A run's folder: the manifest that pins its configuration, the trial index, the spend ledger and
the crash log. Everything a person looks for is a file here (docs/formats.md)."""

from __future__ import annotations

import fcntl
import os
import platform
import socket
import subprocess
import traceback
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from tbscale import SCHEMA_VERSION, __version__
from tbscale.config import Experiment
from tbscale.errors import TbscaleError
from tbscale.logs import AppendedLines, EventLog, TrialIndex, model_line
from tbscale.runfiles import RUN_LOCK, manifest_json, read_manifest
from tbscale.secrets import redact
from tbscale.runner.identity import identity_changes, key_of, setting_identity
from tbscale.runner.plan import TrialSpec
from tbscale.runner.resolve import simulated_roles
from tbscale.types.manifest import RunManifest
from tbscale.types.spend import SpendLine


def versions() -> dict[str, str]:
    out = {"tbscale": __version__, "python": platform.python_version()}
    for pkg in ("litellm", "docker", "swebench", "pydantic"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def git_commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                              cwd=Path(__file__).parent).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def now() -> str:
    return datetime.now(timezone.utc).isoformat()


class RunLock:
    """Held by the one process that runs trials into a run folder (`tbscale run`, a sweep's point,
    `tasks check`): a second one on the same folder is refused, instead of running every trial again
    beside the first and interleaving their lines in the same trajectory files. An flock on
    `.tbscale-run.lock`: the kernel lets go of it when its holder exits, however it exits (kill -9
    too), so a lock is never stale. The file stays (removing it would let two processes hold locks on
    two files of the same name); it names the last holder."""

    NAME = RUN_LOCK

    def __init__(self, folder: Path):
        self.path = Path(folder) / self.NAME
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        if self._fd is not None:
            return
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 300).decode(errors="replace").strip() or "a process"
            os.close(fd)
            raise TbscaleError(f"{self.path.parent}: another tbscale run is running trials into this run folder "
                               f"({holder}); let it finish (or stop it), or give this run another --run-name") from None
        except OSError:  # a file system without flock (some network mounts): run unguarded, as before
            os.close(fd)
            return
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()} on {socket.gethostname()} since {now()}\n".encode())
        self._fd = fd

    def release(self, remove: bool = False) -> None:
        """Let go of the lock; with `remove`, remove the file too (only for a folder the caller made
        moments ago and is removing again: no other run can be waiting on it)."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            if remove:
                self.path.unlink(missing_ok=True)
            os.close(fd)  # closing the last descriptor lets go of the flock


class RunFolder:
    """results/<run>/ as one experiment sees it."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.index = TrialIndex(self.path / "trials.jsonl")
        self.ledger = AppendedLines(self.path / "spend.jsonl", sync=False)
        self.lock = RunLock(self.path)

    @property
    def run_label(self) -> str:
        """The run folder as the resources a trial starts are labelled with (`org.tbscale.run`)."""
        return str(self.path.resolve())

    @property
    def manifest_path(self) -> Path:
        return self.path / "manifest.json"

    def read_manifest(self) -> RunManifest | None:
        return read_manifest(self.manifest_path)

    def open_for(self, exp: Experiment, task_hashes: dict[str, str]) -> RunManifest:
        """The manifest for running `exp` here: created, or checked and extended. A setting whose
        name is known but whose identity changed is refused, naming what changed."""
        identities = {s.name: setting_identity(exp, s) for s in exp.settings}
        keys = {name: key_of(ident) for name, ident in identities.items()}
        sim_roles = {s.name: simulated_roles(exp, s) for s in exp.settings}
        manifest = self.read_manifest()
        if manifest is not None:
            old_keys, old_ids = manifest.setting_keys, manifest.setting_identities
            for name, key in keys.items():
                if name in old_keys and old_keys[name] != key:
                    what = identity_changes(old_ids[name], identities[name]) if name in old_ids else []
                    raise TbscaleError(
                        f"{self.manifest_path}: setting {name!r} changed since this run began"
                        + (f" ({', '.join(what[:8])})" if what else "")
                        + "; give the run a new name (--run-name) or the setting a new name")
            manifest.setting_keys = {**old_keys, **keys}
            manifest.setting_identities = {**old_ids, **identities}
            manifest.config_history = [*manifest.config_history, exp.model_dump(mode="json")]
        else:
            manifest = RunManifest(schema_version=SCHEMA_VERSION, run_name=self.path.name,
                                   experiment=exp.model_dump(mode="json"), setting_keys=keys,
                                   setting_identities=identities, created_at=now(), invocations=[])
        simulated = any(m.is_simulated for m in exp.models.values())
        # What the plan holds, so a report can say what is missing.
        manifest.current = {"settings": list(keys), "setting_keys": keys, "trials": exp.trials, "seed": exp.seed,
                            "task_hashes": task_hashes,
                            "planned_trials": {name: len(task_hashes) * exp.trials for name in keys}}
        manifest.simulated_roles = {**manifest.simulated_roles, **sim_roles}
        manifest.versions, manifest.git_commit, manifest.host = versions(), git_commit(), platform.node()
        manifest.simulated_models = simulated
        manifest.simulated_note = ("models named sim/... are tbscale's embedded simulation, not language models"
                                   if simulated else None)
        manifest.invocations = manifest.invocations  # written even when an older manifest had none
        return manifest

    def write_manifest(self, manifest: RunManifest) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        tmp = self.manifest_path.with_suffix(".json.tmp")
        tmp.write_text(manifest_json(manifest))
        tmp.replace(self.manifest_path)

    def event_log(self, spec: TrialSpec, **base: Any) -> EventLog:
        return EventLog(self.path / spec.trajectory_relpath, **base)

    def log_crash(self, spec: TrialSpec, exc: BaseException) -> None:
        with open(self.path / "crashes.log", "a", encoding="utf-8") as f:
            f.write(f"--- {now()} trial {spec.key} ({spec.setting.name}, {spec.task.id}, trial {spec.trial})\n")
            f.write(redact("".join(traceback.format_exception(exc))) + "\n")

    def record_spend(self, line: SpendLine) -> None:
        """One line per model call ever made for this run (spend.jsonl): crashed, retried and
        superseded trials included, so the report can say what was spent beside what it counts."""
        self.ledger.append_line(model_line(line))
