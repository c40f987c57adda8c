"""Who owns a container, network or image tbscale made: the host, the process id and that
process's start time, carried as labels. `tbscale clean` removes what belongs to owners that are
gone, and only that: a pid the system has since given to another process is told apart by its
start time, so a live stranger is not mistaken for the owner, and the dead owner's leftovers are
still found.
"""

from __future__ import annotations

import os
import uuid
from functools import lru_cache
from pathlib import Path

LABEL_APP = "org.tbscale"
LABEL_SESSION = "org.tbscale.session"
LABEL_HOST = "org.tbscale.host"
LABEL_PID = "org.tbscale.pid"
LABEL_STARTED = "org.tbscale.started"  # the owner's start: "<boot id>:<clock ticks after boot>"
LABEL_RUN = "org.tbscale.run"  # the run folder a trial's resources belong to (resolved path)
LABEL_PROJECT = "com.docker.compose.project"

HOST = os.uname().nodename
SESSION_ID = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"


@lru_cache(maxsize=1)
def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()[:8]
    except OSError:
        return "noboot"


def process_start(pid: int) -> str | None:
    """When process `pid` started, as "<boot id>:<clock ticks after boot>" (Linux /proc), or None
    when it does not exist or this system does not say."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    try:
        ticks = stat[stat.rindex(")") + 2:].split()[19]  # field 22: starttime
    except (ValueError, IndexError):
        return None
    return f"{_boot_id()}:{ticks}"


def owner_labels() -> dict[str, str]:
    """The labels naming this process as the owner."""
    pid = os.getpid()
    # Every owner label is set, the start time empty where this system does not say: a container
    # inherits its image's labels, and one left unset would be the image builder's.
    return {LABEL_APP: "1", LABEL_SESSION: SESSION_ID, LABEL_HOST: HOST, LABEL_PID: str(pid),
            LABEL_STARTED: process_start(pid) or ""}


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def owner_state(labels: dict[str, str]) -> str:
    """"mine" (this process), "live", "gone", or "unknown" (another host, or no owner labels)."""
    if labels.get(LABEL_SESSION) == SESSION_ID:
        return "mine"
    if labels.get(LABEL_HOST) != HOST:
        return "unknown"
    pid_text = labels.get(LABEL_PID) or labels.get(LABEL_SESSION, "").split("-", 1)[0]
    if not pid_text.isdigit():
        return "unknown"
    pid = int(pid_text)
    if not _pid_alive(pid):
        return "gone"
    started = labels.get(LABEL_STARTED)
    if started:
        now = process_start(pid)
        if now is not None and now != started:
            return "gone"  # the pid now belongs to another process: the owner is gone
    return "live"


def describe_owner(labels: dict[str, str]) -> str:
    pid = labels.get(LABEL_PID) or labels.get(LABEL_SESSION, "?").split("-", 1)[0]
    run = labels.get(LABEL_RUN)
    return f"pid {pid} on {labels.get(LABEL_HOST, '?')}" + (f", run {run}" if run else "")
