"""The agent's patch: everything it changed in the repository, as a diff against the base commit.

Untracked files count (`git add -A`), ignored files do not (the repository's .gitignore), and
neither do the config's `patch_exclude` globs (bytecode, caches, .orig/.rej leftovers) nor binary
files: a text diff cannot carry them and `git apply` refuses a patch that mentions one, so one
stray binary would sink the whole submission. What was left out is recorded.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from tbscale.environments import Environment

PATCH_FILE = "/tmp/tbscale_model.patch"


@dataclass
class ExtractedPatch:
    patch: str
    files: list[str] = field(default_factory=list)
    excluded_binary: list[str] = field(default_factory=list)
    error: str | None = None
    truncated: bool = False

    def as_details(self) -> dict:
        return {"model_patch": self.patch, "patch_files": self.files, "patch_excluded_binary": self.excluded_binary,
                "patch_error": self.error, "patch_too_large": self.truncated}


def _pathspecs(excludes: list[str], binary: list[str]) -> str:
    specs = ["."] + [f":(exclude,glob){g}" for g in excludes] + [f":(exclude,literal){p}" for p in binary]
    return " ".join(shlex.quote(s) for s in specs)


def extract_patch(box: Environment, repo_dir: str, base_commit: str, excludes: list[str],
                  max_bytes: int = 5_000_000, timeout_sec: float = 120) -> ExtractedPatch:
    repo, base = shlex.quote(repo_dir), shlex.quote(base_commit)
    git = f"git -C {repo} -c core.fileMode=false -c safe.directory='*'"
    diff = f"{git} diff --cached --no-color --no-ext-diff --no-renames {base}"
    stage = box.exec(f"out=$({git} add -A -- {_pathspecs(excludes, [])} 2>&1) || {{ echo \"$out\"; exit 3; }}; "
                     f"{diff} --numstat -z -- {_pathspecs(excludes, [])}", timeout_sec)
    if stage.exit_code != 0:
        return ExtractedPatch("", error=f"git add/diff failed (exit {stage.exit_code}): {stage.output.strip()[-500:]}")
    files, binary = [], []
    for entry in stage.output.split("\0"):
        parts = entry.split("\t", 2)
        if len(parts) != 3:
            continue
        added, deleted, path = parts
        (binary if added == "-" and deleted == "-" else files).append(path)
    res = box.exec(f"{diff} -- {_pathspecs(excludes, binary)} > {PATCH_FILE} && wc -c < {PATCH_FILE}", timeout_sec)
    if res.exit_code != 0:
        return ExtractedPatch("", files, binary, error=f"git diff failed (exit {res.exit_code}): {res.output.strip()[-500:]}")
    try:
        size = int(res.output.strip().splitlines()[-1])
    except (ValueError, IndexError):
        size = 0
    if size > max_bytes:
        return ExtractedPatch("", files, binary, error=f"the patch is {size} bytes, over patch_max_bytes", truncated=True)
    raw = box.read_file(PATCH_FILE) or b""
    return ExtractedPatch(raw.decode("utf-8", errors="replace"), files, binary)
