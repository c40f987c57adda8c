"""What a download prints when it has no internet: name lookups, connections, and the download
tools' own messages (pip, uv, curl, wget, apt, git, npm, a registry pull).

`tbscale tasks check` files a failure that shows one as "needs internet". A failed image build
names the first such line of its whole log, which is often far above the log's last lines: an
installer piped into a shell (`curl ... | sh`) fails quietly, and only a later step, which cannot
find what it should have installed, stops the build (`lake: not found`)."""

from __future__ import annotations

import re

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


def failed_build_log(text: str) -> str:
    """A failed build's log for its error message, without terminal colours: the last TAIL_LINES
    lines and, when a line above them shows a download that had no internet, the first such line
    after them."""
    lines = [line for line in TERMINAL_COLOURS.sub("", text).splitlines() if line.strip()]
    tail, above = lines[-TAIL_LINES:], lines[:-TAIL_LINES]
    summary = "\n".join(tail)
    earlier = next((line.strip() for line in above if NEEDS_INTERNET.search(line)), None)
    if earlier is not None and not NEEDS_INTERNET.search(summary):
        summary += f"\nearlier in the build log: {earlier[:300]}"
    return summary


def build_error_log(build_log) -> str:
    """failed_build_log of a docker SDK BuildError's `build_log` (its stream and error chunks)."""
    return failed_build_log("".join(str(x.get("stream", x.get("error", ""))) for x in build_log))
