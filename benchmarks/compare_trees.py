"""8 oracle trials at concurrency 4, in two checkouts of tbscale, interleaved: the ratio of their
wall times (timings on a shared machine drift; rounds that alternate the trees see the same load),
and for each tree the machine's CPU per trial and the engine calls per trial, by kind.

Each measure runs in its own process with the checkout first on PYTHONPATH, through that
checkout's own benchmarks/bench_sandbox.py (the trivial oracle task, image cached, a warm-up of 2
trials first). The Python environment is this one, so both checkouts must run in it. The engine
calls are counted here, not by the checkout's bench_sandbox (older ones do not count them): every
request the docker SDK sends, by kind (`exec` is an exec's creation; its start and inspection are
in `other`). The CPU is the whole machine's (/proc/stat): run it on an otherwise quiet machine.

Usage: .venv/bin/python benchmarks/compare_trees.py BEFORE_DIR AFTER_DIR [--rounds 3]
  e.g. git worktree add /tmp/base fe1cf58 && .venv/bin/python benchmarks/compare_trees.py /tmp/base .
Writes benchmarks/out/compare_trees.json: every measure, the AFTER/BEFORE ratio per round and its median.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

OUT = Path(__file__).parent / "out"

# Run inside the measured checkout, through its own bench_sandbox only (the Docker backend's module
# was tbscale.env.docker before it became tbscale.environments.docker; the script names it `dk` in
# both); bench_trials returns (wall, rows) in older checkouts and (wall, rows, engine calls, CPU) in
# newer ones: the wall is first in all.
MEASURE = r"""
import collections, json, os, re, tempfile
from pathlib import Path
from docker.api.client import APIClient
import bench_sandbox as b

KINDS = [("POST", r"/containers/create", "create"), ("POST", r"/containers/[^/]+/exec", "exec"),
         ("POST", r"/containers/[^/]+/restart", "restart"), ("PUT", r"/containers/[^/]+/archive", "put_archive"),
         ("GET", r"/containers/[^/]+/archive", "get_archive"), ("POST", r"/commit", "commit")]
calls = collections.Counter()
request = APIClient.request

def counted(session, method, url, *args, **kwargs):
    path = re.sub(r"^/v[0-9.]+(?=/)", "", re.sub(r"^[a-z+]+://[^/]*", "", url.split("?", 1)[0]))
    calls[next((k for m, p, k in KINDS if m == method.upper() and re.fullmatch(p, path)), "other")] += 1
    return request(session, method, url, *args, **kwargs)

def busy_ticks():
    v = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return sum(v) - v[3] - v[4]  # all but idle and iowait

root = Path(tempfile.mkdtemp(prefix="tbscale-compare-"))
task = b.load_task(b.trivial_task(root))
b.dk.ensure_image(task)
b.bench_trials(root, task, 2, 2, "warm")
APIClient.request = counted
ticks = busy_ticks()
wall = b.bench_trials(root, task, 8, 4, "c4")[0]
cpu = (busy_ticks() - ticks) / os.sysconf("SC_CLK_TCK") / 8
APIClient.request = request
per = {k: round(v / 8, 2) for k, v in sorted(calls.items())}
per["total"] = round(sum(calls.values()) / 8, 2)
print(json.dumps({"wall": wall, "cpu_per_trial": round(cpu, 3), "calls_per_trial": per}))
"""


def measure(tree: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), str(tree / "benchmarks")])}
    res = subprocess.run([sys.executable, "-c", MEASURE], cwd=tree, env=env, capture_output=True, text=True,
                         timeout=1800)
    if res.returncode != 0:
        raise SystemExit(f"{tree}: the measure failed:\n{res.stderr[-2000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    before, after = args.before.resolve(), args.after.resolve()
    rounds = []
    for i in range(args.rounds):
        a, b = measure(before), measure(after)
        load = os.getloadavg()[0]
        rounds.append({"before": a, "after": b, "ratio": round(b["wall"] / a["wall"], 3), "load_average": round(load, 1)})
        print(f"round {i + 1}: before {a['wall']:.2f} s ({a['cpu_per_trial']:.2f} CPU-s a trial), "
              f"after {b['wall']:.2f} s ({b['cpu_per_trial']:.2f}), ratio {b['wall'] / a['wall']:.2f} "
              f"(load {load:.1f})", flush=True)
    median = statistics.median(r["ratio"] for r in rounds)
    print(f"8 oracle trials at concurrency 4, after/before: median ratio {median:.2f} over {len(rounds)} rounds")
    for side in ("before", "after"):
        last = rounds[-1][side]["calls_per_trial"]
        cpu = statistics.median(r[side]["cpu_per_trial"] for r in rounds)
        print(f"  {side}: median {statistics.median(r[side]['wall'] for r in rounds):.2f} s, {cpu:.2f} CPU-s a trial; "
              "engine calls a trial: " + ", ".join(f"{k} {v:g}" for k, v in last.items()))
    OUT.mkdir(exist_ok=True)
    (OUT / "compare_trees.json").write_text(json.dumps({"before": str(before), "after": str(after),
                                                        "rounds": rounds, "median_ratio": median}, indent=2))


if __name__ == "__main__":
    main()
