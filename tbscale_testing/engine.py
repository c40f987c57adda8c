"""What a test sees on the engine: the containers of its own runs only.

Several suites can share one engine (xdist workers, another checkout's `make test`), and they
make tasks of the same names. A test that looked containers up by task name alone could take
another suite's container for its own run's, and, say, interrupt its run before that run had
started one. Every tbscale container carries its run folder (`org.tbscale.run`), and a test's run
folders are under its `tmp_path`.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

LABEL_RUN = "org.tbscale.run"


def containers(*labels: str, under: Path | str | None = None) -> list[str]:
    """Ids of the containers (running or not) that carry every label ("key" or "key=value"),
    and, with `under`, whose run folder is `under` or inside it."""
    argv = ["docker", "ps", "-a", "--no-trunc", "--format", "{{.ID}}\t{{.Label \"%s\"}}" % LABEL_RUN]
    for label in labels:
        argv += ["--filter", f"label={label}"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120).stdout
    found = [line.split("\t", 1) + [""] for line in out.splitlines() if line.strip()]
    if under is None:
        return [cid for cid, *_ in found]
    root = str(Path(under).resolve())
    return [cid for cid, run, *_ in found if run == root or run.startswith(root + "/")]
