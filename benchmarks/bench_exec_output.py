"""Lost command output: how often an exec comes back empty, with the docker SDK's plain streamed
exec and with tbscale's Container.exec (which holds the command until the stream is attached).

The engine can start a short command and finish it before the client's stream attaches; all it
printed is then lost and the exit code still says 0 (moby/moby#27289). It shows up when the
client is slow to attach: here, in Ray worker processes on a machine whose cores are busy. Each
case runs `echo` in 4 containers at once (Ray workers when ray is installed, else threads) while
3 busy loops hold the CPU, and counts replies other than the echoed line.

Writes benchmarks/out/exec_output.json. Run: .venv/bin/python benchmarks/bench_exec_output.py [REPS]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

OUT = Path(__file__).parent / "out"
IMAGE = "debian:bookworm-slim"
LINE = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


def echoes(way: str, reps: int) -> int:
    """Run `echo` `reps` times in a fresh container; return how many replies were wrong."""
    from tbscale.environments import StartSpec
    from tbscale.environments.docker import Container

    box = Container.start(StartSpec(IMAGE, cpus=1, memory_mb=256))
    api = box.container.client.api
    wrong = 0
    try:
        for _ in range(reps):
            if way == "tbscale":
                text = box.exec(f"echo {LINE}", 60).output
            else:  # the SDK's streamed exec, as tbscale did before the handshake
                exec_id = api.exec_create(box.container.id, ["timeout", "-k", "5", "60", "bash", "-c", f"echo {LINE}"])
                text = b"".join(api.exec_start(exec_id["Id"], stream=True)).decode()
            wrong += text != LINE + "\n"
    finally:
        box.stop()
    return wrong


def run_case(way: str, reps: int, workers: int = 4) -> dict:
    try:
        import ray
    except ImportError:
        ray = None
    t = time.perf_counter()
    if ray is not None:
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
        try:
            task = ray.remote(echoes)
            lost = ray.get([task.remote(way, reps) for _ in range(workers)])
        finally:
            ray.shutdown()
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(workers) as pool:
            lost = list(pool.map(echoes, [way] * workers, [reps] * workers))
    return {"where": "ray workers" if ray is not None else "threads", "execs": reps * workers,
            "lost": sum(lost), "lost_share": sum(lost) / (reps * workers), "wall_sec": time.perf_counter() - t}


def main() -> None:
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    OUT.mkdir(exist_ok=True)
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(3)]
    try:
        result = {way: run_case(way, reps) for way in ("sdk_stream", "tbscale")}
    finally:
        for h in hogs:
            h.kill()
    (OUT / "exec_output.json").write_text(json.dumps(result, indent=2))
    for way, r in result.items():
        print(f"{way:11s} {r['where']}: {r['lost']}/{r['execs']} replies lost ({r['lost_share']:.1%}), "
              f"{r['wall_sec']:.0f} s")


if __name__ == "__main__":
    main()
