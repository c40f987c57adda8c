"""What a download prints when it has no internet: name lookups, connections, and the download
tools' own messages (pip, uv, curl, wget, apt, git, npm, a registry pull).

`tbscale tasks check` files a failure that shows one as "needs internet". A failed image build
names the first such line of its whole log, which is often far above the log's last lines: an
installer piped into a shell (`curl ... | sh`) fails quietly, and only a later step, which cannot
find what it should have installed, stops the build (`lake: not found`).

A step the builder takes from its cache prints nothing, so a rebuild's log would lose that line.
The classic builder names the image each step made (` ---> 27c14ab532d6`), and a cached step names
the same image: the first such line of a step that ran is kept under its image's id
(`StepNotes`, in tbscale's cache folder), and a rebuild that takes the step from the cache names
it again."""

from __future__ import annotations

import os
import re
from pathlib import Path

from tbscale.environments.base import cache_dir

NEEDS_INTERNET = re.compile("|".join([
    r"Temporary failure in name resolution", r"Could not resolve host", r"Name or service not known",
    r"nodename nor servname", r"getaddrinfo (?:ENOTFOUND|EAI_AGAIN)", r"No address associated with hostname",
    r"Failed to establish a new connection", r"Network is unreachable", r"Could not connect to server",
    r"curl: \((?:5|6|7|28|35)\)", r"wget: unable to resolve", r"unable to resolve host address",
    r"Failed to fetch https?://", r"Could not find a version that satisfies", r"No matching distribution found",
    r"error sending request for url", r"Failed to download", r"dns error", r"Connection timed out",
    r"fatal: unable to access 'https?://", r"npm ERR! (?:code )?E(?:AI_AGAIN|NOTFOUND)",
    r"astral\.sh/uv/.*(?:not found|No such file)", r"uv(?:x)?: (?:command )?not found",
    r"dial tcp: lookup \S+", r"is not present and cannot be pulled", r"pull access denied",
]), re.IGNORECASE)

TAIL_LINES = 8
# The classic builder colours what a step wrote to stderr (ESC[91m ... ESC[0m).
TERMINAL_COLOURS = re.compile(r"\x1b\[[0-9;]*m")


# The classic builder's step lines: the image a step made (or took from the cache), and the start
# of a step that runs.
STEP_IMAGE = re.compile(r"^ ---> ([0-9a-f]{12,64})$")
STEP_RUNS = re.compile(r"^ ---> Running in [0-9a-f]+$")
STEP_CACHED = " ---> Using cache"


class StepNotes:
    """Network-failure lines of build steps, one small file per step image that printed one
    (`<cache>/build-steps/<image id>`). An image id names one step's result on one engine's
    cache, so a note can only be recalled by a rebuild that took that very step from it."""

    def __init__(self, folder: Path | None = None):
        self.folder = folder if folder is not None else cache_dir() / "build-steps"

    def remember(self, image_id: str, line: str) -> None:
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            part = self.folder / f".{image_id}.{os.getpid()}"
            part.write_text(line, encoding="utf-8")
            part.replace(self.folder / image_id)
        except OSError:
            pass  # a note is a courtesy: a read-only cache folder costs only the rebuild's hint

    def recall(self, image_id: str) -> str | None:
        try:
            return (self.folder / image_id).read_text(encoding="utf-8")
        except OSError:
            return None


def _quiet_failure_from_cache(lines: list[str], notes: StepNotes) -> str | None:
    """Walk the classic builder's log: note the first network-failure line of each step that ran,
    under the image it made; return the first note of a step this build took from the cache."""
    found: str | None = None
    pending: str | None = None  # the running step's first network-failure line
    cached = False
    for line in lines:
        if STEP_RUNS.match(line):
            pending, cached = None, False
        elif line == STEP_CACHED:
            pending, cached = None, True
        elif (m := STEP_IMAGE.match(line)) is not None:
            if pending is not None:
                notes.remember(m.group(1), pending)
            elif cached and found is None:
                found = notes.recall(m.group(1))
            pending, cached = None, False
        elif pending is None and NEEDS_INTERNET.search(line):
            pending = line.strip()[:300]
    return found


def failed_build_log(text: str, notes: StepNotes | None = None) -> str:
    """A failed build's log for its error message, without terminal colours: the last TAIL_LINES
    lines and, when a line above them shows a download that had no internet, the first such line
    after them. With `notes`, a line that a cached step printed when it ran (in an earlier build)
    is named when this log has none."""
    lines = [line for line in TERMINAL_COLOURS.sub("", text).splitlines() if line.strip()]
    tail, above = lines[-TAIL_LINES:], lines[:-TAIL_LINES]
    summary = "\n".join(tail)
    recalled = _quiet_failure_from_cache(lines, notes) if notes is not None else None
    if NEEDS_INTERNET.search(summary):
        return summary
    earlier = next((line.strip() for line in above if NEEDS_INTERNET.search(line)), None)
    if earlier is not None:
        summary += f"\nearlier in the build log: {earlier[:300]}"
    elif recalled is not None:
        summary += f"\nearlier, in a step this build took from the cache (it printed this when it ran): {recalled}"
    return summary


def build_error_log(build_log, notes: StepNotes | None = None) -> str:
    """failed_build_log of a docker SDK BuildError's `build_log` (its stream and error chunks), with
    the notes of this machine's cache folder unless others are given."""
    text = "".join(str(x.get("stream", x.get("error", ""))) for x in build_log)
    return failed_build_log(text, notes if notes is not None else StepNotes())
