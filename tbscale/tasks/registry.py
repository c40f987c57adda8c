"""Datasets by name from a registry: Harbor's registry.json, and terminal-bench's legacy registry.

A registry is a JSON list read from a URL (http, https, file://) or a local file:
* Harbor (0.26, `harbor/models/registry.py`): `{name, version, description, metrics, tasks:
  [{name, git_url, git_commit_id, path}]}`; a task without `git_url` is a folder relative to a
  local registry file. The default registry is Harbor's public one (DEFAULT_REGISTRY).
* terminal-bench's legacy registry (`terminal_bench/registry/client.py`): `{name, version,
  description, terminal_bench_version, github_url, dataset_path, branch, commit_hash,
  task_id_subset}`: the task folders under `dataset_path` at `commit_hash` ("head": the tip of
  `branch`), only those in `task_id_subset` when it is given; zip files there are extracted with the
  legacy harness's password.

`pull` fetches every task at its pinned commit into the cache (sparse and shallow: `git init`,
`git fetch --depth 1 origin <commit>`, a sparse checkout of the task's path), checks the fetched
commit is the pinned one, and reuses what is already cached (a lock file records each task's commit
and content hash). A failure is a one-line error naming the task and the URL.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import tempfile
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Callable, Iterator

from tbscale.errors import TbscaleError
from tbscale.types.manifest import DatasetRecord, DatasetSource

DEFAULT_REGISTRY = "https://raw.githubusercontent.com/laude-institute/harbor/main/registry.json"
LEGACY_ZIP_PASSWORD = b"TERMINAL-BENCH-ADAPTED-DATASET"  # terminal-bench's adapted datasets
LOCK_NAME = ".tbscale-dataset.json"
GIT_TIMEOUT_SEC = 600
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")
_SHA = re.compile(r"^[0-9a-f]{7,64}$")


@dataclass
class RegistryTask:
    """One task of a dataset: `path` in the repository `git_url` at `commit` (None: the default
    branch's tip, or `branch`'s), or a local folder when there is no git_url."""

    name: str
    path: str
    git_url: str | None = None
    commit: str | None = None
    branch: str | None = None
    local: Path | None = None
    whole_folder: bool = False  # terminal-bench legacy: `path` holds many task folders


@dataclass
class RegistryDataset:
    name: str
    version: str
    description: str
    format: str  # "harbor" or "terminal-bench"
    registry: str
    tasks: list[RegistryTask] = field(default_factory=list)
    subset: list[str] | None = None  # terminal-bench legacy: task_id_subset

    @property
    def label(self) -> str:
        return f"{self.name}@{self.version}"


@dataclass
class PulledDataset:
    """A dataset in the cache: `path` holds one folder per task; `commits` maps each folder name
    to the commit it was fetched at (None for a local task)."""

    dataset: RegistryDataset
    path: Path
    commits: dict[str, str | None]
    sources: dict[str, DatasetSource]
    reused: int = 0
    fetched: int = 0

    def manifest(self) -> DatasetRecord:
        """What the run's manifest records of the dataset (its `dataset`)."""
        return DatasetRecord(name=self.dataset.name, version=self.dataset.version, registry=self.dataset.registry,
                             format=self.dataset.format, path=str(self.path), commits=dict(self.commits),
                             sources=dict(self.sources))


# ---- reading a registry ------------------------------------------------------------------------

def _read_location(location: str) -> tuple[str, Path | None]:
    """The registry's text, and its folder when it is a local file (for tasks without git_url)."""
    if re.match(r"^[a-z][a-z0-9+.-]*://", location):
        if location.startswith("file://"):
            path = Path(urllib.request.url2pathname(location[len("file://"):]))
            return _read_file(path, location), path.parent
        try:
            with urllib.request.urlopen(location, timeout=60) as response:
                return response.read().decode("utf-8"), None
        except (urllib.error.URLError, OSError, UnicodeDecodeError) as e:
            reason = getattr(e, "reason", None) or e
            raise TbscaleError(f"could not read the registry {location}: {reason} (give a registry this machine "
                               "can reach: a URL, a file, or a file:// URL)") from None
    return _read_file(Path(location), location), Path(location).parent


def _read_file(path: Path, shown: str) -> str:
    if path.is_dir():
        path = path / "registry.json"
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TbscaleError(f"{shown}: no such registry file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise TbscaleError(f"{shown}: cannot read the registry ({e})") from None


def _safe_name(name: Any, where: str) -> str:
    if not isinstance(name, str) or not _SAFE_NAME.match(name) or ".." in name:
        raise TbscaleError(f"{where}: task name {name!r} is not a folder name (letters, digits, . _ + -)")
    return name


def _safe_path(path: Any, where: str) -> str:
    if not isinstance(path, str) or not path or PurePosixPath(path).is_absolute() or ".." in PurePosixPath(path).parts:
        raise TbscaleError(f"{where}: path {path!r} must be a relative path inside the repository")
    return PurePosixPath(path).as_posix()


def read_registry(location: str | None = None) -> list[RegistryDataset]:
    """Every dataset of a registry (Harbor's format or terminal-bench's legacy one)."""
    location = location or DEFAULT_REGISTRY
    text, folder = _read_location(location)
    try:
        rows = json.loads(text)
    except json.JSONDecodeError as e:
        raise TbscaleError(f"{location}: not valid JSON ({e.msg} at line {e.lineno})") from None
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise TbscaleError(f"{location}: a registry is a JSON list of datasets")
    out = []
    for i, row in enumerate(rows):
        where = f"{location}: dataset {i + 1} ({row.get('name')}@{row.get('version')})"
        if not isinstance(row.get("name"), str) or row.get("version") is None:
            raise TbscaleError(f"{where}: needs `name` and `version`")
        if isinstance(row.get("tasks"), list):
            out.append(_harbor_dataset(row, location, folder, where))
        elif isinstance(row.get("github_url"), str) and isinstance(row.get("dataset_path"), str):
            out.append(_legacy_dataset(row, location, where))
        else:
            raise TbscaleError(f"{where}: neither Harbor's format (`tasks`) nor terminal-bench's (`github_url`, "
                               "`dataset_path`)")
    return out


def _harbor_dataset(row: dict, location: str, folder: Path | None, where: str) -> RegistryDataset:
    tasks: list[RegistryTask] = []
    seen: dict[str, RegistryTask] = {}
    for j, entry in enumerate(row["tasks"]):
        at = f"{where}: tasks[{j}]"
        if not isinstance(entry, dict):
            raise TbscaleError(f"{at}: must be a table {{name, git_url, git_commit_id, path}}")
        path = _safe_path(entry.get("path") or entry.get("name"), at)
        name = _safe_name(entry.get("name") or PurePosixPath(path).name, at)
        commit = entry.get("git_commit_id")
        if commit is not None and not isinstance(commit, str):
            raise TbscaleError(f"{at}: git_commit_id must be a string")
        git_url = entry.get("git_url")
        local = None
        if not git_url:
            if folder is None:
                raise TbscaleError(f"{at}: task {name!r} has no git_url, and a remote registry has no folder for "
                                   "its path")
            local = (folder / path).resolve()
        task = RegistryTask(name=name, path=path, git_url=git_url or None, commit=commit or None, local=local)
        if name in seen:
            if (seen[name].git_url, seen[name].commit, seen[name].path) == (task.git_url, task.commit, task.path):
                continue  # the same task listed twice (Harbor drops such duplicates too)
            raise TbscaleError(f"{at}: two different tasks are named {name!r}")
        seen[name] = task
        tasks.append(task)
    return RegistryDataset(str(row["name"]), str(row["version"]), str(row.get("description") or ""), "harbor",
                           location, tasks)


def _legacy_dataset(row: dict, location: str, where: str) -> RegistryDataset:
    commit = row.get("commit_hash")
    branch = row.get("branch") or None
    subset = row.get("task_id_subset")
    if subset is not None and not (isinstance(subset, list) and all(isinstance(s, str) for s in subset)):
        raise TbscaleError(f"{where}: task_id_subset must be a list of task ids")
    path = _safe_path(row["dataset_path"], where)
    task = RegistryTask(name=str(row["name"]), path=path, git_url=row["github_url"],
                        commit=None if commit in (None, "", "head") else str(commit), branch=branch, whole_folder=True)
    ds = RegistryDataset(str(row["name"]), str(row["version"]), str(row.get("description") or ""), "terminal-bench",
                         location, [task], subset=[_safe_name(s, where) for s in subset] if subset else None)
    return ds


def _version_key(version: str) -> tuple:
    from packaging.version import InvalidVersion, Version

    try:
        return (1, Version(version), version)
    except InvalidVersion:
        return (0, None, version)


def find_dataset(datasets: list[RegistryDataset], spec: str, registry: str) -> RegistryDataset:
    """The dataset `spec` names: NAME@VERSION, or NAME alone (then "head" if there is one, else the
    highest version, as Harbor resolves it)."""
    name, _, version = spec.partition("@")
    same = [d for d in datasets if d.name == name]
    if not same:
        known = ", ".join(sorted({d.label for d in datasets})[:20]) or "none"
        raise TbscaleError(f"{registry}: no dataset named {name!r} (datasets: {known})")
    if version:
        for d in same:
            if d.version == version:
                return d
        raise TbscaleError(f"{registry}: dataset {name!r} has no version {version!r} (versions: "
                           f"{', '.join(d.version for d in same)})")
    heads = [d for d in same if d.version == "head"]
    if heads:
        return heads[0]
    return max(same, key=lambda d: _version_key(d.version))


# ---- fetching ------------------------------------------------------------------------------------

def cache_root() -> Path:
    """Where pulled datasets live: $TBSCALE_DATASETS, else $XDG_CACHE_HOME/tbscale/datasets."""
    if os.environ.get("TBSCALE_DATASETS"):
        return Path(os.environ["TBSCALE_DATASETS"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tbscale" / "datasets"


def _git(args: list[str], cwd: Path, what: str) -> str:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_LFS_SKIP_SMUDGE": "1"}
    try:
        res = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=GIT_TIMEOUT_SEC, env=env)
    except FileNotFoundError:
        raise TbscaleError(f"{what}: git is not installed") from None
    except subprocess.TimeoutExpired:
        raise TbscaleError(f"{what}: `git {args[0]}` took longer than {GIT_TIMEOUT_SEC} s") from None
    if res.returncode != 0:
        lines = [ln.strip() for ln in (res.stderr or res.stdout).splitlines() if ln.strip()]
        last = next((ln for ln in reversed(lines) if ln.lower().startswith(("fatal", "error"))), lines[-1] if lines else "")
        command = next(a for i, a in enumerate(args) if not a.startswith("-") and (i == 0 or args[i - 1] != "-c"))
        raise TbscaleError(f"{what}: git {command} failed ({last[:200]})")
    return res.stdout.strip()


def _checkout(repo: Path, git_url: str, ref: str | None, paths: list[str], what: str) -> str:
    """A sparse, shallow checkout of `paths` at `ref` (a commit, a branch, or None for the remote's
    HEAD) into the empty folder `repo`; returns the commit checked out."""
    _git(["init", "-q"], repo, what)
    _git(["remote", "add", "origin", git_url], repo, what)
    _git(["sparse-checkout", "set", "--no-cone", *paths], repo, what)
    want = ref or "HEAD"
    try:
        _git(["fetch", "-q", "--depth", "1", "--filter=blob:none", "origin", want], repo, what)
    except TbscaleError:
        # Servers that refuse a commit by id, or partial clones, get a whole fetch instead.
        _git(["fetch", "-q", "origin", *([] if ref and _SHA.match(ref) else [want])], repo, what)
        if ref and _SHA.match(ref):
            _git(["-c", "advice.detachedHead=false", "checkout", "-q", ref], repo, what)
            return _git(["rev-parse", "HEAD"], repo, what)
    _git(["-c", "advice.detachedHead=false", "checkout", "-q", "FETCH_HEAD"], repo, what)
    return _git(["rev-parse", "HEAD"], repo, what)


def _verify(commit: str, pinned: str | None, what: str) -> None:
    if pinned and not commit.startswith(pinned.lower()):
        raise TbscaleError(f"{what}: fetched commit {commit[:12]} is not the pinned {pinned}")


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _digest(path: Path) -> str:
    from tbscale.seeds import hash_directory

    return hash_directory(path)


def _what(ds: RegistryDataset, task: RegistryTask) -> str:
    where = f"{task.git_url} @ {task.commit or task.branch or 'HEAD'}" if task.git_url else str(task.local)
    return f"dataset {ds.label}: task {task.name!r} ({where})"


def _extract_legacy_zips(folder: Path) -> None:
    for item in sorted(folder.iterdir()):
        if item.is_file() and item.suffix == ".zip":
            try:
                with zipfile.ZipFile(item) as z:
                    z.extractall(folder, pwd=LEGACY_ZIP_PASSWORD)
                item.unlink()
            except (zipfile.BadZipFile, RuntimeError):
                continue  # not an encrypted task archive, as the legacy harness skipped it


def pull(ds: RegistryDataset, cache: Path | None = None, force: bool = False,
         log: Callable[[str], None] | None = None) -> PulledDataset:
    """Every task of `ds` in the cache at its pinned commit (see the module doc)."""
    root = (cache or cache_root()) / _safe_name(ds.name, ds.registry) / _safe_name(ds.version, ds.registry)
    lock_path = root / LOCK_NAME
    with _locked(root):
        lock = {} if force or not lock_path.is_file() else json.loads(lock_path.read_text())
        known = lock.get("tasks", {}) if lock.get("registry_entry") == _entry_key(ds) else {}
        commits: dict[str, str | None] = {}
        sources: dict[str, DatasetSource] = {}
        reused = fetched = 0
        todo: dict[tuple[str | None, str | None], list[RegistryTask]] = {}
        for task in ds.tasks:
            if task.whole_folder:
                todo.setdefault((task.git_url, task.commit or task.branch), []).append(task)
                continue
            entry = known.get(task.name)
            target = root / task.name
            # A pinned task already in the cache, unchanged, is reused; an unpinned one (the default
            # branch's tip) is fetched again, since the tip may have moved.
            if entry and task.commit is not None and entry.get("pinned") == task.commit and \
                    entry.get("git_url") == task.git_url and target.is_dir() and entry.get("digest") == _digest(target):
                commits[task.name], sources[task.name] = entry["commit"], _source(task)
                reused += 1
                continue
            if task.local is not None:
                if not (task.local / "task.toml").is_file() and not (task.local / "task.yaml").is_file():
                    raise TbscaleError(f"{_what(ds, task)}: not a task folder (no task.toml or task.yaml)")
                _replace(task.local, target)
                commits[task.name], sources[task.name] = None, _source(task)
                fetched += 1
                continue
            todo.setdefault((task.git_url, task.commit or task.branch), []).append(task)
        for (git_url, ref), tasks in todo.items():
            if tasks[0].whole_folder:
                entries, cached = _pull_folder(ds, tasks[0], root, known, log)
                for name, commit in entries.items():
                    commits[name], sources[name] = commit, _source(tasks[0]).model_copy(update={"path": f"{tasks[0].path}/{name}"})
                if cached:
                    reused += len(entries)
                else:
                    fetched += len(entries)
                continue
            if log:
                log(f"fetching {len(tasks)} task(s) of {ds.label} from {git_url} @ {ref or 'HEAD'}")
            with tempfile.TemporaryDirectory(prefix="tbscale-fetch-") as tmp:
                repo = Path(tmp)
                what = _what(ds, tasks[0]) if len(tasks) == 1 else \
                    f"dataset {ds.label}: tasks {', '.join(repr(t.name) for t in tasks[:3])}" \
                    f"{' ...' if len(tasks) > 3 else ''} ({git_url} @ {ref or 'HEAD'})"
                commit = _checkout(repo, str(git_url), ref, sorted({t.path for t in tasks}), what)
                for task in tasks:
                    _verify(commit, task.commit, _what(ds, task))
                    source = repo / task.path
                    if not (source / "task.toml").is_file() and not (source / "task.yaml").is_file():
                        raise TbscaleError(f"{_what(ds, task)}: {task.path!r} is not a task folder at {commit[:12]} "
                                           "(no task.toml or task.yaml)")
                    _replace(source, root / task.name)
                    commits[task.name], sources[task.name] = commit, _source(task)
                    fetched += 1
        _write_lock(lock_path, ds, commits, sources)
    return PulledDataset(ds, root, commits, sources, reused=reused, fetched=fetched)


def _pull_folder(ds: RegistryDataset, task: RegistryTask, root: Path, known: dict,
                 log: Callable[[str], None] | None) -> tuple[dict[str, str], bool]:
    """terminal-bench legacy: every task folder under `task.path` (or those of the subset)."""
    ref = task.commit or task.branch
    # A pinned commit already in the cache, unchanged, is reused; a branch tip ("head") is fetched
    # again every time, as the legacy harness did.
    if task.commit is not None and known and all(
            v.get("pinned") == task.commit and (root / n).is_dir() and v.get("digest") == _digest(root / n)
            for n, v in known.items()):
        return {n: v["commit"] for n, v in known.items()}, True
    if log:
        log(f"fetching {ds.label} from {task.git_url} @ {ref or 'HEAD'} ({task.path})")
    what = _what(ds, task)
    with tempfile.TemporaryDirectory(prefix="tbscale-fetch-") as tmp:
        repo = Path(tmp)
        paths = [f"{task.path}/{s}" for s in ds.subset] if ds.subset else [task.path]
        commit = _checkout(repo, str(task.git_url), ref, paths + [f"{task.path}/*.zip"] if ds.subset else paths, what)
        _verify(commit, task.commit, what)
        folder = repo / task.path
        if not folder.is_dir():
            raise TbscaleError(f"{what}: no folder {task.path!r} at {commit[:12]}")
        _extract_legacy_zips(folder)
        names = sorted(p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
        if ds.subset:
            missing = sorted(set(ds.subset) - set(names))
            if missing:
                raise TbscaleError(f"{what}: task_id_subset names folders that are not there: {', '.join(missing[:5])}")
            names = [n for n in names if n in ds.subset]
        for old in root.iterdir() if root.is_dir() else []:
            if old.is_dir() and old.name not in names:
                shutil.rmtree(old)
        for name in names:
            _replace(folder / name, root / name)
    return {name: commit for name in names}, False


def _source(task: RegistryTask) -> DatasetSource:
    return DatasetSource(git_url=task.git_url, path=task.path, pinned=task.commit,
                         **({"branch": task.branch} if task.branch else {}))


def _entry_key(ds: RegistryDataset) -> str:
    return json.dumps([[t.name, t.git_url, t.commit, t.path, t.branch] for t in ds.tasks] + [ds.subset],
                      sort_keys=True)


def _replace(source: Path, target: Path) -> None:
    tmp = target.with_name(f".{target.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(source, tmp, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    if target.exists():
        shutil.rmtree(target)
    tmp.rename(target)


def _write_lock(path: Path, ds: RegistryDataset, commits: dict[str, str | None],
                sources: dict[str, DatasetSource]) -> None:
    tasks = {name: {"commit": commit, "pinned": sources[name].pinned, "git_url": sources[name].git_url,
                    "path": sources[name].path, "digest": _digest(path.parent / name)}
             for name, commit in commits.items()}
    data = {"name": ds.name, "version": ds.version, "registry": ds.registry, "format": ds.format,
            "registry_entry": _entry_key(ds), "tasks": tasks}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2))
    tmp.replace(path)


def pull_by_name(spec: str, registry: str | None = None, cache: Path | None = None, force: bool = False,
                 log: Callable[[str], None] | None = None) -> PulledDataset:
    """`NAME@VERSION` from `registry` (default: Harbor's public registry), pulled into the cache."""
    location = registry or DEFAULT_REGISTRY
    return pull(find_dataset(read_registry(location), spec, location), cache=cache, force=force, log=log)
