"""A fork by copying a prefix's changes into a container started in advance, against tbscale's fork
(commit, then start from the commit); docs/forks-and-lookahead.md, "What was cut and what was tried".

The copy skips the container start on the fork's path, the one cost a commit-based fork shares
with a replay. For each bundled task (images built first, untimed) and repetition, interleaved:
- a parent container runs an 11-command prefix (bench_forks.py's first 10 commands, which write
  and edit files, and one that deletes a file of the image);
- `commit_fork`: `Environment.snapshot()` then `Backend.fork()` until the fork answers a command
  (what `prefix_restore: fork` pays);
- `copy_fork`, into a container of the same image started beforehand (`warm_start`, not on the
  fork's path): the engine's list of the parent's changes (`changes`), one `tar` of the changed
  paths in the parent (`archive`), `put_archive` and `rm` of what the prefix deleted, until the
  copy answers (`put`).
Both forks are checked to hold the prefix's files and not the deleted one. Reported: p50 / p95 of
each, and `copy_fork / commit_fork`.

Usage: .venv/bin/python benchmarks/bench_fork_by_copy.py [--reps 1] [--tasks a,b];
writes benchmarks/out/fork_by_copy.json.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from bench_forks import PREFIX, pct, start

from tbscale.environments.docker_backend import DockerBackend
from tbscale.tasks import load_tasks

HERE = Path(__file__).parent
REPO = HERE.parent
LABEL = {"org.tbscale.bench": f"fork-by-copy-{os.getpid()}"}
STEPS = [*PREFIX[:10], "rm -f /etc/issue"]
PROBE = "cat /tmp/work/data.csv; test -e /etc/issue && echo issue-still-there; true"
KINDS = {0: "changed", 1: "added", 2: "deleted"}  # the engine's codes in a container's changes


def copy_into(parent, warm) -> dict[str, float]:
    """Carry the parent's changes into `warm` (both docker SDK containers)."""
    api = parent.client.api
    t0 = time.monotonic()
    changes = api.diff(parent.id)
    t1 = time.monotonic()
    paths = [c["Path"] for c in changes if KINDS[c["Kind"]] != "deleted"]
    gone = [c["Path"] for c in changes if KINDS[c["Kind"]] == "deleted"]
    tar = parent.exec_run(["tar", "-c", "--no-recursion", "-P", "-f", "-", *paths], demux=True)
    if tar.exit_code != 0:
        raise RuntimeError(f"tar in the parent: {tar.output[1]!r}")
    t2 = time.monotonic()
    warm.put_archive("/", tar.output[0])
    if gone:
        warm.exec_run(["rm", "-rf", *gone])
    warm.exec_run(["true"])
    t3 = time.monotonic()
    return {"changes": t1 - t0, "archive": t2 - t1, "put": t3 - t2, "copy_fork": t3 - t0, "paths": len(changes)}


def one(backend: DockerBackend, image: str, task) -> dict[str, float]:
    out: dict[str, float] = {}
    parent = start(backend, image, task)
    boxes, snap = [parent], None
    try:
        for command in STEPS:
            parent.exec(command, 60)
        t = time.monotonic()
        warm = start(backend, image, task)
        out["warm_start"] = time.monotonic() - t
        boxes.append(warm)
        t = time.monotonic()
        snap = parent.snapshot()
        fork = backend.fork(snap, labels=dict(LABEL))
        fork.exec("true", 30)
        out["commit_fork"] = time.monotonic() - t
        boxes.append(fork)
        out.update(copy_into(parent.container, warm.container))
        expected = parent.exec(PROBE, 30).output
        for name, box in (("commit_fork", fork), ("copy_fork", warm)):
            got = box.exec(PROBE, 30).output
            assert got == expected, (name, got, expected)
    finally:
        for box in reversed(boxes):
            box.stop()
        if snap is not None:
            backend.release(snap)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--tasks", default="")
    args = ap.parse_args()
    tasks, _ = load_tasks(REPO / "tasks")
    if args.tasks:
        tasks = [t for t in tasks if t.id in args.tasks.split(",")]
    backend = DockerBackend()
    images = {t.id: backend.prepare(t)[0] for t in tasks}
    samples: list[dict[str, float]] = []
    for rep in range(args.reps):
        for task in tasks:
            row = one(backend, images[task.id], task)
            samples.append(row)
            print(f"rep {rep} {task.id}: " + ", ".join(f"{k} {v:.2f}" for k, v in row.items()), flush=True)
    keys = ["commit_fork", "copy_fork", "changes", "archive", "put", "warm_start"]
    summary = {k: {"p50": pct([s[k] for s in samples], 0.5), "p95": pct([s[k] for s in samples], 0.95)} for k in keys}
    summary["copy_over_commit_p50"] = round(summary["copy_fork"]["p50"] / summary["commit_fork"]["p50"], 2)
    summary["load_average_end"] = list(os.getloadavg())
    print(f"{len(samples)} samples; seconds p50 / p95:")
    for k in keys:
        print(f"  {k:<12} {summary[k]['p50']:6.2f} / {summary[k]['p95']:6.2f}")
    print(f"  copy_fork / commit_fork (p50): {summary['copy_over_commit_p50']}")
    out = HERE / "out"
    out.mkdir(exist_ok=True)
    (out / "fork_by_copy.json").write_text(json.dumps({"summary": summary, "samples": samples}, indent=1))


if __name__ == "__main__":
    main()
