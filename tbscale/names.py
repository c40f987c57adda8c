"""Names a user gives that become folder or file names (run names, import names, setting names,
sweep dates, task ids), and the paths built from them: one rule for all, so no name can climb out
of the folder it is meant to live in."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

from tbscale.errors import TbscaleError

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
NAME_MAX_LEN = 200  # a folder name's bytes are limited (255 on most file systems); leave room for suffixes
_NAME = re.compile(NAME_PATTERN)
NAME_RULE = "letters, digits, '_', '.' and '-', starting with a letter or digit"


def name_problem(value: object) -> str | None:
    """Why `value` cannot name a folder, or None when it can."""
    if not isinstance(value, str) or not value:
        return "must not be empty"
    if len(value) > NAME_MAX_LEN:
        return f"is {len(value)} characters long (at most {NAME_MAX_LEN})"
    if not _NAME.fullmatch(value) or value.endswith("."):
        return f"must be {NAME_RULE} (it names a folder)"
    return None


def check_name(value: object, where: str) -> str:
    """`value` when it can name a folder; else a one-line TbscaleError naming `where`."""
    problem = name_problem(value)
    if problem is not None:
        raise TbscaleError(f"{where}: {value!r} {problem}")
    return value  # type: ignore[return-value]


def inside(path: Path, root: Path) -> bool:
    """Whether `path` lies inside `root` once both are resolved (symlinks followed)."""
    try:
        Path(os.path.realpath(path)).relative_to(os.path.realpath(root))
    except ValueError:
        return False
    return True


def run_folder_problem(path: Path, root: Path) -> str | None:
    """Why `path` is not a tbscale run folder that may be replaced (`--force`), or None when it is:
    a real folder (not a symlink) directly inside `root`, holding a manifest.json that tbscale wrote
    for a run of this name and a trials.jsonl."""
    path = Path(path)
    if path.is_symlink():
        return "is a symbolic link"
    if not path.is_dir():
        return "is not a folder"
    if Path(os.path.realpath(path)).parent != Path(os.path.realpath(root)):
        return f"is not a folder directly inside {root}"
    manifest = path / "manifest.json"
    if manifest.is_symlink() or not manifest.is_file():
        return "holds no manifest.json written by tbscale"
    from tbscale.runfiles import read_manifest  # pydantic: only when a folder is to be replaced

    try:
        data = read_manifest(manifest)
    except TbscaleError as e:
        return f"has a manifest.json that is not tbscale's ({str(e).removeprefix(f'{manifest}: ')})"
    if data is None or data.schema_version is None or data.run_name != path.name:
        return "has a manifest.json that tbscale did not write for a run of this name"
    trials = path / "trials.jsonl"
    if trials.is_symlink() or not trials.is_file():
        return "holds no trials.jsonl"
    return None


def writable_folder(path: Path | str, what: str, made: list[Path] | None = None) -> Path:
    """`path` made (with its parents) and written to once, or a one-line TbscaleError saying why not.
    `made`, when given, gets each folder this call created, outermost first: a command that stops
    on bad input before it writes anything removes them again (`remove_made_folders`)."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise TbscaleError(f"{what} {path}: is a file, not a folder")
    try:
        _make_folders(path, made if made is not None else [])
        with tempfile.NamedTemporaryFile(dir=path, prefix=".tbscale-write-check-"):
            pass
    except FileExistsError:
        raise TbscaleError(f"{what} {path}: a part of the path is a file") from None
    except NotADirectoryError:
        raise TbscaleError(f"{what} {path}: a part of the path is a file, not a folder") from None
    except OSError as e:
        raise TbscaleError(f"{what} {path}: cannot be written ({e.strerror or type(e).__name__})") from None
    return path


def _make_folders(path: Path, made: list[Path]) -> None:
    """`mkdir -p path`, noting in `made` each folder it made (not one another process made meanwhile)."""
    missing = []
    folder = path
    while not folder.is_dir() and folder.parent != folder:
        missing.append(folder)
        folder = folder.parent
    for folder in reversed(missing):
        try:
            folder.mkdir()
        except FileExistsError:
            if not folder.is_dir():
                raise
            continue
        made.append(folder)


def remove_made_folders(made: list[Path]) -> None:
    """Remove the folders `writable_folder` noted in `made`, innermost first, while they are empty:
    what a command made before it stopped on bad input, and nothing else."""
    for folder in reversed(made):
        try:
            folder.rmdir()
        except OSError:  # it holds something now (or is gone): it and its parents stay
            return
