"""Where each command of a test script runs, read off its text: the folder a `cd` to a path the script
names moves to ("" the workdir, where the script starts). The verifier guard asks this of the
commands that read the folder they run in: uv's (verifier_reads.project_envs), npm's
(runner/npm_project.py) and the build tools' (runner/build_tools.py: go, cargo, cmake and make)."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator

from tbscale.runner.findings import under
from tbscale.shell.parse import Invocation, invocation, split_segments


def moved(cwd: str | None, target: str) -> str | None:
    """The folder after `cd target` from `cwd` ("" the workdir; None a folder the script does not
    name, as after `cd "$TEST_DIR"` or `cd ..` from the workdir)."""
    if re.fullmatch(r"/[A-Za-z0-9_./+-]*", target):
        return posixpath.normpath(target)
    if cwd is None or not re.fullmatch(r"[A-Za-z0-9_.+-][A-Za-z0-9_./+-]*", target):
        return None
    if cwd:
        return posixpath.normpath(posixpath.join(cwd, target))
    folder = posixpath.normpath(target)
    return None if folder == ".." or folder.startswith("../") else ("" if folder == "." else folder)


# `cd A || cd B || cd C` (SWE-bench Pro's Harbor adapters: `cd /app || cd /testbed || cd /workspace`):
# the script is in one of them, whichever exists; read as one command naming all (`_CD_ANY`).
_CD_ANY = "tbscale-cd-any"
_EITHER_CD = re.compile(r"^([ \t]*)cd[ \t]+([^\s;&|]+)((?:[ \t]*\|\|[ \t]*cd[ \t]+[^\s;&|]+)+)[ \t]*$", re.M)


def _either(match: re.Match) -> str:
    return f"{match.group(1)}{_CD_ANY} {match.group(2)} " + " ".join(re.findall(r"cd[ \t]+([^\s;&|]+)", match.group(3)))


def located(texts: list[str], tests_mount: str | None = None) -> Iterator[tuple[list[str], Invocation]]:
    """Each command of the scripts that is not a `cd`, with the folders it may run in: none after a
    `cd` to a folder the script does not name, and none under the tests mount (the verifier's own)."""
    for text in texts:
        cwds: list[str | None] = [""]
        for segment in split_segments(_EITHER_CD.sub(_either, text)):
            inv = invocation(segment)
            if inv.raw_program in ("cd", _CD_ANY):
                targets = (inv.args or ["~"]) if inv.raw_program == _CD_ANY else (inv.args or ["~"])[:1]
                cwds = list(dict.fromkeys(moved(cwd, t) for cwd in cwds for t in targets))
                continue
            yield [cwd for cwd in cwds if cwd is not None
                   and not (tests_mount and cwd.startswith("/") and under(cwd, tests_mount))], inv
